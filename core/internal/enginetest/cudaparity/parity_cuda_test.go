//go:build cuda

package cudaparity_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/iris-vlm/iris/core/internal/engine"
	"github.com/iris-vlm/iris/core/internal/enginetest/fixture"
	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/ml/cuda"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models"
)

// Tolerances against transformers in float32 on the same bf16 checkpoint (the CPU backend's; the
// GPU adds accumulation-order noise only).
const (
	logitTol  = 2e-4 // max |diff| of the stored first-step logits
	visionTol = 2e-5 // max |diff| of the first vision outputs, relative to their largest magnitude
)

// loadDir binds the checkpoint in dir on a new GPU backend, its vision tower on a lane of its
// own as iris serve runs it.
func loadDir(t testing.TB, dir string, opts cuda.Options) (model.Model, *cuda.Backend) {
	t.Helper()
	b, err := cuda.NewBackend(opts)
	if err != nil {
		t.Fatal(err)
	}
	m, err := models.Load(dir, b, models.Options{VisionLane: true})
	if err != nil {
		t.Fatalf("loading %s: %v", dir, err)
	}
	t.Cleanup(func() { m.Close() })
	return m, b
}

func loadFixture(t testing.TB, name string, opts cuda.Options) (model.Model, *cuda.Backend) {
	return loadDir(t, fixture.ModelDir(name), opts)
}

// TestParityFP32 runs every golden case of both fixture models in fp32: the vision tower output,
// the first-step logits and 24 greedy tokens must match transformers, with and without graphs,
// with each comparison path.
func TestParityFP32(t *testing.T) {
	for _, tc := range []struct {
		model string
		opts  cuda.Options
	}{
		{"tiny-untied", cuda.Options{Precision: "fp32"}},
		{"tiny-tied", cuda.Options{Precision: "fp32"}},
		{"tiny-untied", cuda.Options{Precision: "fp32", NoGraph: true, FlashOnly: true}},
		{"tiny-untied", cuda.Options{Precision: "fp32", DecodeCuBLAS: true, NoPDL: true}},
		{"tiny-untied", cuda.Options{Precision: "fp32", GemmEx: true}},
	} {
		golden, err := fixture.LoadGolden(tc.model)
		if err != nil {
			t.Fatal(err)
		}
		m, b := loadFixture(t, tc.model, tc.opts)
		name := fmt.Sprintf("%s/graph=%v,flash=%v,cublas=%v,gemmex=%v", tc.model, !tc.opts.NoGraph, tc.opts.FlashOnly, tc.opts.DecodeCuBLAS, tc.opts.GemmEx)
		t.Run(name, func(t *testing.T) {
			for _, g := range golden.Cases {
				t.Run(g.Case, func(t *testing.T) { fixture.CheckGolden(t, m, g, logitTol, visionTol) })
			}
			if err := b.GraphError(); err != nil && !tc.opts.NoGraph {
				t.Errorf("graphs not used: %v", err)
			}
			if n := b.GraphRuns(); (n > 0) == tc.opts.NoGraph {
				t.Errorf("%d passes ran as graphs (NoGraph %v)", n, tc.opts.NoGraph)
			}
		})
	}
}

// TestBatchEqualsSingleFP32: on the GPU too, a batch of N mixed sequences (joining while others
// decode, prefilled in chunks, leaving at different steps) gives exactly the greedy tokens each
// gives alone.
func TestBatchEqualsSingleFP32(t *testing.T) {
	for _, name := range []string{"tiny-untied", "tiny-tied"} {
		m, _ := loadFixture(t, name, cuda.Options{Precision: "fp32"})
		t.Run(name, func(t *testing.T) { fixture.CheckBatchEqualsSingle(t, m, nil) })
	}
}

