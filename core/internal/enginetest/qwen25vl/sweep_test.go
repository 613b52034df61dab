package qwen25vl_test

import (
	"testing"

	"github.com/iris-vlm/iris/core/internal/enginetest/fixture"
	"github.com/iris-vlm/iris/core/internal/ml/cpu"
	"github.com/iris-vlm/iris/core/internal/model"
)

// TestSweep runs the shape sweep (fixture.RunSweep, docs/testing.md) on the CPU backend with each
// kernel level, since odd sizes are what exercise the SIMD kernels' tails: 14 seeded checkpoints
// of odd sizes, GQA ratios 1-8, vision depths 1-4, several mrope sections and windows, tied and
// untied, each on three images in both part orders. A level the CPU lacks falls back to the next
// one down, so each load states the level it got.
func TestSweep(t *testing.T) {
	var loaders []fixture.SweepLoader
	for _, k := range []string{"avx512", "avx2", "generic"} {
		loaders = append(loaders, fixture.SweepLoader{Name: k, Load: func(dir string) (model.Model, error) {
			m, err := Load(dir, cpu.Options{Kernels: k}, nil)
			if err == nil {
				t.Logf("kernels %s: running %s", k, kernels(m))
			}
			return m, err
		}})
	}
	fixture.RunSweep(t, fixture.SweepPath(), loaders...)
}
