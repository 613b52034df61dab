package bundles

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// Family is what the bundle builder knows about a model family: data only.
type Family struct {
	Name string
	// ModelTypes are the config.json model_type values the family accepts.
	ModelTypes []string
	Tasks      []Task
	PluginABI  int
	// StopIDs are used when the checkpoint's generation_config.json names none.
	StopIDs        []int32
	MaxMemoryPages int
	TimeoutMS      int
	// ContextLength is the family's default context when the build names none (else 4096),
	// capped by the config's max_position_embeddings.
	ContextLength int
	// Params maps each plugin parameter to the preprocessor_config.json keys it is read from,
	// first present wins ("size.shortest_edge" names a nested key).
	Params map[string][]string
	// Fixed are preprocessor_config.json values the family's plugin implements as constants; a
	// checkpoint that says otherwise is refused rather than served wrongly.
	Fixed map[string]any
	// LowPixels is the largest area of image_url.detail "low" (256 image tokens), when the
	// family's plugin takes per-request budgets through min_pixels and max_pixels.
	LowPixels int64
	// ConfigFixed are config.json values (dotted keys) the family's plugin and graph assume; a
	// checkpoint that says otherwise is refused. A key the checkpoint leaves out passes (the
	// transformers default applies).
	ConfigFixed map[string]any
	// SpecialTokens are tokens the plugin's framing spells out, each mapped to the config.json key
	// that holds its id ("" when the id is free): tokenizer.json must hold each as an added token,
	// with that id, or the prompt would not be what the engine expects.
	SpecialTokens map[string]string
	// Grounding, when set, names the config.json keys of the coordinate, box and ref token ids
	// (with the values the model class takes when a key is absent): the bundle's
	// generation.grounding, which lets the runtime read boxes out of the answers.
	Grounding *GroundingKeys
	// Image overrides DefaultImage's limits where non-zero: a family whose reference accepts
	// images the defaults refuse (Lance's transform takes any aspect ratio).
	Image Image
}

// GroundingKeys are the config.json keys (top level) of a Grounding's ids, each with the model
// class's default, and its scale.
type GroundingKeys struct {
	CoordFirst, CoordLast, BoxOpen, BoxClose, RefOpen, RefClose ConfigID
	Scale                                                       float64
}

// ConfigID is a config.json key holding a token id and the id when the key is absent.
type ConfigID struct {
	Key     string
	Default int32
}

// grounding reads the family's grounding ids out of config.json.
func (f Family) grounding(cfg map[string]any) (*Grounding, error) {
	k := f.Grounding
	if k == nil {
		return nil, nil
	}
	id := func(c ConfigID) (int32, error) {
		v, ok := cfg[c.Key]
		if !ok || v == nil {
			return c.Default, nil
		}
		n, ok := v.(float64)
		if !ok || n != math.Trunc(n) || n < 0 || n > math.MaxInt32 {
			return 0, fmt.Errorf("config.json %s: %v is not a token id", c.Key, v)
		}
		return int32(n), nil
	}
	g := &Grounding{Scale: k.Scale}
	for _, x := range []struct {
		dst *int32
		key ConfigID
	}{{&g.CoordFirst, k.CoordFirst}, {&g.CoordLast, k.CoordLast}, {&g.BoxOpen, k.BoxOpen}, {&g.BoxClose, k.BoxClose},
		{&g.RefOpen, k.RefOpen}, {&g.RefClose, k.RefClose}} {
		var err error
		if *x.dst, err = id(x.key); err != nil {
			return nil, err
		}
	}
	if err := g.Validate(); err != nil {
		return nil, err
	}
	return g, nil
}

