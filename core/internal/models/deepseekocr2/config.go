package deepseekocr2

import (
	"errors"
	"fmt"

	"github.com/iris-vlm/iris/core/internal/model"
)

// ModelType is config.json's model_type of the family.
const ModelType = "deepseek_ocr2"

// The family's config.json: transformers 5.17 models/deepseek_ocr2 (DeepseekOcr2Config with
// text_config, and vision_config holding sam_config and encoder_config). The decoder is read by
// the shared keys (1-D RoPE, no q/k/v biases unless attention_bias); its experts and the vision
// tower by parseVision into Settings (Config.Family). The class defaults are not the released
// checkpoint's (a vocabulary of 102400, hidden 4096, encoder rope_theta 1e4 against upstream's
// 1e6): a config.json that leaves a key out gets the class default, as transformers would.
func init() {
	model.RegisterConfig(ModelType, model.ConfigDefaults{
		BiasKey: true, TextEps: 1e-6, TextTheta: 1e4, Rope1D: true, VisionAct: "gelu",
		ImageTokens: imageTokens,
		Vision:      parseVision,
	})
}

// Settings is what the family reads beyond model.Config: the tower and the decoder's experts.
type Settings struct {
	Vision VisionConfig
	MoE    MoEConfig
}

// settings returns cfg's Settings (parseVision set them).
func settings(cfg *model.Config) (*Settings, error) {
	s, ok := cfg.Family.(*Settings)
	if !ok {
		return nil, fmt.Errorf("deepseekocr2: a config of model_type %q without the family's settings: %w", cfg.ModelType, model.ErrUnsupported)
	}
	return s, nil
}

// imageTokens is an image's placeholders (DeepseekOcr2Processor._expand_image_tokens): each
// view's queries (a 768 tile 144, the 1024 view 256, told apart by their patch masks) and the
// view separator; an image whose views the tower does not take is refused (ml.ErrInvalidInput).
func imageTokens(cfg *model.Config, img *model.Image) (int, error) {
	s, err := settings(cfg)
	if err != nil {
		return 0, err
	}
	v := Vision{cfg: s.Vision}
	return v.ImageRows(*img)
}

