package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/iris-vlm/iris/core/internal/ml"
)

// ErrUnsupported reports a checkpoint whose model type or graph option no backend implements.
var ErrUnsupported = errors.New("unsupported model")

// Config is the model graph, parsed from a checkpoint's config.json. Backends build their graph
// from these numbers alone: a family differs from another by its values here, not by name.
type Config struct {
	// ModelType is config.json's model_type, e.g. "qwen2_5_vl".
	ModelType string
	Text      TextConfig
	Vision    VisionConfig
	// TieEmbeddings makes lm_head reuse embed_tokens (lm_head.weight may be absent).
	TieEmbeddings bool
	// Special token ids of the multimodal prompt.
	ImageTokenID       int32
	VideoTokenID       int32
	VisionStartTokenID int32
	VisionEndTokenID   int32
	// EOSTokenIDs are the config's end-of-sequence ids (generation_config.json may add more).
	EOSTokenIDs []int32
	// Family holds settings only the family's code reads, parsed by its ConfigDefaults.Vision
	// hook (DeepSeek-OCR-2's SAM and encoder, its decoder's experts); nil for the others.
	Family any
}

// TextConfig is the decoder: GQA attention with sectioned multimodal RoPE and a SwiGLU MLP.
type TextConfig struct {
	Hidden       int
	Layers       int
	Heads        int
	KVHeads      int
	HeadDim      int
	Intermediate int
	Vocab        int
	// MaxPositions is max_position_embeddings, the model's own context ceiling.
	MaxPositions int
	RMSNormEps   float64
	RopeTheta    float64
	// MRopeSection splits the HeadDim/2 rotary frequencies between the t, h and w positions:
	// in chunks (Qwen2.5-VL) or, with MRopeInterleaved, frequency f < 3*section[a] with f%3 = a
	// follows axis a (Qwen3-VL), the rest t.
	MRopeSection     [3]int
	MRopeInterleaved bool
	// QKNorm applies an RMSNorm over each head of q and k before RoPE (Qwen3, Lance).
	QKNorm bool
	// BidirectionalImage makes each image's block (its placeholders and the one token on each
	// side: <|vision_start|> ... <|vision_end|>) attend to all of itself in prefill, and causally
	// to what precedes it (Lance's prefill of the vision split with is_causal=False).
	BidirectionalImage bool
	// OutputVocab, when in (0, Vocab), is the first id never predicted: the logits of the
	// embedding rows past the tokenizer's vocabulary are -inf (Lance's
	// pred_logits[:, len(tokenizer):] = -inf). Config key output_vocab_size; 0: every id.
	OutputVocab int
	// Rope1D is plain 1-D RoPE (InternVL's Qwen2): every frequency follows the token's index
	// (MRopeSection is {HeadDim/2, 0, 0}, and PromptPositions gives all three rows the index).
	Rope1D bool
	// Act is the MLP activation; QKVBias says q/k/v projections carry a bias.
	Act     string
	QKVBias bool
	// RotaryDims is how many leading dimensions of each head rotate (partial_rotary_factor x
	// HeadDim, Phi-3's 96 of 128); 0: every one.
	RotaryDims int
	// RopeFactors divide the rotary frequencies one by one (LongRoPE's short_factor: the factors of
	// a pass whose positions stay within RopeOriginalMax), and RopeScale multiplies cos and sin
	// (LongRoPE's attention factor); nil and 0 for plain RoPE. RopeLongFactors (long_factor) are
	// the factors of a sequence that runs past RopeOriginalMax (LongRoPE.Long); nil: none given,
	// and no sequence may pass RopeOriginalMax.
	RopeFactors     []float64
	RopeLongFactors []float64
	RopeScale       float64
	RopeOriginalMax int
}

// LongRoPE tells, for a decoder with LongRoPE's long factors, whether a sequence of capacity
// tokens runs them. transformers switches a forward pass to the long factors when its largest
// position reaches original_max_position_embeddings (longrope_frequency_update), so a prompt
// longer than that is prefilled, and decoded, with the long factors throughout; a prompt within
// it keeps the short ones, and may not grow past it (engine.Check refuses such a request: there
// transformers 5.17 drops the cache and decodes on without the context). A sequence is made
// with capacity = prompt + new tokens, so past RopeOriginalMax it holds a prompt past it.
// Without long factors (or without LongRoPE) it is false.
func (t *TextConfig) LongRoPE(capacity int) bool {
	return len(t.RopeLongFactors) > 0 && t.RopeOriginalMax > 0 && capacity > t.RopeOriginalMax
}

