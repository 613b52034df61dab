package qwen25vl

import (
	"testing"

	"github.com/iris-vlm/iris/core/internal/engine"
	"github.com/iris-vlm/iris/core/internal/engine/fixture"
	"github.com/iris-vlm/iris/core/internal/engine/native"
)

// TestBatchEqualsSingle: a batch of N mixed sequences (joining while others decode, prompts
// prefilled in chunks, leaving at different steps) gives exactly the greedy tokens each gives
// alone, on the CPU backend.
func TestBatchEqualsSingle(t *testing.T) {
	for _, model := range []string{"tiny-untied", "tiny-tied"} {
		m := loadFixture(t, model, native.Options{})
		t.Run(model, func(t *testing.T) { fixture.CheckBatchEqualsSingle(t, m, nil) })
	}
}

// TestVisionBatch: images of different grids (odd merge units across, partial and whole
// windows) in one tower pass give exactly the rows each gives alone.
func TestVisionBatch(t *testing.T) {
	m := loadFixture(t, "tiny-untied", native.Options{})
	var imgs []engine.Image
	for i, g := range []engine.Grid{{T: 1, H: 18, W: 22}, {T: 1, H: 16, W: 16}, {T: 1, H: 6, W: 8}, {T: 1, H: 6, W: 30}, {T: 1, H: 22, W: 10}} {
		imgs = append(imgs, fixture.SeededImage(m.Config(), g, uint64(i+1)))
	}
	fixture.CheckVisionBatch(t, m, imgs, 0)
}