// parseVision reads DeepseekOcr2VisionConfig (vision_config: sam_config, encoder_config) and
// the text config's experts into Settings, and fills model.Config's vision fields the engine
// checks images by: 64x64 patches of 16 a view (FixedGrid), merged 4x4 (SAM's two stride-2
// convolutions), 3 channels.
func parseVision(top, vision model.ConfigSection, cfg *model.Config) error {
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
	st := &Settings{}
	var sam, enc, text model.ConfigSection
	get(vision, "sam_config", &sam)
	get(vision, "encoder_config", &enc)
	get(top, "text_config", &text)
	if text == nil {
		text = top
	}

	// DeepseekOcr2SamVisionConfig
	s := &st.Vision.SAM
	s.Hidden, s.Layers, s.Heads, s.OutChannels = 768, 12, 12, 256
	s.ImageSize, s.Patch, s.Window, s.Eps = 1024, 16, 14, 1e-6
	s.Global, s.Down = []int{2, 5, 8, 11}, [2]int{512, 896}
	get(sam, "hidden_size", &s.Hidden)
	get(sam, "num_hidden_layers", &s.Layers)
	get(sam, "num_attention_heads", &s.Heads)
	get(sam, "output_channels", &s.OutChannels)
	get(sam, "image_size", &s.ImageSize)
	get(sam, "patch_size", &s.Patch)
	get(sam, "window_size", &s.Window)
	get(sam, "layer_norm_eps", &s.Eps)
	get(sam, "global_attn_indexes", &s.Global)
	get(sam, "downsample_channels", &s.Down)
	ratio := 4.0
	get(sam, "mlp_ratio", &ratio)
	s.MLP = int(float64(s.Hidden) * ratio)
	get(sam, "mlp_dim", &s.MLP)
	for _, f := range []struct {
		key  string
		want bool
	}{{"use_abs_pos", true}, {"use_rel_pos", true}, {"qkv_bias", true}} {
		got := f.want
		if get(sam, f.key, &got); got != f.want {
			unsupported("sam_config %s %v", f.key, got)
		}
	}
	act := "gelu"
	if get(sam, "hidden_act", &act); act != "gelu" {
		unsupported("sam_config hidden_act %q (the tower runs GELU, erf form)", act)
	}
	if s.ImageSize != 1024 || s.Patch != 16 || s.Heads <= 0 || s.Hidden%max(s.Heads, 1) != 0 {
		unsupported("sam_config image_size %d, patch_size %d, %d heads of %d (the processor's 1024 views of 16-pixel patches)", s.ImageSize, s.Patch, s.Heads, s.Hidden)
	}

	// DeepseekOcr2VisionEncoderConfig (a Qwen2 decoder run as an encoder)
	e := &st.Vision.Encoder
	e.Hidden, e.Layers, e.Heads, e.Intermediate, e.Eps, e.Theta = 4096, 32, 32, 22016, 1e-6, 1e4
	get(enc, "hidden_size", &e.Hidden)
	get(enc, "num_hidden_layers", &e.Layers)
	get(enc, "num_attention_heads", &e.Heads)
	e.KVHeads = e.Heads
	get(enc, "num_key_value_heads", &e.KVHeads)
	get(enc, "intermediate_size", &e.Intermediate)
	get(enc, "rms_norm_eps", &e.Eps)
	get(enc, "rope_theta", &e.Theta)
	var rope model.ConfigSection
	if get(enc, "rope_parameters", &rope); rope != nil {
		get(rope, "rope_theta", &e.Theta)
		kind := "default"
		if get(rope, "rope_type", &kind); kind != "default" {
			unsupported("encoder_config rope_type %q", kind)
		}
	}
	if e.Hidden != s.Down[1] {
		unsupported("encoder_config hidden_size %d is not the last downsample channel count %d", e.Hidden, s.Down[1])
	}
	eact := "silu"
	if get(enc, "hidden_act", &eact); eact != "silu" {
		unsupported("encoder_config hidden_act %q", eact)
	}
	st.Vision.TextHidden = cfg.Text.Hidden

	// DeepseekOcr2TextConfig's experts
	m := &st.MoE
	m.Experts, m.Shared, m.Inter, m.Scale = 64, 2, 1407, 1
	get(text, "n_routed_experts", &m.Experts)
	get(text, "num_experts_per_tok", &m.TopK)
	get(text, "n_shared_experts", &m.Shared)
	get(text, "moe_intermediate_size", &m.Inter)
	get(text, "routed_scaling_factor", &m.Scale)
	method := "greedy"
	get(text, "topk_method", &method)
	switch method {
	case "greedy":
	case "group_limited_greedy":
		get(text, "n_group", &m.Groups)
		get(text, "topk_group", &m.TopGroups)
	default:
		unsupported("topk_method %q", method)
	}
	var mla bool
	if get(text, "use_mla", &mla); mla {
		unsupported("use_mla (multi-head latent attention)")
	}
	var types []string
	get(text, "mlp_layer_types", &types)
	if types == nil { // DeepseekV2's first_k_dense_replace
		first := 0
		get(text, "first_k_dense_replace", &first)
		for l := range cfg.Text.Layers {
			types = append(types, map[bool]string{true: "dense", false: "sparse"}[l < first])
		}
	}
	if len(types) != cfg.Text.Layers {
		errs = append(errs, fmt.Errorf("mlp_layer_types: %d for %d layers", len(types), cfg.Text.Layers))
	}
	for _, k := range types {
		if k != "dense" && k != "sparse" {
			unsupported("mlp_layer_types entry %q", k)
		}
		m.Sparse = append(m.Sparse, k == "sparse")
	}
	if m.TopK <= 0 && len(m.Sparse) > 0 && m.Sparse[0] {
		unsupported("num_experts_per_tok %d", m.TopK)
	}

	// what the engine checks images by
	v := &cfg.Vision
	v.Depth, v.Hidden, v.Heads, v.Intermediate = s.Layers, s.Hidden, s.Heads, s.MLP
	v.InChannels, v.PatchSize, v.TemporalPatchSize, v.MergeSize = 3, s.Patch, 1, 4
	v.FixedGrid = s.ImageSize / s.Patch
	v.OutHidden = cfg.Text.Hidden
	v.Act, v.NormEps = "gelu", s.Eps
	cfg.ImageTokenID = 128815
	get(top, "image_token_id", &cfg.ImageTokenID)
	cfg.Family = st
	return errors.Join(errs...)
}