// Rotated is the number of leading dimensions of a head that rotate.
func (t *TextConfig) Rotated() int {
	if t.RotaryDims == 0 {
		return t.HeadDim
	}
	return t.RotaryDims
}

// VisionConfig is the vision tower: patch embedding, ViT blocks with 2-D RoPE (windowed except
// in FullAttBlocks), and a merger of MergeSize x MergeSize patches into one token.
type VisionConfig struct {
	Depth             int
	Hidden            int
	Heads             int
	Intermediate      int
	InChannels        int
	PatchSize         int
	TemporalPatchSize int
	MergeSize         int
	// WindowSize is the attention window side in pixels; 0 means every block is global.
	WindowSize    int
	FullAttBlocks []int
	OutHidden     int
	// RopeTheta is the base of the tower's 2-D rotary embedding; 0 for a tower without one
	// (InternViT: learned absolute positions).
	RopeTheta float64
	// NormEps is the epsilon of the blocks' and the merger's norms (fixed by the family, or
	// layer_norm_eps).
	NormEps float64
	// PosEmbeddings is the size of a learned square position table: resampled to each grid
	// (Qwen3-VL's num_position_embeddings), or one row a patch of the one grid the tower takes
	// (InternViT: (image_size/patch_size)^2, its CLS row apart); 0: none.
	PosEmbeddings int
	// PosGrid is the learned position table's {height, width} when it is not square (MoonViT's
	// init_pos_emb_height x init_pos_emb_width, resampled bicubic to each grid); PosEmbeddings is
	// then their product. Zero: a square table of PosEmbeddings rows.
	PosGrid [2]int
	// FixedGrid is the grid side, in patches, of every frame the tower takes (InternViT: one
	// 448-pixel tile of 32x32 patches a frame, Grid.T tiles an image); 0: any grid.
	FixedGrid int
	// Deepstack are the blocks whose output feeds a merger of its own, added to the decoder's
	// hidden states at the image tokens after decoder layer i (deepstack_visual_indexes).
	Deepstack []int
	// FeatureBlocks is how many blocks run before the features are taken, when a feature layer
	// before the last is the tower's output (Phi-4-multimodal's hidden_states[-2]: Depth-1 of
	// its blocks); 0: all Depth.
	FeatureBlocks   int
	Act             string
	TokensPerSecond int
}

// EmbedDim is the width of one image token's row out of the vision tower: the merger's output,
// then each deepstack merger's.
func (c *Config) EmbedDim() int { return c.Vision.OutHidden * (1 + len(c.Vision.Deepstack)) }

// PatchDim is the length of one pixel row: channels x frames x patch x patch.
func (v VisionConfig) PatchDim() int {
	return v.InChannels * v.TemporalPatchSize * v.PatchSize * v.PatchSize
}