// Families lists the families this build can bundle.
var Families = map[string]Family{
	"qwen2_5_vl": {
		Name: "qwen2_5_vl", ModelTypes: []string{"qwen2_5_vl"},
		Tasks: []Task{TaskVisionLanguage}, PluginABI: 1, StopIDs: []int32{151645, 151643},
		MaxMemoryPages: 512, TimeoutMS: 2000,
		Params: map[string][]string{
			"min_pixels": {"min_pixels", "size.shortest_edge"},
			"max_pixels": {"max_pixels", "size.longest_edge"},
		},
		Fixed: map[string]any{
			"patch_size": 14.0, "temporal_patch_size": 2.0, "merge_size": 2.0,
			"image_mean": []any{0.48145466, 0.4578275, 0.40821073},
			"image_std":  []any{0.26862954, 0.26130258, 0.27577711},
		},
		LowPixels: 256 * 28 * 28,
	},
	"qwen3_vl": {
		Name: "qwen3_vl", ModelTypes: []string{"qwen3_vl"},
		Tasks: []Task{TaskVisionLanguage}, PluginABI: 1, StopIDs: []int32{151645, 151643},
		MaxMemoryPages: 512, TimeoutMS: 2000,
		Params: map[string][]string{
			"min_pixels": {"size.shortest_edge", "min_pixels"},
			"max_pixels": {"size.longest_edge", "max_pixels"},
		},
		Fixed: map[string]any{
			"patch_size": 16.0, "temporal_patch_size": 2.0, "merge_size": 2.0,
			"image_mean": []any{0.5, 0.5, 0.5}, "image_std": []any{0.5, 0.5, 0.5},
		},
		LowPixels: 256 * 32 * 32,
	},
	// InternVL3 (-hf checkpoints): several 448x448 views a request (plugin ABI 2), 256 tokens each.
	"internvl": {
		Name: "internvl", ModelTypes: []string{"internvl"},
		Tasks: []Task{TaskVisionLanguage}, PluginABI: 2, StopIDs: []int32{151645},
		MaxMemoryPages: 512, TimeoutMS: 2000,
		Params: map[string][]string{
			"max_patches": {"max_patches"},
			"min_patches": {"min_patches"},
		},
		Fixed: map[string]any{
			"size.height": 448.0, "size.width": 448.0, "resample": 3.0,
			"image_mean": []any{0.485, 0.456, 0.406},
			"image_std":  []any{0.229, 0.224, 0.225},
		},
		ConfigFixed: map[string]any{
			"downsample_ratio": 0.5, "image_seq_length": 256.0,
			"vision_config.image_size": []any{448.0, 448.0}, "vision_config.patch_size": []any{14.0, 14.0},
			"vision_feature_layer": -1.0, "vision_feature_select_strategy": "default",
		},
		SpecialTokens: map[string]string{"<IMG_CONTEXT>": "image_token_id", "<img>": "", "</img>": ""},
	},
	// DeepSeek-OCR-2 (transformers 5 checkpoints, deepseek-community/DeepSeek-OCR-2 layout, or the
	// original release's tensor names): 768 tiles past 768 px and a 1024 global view (plugin ABI
	// 2), 256 + 144 x tiles + 1 tokens; no chat roles (the plugin frames BOS<image>...\n{question}).
	"deepseek_ocr2": {
		Name: "deepseek_ocr2", ModelTypes: []string{"deepseek_ocr2"},
		Tasks: []Task{TaskVisionLanguage}, PluginABI: 2, StopIDs: []int32{1},
		MaxMemoryPages: 512, TimeoutMS: 2000,
		Params: map[string][]string{
			"min_tiles": {"min_patches"},
			"max_tiles": {"max_patches"},
		},
		Fixed: map[string]any{
			"size.height": 1024.0, "size.width": 1024.0, "tile_size": 768.0, "resample": 3.0,
			"image_mean": []any{0.5, 0.5, 0.5}, "image_std": []any{0.5, 0.5, 0.5},
			"background_color": []any{127.0, 127.0, 127.0},
		},
		ConfigFixed: map[string]any{
			"vision_config.sam_config.image_size": 1024.0, "vision_config.sam_config.patch_size": 16.0,
		},
		SpecialTokens: map[string]string{"<image>": "image_token_id", "<｜begin▁of▁sentence｜>": ""},
	},
	// Phi-4-multimodal (the transformers-format checkpoint, model_type phi4_multimodal, or the
	// hub's remote-code one, phi4mm, converted first: phi4mm.go): a global view and up to
	// dynamic_hd 448x448 crops with patch masks a request (plugin ABI 2, wire minor 3).
	"phi4_multimodal": {
		Name: "phi4_multimodal", ModelTypes: []string{"phi4_multimodal", phi4HubModelType},
		Tasks: []Task{TaskVisionLanguage}, PluginABI: 2, StopIDs: []int32{199999, 200020},
		MaxMemoryPages: 512, TimeoutMS: 2000,
		Params: map[string][]string{
			"dynamic_hd": {"dynamic_hd"},
		},
		Fixed: map[string]any{
			"size.height": 448.0, "size.width": 448.0, "patch_size": 14.0,
			"image_mean": []any{0.5, 0.5, 0.5}, "image_std": []any{0.5, 0.5, 0.5},
		},
		ConfigFixed: map[string]any{
			"vision_config.image_size": 448.0, "vision_config.patch_size": 14.0, "vision_config.crop_size": 448.0,
		},
		SpecialTokens: map[string]string{
			"<|image|>": "vision_config.image_token_id", "<|user|>": "", "<|assistant|>": "", "<|end|>": "", "<|system|>": "",
		},
	},
	// LocateAnything-3B (remote code): one view, resized once or twice (plugin ABI 2, wire minor
	// 4); in_token_limit from preprocessor_config.json (25600; the class default is 4096).
	"locateanything": {
		Name: "locateanything", ModelTypes: []string{"locateanything"},
		Tasks: []Task{TaskVisionLanguage}, PluginABI: 2, StopIDs: []int32{151645},
		MaxMemoryPages: 512, TimeoutMS: 2000,
		// an image takes up to 6777 tokens at in_token_limit 25600 (a 4000x3000 photo 6510): room
		// for it, the question and the grounding workload's 32 new tokens
		ContextLength: 8192,
		Params:        map[string][]string{"in_token_limit": {"in_token_limit"}},
		Fixed:         map[string]any{"merge_kernel_size": []any{2.0, 2.0}},
		ConfigFixed: map[string]any{
			"vision_config.patch_size": 14.0, "vision_config.merge_kernel_size": []any{2.0, 2.0},
		},
		SpecialTokens: map[string]string{"<IMG_CONTEXT>": "image_token_index", "<img>": "", "</img>": ""},
		// LocateAnythingConfig's keys and defaults: <0>..<1000>, <box> </box>, <ref> </ref>
		Grounding: &GroundingKeys{
			CoordFirst: ConfigID{"coord_start_token_id", 151677}, CoordLast: ConfigID{"coord_end_token_id", 152677},
			BoxOpen: ConfigID{"box_start_token_id", 151668}, BoxClose: ConfigID{"box_end_token_id", 151669},
			RefOpen: ConfigID{"ref_start_token_id", 151672}, RefClose: ConfigID{"ref_end_token_id", 151673},
			Scale: 1000,
		},
	},
	// Lance-3B's understanding expert (plugin ABI 2: one view cut and resized to one of six
	// buckets), from Lance's release layout (Lance_3B/ and Qwen2.5-VL-ViT/, converted by
	// convertLance) or a directory in Iris's layout: config.json with model_type lance (the
	// decoder's llm_config.json keys at the top, the tower's config as vision_config),
	// model.safetensors with the understanding path's tensors, the Qwen2.5 tokenizer. The plugin
	// fixes the geometry (no preprocessor_config.json); generation stops on <|im_end|> only.
	"lance": {
		Name: "lance", ModelTypes: []string{"lance"},
		Tasks: []Task{TaskVisionLanguage}, PluginABI: 2, StopIDs: []int32{151645},
		MaxMemoryPages: 512, TimeoutMS: 2000,
		ConfigFixed: map[string]any{
			"vision_config.patch_size": 14.0, "vision_config.temporal_patch_size": 2.0,
			"vision_config.spatial_merge_size": 2.0,
		},
		SpecialTokens: map[string]string{
			"<|video_pad|>": "image_token_id", "<|vision_start|>": "vision_start_token_id",
			"<|vision_end|>": "vision_end_token_id", "<|im_start|>": "", "<|im_end|>": "",
		},
		// the bucket transform crops any aspect ratio (a 1x32768 strip is one bucket's crop);
		// get_video_tensor_online opens with PIL, no exif_transpose, transparency on white
		Image: Image{MaxAspect: 32768, Read: ReadPILWhite},
	},
}