// TestVisionLane: the tower on its lane (a stream and thread of its own) gives the rows it
// gives on the decoder's stream, bit for bit, also while a generation runs beside it; in fp32
// and bf16.
func TestVisionLane(t *testing.T) {
	for _, prec := range []string{"fp32", "bf16"} {
		t.Run(prec, func(t *testing.T) {
			lane, _ := loadFixture(t, "tiny-untied", cuda.Options{Precision: prec})
			b, err := cuda.NewBackend(cuda.Options{Precision: prec})
			if err != nil {
				t.Fatal(err)
			}
			serial, err := models.Load(fixture.ModelDir("tiny-untied"), b, models.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { serial.Close() })
			fixture.CheckLane(t, lane, serial)
		})
	}
}

// TestBF16Runs runs the fixture cases in bf16: graphs and plain launches give the same tokens.
// Agreement with the fp32 golden tokens is logged (bf16 changes near-ties of random weights).
func TestBF16Runs(t *testing.T) {
	golden, err := fixture.LoadGolden("tiny-untied")
	if err != nil {
		t.Fatal(err)
	}
	graph, gb := loadFixture(t, "tiny-untied", cuda.Options{})
	plain, _ := loadFixture(t, "tiny-untied", cuda.Options{NoGraph: true})
	ctx := context.Background()
	agree, total := 0, 0
	for _, g := range golden.Cases {
		c, img := fixture.MustCase(t, g.Case)
		var toks [2][]int32
		for i, m := range []model.Model{graph, plain} {
			res, err := engine.Generate(ctx, m, engine.Request{IDs: c.InputIDs, Images: []model.Image{img}, MaxNewTokens: 8, IgnoreEOS: true})
			if err != nil {
				t.Fatal(err)
			}
			toks[i] = res.Tokens
		}
		if !slices.Equal(toks[0], toks[1]) {
			t.Errorf("%s: graph tokens %v, plain %v", g.Case, toks[0], toks[1])
		}
		for i, tok := range toks[0] {
			if i < len(g.Tokens) && tok == g.Tokens[i] {
				agree++
			}
			total++
		}
	}
	if err := gb.GraphError(); err != nil || gb.GraphRuns() == 0 {
		t.Errorf("graphs not used (%d runs): %v", gb.GraphRuns(), err)
	}
	t.Logf("bf16 vs fp32 golden: %d/%d tokens agree", agree, total)
}

// TestGraphMatchesPlain compares the logits of recorded decode steps with plain launches, step by
// step, in both precisions.
func TestGraphMatchesPlain(t *testing.T) {
	for _, prec := range []string{"fp32", "bf16"} {
		t.Run(prec, func(t *testing.T) {
			graph, _ := loadFixture(t, "tiny-untied", cuda.Options{Precision: prec})
			plain, _ := loadFixture(t, "tiny-untied", cuda.Options{Precision: prec, NoGraph: true})
			c, img := fixture.MustCase(t, "rect_320x240")
			ctx := context.Background()
			var seqs [2]model.Sequence
			var last [2][]float32
			pos, err := model.PromptPositions(graph.Config(), c.InputIDs, []model.Grid{c.Grid()})
			if err != nil {
				t.Fatal(err)
			}
			for i, m := range []model.Model{graph, plain} {
				emb, err := m.EncodeVision(ctx, img)
				if err != nil {
					t.Fatal(err)
				}
				if seqs[i], err = m.NewSequence(len(c.InputIDs) + 8); err != nil {
					t.Fatal(err)
				}
				defer seqs[i].Close()
				l, err := m.Prefill(ctx, seqs[i], model.Prompt{IDs: c.InputIDs, Positions: pos, Images: []*model.Embeddings{emb}})
				if err != nil {
					t.Fatal(err)
				}
				last[i] = slices.Clone(l)
			}
			for step := range 6 {
				if d := fixture.MaxDiff(last[0], last[1]); d != 0 {
					t.Fatalf("step %d: graph and plain logits differ by %.3g", step, d)
				}
				tok := ml.Argmax(last[0])
				at := int32(len(c.InputIDs) + step + pos.Delta)
				for i, m := range []model.Model{graph, plain} {
					l, err := m.DecodeStep(ctx, seqs[i], tok, at)
					if err != nil {
						t.Fatal(err)
					}
					last[i] = slices.Clone(l)
				}
			}
		})
	}
}