// ConfigDefaults are what a model type fixes that its config.json does not say: the values the
// reference applies when a key is absent. Each family registers its own (RegisterConfig) from its
// folder under core/internal/models.
type ConfigDefaults struct {
	VisionNormEps float64
	QKVBias       bool
	// defaults the reference applies when config.json omits a key
	TextEps, TextTheta, VisionTheta float64
	MRopeSection                    [3]int
	WindowSize                      int
	FullAtt                         []int
	// HeadDimKey honours the text config's head_dim (else hidden_size / num_attention_heads);
	// BiasKey reads attention_bias (else QKVBias); QKNorm is the family's per-head q/k norm;
	// BidirectionalImage its image blocks' attention (TextConfig.BidirectionalImage).
	HeadDimKey, BiasKey, QKNorm, BidirectionalImage bool
	// VisionAct is the vision MLP activation the family runs ("silu" when empty).
	VisionAct string
	// PosEmbeddings is num_position_embeddings when absent.
	PosEmbeddings int
	// Rope1D: the decoder's rotary embedding is plain 1-D (TextConfig.Rope1D).
	Rope1D bool
	// MaxPositions is max_position_embeddings when absent (32768 when 0); RopeOriginalMax is the
	// config class's own original_max_position_embeddings (Phi-3's 4096), which then wins over a
	// rope dict's (standardize_rope_params gives the top-level attribute priority).
	MaxPositions, RopeOriginalMax int
	// TieTop: the top level's tie_word_embeddings alone decides, true when absent
	// (InternVLConfig; the text config's value is not forwarded).
	TieTop bool
	// Vision, when set, reads the tower's keys in place of the Qwen layout (depth, num_heads,
	// out_hidden_size, ...): it fills cfg.Vision from vision_config and the top level (where a
	// family keeps its projector's keys), may set the special token ids, and refuses what the
	// family does not implement with ErrUnsupported. It runs after the text keys are read.
	Vision func(top, vision ConfigSection, cfg *Config) error
	// ImageTokens, when set, counts the prompt placeholder tokens of an image the family lays
	// out by its patch masks and tile places (Phi-4-multimodal: the kept cells of its stitched
	// crops, a separator after each row, the global view's rows), refusing an image it cannot
	// lay out with ml.ErrInvalidInput; absent, an image is Grid.Tokens(MergeSize) tokens and
	// takes no patch masks.
	ImageTokens func(cfg *Config, img *Image) (int, error)
}

func (d ConfigDefaults) visionAct() string {
	if d.VisionAct == "" {
		return "silu"
	}
	return d.VisionAct
}

var (
	familiesMu sync.RWMutex
	families   = map[string]ConfigDefaults{}
)

// RegisterConfig makes ParseConfig accept modelType with these defaults; a family calls it from
// its package's init. Registering a model type twice panics.
func RegisterConfig(modelType string, d ConfigDefaults) {
	familiesMu.Lock()
	defer familiesMu.Unlock()
	if _, dup := families[modelType]; dup {
		panic("engine: model type " + modelType + " registered twice")
	}
	families[modelType] = d
}

// LoadConfig reads dir/config.json.
func LoadConfig(dir string) (*Config, error) {
	data, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "config.json"), err)
	}
	return cfg, nil
}

// ConfigSection is one level of config.json (the top level, text_config or vision_config); a key
// absent from it, or null, reads as absent.
type ConfigSection map[string]json.RawMessage

// Has reports whether key is present and not null.
func (o ConfigSection) Has(key string) bool { _, ok := o[key]; return ok && string(o[key]) != "null" }

// Get decodes key into dst when present; found says whether it was.
func (o ConfigSection) Get(key string, dst any) (found bool, err error) {
	if !o.Has(key) {
		return false, nil
	}
	if err := json.Unmarshal(o[key], dst); err != nil {
		return true, fmt.Errorf("config key %q: %w", key, err)
	}
	return true, nil
}

