package phi4mm_test

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/core/internal/engine"
	"github.com/iris-vlm/iris/core/internal/enginetest/fixture"
	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/ml/cpu"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models/phi4mm"
)

// load opens a checkpoint directory on a CPU backend.
func load(dir string, opts cpu.Options) (*phi4mm.Model, error) {
	b, err := cpu.New(opts)
	if err != nil {
		return nil, err
	}
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		b.Close()
		return nil, err
	}
	ck, err := ml.OpenCheckpoint(dir)
	if err != nil {
		b.Close()
		return nil, err
	}
	return phi4mm.New(b, ck, cfg, model.DefaultLimits(cfg), phi4mm.Options{})
}

func loadSweep(t *testing.T) *fixture.Sweep {
	t.Helper()
	sw, err := fixture.LoadSweepFile(fixture.SweepPathFor(phi4mm.ModelType))
	if err != nil {
		t.Fatal(err)
	}
	return sw
}

// sweepModel writes the named model of the sweep to a temporary directory.
func sweepModel(t *testing.T, sw *fixture.Sweep, name string) string {
	t.Helper()
	for _, m := range sw.Models {
		if m.Name == name {
			dir := t.TempDir()
			if err := fixture.WriteSeeded(dir, m); err != nil {
				t.Fatal(err)
			}
			return dir
		}
	}
	t.Fatalf("no sweep model %s", name)
	return ""
}

// sweepImage is the sweep's image of that name, pixels regenerated.
func sweepImage(t *testing.T, sw *fixture.Sweep, name string) model.Image {
	t.Helper()
	for _, si := range sw.Images {
		if si.Name == name {
			px, err := sw.Pixels(si)
			if err != nil {
				t.Fatal(err)
			}
			return si.Image(px)
		}
	}
	t.Fatalf("no sweep image %s", name)
	return model.Image{}
}

// TestSweep runs the Phi-4-multimodal shape sweep (fixture.RunSweep, docs/testing.md) on the CPU
// backend at each kernel level: seeded checkpoints made with transformers' own
// Phi4MultimodalForCausalLM (eager attention) of several widths, GQA 1-8, head dims 8-20,
// partial rotary factors 0.5-1.0, LongRoPE's short factors with the attention factor derived or
// given, plain RoPE, tied and untied heads, towers of 2-4 layers read at feature layers -1 to -3;
// images of 1 to 9 crops, padded (odd valid counts: a pooled cell half padding) and unpadded, in
// both part orders. Greedy tokens identical to transformers, first-step logits within 1e-4. The
// portable kernels run two of the models.
func TestSweep(t *testing.T) {
	sw := loadSweep(t)
	var loaders []fixture.SweepLoader
	for _, k := range []string{"avx512", "avx2", "generic"} {
		l := fixture.SweepLoader{Name: k, Load: func(dir string) (model.Model, error) {
			return load(dir, cpu.Options{Kernels: k})
		}}
		if k == "generic" {
			l.Models = []string{sw.Models[0].Name, sw.Models[len(sw.Models)-1].Name}
		}
		loaders = append(loaders, l)
	}
	fixture.RunSweep(t, fixture.SweepPathFor(phi4mm.ModelType), loaders...)
}