// TestSweepFP32 runs the shape sweep (fixture.RunSweep, docs/testing.md) on the GPU in fp32: 14
// seeded checkpoints of odd sizes (head dims no kernel is specialised for take the cuBLAS and
// composed paths), three images each in both part orders; greedy tokens identical to
// transformers, first-step logits within the sweep's tolerance.
func TestSweepFP32(t *testing.T) {
	fixture.RunSweep(t, fixture.SweepPath(), sweepLoader(cuda.Options{Precision: "fp32"}))
}

// sweepLoader loads a sweep checkpoint on a new GPU backend.
func sweepLoader(opts cuda.Options) fixture.SweepLoader {
	return fixture.SweepLoader{Name: "cuda-" + opts.Precision, Load: func(dir string) (model.Model, error) {
		b, err := cuda.NewBackend(opts)
		if err != nil {
			return nil, err
		}
		return models.Load(dir, b, models.Options{VisionLane: true})
	}}
}

// qwen3Sweep loads the Qwen3-VL sweep golden and writes its model i to a temporary directory.
func qwen3Sweep(t *testing.T, i int) (*fixture.Sweep, string) {
	t.Helper()
	sw, err := fixture.LoadSweepFile(fixture.SweepPathFor("qwen3_vl"))
	if err != nil {
		t.Fatal(err)
	}
	if i < 0 {
		i += len(sw.Models)
	}
	dir := t.TempDir()
	if err := fixture.WriteSeeded(dir, sw.Models[i]); err != nil {
		t.Fatal(err)
	}
	return sw, dir
}

// TestSweepQwen3FP32 runs the Qwen3-VL shape sweep on the GPU in fp32: 11 seeded checkpoints
// (head dims, deepstack blocks and position tables of many sizes), three images each in both
// part orders; greedy tokens identical to transformers, first-step logits within tolerance.
func TestSweepQwen3FP32(t *testing.T) {
	fixture.RunSweep(t, fixture.SweepPathFor("qwen3_vl"), sweepLoader(cuda.Options{Precision: "fp32"}))
}

// TestBatchEqualsSingleQwen3FP32: Qwen3-VL's sweep cases batched (chunks splitting images and
// their deepstack rows) give what each gives alone, fp32.
func TestBatchEqualsSingleQwen3FP32(t *testing.T) {
	for _, i := range []int{0, -1} {
		sw, dir := qwen3Sweep(t, i)
		m, _ := loadDir(t, dir, cuda.Options{Precision: "fp32"})
		reqs, err := fixture.SweepRequests(sw, m.Config())
		if err != nil {
			t.Fatal(err)
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) { fixture.CheckBatchEqualsSingle(t, m, reqs) })
	}
}

// TestBF16Qwen3GraphMatchesPlain: in bf16, Qwen3-VL's recorded decode steps (the pool kernel with
// the q/k norms inside) give the tokens of plain launches (HeadNorm, then the kernel), and the
// agreement with the fp32 golden is reported.
func TestBF16Qwen3GraphMatchesPlain(t *testing.T) {
	const sweepModel = 1 // g2-h28-d16: a head dim the pool kernel takes (the others attend per sequence)
	sw, dir := qwen3Sweep(t, sweepModel)
	graph, gb := loadDir(t, dir, cuda.Options{})
	plain, _ := loadDir(t, dir, cuda.Options{NoGraph: true})
	reqs, err := fixture.SweepRequests(sw, graph.Config())
	if err != nil {
		t.Fatal(err)
	}
	agree, total := 0, 0
	for i, c := range sw.Cases {
		var toks [2][]int32
		for k, m := range []model.Model{graph, plain} {
			res, err := engine.Generate(context.Background(), m, engine.Request{IDs: c.InputIDs, Images: reqs[i].Images, MaxNewTokens: 8, IgnoreEOS: true})
			if err != nil {
				t.Fatal(err)
			}
			toks[k] = res.Tokens
		}
		if !slices.Equal(toks[0], toks[1]) {
			t.Errorf("%s: graph tokens %v, plain %v", c.Name, toks[0], toks[1])
		}
		for j, tok := range toks[0] {
			if tok == sw.Models[sweepModel].Results[i].Tokens[j] {
				agree++
			}
			total++
		}
	}
	if err := gb.GraphError(); err != nil || gb.GraphRuns() == 0 {
		t.Errorf("graphs not used (%d runs): %v", gb.GraphRuns(), err)
	}
	t.Logf("bf16 vs fp32 golden: %d/%d tokens agree", agree, total)
}

