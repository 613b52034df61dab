package internvl_test

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
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models/internvl"
)

// load opens a checkpoint directory on a CPU backend.
func load(dir string, opts cpu.Options) (*internvl.Model, error) {
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
	return internvl.New(b, ck, cfg, model.DefaultLimits(cfg), internvl.Options{})
}

// sweepModel writes the named model of the InternVL sweep to a temporary directory.
func sweepModel(t *testing.T, name string) (string, *fixture.Sweep) {
	t.Helper()
	sw, err := fixture.LoadSweepFile(fixture.SweepPathFor(internvl.ModelType))
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
	sw, err := fixture.LoadSweepFile(fixture.SweepPathFor(internvl.ModelType))
	if err != nil {
		t.Fatal(err)
	}
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
	fixture.RunSweep(t, fixture.SweepPathFor(internvl.ModelType), loaders...)
}

// TestBatchEqualsSingle: the sweep's cases batched (joining while others decode, prompts
// prefilled in chunks that split the tiles' rows, leaving at different steps) give exactly the
// greedy tokens each gives alone. One model (GQA 3): its 13-tile prompts are the cost, and the
// batch layout is kit's, shared with the other families.
func TestBatchEqualsSingle(t *testing.T) {
	sw, err := fixture.LoadSweepFile(fixture.SweepPathFor(internvl.ModelType))
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
	sw, err := fixture.LoadSweepFile(fixture.SweepPathFor(internvl.ModelType))
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
	var img model.Image
	for _, si := range sw.Images {
		if si.Name == c.Image {
			px, err := sw.Pixels(si)
			if err != nil {
				t.Fatal(err)
			}
			img = model.Image{Pixels: px, Grid: model.Grid{T: si.Grid[0], H: si.Grid[1], W: si.Grid[2]}}
		}
	}
	for _, tc := range []struct {
		name string
		// file changes the checkpoint directory before the load
		file func(t *testing.T, dir string)
	}{
		{name: "as is"},
		// The projector's LayerNorm and first Linear with the channel blocks of patches (2r, 2c+1)
		// and (2r+1, 2c) swapped compute, on the correct row-major shuffle, exactly what the
		// original weights compute on a column-major one (LayerNorm's statistics do not depend
		// on the channels' order): the shuffle-order hazard, made in the checkpoint.
		{name: "shuffle blocks column-major", file: func(t *testing.T, dir string) { swapShuffleBlocks(t, dir) }},
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
			cfg := m.Config()
			emb, err := m.EncodeVision(t.Context(), img)
			if err != nil {
				t.Fatal(err)
			}
			pos, err := model.PromptPositions(cfg, c.InputIDs, []model.Grid{img.Grid})
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
			if match := worst <= fixture.SweepLogitTol; match != (tc.name == "as is") {
				t.Errorf("first-step logits max |diff| %.3g (tolerance %.0e)", worst, fixture.SweepLogitTol)
			} else {
				t.Logf("first-step logits max |diff| %.3g", worst)
			}
		})
	}
}

// swapShuffleBlocks swaps, in dir/model.safetensors, the second and third quarters of the
// projector's LayerNorm weight and bias and of its first Linear's input columns (each quarter is
// one patch of a shuffled 2x2 block).
func swapShuffleBlocks(t *testing.T, dir string) {
	t.Helper()
	path := filepath.Join(dir, "model.safetensors")
	entries, err := ml.ReadSafetensorsHeader(path)
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
		if !strings.Contains(e.Name, "multi_modal_projector.layer_norm.") && !strings.Contains(e.Name, "multi_modal_projector.linear_1.weight") {
			continue
		}
		if e.Dtype != "F32" {
			t.Fatalf("tensor %s: %s, want F32", e.Name, e.Dtype)
		}
		cols := e.Shape[len(e.Shape)-1]
		if cols%4 != 0 {
			t.Fatalf("tensor %s: %d columns, not four patches", e.Name, cols)
		}
		b := make([]byte, e.Size)
		if _, err := f.ReadAt(b, e.Offset); err != nil {
			t.Fatal(err)
		}
		q := int(cols/4) * 4 // a quarter row in bytes
		for row := 0; row < len(b); row += int(cols) * 4 {
			one, two := b[row+q:row+2*q], b[row+2*q:row+3*q]
			tmp := slices.Clone(one)
			copy(one, two)
			copy(two, tmp)
		}
		if _, err := f.WriteAt(b, e.Offset); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 3 {
		t.Fatalf("%d projector tensors swapped, want 3 (layer_norm weight and bias, linear_1 weight)", n)
	}
}

