package qwen25vl

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/iris-vlm/iris/core/internal/engine"
	"github.com/iris-vlm/iris/core/internal/engine/fixture"
	"github.com/iris-vlm/iris/core/internal/engine/native"
	"github.com/iris-vlm/iris/core/internal/ml"
)

// Tolerances against transformers in float32 on the same bf16 checkpoint.
const (
	logitTol  = 1e-4 // max |diff| of the stored first-step logits
	visionTol = 1e-5 // max |diff| of the first vision outputs, relative to their largest magnitude
)

// load binds the checkpoint in dir on a CPU backend.
func load(t testing.TB, dir string, opts native.Options, mo Options) *Model {
	t.Helper()
	b, err := native.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := engine.LoadConfig(dir)
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	ck, err := ml.OpenCheckpoint(dir)
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	m, err := New(b, ck, cfg, engine.DefaultLimits(cfg), mo)
	if err != nil {
		t.Fatalf("loading %s: %v", dir, err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func loadFixture(t testing.TB, model string, opts native.Options) *Model {
	t.Helper()
	return load(t, fixture.ModelDir(model), opts, Options{})
}

// kernels names the backend's matmul kernels.
func kernels(m *Model) string { return m.Backend().(*native.Backend).Kernels() }

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

// TestParity runs every golden case of both fixture models: the vision tower output, the
// first-step logits, and 24 greedy tokens must match transformers.
func TestParity(t *testing.T) {
	for _, tc := range []struct {
		model string
		opts  native.Options
	}{
		{"tiny-untied", native.Options{}},
		{"tiny-tied", native.Options{}},
		{"tiny-untied", native.Options{Kernels: "avx2"}},
		{"tiny-untied", native.Options{Kernels: "generic", Threads: 1}},
	} {
		golden, err := fixture.LoadGolden(tc.model)
		if err != nil {
			t.Fatal(err)
		}
		m := loadFixture(t, tc.model, tc.opts)
		name := tc.model + "/" + kernels(m)
		if tc.opts.Threads == 1 {
			name += "-1thread"
		}
		t.Run(name, func(t *testing.T) {
			for _, g := range golden.Cases {
				t.Run(g.Case, func(t *testing.T) { checkCase(t, m, g) })
			}
		})
	}
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
	if d := maxDiff(emb.Data[:len(g.VisionHead)], g.VisionHead); d > visionTol*scale {
		t.Errorf("vision head max |diff| %.3g > %.0e x %.3g", d, visionTol, scale)
	} else {
		t.Logf("vision head max |diff| %.3g (scale %.3g)", d, scale)
	}
	var sum, sumAbs float64
	for _, v := range emb.Data {
		sum += float64(v)
		sumAbs += math.Abs(float64(v))
	}
	if math.Abs(sumAbs-g.VisionSumAbs) > 1e-5*g.VisionSumAbs+1e-3 || math.Abs(sum-g.VisionSum) > 1e-5*g.VisionSumAbs+1e-3 {
		t.Errorf("vision sums %.6g/%.6g, want %.6g/%.6g", sum, sumAbs, g.VisionSum, g.VisionSumAbs)
	}

	pos, err := engine.Positions3D(c.InputIDs, m.Config().ImageTokenID, []engine.Grid{c.Grid()}, m.Config().Vision.MergeSize)
	if err != nil {
		t.Fatal(err)
	}
	seq, err := m.NewSequence(len(c.InputIDs) + 1)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	logits, err := m.Prefill(ctx, seq, engine.Prompt{IDs: c.InputIDs, Positions: pos, Images: []*engine.Embeddings{emb}})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, len(g.LogitIDs))
	for i, id := range g.LogitIDs {
		got[i] = logits[id]
	}
	if d := maxDiff(got, g.LogitValues); d > logitTol {
		t.Errorf("first-step logits max |diff| %.3g > %.0e", d, logitTol)
	} else {
		t.Logf("first-step logits max |diff| %.3g over %d ids", d, len(got))
	}
	if a := engine.Argmax(logits); a != g.Argmax {
		t.Errorf("first-step argmax %d, want %d", a, g.Argmax)
	}
	var lsum, lsumsq float64
	for _, v := range logits {
		lsum += float64(v)
		lsumsq += float64(v) * float64(v)
	}
	if math.Abs(lsum-g.LogitSum) > 1e-4*float64(len(logits))*logitTol+1e-3 || math.Abs(lsumsq-g.LogitSumSq) > 1e-4*g.LogitSumSq {
		t.Errorf("logit sums %.6g/%.6g, want %.6g/%.6g", lsum, lsumsq, g.LogitSum, g.LogitSumSq)
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
	if res.Finish != engine.FinishLength || res.ImageTokens != g.VisionRows || res.PromptTokens != len(c.InputIDs) {
		t.Errorf("result finish %q, image tokens %d, prompt tokens %d", res.Finish, res.ImageTokens, res.PromptTokens)
	}
}

func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	if len(a) != len(b) {
		return math.Inf(1)
	}
	return d
}
