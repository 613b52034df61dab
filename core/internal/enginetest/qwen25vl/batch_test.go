package qwen25vl_test

import (
	"context"
	"slices"
	"testing"

	"github.com/iris-vlm/iris/core/internal/enginetest/fixture"
	"github.com/iris-vlm/iris/core/internal/ml/cpu"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models/qwen25vl"
)

// TestBatchEqualsSingle: a batch of N mixed sequences (joining while others decode, prompts
// prefilled in chunks, leaving at different steps) gives exactly the greedy tokens each gives
// alone, on the CPU backend.
func TestBatchEqualsSingle(t *testing.T) {
	for _, model := range []string{"tiny-untied", "tiny-tied"} {
		m := loadFixture(t, model, cpu.Options{})
		t.Run(model, func(t *testing.T) { fixture.CheckBatchEqualsSingle(t, m, nil) })
	}
}

// TestVisionBatch: images of different grids (odd merge units across, partial and whole
// windows) in one tower pass give exactly the rows each gives alone.
func TestVisionBatch(t *testing.T) {
	m := loadFixture(t, "tiny-untied", cpu.Options{})
	var imgs []model.Image
	for i, g := range []model.Grid{{T: 1, H: 18, W: 22}, {T: 1, H: 16, W: 16}, {T: 1, H: 6, W: 8}, {T: 1, H: 6, W: 30}, {T: 1, H: 22, W: 10}} {
		imgs = append(imgs, fixture.SeededImage(m.Config(), g, uint64(i+1)))
	}
	fixture.CheckVisionBatch(t, m, imgs, 0)
}

// TestVisionLane: with the tower on a lane of the backend (a thread pool of its own here, a
// stream of its own on a GPU) a scheduler encodes images in a loop of its own beside the
// decoder's passes, and every request still gives the tokens it gives alone.
func TestVisionLane(t *testing.T) {
	m := load(t, fixture.ModelDir("tiny-untied"), cpu.Options{Threads: 1}, qwen25vl.Options{VisionLane: true})
	if !m.ParallelVision() {
		t.Fatal("a vision lane was asked for: the tower does not run beside the decoder")
	}
	serial := loadFixture(t, "tiny-untied", cpu.Options{Threads: 1})
	if serial.ParallelVision() {
		t.Error("no vision lane was asked for: the tower runs beside the decoder")
	}
	t.Run("rows", func(t *testing.T) { fixture.CheckLane(t, m, serial) })
	fixture.CheckBatchEqualsSingle(t, m, nil)
}

// TestPromptHeads: prompts whose head (the tokens before the image: the system turn) was kept
// copy its KV rows instead of computing them, and give exactly the tokens of a model that
// keeps no head: alone (the second prompt with a head keeps it, the later ones copy it),
// batched and scheduled. The kept heads' blocks are not counted in use.
func TestPromptHeads(t *testing.T) {
	ctx := context.Background()
	none := load(t, fixture.ModelDir("tiny-untied"), cpu.Options{}, qwen25vl.Options{Heads: -1})
	m := load(t, fixture.ModelDir("tiny-untied"), cpu.Options{}, qwen25vl.Options{})
	reqs, err := fixture.MixedRequests(m.Config())
	if err != nil {
		t.Fatal(err)
	}
	reqs = append(reqs, reqs...) // every head seen twice before the second round's prompts
	want, err := fixture.Alone(ctx, none, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if kept, hits := none.PromptHeads(); kept != 0 || hits != 0 {
		t.Fatalf("Heads -1: %d heads kept, %d copied", kept, hits)
	}
	got, err := fixture.Alone(ctx, m, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range reqs {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("request %d with kept heads: %v, without: %v", i, got[i], want[i])
		}
	}
	kept, hits := m.PromptHeads()
	if kept == 0 || hits < int64(len(reqs)/2) {
		t.Fatalf("%d heads kept, %d prompts copied one: want a head kept and the second round's prompts copying", kept, hits)
	}
	if used, _ := m.KVUse(); used != 0 {
		t.Errorf("%d KV blocks in use with no sequence open (the kept heads' not counted)", used)
	}
	fixture.CheckBatchEqualsSingle(t, m, reqs)
}
