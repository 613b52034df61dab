//go:build cuda

package cuda

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/iris-vlm/iris/core/internal/engine"
	"github.com/iris-vlm/iris/core/internal/engine/fixture"
)

// Tolerances against transformers in float32 on the same bf16 checkpoint (the CPU engine's, the
// GPU adds accumulation-order noise only).
const (
	logitTol  = 2e-4 // max |diff| of the stored first-step logits
	visionTol = 2e-5 // max |diff| of the first vision outputs, relative to their largest magnitude
)

func loadFixture(t testing.TB, model string, opts Options) *Model {
	t.Helper()
	m, err := LoadModel(context.Background(), fixture.ModelDir(model), nil, opts)
	if err != nil {
		t.Fatalf("loading %s: %v", model, err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestParityFP32 runs every golden case of both fixture models in fp32: the vision tower output,
// the first-step logits and 24 greedy tokens must match transformers, with and without the
// decode graph.
func TestParityFP32(t *testing.T) {
	for _, tc := range []struct {
		model string
		opts  Options
	}{
		{"tiny-untied", Options{Precision: "fp32"}},
		{"tiny-tied", Options{Precision: "fp32"}},
		{"tiny-untied", Options{Precision: "fp32", NoGraph: true, FlashOnly: true}},
		{"tiny-untied", Options{Precision: "fp32", DecodeCuBLAS: true, NoPDL: true}},
		{"tiny-untied", Options{Precision: "fp32", GemmEx: true}},
	} {
		golden, err := fixture.LoadGolden(tc.model)
		if err != nil {
			t.Fatal(err)
		}
		m := loadFixture(t, tc.model, tc.opts)
		name := tc.model
		if tc.opts.NoGraph {
			name += "-nograph-flash"
		}
		if tc.opts.DecodeCuBLAS {
			name += "-cublas-nopdl"
		}
		if tc.opts.GemmEx {
			name += "-gemmex"
		}
		t.Run(name, func(t *testing.T) {
			for _, g := range golden.Cases {
				t.Run(g.Case, func(t *testing.T) { checkCase(t, m, g) })
			}
			if err := m.GraphError(); err != nil && !tc.opts.NoGraph {
				t.Errorf("decode graph not used: %v", err)
			}
		})
	}
}

func loadCase(t testing.TB, name string) (*fixture.Case, engine.Image) {
	t.Helper()
	c, err := fixture.LoadCase(name)
	if err != nil {
		t.Fatal(err)
	}
	img, err := c.EngineImage()
	if err != nil {
		t.Fatal(err)
	}
	return c, img
}

func checkCase(t *testing.T, m *Model, g fixture.GoldenCase) {
	ctx := context.Background()
	c, img := loadCase(t, g.Case)
	emb, err := m.EncodeVision(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	if emb.Tokens != g.VisionRows || emb.Dim != g.VisionDim {
		t.Fatalf("vision output %dx%d, want %dx%d", emb.Tokens, emb.Dim, g.VisionRows, g.VisionDim)
	}
	scale := 0.0
	for _, v := range g.VisionHead {
		scale = max(scale, math.Abs(float64(v)))
	}
	if d := maxDiff(emb.Data[:len(g.VisionHead)], g.VisionHead); !(d <= visionTol*scale) {
		t.Errorf("vision head max |diff| %.3g > %.0e x %.3g", d, visionTol, scale)
	}
	var sum, sumAbs float64
	for _, v := range emb.Data {
		sum += float64(v)
		sumAbs += math.Abs(float64(v))
	}
	if math.Abs(sumAbs-g.VisionSumAbs) > 1e-4*g.VisionSumAbs+1e-3 || math.Abs(sum-g.VisionSum) > 1e-4*g.VisionSumAbs+1e-3 {
		t.Errorf("vision sums %.6g/%.6g, want %.6g/%.6g", sum, sumAbs, g.VisionSum, g.VisionSumAbs)
	}

	pos, err := engine.Positions3D(c.InputIDs, m.Config().ImageTokenID, []engine.Grid{c.Grid()}, m.Config().Vision.MergeSize)
	if err != nil {
		t.Fatal(err)
	}
	// newSeq is a sequence with room for the prompt and a decode step, closed with the test.
	newSeq := func() engine.Sequence {
		seq, err := m.NewSequence(len(c.InputIDs) + 2)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { seq.Close() })
		return seq
	}
	prompt := func(e *engine.Embeddings) engine.Prompt {
		return engine.Prompt{IDs: c.InputIDs, Positions: pos, Images: []*engine.Embeddings{e}}
	}
	logits, err := m.Prefill(ctx, newSeq(), prompt(emb))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, len(g.LogitIDs))
	for i, id := range g.LogitIDs {
		got[i] = logits[id]
	}
	if d := maxDiff(got, g.LogitValues); !(d <= logitTol) {
		t.Errorf("first-step logits max |diff| %.3g > %.0e", d, logitTol)
	} else {
		t.Logf("first-step logits max |diff| %.3g over %d ids", d, len(got))
	}
	if a := engine.Argmax(logits); a != g.Argmax {
		t.Errorf("first-step argmax %d, want %d", a, g.Argmax)
	}
	// the same prefill from rows left on the device (what Generate uses) gives the same logits
	dev, err := m.EncodeVisionDevice(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Device.Release()
	seq2 := newSeq()
	logits2, err := m.Prefill(ctx, seq2, prompt(dev))
	if err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(logits2, logits); d != 0 {
		t.Errorf("prefill from device rows: logits differ from host rows' by %.3g", d)
	}
	// the device's greedy choice is the host's, at the prefill and at a decode step
	seq3 := newSeq()
	tok, err := m.PrefillGreedy(ctx, seq3, prompt(emb))
	if err != nil {
		t.Fatal(err)
	}
	if want := engine.Argmax(logits); tok != want {
		t.Errorf("PrefillGreedy = %d, Argmax of the logits %d", tok, want)
	}
	at := int32(len(c.InputIDs) + pos.Delta)
	next, err := m.DecodeStepGreedy(ctx, seq3, tok, at)
	if err != nil {
		t.Fatal(err)
	}
	stepLogits, err := m.DecodeStep(ctx, seq2, tok, at)
	if err != nil {
		t.Fatal(err)
	}
	if want := engine.Argmax(stepLogits); next != want {
		t.Errorf("DecodeStepGreedy = %d, Argmax of DecodeStep's logits %d", next, want)
	}

	res, err := engine.Generate(ctx, m, engine.Request{
		IDs:          c.InputIDs,
		Images:       []engine.Image{img},
		MaxNewTokens: len(g.Tokens),
		IgnoreEOS:    true,
		StopIDs:      m.Config().EOSTokenIDs,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Tokens, g.Tokens) {
		t.Errorf("greedy tokens (min reference margin %.3g):\n got %v\nwant %v", g.MinMargin, res.Tokens, g.Tokens)
	}
}

func maxDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	d := 0.0
	for i := range a {
		x := math.Abs(float64(a[i]) - float64(b[i]))
		if math.IsNaN(x) {
			return math.Inf(1)
		}
		d = max(d, x)
	}
	return d
}

// TestBF16Runs runs the fixture cases in bf16: the graph and plain decode paths give the same
// tokens. Agreement with the fp32 golden tokens is logged (bf16
// changes near-ties; the full-size parity run measures agreement against transformers in bf16).
func TestBF16Runs(t *testing.T) {
	golden, err := fixture.LoadGolden("tiny-untied")
	if err != nil {
		t.Fatal(err)
	}
	graph := loadFixture(t, "tiny-untied", Options{})
	plain := loadFixture(t, "tiny-untied", Options{NoGraph: true})
	ctx := context.Background()
	agree, total := 0, 0
	for _, g := range golden.Cases {
		c, img := loadCase(t, g.Case)
		var toks [2][]int32
		for i, m := range []*Model{graph, plain} {
			res, err := engine.Generate(ctx, m, engine.Request{IDs: c.InputIDs, Images: []engine.Image{img}, MaxNewTokens: 8, IgnoreEOS: true})
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
	if err := graph.GraphError(); err != nil {
		t.Errorf("decode graph not used: %v", err)
	}
	t.Logf("bf16 vs fp32 golden: %d/%d tokens agree", agree, total)
}

// TestGraphMatchesPlain compares the logits of the captured decode step with plain launches,
// step by step, in both precisions.
func TestGraphMatchesPlain(t *testing.T) {
	for _, prec := range []string{"fp32", "bf16"} {
		t.Run(prec, func(t *testing.T) {
			graph := loadFixture(t, "tiny-untied", Options{Precision: prec})
			plain := loadFixture(t, "tiny-untied", Options{Precision: prec, NoGraph: true})
			c, img := loadCase(t, "rect_320x240")
			ctx := context.Background()
			var seqs [2]engine.Sequence
			var last [2][]float32
			pos, err := engine.Positions3D(c.InputIDs, graph.Config().ImageTokenID, []engine.Grid{c.Grid()}, 2)
			if err != nil {
				t.Fatal(err)
			}
			for i, m := range []*Model{graph, plain} {
				emb, err := m.EncodeVision(ctx, img)
				if err != nil {
					t.Fatal(err)
				}
				if seqs[i], err = m.NewSequence(len(c.InputIDs) + 8); err != nil {
					t.Fatal(err)
				}
				defer seqs[i].Close()
				if last[i], err = m.Prefill(ctx, seqs[i], engine.Prompt{IDs: c.InputIDs, Positions: pos, Images: []*engine.Embeddings{emb}}); err != nil {
					t.Fatal(err)
				}
			}
			for step := range 6 {
				if d := maxDiff(last[0], last[1]); d != 0 {
					t.Fatalf("step %d: graph and plain logits differ by %.3g", step, d)
				}
				tok := engine.Argmax(last[0])
				at := int32(len(c.InputIDs) + step + pos.Delta)
				for i, m := range []*Model{graph, plain} {
					if last[i], err = m.DecodeStep(ctx, seqs[i], tok, at); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}