// TestSweepInternVLFP32 runs the InternVL shape sweep on the GPU in fp32: 10 seeded checkpoints
// (odd tower widths and head counts, GQA 1-8, tied and untied), images of 1, 3, 6 and 13 tiles in
// both part orders; greedy tokens identical to transformers, first-step logits within tolerance.
func TestSweepInternVLFP32(t *testing.T) {
	fixture.RunSweep(t, fixture.SweepPathFor("internvl"), sweepLoader(cuda.Options{Precision: "fp32"}))
}

// TestSweepLocateAnythingFP32 runs the LocateAnything shape sweep on the GPU in fp32: 8 seeded
// checkpoints (MoonViT depths 1-4 with position tables of 64x64, 16x12 and 6x10, GQA 1-8, one tied
// head), images of 4 to 2000 patches in both part orders; greedy tokens identical to the remote
// code's slow mode, first-step logits within tolerance. Nothing of it is CUDA of its own: the
// tower is AddEmbedBag's 16 bicubic taps, Rope on q/k rows bound pair-to-half, SegmentAttention.
func TestSweepLocateAnythingFP32(t *testing.T) {
	fixture.RunSweep(t, fixture.SweepPathFor("locateanything"), sweepLoader(cuda.Options{Precision: "fp32"}))
}

// TestBatchEqualsSingleInternVLFP32: InternVL's sweep cases batched (chunks splitting the tiles'
// rows) give what each gives alone, fp32.
func TestBatchEqualsSingleInternVLFP32(t *testing.T) {
	sweepBatchEqualsSingle(t, "internvl", 0, -1)
}

// TestSweepPhi4FP32 runs the Phi-4-multimodal shape sweep on the GPU in fp32: 10 seeded
// checkpoints (GQA 1-8, partial rotary 0.5-1.0, LongRoPE's short and long factors and attention
// factor, towers read at feature layers -1 to -3), images of 1-9 crops with padded crops' key
// flags and stretched positions, both part orders; greedy tokens identical to transformers,
// first-step logits within tolerance.
func TestSweepPhi4FP32(t *testing.T) {
	fixture.RunSweep(t, fixture.SweepPathFor("phi4_multimodal"), sweepLoader(cuda.Options{Precision: "fp32"}))
}

// TestBatchEqualsSinglePhi4FP32: Phi-4-multimodal's sweep cases batched (chunks splitting the
// HD layout's rows) give what each gives alone, fp32.
func TestBatchEqualsSinglePhi4FP32(t *testing.T) {
	sweepBatchEqualsSingle(t, "phi4_multimodal", 0, -1)
}

// sweepBatchEqualsSingle runs fixture.CheckBatchEqualsSingle in fp32 on the sweep models of a
// family at the indexes given (negative ones from the end), with the sweep's cases as requests.
func sweepBatchEqualsSingle(t *testing.T, family string, models ...int) {
	sw, err := fixture.LoadSweepFile(fixture.SweepPathFor(family))
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range models {
		if i < 0 {
			i += len(sw.Models)
		}
		dir := t.TempDir()
		if err := fixture.WriteSeeded(dir, sw.Models[i]); err != nil {
			t.Fatal(err)
		}
		m, _ := loadDir(t, dir, cuda.Options{Precision: "fp32"})
		reqs, err := fixture.SweepRequests(sw, m.Config())
		if err != nil {
			t.Fatal(err)
		}
		t.Run(sw.Models[i].Name, func(t *testing.T) { fixture.CheckBatchEqualsSingle(t, m, reqs) })
	}
}

