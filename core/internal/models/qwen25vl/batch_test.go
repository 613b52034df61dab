package qwen25vl

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/iris-vlm/iris/core/internal/engine/fixture"
	"github.com/iris-vlm/iris/core/internal/engine/native"
)

// TestBatchEqualsSingle: a batch of N mixed sequences (joining while others decode, prompts
// prefilled in chunks, leaving at different steps) gives exactly the greedy tokens each gives
// alone.
func TestBatchEqualsSingle(t *testing.T) {
	ctx := context.Background()
	for _, model := range []string{"tiny-untied", "tiny-tied"} {
		m := loadFixture(t, model, native.Options{})
		reqs, err := fixture.MixedRequests(m.Config())
		if err != nil {
			t.Fatal(err)
		}
		alone, err := fixture.Alone(ctx, m, reqs)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct{ width, chunk int }{{2, 1 << 20}, {3, 64}, {7, 37}, {7, 1 << 20}} {
			t.Run(fmt.Sprintf("%s/width%d/chunk%d", model, tc.width, tc.chunk), func(t *testing.T) {
				got, err := fixture.Batched(ctx, m, reqs, tc.width, tc.chunk)
				if err != nil {
					t.Fatal(err)
				}
				for i := range reqs {
					if !slices.Equal(got[i], alone[i]) {
						t.Errorf("request %d: batched %v, alone %v", i, got[i], alone[i])
					}
				}
				if used, _ := m.KVUse(); used != 0 {
					t.Errorf("%d KV blocks still in use after every sequence closed", used)
				}
			})
		}
	}
}
