package locateanything

import (
	"errors"
	"fmt"

	"github.com/iris-vlm/iris/core/internal/model"
)

// The family's config.json: the remote code's LocateAnythingConfig (NVlabs/Eagle 783f656d,
// Embodied/eaglevl/utils/locany). text_config is its own Qwen2Config (configuration_qwen2.py:
// q/k/v biases, head_dim = hidden / heads, RMSNorm 1e-6, rope_theta 1e4 by default, plain 1-D
// RoPE); vision_config is MoonViTConfig, read by parseVision.
func init() {
	model.RegisterConfig(ModelType, model.ConfigDefaults{
		QKVBias: true, TextEps: 1e-6, TextTheta: 1e4, Rope1D: true,
		VisionAct: "gelu_pytorch_tanh", VisionTheta: visionTheta, VisionNormEps: normEps,
		Vision: parseVision,
	})
}

// Special tokens of the checkpoint (added_tokens; the config's image_token_index).
const (
	imgContextID = 151665 // <IMG_CONTEXT>: LocateAnythingConfig's class default 151667 is not the checkpoint's
	imgStartID   = 151666 // <img>
	imgEndID     = 151667 // </img>
)

// MoonViT's fixed constants: Rope2DPosEmb's theta_base (10000, not a config key), nn.LayerNorm's
// default epsilon (norm0, norm1, final_layernorm and mlp1's LayerNorm: none takes a config key).
const (
	visionTheta = 10000
	normEps     = 1e-5
)

// parseVision reads MoonViTConfig (vision_config) and LocateAnythingConfig's top level, with the
// classes' defaults for absent keys, and refuses what the family does not implement.
func parseVision(top, vision model.ConfigSection, cfg *model.Config) error {
	v := &cfg.Vision
	var errs []error
	get := func(o model.ConfigSection, key string, dst any) bool {
		found, err := o.Get(key, dst)
		if err != nil {
			errs = append(errs, err)
		}
		return found
	}
	v.PatchSize, v.Depth, v.Heads, v.Hidden, v.Intermediate = 14, 27, 16, 1152, 4304
	get(vision, "patch_size", &v.PatchSize)
	get(vision, "num_hidden_layers", &v.Depth)
	get(vision, "num_attention_heads", &v.Heads)
	get(vision, "hidden_size", &v.Hidden)
	get(vision, "intermediate_size", &v.Intermediate)
	ph, pw := 64, 64
	get(vision, "init_pos_emb_height", &ph)
	get(vision, "init_pos_emb_width", &pw)
	v.PosGrid, v.PosEmbeddings = [2]int{ph, pw}, ph*pw
	merge := []int{2, 2}
	if get(vision, "merge_kernel_size", &merge); len(merge) != 2 || merge[0] != 2 || merge[1] != 2 {
		errs = append(errs, fmt.Errorf("vision_config merge_kernel_size %v (the 2x2 patch merger is implemented): %w", merge, model.ErrUnsupported))
	}
	v.MergeSize = 2
	v.InChannels, v.TemporalPatchSize = 3, 1 // Conv2d patches of one frame
	v.Act = "gelu_pytorch_tanh"              // MoonVitPretrainedModel's PytorchGELUTanh, not a key
	v.RopeTheta, v.NormEps = visionTheta, normEps
	v.OutHidden = cfg.Text.Hidden
	if v.Hidden%v.Heads != 0 || (v.Hidden/v.Heads)%4 != 0 {
		errs = append(errs, fmt.Errorf("vision head_dim %d/%d: Rope2DPosEmb needs a multiple of 4", v.Hidden, v.Heads))
	}

	var arch []string
	var tc model.ConfigSection
	get(top, "text_config", &tc)
	if get(tc, "architectures", &arch); len(arch) > 0 && arch[0] != "Qwen2ForCausalLM" {
		errs = append(errs, fmt.Errorf("text_config architectures %v (the Qwen2 decoder is implemented): %w", arch, model.ErrUnsupported))
	}
	lora := 0
	for _, k := range []string{"use_backbone_lora", "use_llm_lora"} {
		if get(top, k, &lora); lora != 0 {
			errs = append(errs, fmt.Errorf("%s %d (unmerged LoRA weights): %w", k, lora, model.ErrUnsupported))
		}
	}
	cfg.ImageTokenID, cfg.VisionStartTokenID, cfg.VisionEndTokenID = imgContextID, imgStartID, imgEndID
	get(top, "image_token_index", &cfg.ImageTokenID)
	return errors.Join(errs...)
}