// ParseConfig parses config.json in either layout: the hub's flat one (text keys at the top,
// rope_scaling + rope_theta) or transformers 5's nested one (text_config, rope_parameters).
func ParseConfig(data []byte) (*Config, error) {
	var top ConfigSection
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("parsing config: %w", err)
	}
	cfg := &Config{}
	if _, err := top.Get("model_type", &cfg.ModelType); err != nil {
		return nil, err
	}
	familiesMu.RLock()
	fam, ok := families[cfg.ModelType]
	familiesMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("model_type %q: %w", cfg.ModelType, ErrUnsupported)
	}

	// Text keys live in text_config (transformers 5) or at the top (hub files); a key missing
	// from text_config falls back to the top level.
	text := top
	if top.Has("text_config") {
		var nested ConfigSection
		if _, err := top.Get("text_config", &nested); err != nil {
			return nil, err
		}
		text = ConfigSection{}
		for k, v := range top {
			text[k] = v
		}
		for k, v := range nested {
			text[k] = v
		}
	}
	var vision ConfigSection
	if _, err := top.Get("vision_config", &vision); err != nil {
		return nil, err
	}
	if vision == nil {
		return nil, errors.New("config has no vision_config")
	}

	var errs []error
	need := func(o ConfigSection, key string, dst *int) {
		found, err := o.Get(key, dst)
		switch {
		case err != nil:
			errs = append(errs, err)
		case !found:
			errs = append(errs, fmt.Errorf("config key %q: missing", key))
		}
	}
	opt := func(o ConfigSection, key string, dst any) {
		if _, err := o.Get(key, dst); err != nil {
			errs = append(errs, err)
		}
	}

	t := &cfg.Text
	need(text, "hidden_size", &t.Hidden)
	need(text, "num_hidden_layers", &t.Layers)
	need(text, "num_attention_heads", &t.Heads)
	need(text, "intermediate_size", &t.Intermediate)
	need(text, "vocab_size", &t.Vocab)
	t.KVHeads = t.Heads
	opt(text, "num_key_value_heads", &t.KVHeads)
	t.MaxPositions = 32768
	if fam.MaxPositions > 0 {
		t.MaxPositions = fam.MaxPositions
	}
	opt(text, "max_position_embeddings", &t.MaxPositions)
	t.RMSNormEps = fam.TextEps
	opt(text, "rms_norm_eps", &t.RMSNormEps)
	t.Act = "silu"
	opt(text, "hidden_act", &t.Act)
	t.QKVBias = fam.QKVBias
	if fam.BiasKey {
		opt(text, "attention_bias", &t.QKVBias)
	}
	t.QKNorm = fam.QKNorm
	t.BidirectionalImage = fam.BidirectionalImage
	opt(text, "output_vocab_size", &t.OutputVocab)
	if fam.HeadDimKey {
		opt(text, "head_dim", &t.HeadDim)
	}

	// Rotary: rope_parameters (transformers 5) or rope_scaling plus rope_theta (hub).
	t.RopeTheta = fam.TextTheta
	opt(text, "rope_theta", &t.RopeTheta)
	section := fam.MRopeSection[:]
	t.Rope1D = fam.Rope1D
	partial := 1.0
	opt(text, "partial_rotary_factor", &partial)
	// original_max_position_embeddings: a top-level value (or the config class's default) wins
	// over the rope dict's
	origMax := fam.RopeOriginalMax
	opt(text, "original_max_position_embeddings", &origMax)
	for _, key := range []string{"rope_scaling", "rope_parameters"} {
		var rope ConfigSection
		opt(text, key, &rope)
		if rope == nil {
			continue
		}
		opt(rope, "rope_theta", &t.RopeTheta)
		opt(rope, "partial_rotary_factor", &partial)
		var kind string
		opt(rope, "rope_type", &kind)
		if kind == "" {
			opt(rope, "type", &kind)
		}
		if kind == "longrope" {
			longRope(rope, t, origMax, &errs)
		}
		opt(rope, "mrope_interleaved", &t.MRopeInterleaved)
		if rope.Has("mrope_section") {
			section = nil
			opt(rope, "mrope_section", &section)
			if t.Rope1D {
				errs = append(errs, fmt.Errorf("%s: mrope_section on a decoder with 1-D rotary positions: %w", key, ErrUnsupported))
			}
		}
		if t.Rope1D { // 1-D RoPE: the default frequencies, or LongRoPE's short factors
			for _, k := range []string{"rope_type", "type"} {
				// dynamic NTK (InternVL3's Qwen2 configs) keeps the default frequencies up to
				// max_position_embeddings (dynamic_rope_update rescales only past it), as
				// LongRoPE keeps its short factors up to original_max_position_embeddings: either
				// bounds every context (DefaultLimits, the bundles)
				var kind string
				if opt(rope, k, &kind); kind != "" && kind != "default" && kind != "dynamic" && kind != "longrope" {
					errs = append(errs, fmt.Errorf("%s.%s %q: %w", key, k, kind, ErrUnsupported))
				}
			}
		}
	}
	if len(section) != 3 {
		errs = append(errs, fmt.Errorf("mrope_section %v: want 3 sections", section))
	} else {
		copy(t.MRopeSection[:], section)
	}
	var sliding bool
	if opt(text, "use_sliding_window", &sliding); sliding {
		errs = append(errs, fmt.Errorf("use_sliding_window: %w", ErrUnsupported))
	}

	// tie_word_embeddings: the top level decides; a pre-v5 file may carry it in text_config only
	// (Qwen2_5_VLConfig.__post_init__ forwards it), unless the family reads the top level alone.
	cfg.TieEmbeddings = fam.TieTop
	opt(top, "tie_word_embeddings", &cfg.TieEmbeddings)
	if !fam.TieTop && !cfg.TieEmbeddings && top.Has("text_config") {
		var nested ConfigSection
		opt(top, "text_config", &nested)
		var tied bool
		opt(nested, "tie_word_embeddings", &tied)
		cfg.TieEmbeddings = tied
	}

	cfg.ImageTokenID, cfg.VideoTokenID = 151655, 151656
	cfg.VisionStartTokenID, cfg.VisionEndTokenID = 151652, 151653
	opt(top, "image_token_id", &cfg.ImageTokenID)
	opt(top, "video_token_id", &cfg.VideoTokenID)
	opt(top, "vision_start_token_id", &cfg.VisionStartTokenID)
	opt(top, "vision_end_token_id", &cfg.VisionEndTokenID)
	if ids, err := tokenIDs(text, "eos_token_id"); err != nil {
		errs = append(errs, err)
	} else {
		cfg.EOSTokenIDs = ids
	}

	if fam.Vision != nil {
		if err := fam.Vision(top, vision, cfg); err != nil {
			errs = append(errs, err)
		}
		return finishConfig(cfg, partial, errs)
	}
	v := &cfg.Vision
	need(vision, "depth", &v.Depth)
	need(vision, "hidden_size", &v.Hidden)
	need(vision, "num_heads", &v.Heads)
	need(vision, "intermediate_size", &v.Intermediate)
	need(vision, "out_hidden_size", &v.OutHidden)
	v.InChannels = 3
	opt(vision, "in_chans", &v.InChannels) // hub spelling
	opt(vision, "in_channels", &v.InChannels)
	v.PatchSize, v.TemporalPatchSize, v.MergeSize = 14, 2, 2
	opt(vision, "patch_size", &v.PatchSize)
	opt(vision, "temporal_patch_size", &v.TemporalPatchSize)
	opt(vision, "spatial_merge_size", &v.MergeSize)
	v.WindowSize = fam.WindowSize
	opt(vision, "window_size", &v.WindowSize)
	v.FullAttBlocks = append([]int(nil), fam.FullAtt...)
	opt(vision, "fullatt_block_indexes", &v.FullAttBlocks)
	v.Act = fam.visionAct()
	opt(vision, "hidden_act", &v.Act)
	v.PosEmbeddings = fam.PosEmbeddings
	opt(vision, "num_position_embeddings", &v.PosEmbeddings)
	opt(vision, "deepstack_visual_indexes", &v.Deepstack)
	v.TokensPerSecond = 4
	opt(vision, "tokens_per_second", &v.TokensPerSecond)
	v.RopeTheta = fam.VisionTheta
	var vrope ConfigSection
	opt(vision, "rope_parameters", &vrope)
	if vrope != nil {
		opt(vrope, "rope_theta", &v.RopeTheta)
	}
	v.NormEps = fam.VisionNormEps
	return finishConfig(cfg, partial, errs)
}