// BuildOptions configure Build. Zero values take the defaults noted.
type BuildOptions struct {
	// From is a Hugging Face checkpoint directory (config.json, *.safetensors, tokenizer.json,
	// preprocessor_config.json).
	From string
	// Family selects an entry of Families.
	Family string
	// Out is the bundle directory to create; it must not exist or be empty.
	Out string
	// Plugin is the family plugin .wasm file.
	Plugin string
	// Name defaults to the base name of Out.
	Name string
	// Backend defaults to "cpu"; Precision to "fp32" on cpu and "bf16" on cuda.
	Backend, Precision string
	// ContextLength defaults to 4096, capped by the config's max_position_embeddings.
	ContextLength int
	// MaxNewTokens defaults to the checkpoint's generation_config max_new_tokens, else 256.
	MaxNewTokens int
	// Tasks overrides the family's declared tasks.
	Tasks []Task
	// Image overrides the default image limits where non-zero.
	Image Image
	// Params override (or add) plugin parameters after those lifted from
	// preprocessor_config.json: internvl's max_patches = 1 is upstream's single-tile geometry.
	// The plugin checks them when the bundle loads.
	Params map[string]any
	// Progress receives human-readable progress lines; nil is quiet.
	Progress io.Writer
}

// DefaultImage are the image limits of a new bundle.
var DefaultImage = Image{MaxBytes: 20 << 20, MaxPixels: 40_000_000, MinSide: 1, MaxAspect: 200}

