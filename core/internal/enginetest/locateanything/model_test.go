package locateanything_test

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/core/internal/enginetest/fixture"
	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/ml/cpu"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models/locateanything"
)

// load opens a checkpoint directory on a CPU backend.
func load(dir string, opts cpu.Options) (*locateanything.Model, error) {
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
	return locateanything.New(b, ck, cfg, model.DefaultLimits(cfg), locateanything.Options{})
}

// TestSweep runs the LocateAnything shape sweep (fixture.RunSweep; the golden is
// scripts/reference/make_sweep_locateanything.py's, from the official remote code in its slow
// mode) on the CPU backend: 8 seeded checkpoints of odd tower and decoder widths, GQA ratios 1-8,
// odd head counts, tower depths 1-4, position tables of 64x64, 16x12 and 6x10 (resampled down, up
// and not at all), a tied head, images of 4 to 2000 patches in both part orders; fp32 greedy
// tokens identical to the reference, first-step logits within 1e-4. The portable kernels run two
// of the models.
func TestSweep(t *testing.T) {
	sw, err := fixture.LoadSweepFile(fixture.SweepPathFor(locateanything.ModelType))
	if err != nil {
		t.Fatal(err)
	}
	var loaders []fixture.SweepLoader
	for _, k := range []string{"avx2", "generic"} {
		l := fixture.SweepLoader{Name: k, Load: func(dir string) (model.Model, error) {
			return load(dir, cpu.Options{Kernels: k})
		}}
		if k == "generic" {
			l.Models = []string{sw.Models[0].Name, sw.Models[len(sw.Models)-1].Name}
		}
		loaders = append(loaders, l)
	}
	fixture.RunSweep(t, fixture.SweepPathFor(locateanything.ModelType), loaders...)
}

// TestBatchEqualsSingle: the sweep's cases batched (joining while others decode, prompts prefilled
// in chunks that split the image's rows, leaving at different steps) give exactly the greedy tokens
// each gives alone. One model (GQA 3, a tower of 4 blocks).
func TestBatchEqualsSingle(t *testing.T) {
	sw, err := fixture.LoadSweepFile(fixture.SweepPathFor(locateanything.ModelType))
	if err != nil {
		t.Fatal(err)
	}
	sm := sw.Models[len(sw.Models)-1]
	dir := t.TempDir()
	if err := fixture.WriteSeeded(dir, sm); err != nil {
		t.Fatal(err)
	}
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

// TestSweepDetectsWrongGraph shows the sweep's check can fail on this family's hazards, each made
// in the checkpoint so that the right graph computes what the wrong one would on the original:
//   - the 2-D RoPE pairs taken as (row, column), as modeling_vit.py's own docstring says, instead
//     of (column, row) as its code does: q and k's pairs 4i..4i+1 and 4i+2..4i+3 of every head
//     swapped in wqkv;
//   - patch_merger's 2x2 block read column-major ((2r, 2c), (2r+1, 2c), ...): the middle quarters
//     of mlp1's LayerNorm and first Linear's input swapped.
//
// Each misses the golden first-step logits of the 40x50-patch case (a grid that is not square).
func TestSweepDetectsWrongGraph(t *testing.T) {
	sw, err := fixture.LoadSweepFile(fixture.SweepPathFor(locateanything.ModelType))
	if err != nil {
		t.Fatal(err)
	}
	sm := sw.Models[0]
	ci := -1
	for i, c := range sw.Cases {
		if c.Image == "photo_40x50" {
			ci = i
			break
		}
	}
	if ci < 0 {
		t.Fatal("no 40x50 case in the sweep")
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
	cfg, err := model.ParseConfig(sm.Config)
	if err != nil {
		t.Fatal(err)
	}
	heads := cfg.Vision.Heads
	for _, tc := range []struct {
		name string
		file func(t *testing.T, dir string)
	}{
		{name: "as is"},
		{name: "rope pairs (row, column)", file: func(t *testing.T, dir string) {
			editTensors(t, dir, "wqkv.", func(name string, rows, cols int, b []byte) {
				swapRopePairs(b, rows, cols, heads)
			})
		}},
		{name: "merger column-major", file: func(t *testing.T, dir string) {
			editTensors(t, dir, "mlp1.", func(name string, rows, cols int, b []byte) {
				if strings.HasPrefix(name, "mlp1.0.") || name == "mlp1.1.weight" {
					swapMiddleQuarters(b, rows, cols)
				}
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := fixture.WriteSeeded(dir, sm); err != nil {
				t.Fatal(err)
			}
			if tc.file != nil {
				tc.file(t, dir)
			}
			m, err := load(dir, cpu.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			emb, err := m.EncodeVision(t.Context(), img)
			if err != nil {
				t.Fatal(err)
			}
			pos, err := model.PromptPositions(m.Config(), c.InputIDs, []model.Grid{img.Grid})
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

// editTensors rewrites, in dir/model.safetensors, every F32 tensor whose name contains part, as
// rows x cols (a vector is one row).
func editTensors(t *testing.T, dir, part string, edit func(name string, rows, cols int, b []byte)) {
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
		rows, cols := 1, int(e.Shape[len(e.Shape)-1])
		if len(e.Shape) == 2 {
			rows = int(e.Shape[0])
		}
		b := make([]byte, e.Size)
		if _, err := f.ReadAt(b, e.Offset); err != nil {
			t.Fatal(err)
		}
		edit(e.Name, rows, cols, b)
		if _, err := f.WriteAt(b, e.Offset); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n == 0 {
		t.Fatalf("no tensor named *%s*", part)
	}
}

// swapRopePairs swaps, in a wqkv weight (3*hidden rows) or bias (one row of 3*hidden), each q and
// k head's output pairs (4i, 4i+1) and (4i+2, 4i+3): the column and the row of each frequency.
func swapRopePairs(b []byte, rows, cols, heads int) {
	out, unit := rows, cols*4 // the outputs and the bytes of one output
	if rows == 1 {
		out, unit = cols, 4
	}
	hidden := out / 3
	hd := hidden / heads
	for o := 0; o < 2*hidden; o += 4 { // q's and k's outputs, in quads of one frequency
		if o%hd > hd-4 {
			continue
		}
		a, c := b[o*unit:(o+2)*unit], b[(o+2)*unit:(o+4)*unit]
		tmp := slices.Clone(a)
		copy(a, c)
		copy(c, tmp)
	}
}

// swapMiddleQuarters swaps the second and third quarters of every row (the patches (2r, 2c+1) and
// (2r+1, 2c) of a merged token).
func swapMiddleQuarters(b []byte, rows, cols int) {
	q := cols / 4 * 4
	for row := range rows {
		r := b[row*cols*4 : (row+1)*cols*4]
		one, two := r[q:2*q], r[2*q:3*q]
		tmp := slices.Clone(one)
		copy(one, two)
		copy(two, tmp)
	}
}
