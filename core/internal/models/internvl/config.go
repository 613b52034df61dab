package internvl

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/iris-vlm/iris/core/internal/model"
)

// The family's config.json: transformers 5.17 models/internvl. The decoder is a Qwen2 (q/k/v
// bias, head_dim when given, RMSNorm 1e-6, rope_theta 1e4 by default) with plain 1-D RoPE; the
// top level alone decides tie_word_embeddings (InternVLConfig's default: true); the tower's keys
// (InternVLVisionConfig, the projector's at the top level) are read by parseVision.
func init() {
	model.RegisterConfig(ModelType, model.ConfigDefaults{
		QKVBias: true, HeadDimKey: true, TextEps: 1e-6, TextTheta: 1e4,
		Rope1D: true, TieTop: true, VisionAct: "gelu",
		Vision: parseVision,
	})
}

// Special tokens of the InternVL3 -hf vocabulary (Qwen2.5's plus <img>, </img>, <IMG_CONTEXT>):
// the ids an image span is framed with when config.json does not say.
const (
	imgStartID   = 151665 // <img>
	imgEndID     = 151666 // </img>
	imgContextID = 151667 // <IMG_CONTEXT>, InternVLConfig.image_token_id
)

// projectorEps is the projector's LayerNorm epsilon: nn.LayerNorm's default (the config has no
// key for it).
const projectorEps = 1e-5

// parseVision reads InternVLVisionConfig (vision_config) and InternVLConfig's top-level keys of
// the tower and the projector, with the classes' defaults for absent keys, and refuses what the
// family does not implement.
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
	need := func(key string, dst *int) {
		if !get(vision, key, dst) {
			errs = append(errs, fmt.Errorf("vision_config key %q: missing", key))
		}
	}
	unsupported := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(format+": %w", append(args, model.ErrUnsupported)...))
	}

	need("hidden_size", &v.Hidden)
	need("num_hidden_layers", &v.Depth)
	need("num_attention_heads", &v.Heads)
	need("intermediate_size", &v.Intermediate)
	v.InChannels = 3
	get(vision, "num_channels", &v.InChannels)
	v.Act = "gelu"
	get(vision, "hidden_act", &v.Act)
	v.NormEps = 1e-6
	get(vision, "layer_norm_eps", &v.NormEps)
	v.TemporalPatchSize = 1 // a tile is one frame: Conv2d patches
	v.OutHidden = cfg.Text.Hidden

	patch, err := squareSide(vision, "patch_size", 14)
	if err != nil {
		errs = append(errs, err)
	}
	image, err := squareSide(vision, "image_size", 448)
	if err != nil {
		errs = append(errs, err)
	}
	v.PatchSize = patch
	if patch > 0 && image > 0 {
		if image%patch != 0 {
			unsupported("vision_config image_size %d is not a whole number of patches of %d", image, patch)
		}
		v.FixedGrid = image / patch
		v.PosEmbeddings = v.FixedGrid * v.FixedGrid // the CLS row apart
	}

	// What InternViT-300M (InternVL3 2B, 8B) is; the other variants are refused.
	flags := []struct {
		key  string
		def  any
		want any
		what string
	}{
		{"norm_type", "layer_norm", "layer_norm", "norm_type"},
		{"use_qk_norm", false, false, "per-head q/k norms in the tower"},
		{"attention_bias", false, true, "a tower without q/k/v biases"},
		{"use_absolute_position_embeddings", true, true, "a tower without its position table"},
		{"use_mean_pooling", true, true, "the final LayerNorm of use_mean_pooling false"},
	}
	for _, f := range flags {
		switch def := f.def.(type) {
		case string:
			got := def
			if get(vision, f.key, &got); got != f.want {
				unsupported("vision_config %s %q (%s)", f.key, got, f.what)
			}
		case bool:
			got := def
			if get(vision, f.key, &got); got != f.want {
				unsupported("vision_config %s %v (%s)", f.key, got, f.what)
			}
		}
	}

	ratio := 0.5
	if get(top, "downsample_ratio", &ratio); ratio != 0.5 {
		unsupported("downsample_ratio %v (the pixel shuffle is implemented for 0.5)", ratio)
	}
	v.MergeSize = 2 // int(1 / downsample_ratio)
	act := "gelu"
	if get(top, "projector_hidden_act", &act); act != "gelu" {
		unsupported("projector_hidden_act %q (the projector runs GELU, erf form)", act)
	}
	if top.Has("vision_feature_layer") {
		var layer int
		if err := json.Unmarshal(top["vision_feature_layer"], &layer); err != nil || layer != -1 {
			unsupported("vision_feature_layer %s (the last layer's output, -1, is implemented)", top["vision_feature_layer"])
		}
	}
	strategy := "default"
	if get(top, "vision_feature_select_strategy", &strategy); strategy != "default" {
		unsupported("vision_feature_select_strategy %q (the CLS token dropped, default, is implemented)", strategy)
	}
	if seq := 0; get(top, "image_seq_length", &seq) && v.FixedGrid > 0 && seq != (v.FixedGrid/2)*(v.FixedGrid/2) {
		unsupported("image_seq_length %d: a tile of %dx%d patches makes %d tokens", seq, v.FixedGrid, v.FixedGrid, (v.FixedGrid/2)*(v.FixedGrid/2))
	}

	cfg.ImageTokenID, cfg.VisionStartTokenID, cfg.VisionEndTokenID = imgContextID, imgStartID, imgEndID
	get(top, "image_token_id", &cfg.ImageTokenID)
	return errors.Join(errs...)
}

// squareSide reads a size written as one int or as [height, width] (InternVLVisionConfig takes
// both); a non-square one is refused.
func squareSide(o model.ConfigSection, key string, def int) (int, error) {
	if !o.Has(key) {
		return def, nil
	}
	var one int
	if err := json.Unmarshal(o[key], &one); err == nil {
		return one, nil
	}
	var hw []int
	if err := json.Unmarshal(o[key], &hw); err != nil || len(hw) != 2 {
		return 0, fmt.Errorf("vision_config key %q: %s is neither a size nor [height, width]", key, o[key])
	}
	if hw[0] != hw[1] {
		return 0, fmt.Errorf("vision_config %s %v: not square: %w", key, hw, model.ErrUnsupported)
	}
	return hw[0], nil
}
