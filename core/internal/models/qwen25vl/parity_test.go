package qwen25vl

import (
	"math"
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
				t.Run(g.Case, func(t *testing.T) { fixture.CheckGolden(t, m, g, logitTol, visionTol) })
			}
		})
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