// TestBatchEqualsSingle: the sweep's cases batched (joining while others decode, prompts
// prefilled in chunks that split an image's rows, leaving at different steps) give exactly the
// greedy tokens each gives alone.
func TestBatchEqualsSingle(t *testing.T) {
	sw := loadSweep(t)
	name := sw.Models[1].Name
	dir := sweepModel(t, sw, name)
	m, err := load(dir, cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	reqs, err := fixture.SweepRequests(sw, m.Config())
	if err != nil {
		t.Fatal(err)
	}
	fixture.CheckBatchEqualsSingle(t, m, reqs)
}

// TestVisionBatch: images of one and several crops, padded and not, in one tower pass give
// exactly the rows each gives alone.
func TestVisionBatch(t *testing.T) {
	sw := loadSweep(t)
	dir := sweepModel(t, sw, sw.Models[0].Name)
	m, err := load(dir, cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var imgs []model.Image
	for _, name := range []string{"one_crop_padded", "wide_1x3", "one_crop_full", "tall_3x1"} {
		imgs = append(imgs, sweepImage(t, sw, name))
	}
	fixture.CheckVisionBatch(t, m, imgs, 0)
}

// firstLogitsDiff runs a case's prefill on the model in dir (its backend wrapped by wrap, when
// set) and returns the first-step logits' largest distance from the golden's.
func firstLogitsDiff(t *testing.T, dir string, img model.Image, c fixture.SweepCase, want fixture.SweepResult, wrap func(*cpu.Backend) ml.Backend) float64 {
	t.Helper()
	b, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mb ml.Backend = b
	if wrap != nil {
		mb = wrap(b)
	}
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	ck, err := ml.OpenCheckpoint(dir)
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	m, err := phi4mm.New(mb, ck, cfg, model.DefaultLimits(cfg), phi4mm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	emb, err := m.EncodeVision(t.Context(), img)
	if err != nil {
		t.Fatal(err)
	}
	pos, err := model.PromptPositionsOf(m.Config(), c.InputIDs, []model.Image{img})
	if err != nil {
		t.Fatal(err)
	}
	seq, err := m.NewSequence(len(c.InputIDs))
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	logits, err := m.Prefill(t.Context(), seq, model.Prompt{IDs: c.InputIDs, Positions: pos, Images: []*model.Embeddings{emb}})
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for i, id := range want.LogitIDs {
		worst = max(worst, math.Abs(float64(logits[id])-float64(want.LogitValues[i])))
	}
	return worst
}

// causalTower is the CPU backend with a vision tower's attention turned causal within each
// view (each patch sees the patches before it, the key flags kept): what transformers' default
// SDPA path computes for an image none of whose crops is padded (families.md §11).
type causalTower struct{ *cpu.Backend }

func (c causalTower) SegmentAttention(out, q, k, v ml.Tensor, bounds []int32, a ml.Attn) {
	a.Causal, a.Past = true, 0
	for i := 0; i+1 < len(bounds); i++ {
		r0, n := int(bounds[i]), int(bounds[i+1]-bounds[i])
		seg := a
		if a.Keys.Len > 0 {
			seg.Keys = a.Keys.Slice(r0, r0+n)
		}
		c.Attention(out.RowsAt(r0, n), q.RowsAt(r0, n), k.RowsAt(r0, n), v.RowsAt(r0, n), seg)
	}
}

// keysSeen is the CPU backend with a vision tower's key flags dropped: every view attends to
// its padding patches.
type keysSeen struct{ *cpu.Backend }

func (c keysSeen) SegmentAttention(out, q, k, v ml.Tensor, bounds []int32, a ml.Attn) {
	a.Keys = ml.Ints{}
	c.Backend.SegmentAttention(out, q, k, v, bounds, a)
}

// editConfig rewrites dir/config.json through edit.
func editConfig(t *testing.T, dir string, edit func(cfg map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	edit(cfg)
	if data, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSweepDetectsWrongGraph shows the sweep's check fails on the family's own hazards, each made
// in the checkpoint's config, in the engine's image or in its backend, with the golden unchanged
// (first-step logits of the first model, off by more than 1e-4):
//   - LongRoPE without its attention factor (attention_factor 1: cos and sin unscaled);
//   - the short factors kept past original_max_position_embeddings (g3-h48-o512, whose prompts
//     pass its 512: long_factor set to short_factor);
//   - a full rotary embedding in place of the partial one (partial_rotary_factor 1, the factor
//     lists extended so that the config still parses);
//   - a causal vision tower on an unpadded image (transformers' SDPA hazard), made by a backend
//     whose segment attention is causal;
//   - a padded crop's padding attended as keys (the key flags dropped by the backend);
//   - padded crops' masks dropped where the token count stays (positions not stretched, padding
//     attended).
func TestSweepDetectsWrongGraph(t *testing.T) {
	sw := loadSweep(t)
	for _, tc := range []struct {
		name, caseName string
		model          string // the sweep model; "": the first
		config         func(cfg map[string]any)
		image          func(img *model.Image)
		wrap           func(*cpu.Backend) ml.Backend
		wantMatch      bool
	}{
		{name: "as is, long factors", caseName: "wide_1x3/image_first", model: "g3-h48-o512", wantMatch: true},
		{name: "short factors past original_max_position_embeddings", caseName: "wide_1x3/image_first", model: "g3-h48-o512", config: func(cfg map[string]any) {
			rope := cfg["rope_parameters"].(map[string]any)
			rope["long_factor"] = rope["short_factor"]
		}},
		{name: "as is", caseName: "wide_1x3/image_first", wantMatch: true},
		{name: "as is, unpadded", caseName: "grid_2x2_full/image_first", wantMatch: true},
		{name: "no attention factor", caseName: "wide_1x3/image_first", config: func(cfg map[string]any) {
			cfg["rope_parameters"].(map[string]any)["attention_factor"] = 1.0
		}},
		{name: "full rotary", caseName: "wide_1x3/image_first", config: func(cfg map[string]any) {
			rope := cfg["rope_parameters"].(map[string]any)
			hd := int(cfg["hidden_size"].(float64) / cfg["num_attention_heads"].(float64))
			for _, key := range []string{"short_factor", "long_factor"} {
				f := rope[key].([]any)
				for len(f) < hd/2 {
					f = append(f, f[len(f)-1])
				}
				rope[key] = f
			}
			rope["partial_rotary_factor"] = 1.0
		}},
		{name: "causal tower", caseName: "grid_2x2_full/image_first", wrap: func(b *cpu.Backend) ml.Backend { return causalTower{b} }},
		{name: "padding seen as keys", caseName: "wide_1x3/image_first", wrap: func(b *cpu.Backend) ml.Backend { return keysSeen{b} }},
		{name: "inner crops' masks dropped", caseName: "grid_3x3/image_first", image: func(img *model.Image) {
			// crops 6 and 9 of 3x3 (rows 1 and 2 of the last column, padded) unmasked: neither
			// is in the first row or column, so the token count stays; their positions and key
			// flags become an unpadded crop's
			for _, i := range []int{6, 9} {
				img.Masks[i] = model.PatchRect{W: img.Grid.W, H: img.Grid.H}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sm := sw.Models[0]
			if tc.model != "" {
				sm = modelOf(t, sw, tc.model)
			}
			ci := caseOf(t, sw, tc.caseName)
			c, want := sw.Cases[ci], sm.Results[ci]
			dir := sweepModel(t, sw, sm.Name)
			if tc.config != nil {
				editConfig(t, dir, tc.config)
			}
			img := sweepImage(t, sw, c.Image)
			if tc.image != nil {
				tc.image(&img)
			}
			worst := firstLogitsDiff(t, dir, img, c, want, tc.wrap)
			if match := worst <= fixture.SweepLogitTol; match != tc.wantMatch {
				t.Errorf("first-step logits max |diff| %.3g (tolerance %.0e)", worst, fixture.SweepLogitTol)
			} else {
				t.Logf("first-step logits max |diff| %.3g", worst)
			}
		})
	}
}

// modelOf is the sweep's model of that name.
func modelOf(t *testing.T, sw *fixture.Sweep, name string) fixture.SweepModel {
	t.Helper()
	for _, m := range sw.Models {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("no sweep model %s", name)
	return fixture.SweepModel{}
}

// caseOf is the index of the sweep's case of that name.
func caseOf(t *testing.T, sw *fixture.Sweep, name string) int {
	t.Helper()
	for i, c := range sw.Cases {
		if c.Name == name {
			return i
		}
	}
	t.Fatalf("no sweep case %s", name)
	return -1
}

// TestRefuses: another family's config; the Phi-4 variants the graph does not implement, each an
// ErrUnsupported from config.json; a context past original_max_position_embeddings; images the
// HD layout cannot take.
func TestRefuses(t *testing.T) {
	b, err := cpu.New(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := phi4mm.New(b, nil, &model.Config{ModelType: "qwen2_5_vl"}, model.Limits{}, phi4mm.Options{}); !errors.Is(err, model.ErrUnsupported) {
		t.Errorf("a Qwen2.5-VL config: %v", err)
	}
	if b.Kernels() != "" {
		t.Error("the backend was left open after a refused load")
	}

	base, err := os.ReadFile(filepath.Join(fixture.Root(), "configs", "phi4_multimodal_hf.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := model.ParseConfig(base); err != nil {
		t.Fatalf("the full-size config: %v", err)
	}
	for _, tc := range []struct{ name, old, new string }{
		{"tower act", `"hidden_act": "gelu_pytorch_tanh"`, `"hidden_act": "gelu"`},
		{"text act", `"hidden_act": "silu"`, `"hidden_act": "gelu"`},
		{"crop size", `"crop_size": 448`, `"crop_size": 336`},
		{"odd grid", `"image_size": 448`, `"image_size": 462`},
		{"image not whole patches", `"image_size": 448`, `"image_size": 450`},
		// vision_config's feature_layer (audio_config, first in the file, has one too)
		{"feature layer past the tower", `"feature_layer": -2,
    "hidden_act"`, `"feature_layer": -28,
    "hidden_act"`},
		{"feature layer of the embeddings", `"feature_layer": -2,
    "hidden_act"`, `"feature_layer": 0,
    "hidden_act"`},
		{"yarn rope", `"rope_type": "longrope"`, `"rope_type": "yarn"`},
		{"sliding window", `"sliding_window": 262144`, `"sliding_window": 2048`},
		{"non-square patch", `"patch_size": 14`, `"patch_size": [14, 16]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(string(base), tc.old, tc.new, 1)
			if src == string(base) {
				t.Fatalf("%q not in the config", tc.old)
			}
			if _, err := model.ParseConfig([]byte(src)); !errors.Is(err, model.ErrUnsupported) {
				t.Errorf("err = %v, want ErrUnsupported", err)
			}
		})
	}

	sw := loadSweep(t)
	dir := sweepModel(t, sw, sw.Models[0].Name)
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	// with long factors the context reaches max_position_embeddings; a prompt within
	// original_max_position_embeddings may not grow past it
	lim := model.DefaultLimits(cfg)
	if lim.ContextLength != 131072 {
		t.Errorf("default context %d, want max_position_embeddings 131072", lim.ContextLength)
	}
	for _, tc := range []struct{ prompt, newTokens int }{{4000, 97}, {4096, 1}} {
		req := engine.Request{IDs: make([]int32, tc.prompt), MaxNewTokens: tc.newTokens}
		if err := engine.Check(cfg, lim, &req); !errors.Is(err, model.ErrContextExceeded) || !strings.Contains(err.Error(), "original_max_position_embeddings") {
			t.Errorf("a prompt of %d tokens + %d past original_max_position_embeddings: %v", tc.prompt, tc.newTokens, err)
		}
	}
	for _, tc := range []struct{ prompt, newTokens int }{{4000, 96}, {4097, 100}} {
		req := engine.Request{IDs: make([]int32, tc.prompt), MaxNewTokens: tc.newTokens}
		if err := engine.Check(cfg, lim, &req); err != nil {
			t.Errorf("a prompt of %d tokens + %d: %v", tc.prompt, tc.newTokens, err)
		}
	}
	// without long_factor the context stays within original_max_position_embeddings
	short := *cfg
	short.Text.RopeLongFactors = nil
	if got := model.DefaultLimits(&short).ContextLength; got != 4096 {
		t.Errorf("default context without long factors %d, want original_max_position_embeddings 4096", got)
	}
	b, err = cpu.New(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := phi4mm.New(b, nil, &short, model.Limits{ContextLength: 4097}, phi4mm.Options{}); !errors.Is(err, model.ErrUnsupported) {
		t.Errorf("a context past original_max_position_embeddings without long factors: %v", err)
	}

	m, err := load(dir, cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	grid := sweepImage(t, sw, "grid_3x3")
	full := model.PatchRect{W: 32, H: 32}
	for _, tc := range []struct {
		name string
		edit func(img *model.Image)
	}{
		{"no crop", func(img *model.Image) {
			*img = model.Image{Pixels: img.Pixels[:len(img.Pixels)/10], Grid: model.Grid{T: 1, H: 32, W: 32}}
		}},
		{"views of another grid", func(img *model.Image) {
			img.Grid = model.Grid{T: 40, H: 16, W: 16}
			img.Masks, img.Tiles = nil, nil
		}},
		{"crops without places", func(img *model.Image) { img.Tiles = nil }},
		{"global view placed", func(img *model.Image) { img.Tiles[0] = full }},
		{"crops out of order", func(img *model.Image) { img.Tiles[1], img.Tiles[2] = img.Tiles[2], img.Tiles[1] }},
		{"mask off the corner", func(img *model.Image) { img.Masks[3] = model.PatchRect{X: 2, W: 30, H: 32} }},
		{"a mask short", func(img *model.Image) { img.Masks = img.Masks[1:] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := grid
			img.Masks = append([]model.PatchRect(nil), grid.Masks...)
			img.Tiles = append([]model.PatchRect(nil), grid.Tiles...)
			tc.edit(&img)
			if _, err := m.EncodeVision(t.Context(), img); !errors.Is(err, ml.ErrInvalidInput) {
				t.Errorf("EncodeVision: %v, want ErrInvalidInput", err)
			}
			ids := make([]int32, 2113)
			for i := range ids {
				ids[i] = cfg.ImageTokenID
			}
			req := engine.Request{IDs: ids, MaxNewTokens: 1, Images: []model.Image{img}}
			if err := engine.Check(cfg, m.Limits(), &req); !errors.Is(err, ml.ErrInvalidInput) {
				t.Errorf("engine.Check: %v, want ErrInvalidInput", err)
			}
		})
	}
}
