package phi4mm

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/iris-vlm/iris/core/internal/model"
)

// The family's config.json: transformers 5.17 models/phi4_multimodal. The text keys are the top
// level's (Phi4MultimodalConfig is the decoder's config: rms_norm_eps 1e-5, rope_theta 1e4,
// max_position_embeddings 131072, original_max_position_embeddings 4096, which wins over the
// rope dict's, head_dim when given, untied by default), with partial rotary and LongRoPE in
// rope_parameters; the tower's keys (Phi4MultimodalVisionConfig, SigLIP-so400m's by default)
// are read by parseVision; audio_config is not read (the family serves images).
func init() {
	model.RegisterConfig(ModelType, model.ConfigDefaults{
		HeadDimKey: true, TextEps: 1e-5, TextTheta: 1e4, Rope1D: true,
		MaxPositions: 131072, RopeOriginalMax: 4096,
		VisionAct:   "gelu_pytorch_tanh",
		Vision:      parseVision,
		ImageTokens: imageTokens,
	})
}

// imageTokenID is Phi4MultimodalVisionConfig's image_token_id default (<|image|>).
const imageTokenID = 200010

// parseVision reads Phi4MultimodalVisionConfig (vision_config) with the class's defaults for
// absent keys, the rotary type and sliding window of the top level, and refuses what the family
// does not implement.
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
	unsupported := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(format+": %w", append(args, model.ErrUnsupported)...))
	}

	v.Hidden, v.Depth, v.Heads, v.Intermediate = 1152, 27, 16, 4304
	get(vision, "hidden_size", &v.Hidden)
	get(vision, "num_hidden_layers", &v.Depth)
	get(vision, "num_attention_heads", &v.Heads)
	get(vision, "intermediate_size", &v.Intermediate)
	v.InChannels = 3
	get(vision, "num_channels", &v.InChannels)
	v.Act = "gelu_pytorch_tanh"
	get(vision, "hidden_act", &v.Act)
	v.NormEps = 1e-6
	get(vision, "layer_norm_eps", &v.NormEps)
	v.TemporalPatchSize = 1 // a crop is one frame: Conv2d patches
	v.MergeSize = 2         // AvgPool2d(2, 2)
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
		side := image / patch
		switch {
		case image%patch != 0:
			unsupported("vision_config image_size %d is not a whole number of patches of %d", image, patch)
		case side%2 != 0:
			// Phi4MultimodalImageEmbedding reflection-pads an odd grid before its pooling
			unsupported("vision_config image_size %d: %d patches a side, odd (the reflection pad before the pooling)", image, side)
		}
		v.FixedGrid = side
		v.PosEmbeddings = side * side
	}
	crop := 448
	if get(vision, "crop_size", &crop); crop != image {
		unsupported("vision_config crop_size %d differs from image_size %d (a crop is one view of the tower)", crop, image)
	}
	feature := -2
	if get(vision, "feature_layer", &feature); v.Depth > 0 {
		// hidden_states holds the embeddings then each layer's output: index k runs k layers,
		// -k runs Depth+1-k
		blocks := feature
		if feature < 0 {
			blocks = v.Depth + 1 + feature
		}
		if blocks < 1 || blocks > v.Depth {
			unsupported("vision_config feature_layer %d of %d layers (features of a run layer are implemented)", feature, v.Depth)
		}
		v.FeatureBlocks = blocks
	}

	cfg.ImageTokenID = imageTokenID
	get(vision, "image_token_id", &cfg.ImageTokenID)
	cfg.VideoTokenID, cfg.VisionStartTokenID, cfg.VisionEndTokenID = -1, -1, -1

	// Phi4MultimodalConfig.validate_rope: default or longrope ("su" and "yarn" are read as
	// longrope by convert_rope_params_to_dict; not implemented here)
	for _, key := range []string{"rope_parameters", "rope_scaling"} {
		var rope model.ConfigSection
		if get(top, key, &rope); rope == nil {
			continue
		}
		kind := ""
		if get(rope, "rope_type", &kind); kind == "" {
			get(rope, "type", &kind)
		}
		if kind != "" && kind != "default" && kind != "longrope" {
			unsupported("%s.rope_type %q (default and longrope are implemented)", key, kind)
		}
	}
	// The decoder's sliding window: past the longest context the engine runs, it masks nothing.
	if window := 0; get(top, "sliding_window", &window) {
		ctx := cfg.Text.MaxPositions
		if o := cfg.Text.RopeOriginalMax; len(cfg.Text.RopeFactors) > 0 && o > 0 {
			ctx = min(ctx, o)
		}
		if window < ctx {
			unsupported("sliding_window %d below a context of %d", window, ctx)
		}
	}
	return errors.Join(errs...)
}

// squareSide reads a size written as one int or as [height, width] (the config takes both); a
// non-square one is refused.
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