// TestVisionBatchFP32: images of different grids in one tower pass (the scheduler's batched
// vision) give the rows each gives alone, within visionTol: cuBLAS may pick another algorithm
// for another row count, so the GPU is not held to the CPU's bit-for-bit (the token checks,
// TestBatchEqualsSingle*, hold the tokens to exactly alone's).
func TestVisionBatchFP32(t *testing.T) {
	m, _ := loadFixture(t, "tiny-untied", cuda.Options{Precision: "fp32"})
	var imgs []model.Image
	for i, g := range []model.Grid{{T: 1, H: 18, W: 22}, {T: 1, H: 16, W: 16}, {T: 1, H: 6, W: 8}, {T: 1, H: 22, W: 10}} {
		imgs = append(imgs, fixture.SeededImage(m.Config(), g, uint64(i+1)))
	}
	t.Run("qwen2_5_vl", func(t *testing.T) { fixture.CheckVisionBatch(t, m, imgs, visionTol) })
	_, dir := qwen3Sweep(t, 0)
	q3, _ := loadDir(t, dir, cuda.Options{Precision: "fp32"})
	imgs = imgs[:0]
	for i, g := range []model.Grid{{T: 1, H: 12, W: 16}, {T: 1, H: 6, W: 6}, {T: 1, H: 4, W: 8}, {T: 1, H: 20, W: 8}} {
		imgs = append(imgs, fixture.SeededImage(q3.Config(), g, uint64(i+1)))
	}
	t.Run("qwen3_vl", func(t *testing.T) { fixture.CheckVisionBatch(t, q3, imgs, visionTol) })
}

// TestSweepLanceFP32 runs the Lance sweep on the GPU in fp32: nine seeded checkpoints, four images
// from Lance's x2t transform; greedy tokens identical to the official validation_und_KVcache,
// first-step logits within tolerance: the bidirectional image block (rows with one key count in
// CachedAttention's spans), the q/k norms after the biases and the vocabulary mask on this
// backend.
func TestSweepLanceFP32(t *testing.T) {
	fixture.RunSweep(t, fixture.SweepPathFor("lance"), sweepLoader(cuda.Options{Precision: "fp32"}))
}

// TestBatchEqualsSingleLanceFP32: Lance's sweep cases batched (chunks cut around each image's
// bidirectional block) and scheduled give what each gives alone, fp32.
func TestBatchEqualsSingleLanceFP32(t *testing.T) {
	sweepBatchEqualsSingle(t, "lance", 3, -2)
}

// TestSweepDeepseekOCR2FP32 runs the DeepSeek-OCR-2 parity sweep on the GPU in fp32: 8 checkpoints
// (experts 4-16, top-k 1-3, shared 0-2, greedy and group-limited routing, dense/sparse mixes, SAM
// and encoder shapes), each on two images of 0 to 6 tiles: the MoE op's grouped products, the
// relative-position bias and the encoder's prefix mask through the cuBLAS attention path; greedy
// tokens identical to transformers'.
func TestSweepDeepseekOCR2FP32(t *testing.T) {
	sw, err := fixture.LoadDeepseekSweep()
	if err != nil {
		t.Fatal(err)
	}
	for i := range sw.Checkpoints {
		ck := &sw.Checkpoints[i]
		t.Run(ck.Name, func(t *testing.T) {
			dir := t.TempDir()
			if err := ck.Write(dir, nil, nil); err != nil {
				t.Fatal(err)
			}
			m, _ := loadDir(t, dir, cuda.Options{Precision: "fp32"})
			for _, c := range ck.Cases {
				res, err := engine.Generate(context.Background(), m, engine.Request{IDs: c.InputIDs,
					Images: []model.Image{sw.Image(c.Tiles)}, MaxNewTokens: len(c.Tokens), IgnoreEOS: true})
				if err != nil {
					t.Fatalf("%s: %v", c.Name, err)
				}
				if !slices.Equal(res.Tokens, c.Tokens) {
					t.Errorf("%s: tokens %v, want %v", c.Name, res.Tokens, c.Tokens)
				}
			}
		})
	}
}
