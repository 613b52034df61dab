package qwen3vl

import "github.com/iris-vlm/iris/core/internal/model"

// The family's config.json defaults: transformers 5.17 models/qwen3_vl. The vision tower's
// LayerNorms use eps 1e-6 (Qwen3VLVisionBlock), the text config honours head_dim and
// attention_bias and normalises q and k per head (Qwen3VLTextAttention); Qwen3VLTextConfig's
// default rope_theta is 5e5 (checkpoints say 5e6).
func init() {
	model.RegisterConfig(ModelType, model.ConfigDefaults{
		VisionNormEps: 1e-6, BiasKey: true, HeadDimKey: true, QKNorm: true,
		TextEps: 1e-6, TextTheta: 5e5, VisionTheta: 1e4,
		MRopeSection: [3]int{24, 20, 20}, VisionAct: "gelu_pytorch_tanh", PosEmbeddings: 2304,
	})
}
