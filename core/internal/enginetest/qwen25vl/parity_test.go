package qwen25vl_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/iris-vlm/iris/core/internal/engine"
	"github.com/iris-vlm/iris/core/internal/enginetest/fixture"
	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/ml/cpu"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models/qwen25vl"
)

// Tolerances against transformers in float32 on the same bf16 checkpoint.
const (
	logitTol  = 1e-4 // max |diff| of the stored first-step logits
	visionTol = 1e-5 // max |diff| of the first vision outputs, relative to their largest magnitude
)

// load binds the checkpoint in dir on a CPU backend.
func load(t testing.TB, dir string, opts cpu.Options, mo qwen25vl.Options) *qwen25vl.Model {
	t.Helper()
	b, err := cpu.New(opts)
	if err != nil {
		t.Fatal(err)
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
	m, err := qwen25vl.New(b, ck, cfg, model.DefaultLimits(cfg), mo)
	if err != nil {
		t.Fatalf("loading %s: %v", dir, err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func loadFixture(t testing.TB, model string, opts cpu.Options) *qwen25vl.Model {
	t.Helper()
	return load(t, fixture.ModelDir(model), opts, qwen25vl.Options{})
}

// kernels names the backend's matmul kernels.
func kernels(m *qwen25vl.Model) string { return m.Backend().(*cpu.Backend).Kernels() }

// TestParity runs every golden case of both fixture models: the vision tower output, the
// first-step logits, and 24 greedy tokens must match transformers.
func TestParity(t *testing.T) {
	for _, tc := range []struct {
		model string
		opts  cpu.Options
	}{
		{"tiny-untied", cpu.Options{}},
		{"tiny-tied", cpu.Options{}},
		{"tiny-untied", cpu.Options{Kernels: "avx2"}},
		{"tiny-untied", cpu.Options{Kernels: "generic", Threads: 1}},
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

// logprobsGolden is scripts/reference/golden_logprobs.py's output.
type logprobsGolden struct {
	Top   int `json:"top"`
	Cases []struct {
		Case  string `json:"case"`
		Steps []struct {
			Token       int32     `json:"token"`
			Logprob     float64   `json:"logprob"`
			TopIDs      []int32   `json:"top_ids"`
			TopLogprobs []float64 `json:"top_logprobs"`
		} `json:"steps"`
	} `json:"cases"`
}

// TestLogprobsMatchTransformers generates greedily with logprobs and 20 alternatives on both
// fixture models: every token, its log-probability and the top-20 log-probabilities must equal
// transformers' log_softmax of its fp32 logits within 1e-4. Alternatives closer than that to
// their neighbour may trade places, so the top list is compared as values, and each id
// transformers lists must be listed here with its value unless it sits at a near-tie.
func TestLogprobsMatchTransformers(t *testing.T) {
	const tol = 1e-4
	for _, name := range []string{"tiny-untied", "tiny-tied"} {
		raw, err := os.ReadFile(filepath.Join(fixture.Root(), fixture.Family, "golden", "logprobs-"+name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var g logprobsGolden
		if err := json.Unmarshal(raw, &g); err != nil {
			t.Fatal(err)
		}
		m := loadFixture(t, name, cpu.Options{})
		for _, gc := range g.Cases {
			t.Run(name+"/"+gc.Case, func(t *testing.T) {
				c, img := fixture.MustCase(t, gc.Case)
				res, err := engine.Generate(context.Background(), m, engine.Request{
					IDs: c.InputIDs, Images: []model.Image{img}, MaxNewTokens: len(gc.Steps),
					IgnoreEOS: true, Logprobs: true, TopLogprobs: g.Top,
				})
				if err != nil {
					t.Fatal(err)
				}
				var worst float64
				for i, want := range gc.Steps {
					got := res.Logprobs[i]
					if got.ID != want.Token || res.Tokens[i] != want.Token {
						t.Fatalf("step %d: token %d, transformers chose %d", i, got.ID, want.Token)
					}
					worst = max(worst, math.Abs(float64(got.Logprob)-want.Logprob))
					if len(got.Top) != len(want.TopLogprobs) {
						t.Fatalf("step %d: %d alternatives, want %d", i, len(got.Top), len(want.TopLogprobs))
					}
					byID := map[int32]float32{}
					for j, e := range got.Top {
						byID[e.ID] = e.Logprob
						worst = max(worst, math.Abs(float64(e.Logprob)-want.TopLogprobs[j]))
					}
					for j, id := range want.TopIDs {
						v, ok := byID[id]
						nearTie := (j > 0 && want.TopLogprobs[j-1]-want.TopLogprobs[j] < tol) ||
							(j+1 < len(want.TopLogprobs) && want.TopLogprobs[j]-want.TopLogprobs[j+1] < tol)
						if !ok && !nearTie {
							t.Errorf("step %d: transformers' alternative %d (%.6f) is not listed", i, id, want.TopLogprobs[j])
						}
						if ok {
							worst = max(worst, math.Abs(float64(v)-want.TopLogprobs[j]))
						}
					}
				}
				if worst > tol {
					t.Errorf("max |diff| of the log-probabilities %.3g > %.0e", worst, tol)
				}
				t.Logf("max |diff| %.3g over %d steps", worst, len(gc.Steps))
			})
		}
	}
}