// Build creates a bundle directory from a checkpoint directory and a family plugin.
func Build(ctx context.Context, o BuildOptions) (*Bundle, error) {
	fam, ok := Families[o.Family]
	if !ok {
		names := make([]string, 0, len(Families))
		for n := range Families {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("build bundle: unknown family %q (known: %s)", o.Family, strings.Join(names, ", "))
	}
	if o.From == "" || o.Out == "" || o.Plugin == "" {
		return nil, errors.New("build bundle: from, out and plugin are required")
	}
	if _, err := os.Stat(filepath.Join(o.From, "config.json")); errors.Is(err, os.ErrNotExist) && fam.Name == "lance" && lanceRelease(o.From) {
		// Lance's release layout: the understanding path in Iris's layout first (convertLance)
		conv, err := os.MkdirTemp(filepath.Dir(filepath.Clean(o.Out)), ".iris-lance-*")
		if err != nil {
			return nil, fmt.Errorf("build bundle: %w", err)
		}
		defer os.RemoveAll(conv)
		if err := convertLance(ctx, o.From, conv, o.Progress); err != nil {
			return nil, fmt.Errorf("build bundle: Lance's release layout: %w", err)
		}
		o.From = conv
	}
	cfg, err := readJSON(filepath.Join(o.From, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("build bundle: %w", err)
	}
	mt, _ := cfg["model_type"].(string)
	if !slices.Contains(fam.ModelTypes, mt) {
		return nil, fmt.Errorf("build bundle: family %s expects model_type %s, config.json says %q", fam.Name, strings.Join(fam.ModelTypes, " or "), mt)
	}
	// Phi-4-multimodal's vision LoRA: the hub's remote-code layout is converted into the
	// transformers layout with it merged; a transformers-format checkpoint's vision-lora adapter
	// is merged (phi4mm.go)
	var stageFn func(stage string) error
	switch {
	case mt == phi4HubModelType:
		stageFn = func(stage string) error { return convertPhi4MM(ctx, o.From, stage, cfg, o.Progress) }
	case fam.Name == "phi4_multimodal" && fileExists(filepath.Join(o.From, phi4AdapterDir, "adapter_config.json")):
		stageFn = func(stage string) error { return mergePhi4Adapter(ctx, o.From, stage, o.Progress) }
	case fam.Name == "phi4_multimodal" && fileExists(filepath.Join(o.From, "speech-lora")):
		return nil, fmt.Errorf("build bundle: %s has speech-lora/ and no %s/: a checkpoint adapted for speech only; image prompts run through the vision LoRA, which it lacks", o.From, phi4AdapterDir)
	}
	if stageFn != nil {
		if err := os.MkdirAll(filepath.Dir(filepath.Clean(o.Out)), 0o755); err != nil {
			return nil, fmt.Errorf("build bundle: %w", err)
		}
		stage, err := os.MkdirTemp(filepath.Dir(filepath.Clean(o.Out)), ".iris-phi4mm-*")
		if err != nil {
			return nil, fmt.Errorf("build bundle: %w", err)
		}
		defer os.RemoveAll(stage)
		if err := stageFn(stage); err != nil {
			return nil, fmt.Errorf("build bundle: converting the %s checkpoint: %w", mt, err)
		}
		o.From = stage
		if cfg, err = readJSON(filepath.Join(stage, "config.json")); err != nil {
			return nil, fmt.Errorf("build bundle: %w", err)
		}
	}
	if len(fam.ConfigFixed) > 0 || len(fam.SpecialTokens) > 0 {
		var tok map[string]any
		if len(fam.SpecialTokens) > 0 {
			if tok, err = readJSON(filepath.Join(o.From, "tokenizer.json")); err != nil {
				return nil, fmt.Errorf("build bundle: %w", err)
			}
		}
		if err := fam.CheckConfig(cfg, tok); err != nil {
			return nil, fmt.Errorf("build bundle: %w", err)
		}
	}
	weights, err := weightFiles(o.From)
	if err != nil {
		return nil, fmt.Errorf("build bundle: %w", err)
	}
	if err := prepareOut(o.Out); err != nil {
		return nil, fmt.Errorf("build bundle: %w", err)
	}
	// Build next to the destination and rename at the end: a failed build leaves nothing behind.
	final := o.Out
	tmp, err := os.MkdirTemp(filepath.Dir(filepath.Clean(final)), ".iris-bundle-*")
	if err != nil {
		return nil, fmt.Errorf("build bundle: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("build bundle: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = os.RemoveAll(tmp)
		}
	}()
	o.Out = tmp
	m := &Manifest{
		Schema: SchemaVersion, Name: o.Name, Family: fam.Name, Tasks: fam.Tasks,
		Engine: Engine{Backend: o.Backend, Precision: o.Precision, ContextLength: o.ContextLength, Config: "config.json"},
		Image:  DefaultImage,
		Plugin: Plugin{ABI: fam.PluginABI, MaxMemoryPages: fam.MaxMemoryPages, TimeoutMS: fam.TimeoutMS},
	}
	if m.Name == "" {
		m.Name = filepath.Base(filepath.Clean(final))
	}
	if len(o.Tasks) > 0 {
		m.Tasks = o.Tasks
	}
	if m.Engine.Backend == "" {
		m.Engine.Backend = "cpu"
	}
	if m.Engine.Precision == "" {
		m.Engine.Precision = map[string]string{"cpu": "fp32", "cuda": "bf16"}[m.Engine.Backend]
	}
	if m.Engine.ContextLength == 0 {
		m.Engine.ContextLength = cmp.Or(fam.ContextLength, 4096)
		if mp := maxPositions(cfg); mp > 0 && mp < m.Engine.ContextLength {
			m.Engine.ContextLength = mp
		}
	}
	overrideImage(&m.Image, fam.Image)
	overrideImage(&m.Image, o.Image)
	gen, _ := readJSON(filepath.Join(o.From, "generation_config.json")) // optional
	m.Generation = generationDefaults(gen, cfg, fam, o.MaxNewTokens, m.Engine.ContextLength)
	if m.Generation.Grounding, err = fam.grounding(cfg); err != nil {
		return nil, fmt.Errorf("build bundle: %w", err)
	}

	cp := copier{progress: o.Progress}
	add := func(dst *[]File, rel string) error {
		f, err := cp.copy(ctx, filepath.Join(o.From, rel), filepath.Join(o.Out, rel), rel)
		if err != nil {
			return err
		}
		*dst = append(*dst, f)
		return nil
	}
	for _, w := range weights {
		if err := add(&m.Weights, w); err != nil {
			return nil, fmt.Errorf("build bundle: %w", err)
		}
	}
	for _, name := range []string{"config.json", "preprocessor_config.json", "generation_config.json", "chat_template.json", "chat_template.jinja", "model.safetensors.index.json"} {
		if _, err := os.Stat(filepath.Join(o.From, name)); err != nil {
			if name == "config.json" {
				return nil, fmt.Errorf("build bundle: %w", err)
			}
			continue
		}
		if err := add(&m.Model, name); err != nil {
			return nil, fmt.Errorf("build bundle: %w", err)
		}
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		if err := add(&m.Tokenizer.Files, name); err != nil {
			if name == "tokenizer_config.json" && errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("build bundle: %w", err)
		}
	}
	pf, err := cp.copy(ctx, o.Plugin, filepath.Join(o.Out, "plugin.wasm"), "plugin.wasm")
	if err != nil {
		return nil, fmt.Errorf("build bundle: plugin: %w", err)
	}
	m.Plugin.File, m.Plugin.SHA256 = pf.Path, pf.SHA256
	pre, err := readJSON(filepath.Join(o.From, "preprocessor_config.json"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("build bundle: %w", err)
	}
	if m.Plugin.Params, err = fam.PluginParams(pre); err != nil {
		return nil, fmt.Errorf("build bundle: preprocessor_config.json: %w", err)
	}
	maps.Copy(m.Plugin.Params, o.Params)
	m.Image.Budgets = fam.Budgets(m.Plugin.Params)
	var buf bytes.Buffer
	if err := m.Encode(&buf); err != nil {
		return nil, fmt.Errorf("build bundle: %w", err)
	}
	if err := os.WriteFile(filepath.Join(o.Out, ManifestName), buf.Bytes(), 0o644); err != nil {
		return nil, fmt.Errorf("build bundle: %w", err)
	}
	if err := os.Remove(final); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("build bundle: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return nil, fmt.Errorf("build bundle: %w", err)
	}
	committed = true
	sum := sha256.Sum256(buf.Bytes())
	abs, _ := filepath.Abs(final)
	return &Bundle{Dir: abs, Manifest: m, Digest: hex.EncodeToString(sum[:])}, nil
}

// PluginParams picks the family plugin's parameters out of a checkpoint's preprocessor config
// and checks the values the plugin implements as constants.
func (f Family) PluginParams(pre map[string]any) (map[string]any, error) {
	lookup := func(key string) (any, bool) { return lookupKey(pre, key) }
	if err := checkFixed(pre, f.Fixed, "the "+f.Name+" plugin implements"); err != nil {
		return nil, err
	}
	out := map[string]any{}
	for param, sources := range f.Params {
		for _, src := range sources {
			v, ok := lookup(src)
			if !ok {
				continue
			}
			switch v := v.(type) {
			case float64:
				if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
					out[param] = int64(v)
				} else {
					out[param] = v
				}
			case string, bool:
				out[param] = v
			default:
				return nil, fmt.Errorf("%s: %v is not a number, string or bool", src, v)
			}
			break
		}
	}
	return out, nil
}

// CheckConfig refuses a config.json whose values differ from what the family assumes
// (ConfigFixed), or a tokenizer.json that lacks a special token the plugin frames with or gives
// it another id than config.json (SpecialTokens). tok is tokenizer.json, parsed.
func (f Family) CheckConfig(cfg, tok map[string]any) error {
	if err := checkFixed(cfg, f.ConfigFixed, "the "+f.Name+" family implements"); err != nil {
		return fmt.Errorf("config.json: %w", err)
	}
	if len(f.SpecialTokens) == 0 {
		return nil
	}
	added := map[string]float64{}
	list, _ := tok["added_tokens"].([]any)
	for _, e := range list {
		m, _ := e.(map[string]any)
		content, _ := m["content"].(string)
		if id, ok := m["id"].(float64); ok && content != "" {
			added[content] = id
		}
	}
	names := make([]string, 0, len(f.SpecialTokens))
	for n := range f.SpecialTokens {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		id, ok := added[name]
		if !ok {
			return fmt.Errorf("tokenizer.json: no added token %q, which the %s plugin frames images with", name, f.Name)
		}
		key := f.SpecialTokens[name]
		if key == "" {
			continue
		}
		want, ok := lookupKey(cfg, key)
		if !ok {
			return fmt.Errorf("config.json: no %s (the id of %q)", key, name)
		}
		if w, _ := want.(float64); w != id {
			return fmt.Errorf("tokenizer.json gives %q the id %v, config.json's %s is %v", name, id, key, want)
		}
	}
	return nil
}

// lookupKey finds a dotted key ("size.height") in parsed JSON; a null counts as absent.
func lookupKey(doc map[string]any, key string) (any, bool) {
	var cur any = doc
	for _, part := range strings.Split(key, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok || cur == nil {
			return nil, false
		}
	}
	return cur, true
}

// checkFixed compares the keys of fixed present in doc with their wanted values.
func checkFixed(doc map[string]any, fixed map[string]any, who string) error {
	keys := make([]string, 0, len(fixed))
	for k := range fixed {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if got, ok := lookupKey(doc, k); ok && !sameJSON(got, fixed[k]) {
			return fmt.Errorf("%s is %v, but %s %v", k, got, who, fixed[k])
		}
	}
	return nil
}

// Budgets are the per-request image resolutions of a bundle with these plugin params: the
// checkpoint's own [min_pixels, max_pixels] as the bounds and as "high", and "low" capped at
// LowPixels. Nil when the family takes no budgets or the checkpoint names no pixel range.
func (f Family) Budgets(params map[string]any) *Budgets {
	lo, ok1 := params["min_pixels"].(int64)
	hi, ok2 := params["max_pixels"].(int64)
	if f.LowPixels == 0 || !ok1 || !ok2 || lo < 1 || lo > hi {
		return nil
	}
	return &Budgets{Bounds: [2]int64{lo, hi}, High: [2]int64{lo, hi}, Low: [2]int64{lo, max(lo, min(hi, f.LowPixels))}}
}

func sameJSON(a, b any) bool {
	switch a := a.(type) {
	case float64:
		bf, ok := b.(float64)
		return ok && a == bf
	case []any:
		bl, ok := b.([]any)
		if !ok || len(a) != len(bl) {
			return false
		}
		for i := range a {
			if !sameJSON(a[i], bl[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}

func generationDefaults(gen, cfg map[string]any, fam Family, maxNew, ctxLen int) Generation {
	g := Generation{MaxNewTokens: 256, Temperature: 0, TopK: 0, TopP: 1, StopIDs: fam.StopIDs}
	if v, ok := gen["max_new_tokens"].(float64); ok && v >= 1 {
		g.MaxNewTokens = int(v)
	}
	if sample, _ := gen["do_sample"].(bool); sample {
		g.Temperature = 1
		if v, ok := gen["temperature"].(float64); ok && v >= 0 {
			g.Temperature = v
		}
		if v, ok := gen["top_k"].(float64); ok && v >= 0 {
			g.TopK = int(v)
		}
		if v, ok := gen["top_p"].(float64); ok && v > 0 && v <= 1 {
			g.TopP = v
		}
	}
	if ids := intList(gen["eos_token_id"]); len(ids) > 0 {
		g.StopIDs = ids
	} else if ids := intList(cfg["eos_token_id"]); len(ids) > 0 && len(fam.StopIDs) == 0 {
		g.StopIDs = ids
	}
	if maxNew > 0 {
		g.MaxNewTokens = maxNew
	}
	if g.MaxNewTokens >= ctxLen {
		g.MaxNewTokens = ctxLen / 2
	}
	return g
}

func intList(v any) []int32 {
	switch v := v.(type) {
	case float64:
		return []int32{int32(v)}
	case []any:
		var out []int32
		for _, e := range v {
			if f, ok := e.(float64); ok {
				out = append(out, int32(f))
			}
		}
		return out
	}
	return nil
}

func maxPositions(cfg map[string]any) int {
	if v, ok := cfg["max_position_embeddings"].(float64); ok {
		return int(v)
	}
	if tc, ok := cfg["text_config"].(map[string]any); ok {
		if v, ok := tc["max_position_embeddings"].(float64); ok {
			return int(v)
		}
	}
	return 0
}

func overrideImage(dst *Image, o Image) {
	if o.MaxBytes > 0 {
		dst.MaxBytes = o.MaxBytes
	}
	if o.MaxPixels > 0 {
		dst.MaxPixels = o.MaxPixels
	}
	if o.MinSide > 0 {
		dst.MinSide = o.MinSide
	}
	if o.MaxAspect > 0 {
		dst.MaxAspect = o.MaxAspect
	}
	if o.Read != "" {
		dst.Read = o.Read
	}
}

// weightFiles returns the checkpoint's safetensors files: the shards of the index if there is one.
func weightFiles(dir string) ([]string, error) {
	if idx, err := readJSON(filepath.Join(dir, "model.safetensors.index.json")); err == nil {
		wm, _ := idx["weight_map"].(map[string]any)
		set := map[string]bool{}
		for _, v := range wm {
			if s, ok := v.(string); ok {
				if err := checkPath(s); err != nil {
					return nil, fmt.Errorf("model.safetensors.index.json: %w", err)
				}
				set[s] = true
			}
		}
		var out []string
		for s := range set {
			out = append(out, s)
		}
		sort.Strings(out)
		if len(out) == 0 {
			return nil, errors.New("model.safetensors.index.json names no shards")
		}
		return out, nil
	}
	matches, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if err != nil {
		return nil, err
	}
	if len(matches) == 0 {
		return nil, fmt.Errorf("no *.safetensors in %s", dir)
	}
	out := make([]string, len(matches))
	for i, p := range matches {
		out[i] = filepath.Base(p)
	}
	sort.Strings(out)
	return out, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func prepareOut(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return os.MkdirAll(filepath.Dir(filepath.Clean(dir)), 0o755)
	case err != nil:
		return err
	case len(entries) > 0:
		return fmt.Errorf("output directory %s is not empty", dir)
	}
	return nil
}

func readJSON(p string) (map[string]any, error) {
	raw, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("parse %s: %w", filepath.Base(p), err)
	}
	return v, nil
}

// copier copies files while hashing them and reporting progress on large ones.
type copier struct {
	progress io.Writer
}

const progressMin = 64 << 20 // files smaller than this are reported in one line

func (c *copier) copy(ctx context.Context, src, dst, rel string) (File, error) {
	in, err := os.Open(src)
	if err != nil {
		return File{}, err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return File{}, err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return File{}, err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return File{}, err
	}
	h := sha256.New()
	buf := make([]byte, 4<<20)
	var done int64
	start, last := time.Now(), time.Now()
	for {
		if err := ctx.Err(); err != nil {
			out.Close()
			return File{}, err
		}
		n, rerr := in.Read(buf)
		if n > 0 {
			h.Write(buf[:n])
			if _, err := out.Write(buf[:n]); err != nil {
				out.Close()
				return File{}, fmt.Errorf("write %s: %w", rel, err)
			}
			done += int64(n)
			if c.progress != nil && fi.Size() >= progressMin && time.Since(last) > time.Second {
				last = time.Now()
				fmt.Fprintf(c.progress, "  %s: %s / %s (%.0f%%)\n", rel, human(done), human(fi.Size()), 100*float64(done)/float64(fi.Size()))
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			out.Close()
			return File{}, fmt.Errorf("read %s: %w", rel, rerr)
		}
	}
	if err := out.Close(); err != nil {
		return File{}, err
	}
	if c.progress != nil {
		el := time.Since(start).Seconds()
		fmt.Fprintf(c.progress, "  %s: %s in %.1fs\n", rel, human(done), el)
	}
	return File{Path: filepath.ToSlash(rel), SHA256: hex.EncodeToString(h.Sum(nil)), Size: done}, nil
}

func human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