// setTensors sets every value of the F32 tensors of dir/model.safetensors whose name contains
// part to value, in place.
func setTensors(t *testing.T, dir, part string, value float32) {
	t.Helper()
	path := filepath.Join(dir, "model.safetensors")
	entries, err := ml.ReadSafetensorsHeader(path)
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
	if _, err := internvl.New(b, nil, &model.Config{ModelType: "qwen2_5_vl"}, model.Limits{}, internvl.Options{}); !errors.Is(err, model.ErrUnsupported) {
		t.Errorf("a Qwen2.5-VL config: %v", err)
	}
	if b.Kernels() != "" {
		t.Error("the backend was left open after a refused load")
	}

	base, err := os.ReadFile(filepath.Join(fixture.Root(), "configs", "internvl3_2b_hf.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := model.ParseConfig(base); err != nil {
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
			if _, err := model.ParseConfig([]byte(src)); !errors.Is(err, model.ErrUnsupported) {
				t.Errorf("err = %v, want ErrUnsupported", err)
			}
		})
	}

	sw, err := fixture.LoadSweepFile(fixture.SweepPathFor(internvl.ModelType))
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := sweepModel(t, sw.Models[0].Name)
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	lim := model.DefaultLimits(cfg)
	lim.ContextLength = cfg.Text.MaxPositions + 1
	b, err = cpu.New(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := internvl.New(b, nil, cfg, lim, internvl.Options{}); !errors.Is(err, model.ErrUnsupported) {
		t.Errorf("a context past max_position_embeddings: %v", err)
	}
	m, err := load(dir, cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	pd := cfg.Vision.PatchDim()
	for _, g := range []model.Grid{{T: 1, H: 16, W: 16}, {T: 2, H: 32, W: 16}, {T: 1, H: 34, W: 34}} {
		img := model.Image{Pixels: make([]float32, g.Patches()*pd), Grid: g}
		if _, err := m.EncodeVision(t.Context(), img); !errors.Is(err, ml.ErrInvalidInput) {
			t.Errorf("a grid of %v: %v, want ErrInvalidInput", g, err)
		}
		ids := make([]int32, g.Tokens(2))
		for i := range ids {
			ids[i] = cfg.ImageTokenID
		}
		req := engine.Request{IDs: ids, MaxNewTokens: 1, Images: []model.Image{img}}
		if err := engine.Check(cfg, m.Limits(), &req); !errors.Is(err, ml.ErrInvalidInput) {
			t.Errorf("a request with a grid of %v: %v, want ErrInvalidInput", g, err)
		}
	}
}

// TestVisionBatch: images of one and several tiles in one tower pass give exactly the rows each
// gives alone.
func TestVisionBatch(t *testing.T) {
	sw, err := fixture.LoadSweepFile(fixture.SweepPathFor(internvl.ModelType))
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
	var imgs []model.Image
	for i, g := range []model.Grid{{T: 1, H: f, W: f}, {T: 3, H: f, W: f}, {T: 1, H: f, W: f}, {T: 2, H: f, W: f}} {
		imgs = append(imgs, fixture.SeededImage(m.Config(), g, uint64(i+1)))
	}
	fixture.CheckVisionBatch(t, m, imgs, 0)
}
