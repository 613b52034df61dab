package qwen3vl_test

import (
	"errors"
	"math"
	"testing"

	"github.com/iris-vlm/iris/core/internal/enginetest/fixture"
	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/ml/cpu"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models/qwen3vl"
)

// load opens a checkpoint directory on a CPU backend.
func load(dir string, opts cpu.Options) (*qwen3vl.Model, error) {
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
	return qwen3vl.New(b, ck, cfg, model.DefaultLimits(cfg), qwen3vl.Options{})
}

// sweepModel writes the named model of the Qwen3-VL sweep to a temporary directory.
func sweepModel(t *testing.T, name string) (string, *fixture.Sweep) {
	t.Helper()
	sw, err := fixture.LoadSweepFile(fixture.SweepPathFor(qwen3vl.ModelType))
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

// TestSweep runs the Qwen3-VL shape sweep (fixture.RunSweep, docs/testing.md) on the CPU backend
// at each kernel level: seeded checkpoints of odd sizes, GQA ratios 1-8, head_dim apart from
// hidden/heads, interleaved sections, deepstack at various blocks (none, the first, the last),
// position tables of several sizes, tied and untied, three images in both part orders.
func TestSweep(t *testing.T) {
	var loaders []fixture.SweepLoader
	for _, k := range []string{"avx512", "avx2", "generic"} {
		loaders = append(loaders, fixture.SweepLoader{Name: k, Load: func(dir string) (model.Model, error) {
			return load(dir, cpu.Options{Kernels: k})
		}})
	}
	fixture.RunSweep(t, fixture.SweepPathFor(qwen3vl.ModelType), loaders...)
}

// TestBatchEqualsSingle: the sweep's cases batched (joining while others decode, prompts
// prefilled in chunks that split images and their deepstack rows, leaving at different steps)
// give exactly the greedy tokens each gives alone.
func TestBatchEqualsSingle(t *testing.T) {
	sw, err := fixture.LoadSweepFile(fixture.SweepPathFor(qwen3vl.ModelType))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{sw.Models[0].Name, sw.Models[len(sw.Models)-1].Name} {
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

// TestRefuses: another family's config, and a checkpoint missing a tensor of the graph.
func TestRefuses(t *testing.T) {
	cfg := &model.Config{ModelType: "qwen2_5_vl"}
	b, err := cpu.New(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := qwen3vl.New(b, nil, cfg, model.Limits{}, qwen3vl.Options{}); !errors.Is(err, model.ErrUnsupported) {
		t.Errorf("a Qwen2.5-VL config: %v", err)
	}
	if b.Kernels() != "" {
		t.Error("the backend was left open after a refused load")
	}
}

// TestSweepDetectsWrongGraph shows the sweep's check can fail: the same weights with the rotary
// frequencies in chunks instead of interleaved, or without the deepstack adds, miss the golden
// logits.
func TestSweepDetectsWrongGraph(t *testing.T) {
	sw, err := fixture.LoadSweepFile(fixture.SweepPathFor(qwen3vl.ModelType))
	if err != nil {
		t.Fatal(err)
	}
	var sm *fixture.SweepModel
	for i := range sw.Models {
		cfg, err := model.ParseConfig(sw.Models[i].Config)
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.Vision.Deepstack) > 0 && cfg.Text.MRopeSection[1] > 0 {
			sm = &sw.Models[i]
			break
		}
	}
	if sm == nil {
		t.Fatal("no sweep model with deepstack and height frequencies")
	}
	dir, _ := sweepModel(t, sm.Name)
	c, want := sw.Cases[0], sm.Results[0]
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
		name   string
		mutate func(*model.Config)
	}{
		{"as is", func(*model.Config) {}},
		{"chunked rotary", func(c *model.Config) { c.Text.MRopeInterleaved = false }},
		{"no deepstack", func(c *model.Config) { c.Vision.Deepstack = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := model.LoadConfig(dir)
			if err != nil {
				t.Fatal(err)
			}
			tc.mutate(cfg)
			ck, err := ml.OpenCheckpoint(dir)
			if err != nil {
				t.Fatal(err)
			}
			b, err := cpu.New(cpu.Options{})
			if err != nil {
				t.Fatal(err)
			}
			m, err := qwen3vl.New(b, ck, cfg, model.DefaultLimits(cfg), qwen3vl.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
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
			}
		})
	}
}

// TestVisionBatch: images of different grids (so different position-table taps: each resampled
// to its own grid) in one tower pass give exactly the rows each gives alone, deepstack rows
// included.
func TestVisionBatch(t *testing.T) {
	sw, err := fixture.LoadSweepFile(fixture.SweepPathFor(qwen3vl.ModelType))
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := sweepModel(t, sw.Models[0].Name)
	m, err := load(dir, cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	var imgs []model.Image
	for i, g := range []model.Grid{{T: 1, H: 12, W: 16}, {T: 1, H: 6, W: 6}, {T: 1, H: 4, W: 8}, {T: 1, H: 20, W: 8}} {
		imgs = append(imgs, fixture.SeededImage(m.Config(), g, uint64(i+1)))
	}
	fixture.CheckVisionBatch(t, m, imgs, 0)
}
