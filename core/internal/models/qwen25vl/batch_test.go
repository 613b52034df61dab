package qwen25vl

import (
	"testing"

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
