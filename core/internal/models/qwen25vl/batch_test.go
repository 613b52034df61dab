package qwen25vl

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/iris-vlm/iris/core/internal/engine"
	"github.com/iris-vlm/iris/core/internal/engine/fixture"
	"github.com/iris-vlm/iris/core/internal/engine/native"
)

// batchRequests are mixed sequences: different images and prompt lengths, both part orders (the
// cases' own), a text-only one, and answers of different lengths so that sequences leave at
// different steps.
func batchRequests(t *testing.T, m *Model) []fixture.BatchRequest {
	t.Helper()
	names, err := fixture.CaseNames()
	if err != nil {
		t.Fatal(err)
	}
	var reqs []fixture.BatchRequest
	for i, name := range names {
		c, img := loadCase(t, name)
		reqs = append(reqs, fixture.BatchRequest{IDs: c.InputIDs, Images: []engine.Image{img}, MaxTokens: 3 + (5*i)%11})
	}
	// a text-only prompt: the first case's text tokens without its image
	c, _ := loadCase(t, names[0])
	text := slices.DeleteFunc(slices.Clone(c.InputIDs), func(id int32) bool {
		return id == m.Config().ImageTokenID || id == m.Config().VisionStartTokenID || id == m.Config().VisionEndTokenID
	})
	return append(reqs, fixture.BatchRequest{IDs: text, MaxTokens: 9})
}

// TestBatchEqualsSingle: a batch of N mixed sequences (joining while others decode, prompts
// prefilled in chunks, leaving at different steps) gives exactly the greedy tokens each gives
// alone.
func TestBatchEqualsSingle(t *testing.T) {
	ctx := context.Background()
	for _, model := range []string{"tiny-untied", "tiny-tied"} {
		m := loadFixture(t, model, native.Options{})
		reqs := batchRequests(t, m)
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