// finishConfig derives what the keys imply (the head dim, the rotated dims of a
// partial_rotary_factor) and validates the result.
func finishConfig(cfg *Config, partial float64, errs []error) (*Config, error) {
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	t := &cfg.Text
	// Qwen2_5_VLAttention: head_dim = hidden_size // num_heads (a head_dim key is ignored unless
	// the family reads it).
	if t.Heads > 0 && t.HeadDim == 0 {
		t.HeadDim = t.Hidden / t.Heads
	}
	if partial != 1 { // int(head_dim * partial_rotary_factor), as compute_default_rope_parameters
		t.RotaryDims = int(float64(t.HeadDim) * partial)
	}
	if t.Rope1D { // every frequency on the one position row
		t.MRopeSection = [3]int{t.Rotated() / 2, 0, 0}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// longRope reads LongRoPE's parameters (_compute_longrope_parameters): the short factors (those of
// a context within original_max_position_embeddings) and the attention factor, given or derived
// from max_position_embeddings / original_max_position_embeddings. origMax is the top level's
// original_max_position_embeddings (0: absent), which wins over the rope dict's.
func longRope(rope ConfigSection, t *TextConfig, origMax int, errs *[]error) {
	opt := func(key string, dst any) {
		if _, err := rope.Get(key, dst); err != nil {
			*errs = append(*errs, err)
		}
	}
	if origMax <= 0 {
		opt("original_max_position_embeddings", &origMax)
	}
	opt("short_factor", &t.RopeFactors)
	opt("long_factor", &t.RopeLongFactors)
	var factor, attn float64
	opt("factor", &factor)
	opt("attention_factor", &attn)
	if origMax <= 0 || len(t.RopeFactors) == 0 {
		*errs = append(*errs, fmt.Errorf("longrope: original_max_position_embeddings %d, %d short factors", origMax, len(t.RopeFactors)))
		return
	}
	t.RopeOriginalMax = origMax
	if factor == 0 {
		factor = float64(t.MaxPositions) / float64(origMax)
	}
	if attn == 0 {
		attn = 1
		if factor > 1 {
			attn = math.Sqrt(1 + math.Log(factor)/math.Log(float64(origMax)))
		}
	}
	t.RopeScale = attn
}

// tokenIDs reads an id that config files write either as a number or as a list.
func tokenIDs(o ConfigSection, key string) ([]int32, error) {
	if !o.Has(key) {
		return nil, nil
	}
	var one int32
	if err := json.Unmarshal(o[key], &one); err == nil {
		return []int32{one}, nil
	}
	var many []int32
	if err := json.Unmarshal(o[key], &many); err != nil {
		return nil, fmt.Errorf("config key %q: %w", key, err)
	}
	return many, nil
}

// Validate checks that the numbers describe a graph the backends can build.
func (c *Config) Validate() error {
	t, v := &c.Text, &c.Vision
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for name, n := range map[string]int{
		"hidden_size": t.Hidden, "num_hidden_layers": t.Layers, "num_attention_heads": t.Heads,
		"num_key_value_heads": t.KVHeads, "intermediate_size": t.Intermediate, "vocab_size": t.Vocab,
		"max_position_embeddings": t.MaxPositions, "vision depth": v.Depth, "vision hidden_size": v.Hidden,
		"vision num_heads": v.Heads, "vision intermediate_size": v.Intermediate, "in_channels": v.InChannels,
		"patch_size": v.PatchSize, "temporal_patch_size": v.TemporalPatchSize, "spatial_merge_size": v.MergeSize,
		"out_hidden_size": v.OutHidden,
	} {
		if n <= 0 {
			bad("%s = %d: must be positive", name, n)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	familiesMu.RLock()
	fam := families[c.ModelType]
	familiesMu.RUnlock()
	if t.HeadDim <= 0 || (!fam.HeadDimKey && t.Hidden != t.Heads*t.HeadDim) {
		bad("head_dim %d: hidden_size %d over %d heads", t.HeadDim, t.Hidden, t.Heads)
	}
	if t.Heads%t.KVHeads != 0 {
		bad("num_attention_heads %d not a multiple of num_key_value_heads %d", t.Heads, t.KVHeads)
	}
	if t.OutputVocab < 0 || t.OutputVocab > t.Vocab {
		bad("output_vocab_size %d outside the vocabulary of %d", t.OutputVocab, t.Vocab)
	}
	if r := t.Rotated(); r <= 0 || r%2 != 0 || r > t.HeadDim {
		bad("%d rotated dimensions of a head of %d (partial_rotary_factor)", r, t.HeadDim)
	}
	if s := t.MRopeSection; s[0] < 0 || s[1] < 0 || s[2] < 0 || s[0]+s[1]+s[2] != t.Rotated()/2 {
		bad("mrope_section %v must sum to the rotated dims / 2 = %d", s, t.Rotated()/2)
	}
	if n := len(t.RopeFactors); n > 0 && n != t.Rotated()/2 {
		bad("%d rope factors for %d rotary frequencies", n, t.Rotated()/2)
	}
	if n := len(t.RopeLongFactors); n > 0 && n != t.Rotated()/2 {
		bad("%d long rope factors for %d rotary frequencies", n, t.Rotated()/2)
	}
	if t.Rope1D && (t.MRopeSection != [3]int{t.Rotated() / 2, 0, 0} || t.MRopeInterleaved) {
		bad("1-D rotary positions with mrope_section %v (interleaved %v)", t.MRopeSection, t.MRopeInterleaved)
	}
	if t.Act != "silu" {
		bad("text hidden_act %q: %w", t.Act, ErrUnsupported)
	}
	if v.Act != fam.visionAct() {
		bad("vision hidden_act %q (%s runs %s): %w", v.Act, c.ModelType, fam.visionAct(), ErrUnsupported)
	}
	if g := v.PosGrid; g != [2]int{} {
		if g[0] < 1 || g[1] < 1 || g[0]*g[1] != v.PosEmbeddings {
			bad("a position table of %dx%d for %d position embeddings", g[0], g[1], v.PosEmbeddings)
		}
	} else if side := int(math.Sqrt(float64(v.PosEmbeddings))); v.PosEmbeddings < 0 || side*side != v.PosEmbeddings {
		bad("num_position_embeddings %d is not a square", v.PosEmbeddings)
	}
	if v.FixedGrid < 0 || (v.FixedGrid > 0 && v.FixedGrid%v.MergeSize != 0) {
		bad("a fixed grid side of %d patches: not a multiple of the merge size %d", v.FixedGrid, v.MergeSize)
	}
	if len(v.Deepstack) > t.Layers {
		bad("%d deepstack mergers for %d decoder layers", len(v.Deepstack), t.Layers)
	}
	for _, b := range v.Deepstack {
		if b < 0 || b >= v.Depth {
			bad("deepstack_visual_indexes: block %d outside depth %d", b, v.Depth)
		}
	}
	// a tower with 2-D RoPE (the family's default theta says it has one) splits each head in
	// four; any tower splits its width in whole heads
	rope2D := fam.VisionTheta > 0
	if v.Hidden%v.Heads != 0 || (rope2D && (v.Hidden/v.Heads)%4 != 0) {
		bad("vision head_dim %d/%d must be whole (a multiple of 4 with 2-D RoPE)", v.Hidden, v.Heads)
	}
	if v.WindowSize < 0 || (v.WindowSize > 0 && v.WindowSize%(v.PatchSize*v.MergeSize) != 0) {
		bad("window_size %d must be a multiple of patch_size*spatial_merge_size", v.WindowSize)
	}
	for _, b := range v.FullAttBlocks {
		if b < 0 || b >= v.Depth {
			bad("fullatt_block_indexes: block %d outside depth %d", b, v.Depth)
		}
	}
	if v.OutHidden != t.Hidden {
		bad("vision out_hidden_size %d != text hidden_size %d", v.OutHidden, t.Hidden)
	}
	if !(t.RMSNormEps > 0) || !(t.RopeTheta > 0) || (rope2D && !(v.RopeTheta > 0)) || !(v.NormEps > 0) {
		bad("epsilons and rope thetas must be positive")
	}
	if c.ImageTokenID < 0 || int(c.ImageTokenID) >= t.Vocab {
		bad("image_token_id %d outside the vocabulary", c.ImageTokenID)
	}
	return errors.Join(errs...)
}

// ImageTokens is the number of prompt placeholder tokens img becomes under cfg: its family's
// count (ConfigDefaults.ImageTokens) or Grid.Tokens(MergeSize). An image with patch masks is
// refused (ml.ErrInvalidInput) by a family that counts no masks: its tower would attend to the
// padding.
func ImageTokens(cfg *Config, img *Image) (int, error) {
	familiesMu.RLock()
	count := families[cfg.ModelType].ImageTokens
	familiesMu.RUnlock()
	if count != nil {
		return count(cfg, img)
	}
	if img.Masks != nil {
		return 0, fmt.Errorf("patch masks on an image of the %s family, whose vision tower takes none: %w", cfg.ModelType, ml.ErrInvalidInput)
	}
	return img.Grid.Tokens(cfg.Vision.MergeSize), nil
}

// ConfigModelTypes lists the model types ParseConfig knows the defaults of, sorted.
func ConfigModelTypes() []string {
	familiesMu.RLock()
	defer familiesMu.RUnlock()
	out := make([]string, 0, len(families))
	for k := range families {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
