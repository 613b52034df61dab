package qwen25vl

import "github.com/iris-vlm/iris/core/internal/model"

// The family's config.json defaults: transformers 5.17 models/qwen2_5_vl, Qwen2_5_VLRMSNorm(...,
// eps=1e-6) in the vision tower, q/k/v bias in Qwen2_5_VLAttention, the rest from
// Qwen2_5_VL{Text,Vision}Config.
func init() {
	model.RegisterConfig(ModelType, model.ConfigDefaults{
		VisionNormEps: 1e-6, QKVBias: true,
		TextEps: 1e-5, TextTheta: 1e6, VisionTheta: 1e4,
		MRopeSection: [3]int{16, 24, 24}, WindowSize: 112, FullAtt: []int{7, 15, 23, 31},
	})
}
