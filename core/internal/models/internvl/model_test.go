package internvl

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/core/internal/engine"
	"github.com/iris-vlm/iris/core/internal/enginetest/fixture"
	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/ml/cpu"
)

// load opens a checkpoint directory on a CPU backend.
func load(dir string, opts cpu.Options) (*Model, error) {
	b, err := cpu.New(opts)
	if err != nil {
		return nil, err
	}
	cfg, err := engine.LoadConfig(dir)
	if err != nil {
		b.Close()
		return nil, err
	}
	ck, err := ml.OpenCheckpoint(dir)
	if err != nil {
		b.Close()
		return nil, err
	}
	return New(b, ck, cfg, engine.DefaultLimits(cfg), Options{})
}

// sweepModel writes the named model of the InternVL sweep to a temporary directory.
func sweepModel(t *testing.T, name string) (string, *fixture.Sweep) {
	t.Helper()
	sw, err := fixture.LoadSweepFile(fixture.SweepPathFor(ModelType))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range sw.Models {
		if m.Name == name {
			dir := t.TempDir()
			if err := fixture.WriteSeeded(dir, m); err != nil {
				t.Fatal(err)
			}
			return dir, sw
		}
	}
	t.Fatalf("no sweep model %s", name)
	return "", nil
}

// TestSweep runs the InternVL shape sweep (fixture.RunSweep, docs/testing.md) on the CPU backend
// at each kernel level: seeded checkpoints of odd tower and decoder widths, GQA ratios 1-8, odd
// head counts, head_dim apart from hidden/heads, tied and untied heads, images of 1, 3, 6 and 13
// tiles in both part orders; fp32 greedy tokens identical to transformers, first-step logits
// within 1e-4. The portable kernels, ten times slower on the 13 tiles' 13,325 tower rows, run two
// of the models (the other sweeps run them on every shape).
func TestSweep(t *testing.T) {
	sw, err := fixture.LoadSweepFile(fixture.SweepPathFor(ModelType))
	if err != nil {
		t.Fatal(err)
	}
	var loaders []fixture.SweepLoader
	for _, k := range []string{"avx512", "avx2", "generic"} {
		l := fixture.SweepLoader{Name: k, Load: func(dir string) (engine.Model, error) {
			return load(dir, cpu.Options{Kernels: k})
		}}
		if k == "generic" {
			l.Models = []string{sw.Models[0].Name, sw.Models[len(sw.Models)-1].Name}
		}
		loaders = append(loaders, l)
	}
	fixture.RunSweep(t, fixture.SweepPathFor(ModelType), loaders...)
}

// TestBatchEqualsSingle: the sweep's cases batched (joining while others decode, prompts
// prefilled in chunks that split the tiles' rows, leaving at different steps) give exactly the
// greedy tokens each gives alone. One model (GQA 3): its 13-tile prompts are the cost, and the
// batch layout is kit's, shared with the other families.
func TestBatchEqualsSingle(t *testing.T) {
	sw, err := fixture.LoadSweepFile(fixture.SweepPathFor(ModelType))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{sw.Models[len(sw.Models)-1].Name} {
		t.Run(name, func(t *testing.T) {
			dir, _ := sweepModel(t, name)
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
		})
	}
}

