package native

import (
	"testing"

	"github.com/iris-vlm/iris/core/internal/engine"
	"github.com/iris-vlm/iris/core/internal/engine/fixture"
)

// TestSweep runs the shape sweep (fixture.RunSweep) on the CPU engine: 14 seeded checkpoints of
// odd sizes, GQA ratios 1-8, vision depths 1-4, several mrope sections and windows, tied and
// untied, each on three images in both part orders.
func TestSweep(t *testing.T) {
	fixture.RunSweep(t, func(dir string) (engine.Model, error) { return Load(dir, Options{}) })
}
