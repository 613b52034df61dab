package lance

import "github.com/iris-vlm/iris/core/internal/model"

// The family's config.json defaults: qwen2_navit's Qwen2 decoder as inference_lance.py builds it
// (--llm_qk_norm_und true: q_norm and k_norm of Qwen2RMSNorm(head_dim, rms_norm_eps); q/k/v
// biases of Qwen2Attention; the Qwen2.5-VL M-RoPE of --apply_qwen_2_5_vl_pos_emb with
// mrope_section [16, 24, 24] and θ 1e6), the image block prefilled with is_causal=False, and the
// tower's Qwen2.5-VL defaults (RMSNorm eps 1e-6, window 112, full attention in blocks 7, 15,
// 23, 31).
func init() {
	model.RegisterConfig(ModelType, model.ConfigDefaults{
		VisionNormEps: 1e-6, QKVBias: true, QKNorm: true, BidirectionalImage: true,
		TextEps: 1e-6, TextTheta: 1e6, VisionTheta: 1e4,
		MRopeSection: [3]int{16, 24, 24}, WindowSize: 112, FullAtt: []int{7, 15, 23, 31},
	})
}