// TestSweepDetectsWrongGraph shows the sweep's check can fail: the same weights with the pixel
// shuffle's 2x2 blocks read column-major (the patches (2r, 2c), (2r+1, 2c), (2r, 2c+1), ...), or
// without LayerScale (every lambda 1), miss the golden logits of a three-tile case.
func TestSweepDetectsWrongGraph(t *testing.T) {
	sw, err := fixture.LoadSweepFile(fixture.SweepPathFor(ModelType))
	if err != nil {
		t.Fatal(err)
	}
	sm := sw.Models[0]
	ci := -1
	for i, c := range sw.Cases {
		if c.Image == "three_tiles" {
			ci = i
			break
		}
	}
	if ci < 0 {
		t.Fatal("no three-tile case in the sweep")
	}
	c, want := sw.Cases[ci], sm.Results[ci]
	var img engine.Image
	for _, si := range sw.Images {
		if si.Name == c.Image {
			px, err := sw.Pixels(si)
			if err != nil {
				t.Fatal(err)
			}
			img = engine.Image{Pixels: px, Grid: engine.Grid{T: si.Grid[0], H: si.Grid[1], W: si.Grid[2]}}
		}
	}
	for _, tc := range []struct {
		name string
		// file changes the checkpoint directory before the load, model the model after it
		file  func(t *testing.T, dir string)
		model func(m *Model)
	}{
		{name: "as is"},
		{name: "shuffle blocks column-major", model: func(m *Model) {
			v := &m.Config().Vision
			p := newTilePlan(img.Grid.T, v.FixedGrid, v.MergeSize)
			for u := 0; u+3 < len(p.shuffle); u += 4 {
				p.shuffle[u+1], p.shuffle[u+2] = p.shuffle[u+2], p.shuffle[u+1]
			}
			m.plans.plans = map[int]*tilePlan{img.Grid.T: p}
		}},
		{name: "no LayerScale", file: func(t *testing.T, dir string) { setTensors(t, dir, "lambda_", 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _ := sweepModel(t, sm.Name)
			if tc.file != nil {
				tc.file(t, dir)
			}
			m, err := load(dir, cpu.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if tc.model != nil {
				tc.model(m)
			}
			cfg := m.Config()
			emb, err := m.EncodeVision(t.Context(), img)
			if err != nil {
				t.Fatal(err)
			}
			pos, err := engine.PromptPositions(cfg, c.InputIDs, []engine.Grid{img.Grid})
			if err != nil {
				t.Fatal(err)
			}
			seq, err := m.NewSequence(len(c.InputIDs))
			if err != nil {
				t.Fatal(err)
			}
			defer seq.Close()
			logits, err := m.Prefill(t.Context(), seq, engine.Prompt{IDs: c.InputIDs, Positions: pos, Images: []*engine.Embeddings{emb}})
			if err != nil {
				t.Fatal(err)
			}
			worst := 0.0
			for i, id := range want.LogitIDs {
				worst = max(worst, math.Abs(float64(logits[id])-float64(want.LogitValues[i])))
			}
			if match := worst <= fixture.SweepLogitTol; match != (tc.name == "as is") {
				t.Errorf("first-step logits max |diff| %.3g (tolerance %.0e)", worst, fixture.SweepLogitTol)
			} else {
				t.Logf("first-step logits max |diff| %.3g", worst)
			}
		})
	}
}

// setTensors sets every value of the F32 tensors of dir/model.safetensors whose name contains
// part to value, in place.
func setTensors(t *testing.T, dir, part string, value float32) {
	t.Helper()
	path := filepath.Join(dir, "model.safetensors")
	entries, err := engine.ReadSafetensorsHeader(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for _, e := range entries {
		if !strings.Contains(e.Name, part) {
			continue
		}
		if e.Dtype != "F32" {
			t.Fatalf("tensor %s: %s, want F32", e.Name, e.Dtype)
		}
		b := make([]byte, e.Size)
		for i := 0; i < len(b); i += 4 {
			binary.LittleEndian.PutUint32(b[i:], math.Float32bits(value))
		}
		if _, err := f.WriteAt(b, e.Offset); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n == 0 {
		t.Fatalf("no tensor named *%s*", part)
	}
}

// TestRefuses: another family's config; the InternVL variants the graph does not implement, each
// an ErrUnsupported from config.json; a context past max_position_embeddings; images whose frames
// are not the tower's tiles.
func TestRefuses(t *testing.T) {
	b, err := cpu.New(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(b, nil, &engine.Config{ModelType: "qwen2_5_vl"}, engine.Limits{}, Options{}); !errors.Is(err, engine.ErrUnsupported) {
		t.Errorf("a Qwen2.5-VL config: %v", err)
	}
	if b.Kernels() != "" {
		t.Error("the backend was left open after a refused load")
	}

	base, err := os.ReadFile(filepath.Join(fixture.Root(), "configs", "internvl3_2b_hf.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.ParseConfig(base); err != nil {
		t.Fatalf("the 2B config: %v", err)
	}
	for _, tc := range []struct{ name, old, new string }{
		{"qk norm", `"use_qk_norm": false`, `"use_qk_norm": true`},
		{"rms norm", `"norm_type": "layer_norm"`, `"norm_type": "rms_norm"`},
		{"no attention bias", `"attention_bias": true`, `"attention_bias": false`},
		{"final norm", `"use_mean_pooling": true`, `"use_mean_pooling": false`},
		{"no position table", `"use_absolute_position_embeddings": true`, `"use_absolute_position_embeddings": false`},
		{"feature layer", `"vision_feature_layer": -1`, `"vision_feature_layer": -2`},
		{"feature layers", `"vision_feature_layer": -1`, `"vision_feature_layer": [-1, -2]`},
		{"select strategy", `"vision_feature_select_strategy": "default"`, `"vision_feature_select_strategy": "full"`},
		{"non-square image", "\"image_size\": [\n      448,\n      448\n    ]", `"image_size": [448, 224]`},
		{"non-square patch", "\"patch_size\": [\n      14,\n      14\n    ]", `"patch_size": [14, 16]`},
		{"image not whole patches", "\"image_size\": [\n      448,\n      448\n    ]", `"image_size": 450`},
		{"downsample ratio", `"downsample_ratio": 0.5`, `"downsample_ratio": 0.25`},
		{"projector act", `"projector_hidden_act": "gelu"`, `"projector_hidden_act": "gelu_new"`},
		{"tower act", `"hidden_act": "gelu"`, `"hidden_act": "gelu_pytorch_tanh"`},
		{"image seq length", `"image_seq_length": 256`, `"image_seq_length": 64`},
		{"yarn rope", `"rope_type": "dynamic"`, `"rope_type": "yarn"`},
		{"sliding window", `"use_sliding_window": false`, `"use_sliding_window": true`},
		{"mrope", `"factor": 2.0,`, `"factor": 2.0, "mrope_section": [16, 24, 24],`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(string(base), tc.old, tc.new, 1)
			if src == string(base) {
				t.Fatalf("%q not in the config", tc.old)
			}
			if _, err := engine.ParseConfig([]byte(src)); !errors.Is(err, engine.ErrUnsupported) {
				t.Errorf("err = %v, want ErrUnsupported", err)
			}
		})
	}

	sw, err := fixture.LoadSweepFile(fixture.SweepPathFor(ModelType))
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := sweepModel(t, sw.Models[0].Name)
	cfg, err := engine.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	lim := engine.DefaultLimits(cfg)
	lim.ContextLength = cfg.Text.MaxPositions + 1
	b, err = cpu.New(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(b, nil, cfg, lim, Options{}); !errors.Is(err, engine.ErrUnsupported) {
		t.Errorf("a context past max_position_embeddings: %v", err)
	}
	m, err := load(dir, cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	pd := cfg.Vision.PatchDim()
	for _, g := range []engine.Grid{{T: 1, H: 16, W: 16}, {T: 2, H: 32, W: 16}, {T: 1, H: 34, W: 34}} {
		img := engine.Image{Pixels: make([]float32, g.Patches()*pd), Grid: g}
		if _, err := m.EncodeVision(t.Context(), img); !errors.Is(err, engine.ErrInvalidInput) {
			t.Errorf("a grid of %v: %v, want ErrInvalidInput", g, err)
		}
		ids := make([]int32, g.Tokens(2))
		for i := range ids {
			ids[i] = cfg.ImageTokenID
		}
		req := engine.Request{IDs: ids, MaxNewTokens: 1, Images: []engine.Image{img}}
		if err := engine.Check(cfg, m.Limits(), &req); !errors.Is(err, engine.ErrInvalidInput) {
			t.Errorf("a request with a grid of %v: %v, want ErrInvalidInput", g, err)
		}
	}
}

// TestTilePlan pins the layout of two tiles of 4x4 patches: the CLS row first in each tile's
// segment of 17 rows, the position table's rows repeating a tile, and the pixel shuffle's order
// (InternVLModel.pixel_shuffle: token (r, c) is patches (2r, 2c), (2r, 2c+1), (2r+1, 2c),
// (2r+1, 2c+1)).
func TestTilePlan(t *testing.T) {
	p := newTilePlan(2, 4, 2)
	if p.rows != 34 || p.tileRows != 17 {
		t.Fatalf("rows %d, tile rows %d", p.rows, p.tileRows)
	}
	if want := []int32{0, 17, 34}; !slices.Equal(p.bounds, want) {
		t.Errorf("bounds %v, want %v", p.bounds, want)
	}
	if p.patchRows[0] != 1 || p.patchRows[15] != 16 || p.patchRows[16] != 18 || p.posIDs[17] != 0 || p.posIDs[33] != 16 {
		t.Errorf("patch rows %v, position ids %v", p.patchRows, p.posIDs)
	}
	// tile 0: patch (row, col) is tower row 1 + 4*row + col; tile 1 starts at 18
	want := []int32{
		1, 2, 5, 6, 3, 4, 7, 8, // tokens (0, 0) and (0, 1)
		9, 10, 13, 14, 11, 12, 15, 16, // (1, 0), (1, 1)
		18, 19, 22, 23, 20, 21, 24, 25,
		26, 27, 30, 31, 28, 29, 32, 33,
	}
	if !slices.Equal(p.shuffle, want) {
		t.Errorf("shuffle\n got %v\nwant %v", p.shuffle, want)
	}
}

// TestVisionBatch: images of one and several tiles in one tower pass give exactly the rows each
// gives alone.
func TestVisionBatch(t *testing.T) {
	sw, err := fixture.LoadSweepFile(fixture.SweepPathFor(ModelType))
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := sweepModel(t, sw.Models[0].Name)
	m, err := load(dir, cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	f := m.Config().Vision.FixedGrid
	var imgs []engine.Image
	for i, g := range []engine.Grid{{T: 1, H: f, W: f}, {T: 3, H: f, W: f}, {T: 1, H: f, W: f}, {T: 2, H: f, W: f}} {
		imgs = append(imgs, fixture.SeededImage(m.Config(), g, uint64(i+1)))
	}
	fixture.CheckVisionBatch(t, m, imgs, 0)
}
