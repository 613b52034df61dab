// Package lance_test runs the Lance family through the engine's fixtures: the shape sweep
// against Lance's official validation_und_KVcache (scripts/reference/golden_lance.py sweep) and
// the mutations it must catch.
package lance_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/iris-vlm/iris/core/internal/enginetest/fixture"
	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/ml/cpu"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models/lance"
)

// load binds a checkpoint directory on the CPU backend; mutate, when set, changes the config
// first.
func load(dir string, mutate func(*model.Config)) (*lance.Model, error) {
	return loadWith(dir, mutate, lance.Options{})
}

func loadWith(dir string, mutate func(*model.Config), opts lance.Options) (*lance.Model, error) {
	b, err := cpu.New(cpu.Options{})
	if err != nil {
		return nil, err
	}
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		b.Close()
		return nil, err
	}
	if mutate != nil {
		mutate(cfg)
	}
	ck, err := ml.OpenCheckpoint(dir)
	if err != nil {
		b.Close()
		return nil, err
	}
	return lance.New(b, ck, cfg, model.DefaultLimits(cfg), opts)
}

// firstModel loads the Lance sweep golden and writes its first model into a temporary directory.
func firstModel(t *testing.T) (*fixture.Sweep, string) {
	t.Helper()
	sw, err := fixture.LoadSweepFile(fixture.SweepPathFor(lance.ModelType))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := fixture.WriteSeeded(dir, sw.Models[0]); err != nil {
		t.Fatal(err)
	}
	return sw, dir
}

// engineImage is a sweep image's seeded pixel rows as the engine takes them.
func engineImage(t *testing.T, sw *fixture.Sweep, img fixture.SweepImage) model.Image {
	t.Helper()
	px, err := sw.Pixels(img)
	if err != nil {
		t.Fatal(err)
	}
	return model.Image{Pixels: px, Grid: model.Grid{T: img.Grid[0], H: img.Grid[1], W: img.Grid[2]}}
}

// TestSweep runs the shape sweep (fixture.RunSweep) on the CPU backend: nine seeded checkpoints
// (GQA ratios 1 to 8, 1 to 3 layers, head dims 6 to 22, vision depths 1 to 4, several mrope
// sections, windows and full-attention blocks) on four images from x2t_sample (buckets of the
// 224² and 448² resolutions: 50 to 234 image tokens, odd merged widths), greedy tokens identical
// to validation_und_KVcache's and first-step logits within 1e-4.
func TestSweep(t *testing.T) {
	fixture.RunSweep(t, fixture.SweepPathFor(lance.ModelType), fixture.SweepLoader{Name: "cpu", Load: func(dir string) (model.Model, error) {
		return load(dir, nil)
	}})
}

// sweepExtra is what the Lance sweep golden says beyond fixture.Sweep: each case's
// bidirectional split and, per result, whether a causal image split changes it.
type sweepExtra struct {
	Cases []struct {
		Name          string
		Bidirectional [2]int
	}
	Models []struct {
		Name    string
		Results []struct {
			Case              string
			CausalSpanDiffers bool `json:"causal_span_differs"`
		}
	}
}

// TestVocabularyMask: the logits of the embedding rows past the tokenizer's vocabulary
// (output_vocab_size 151665 of 151936) are -inf, the others finite, as validation_und_KVcache's
// pred_logits[:, len(tokenizer):] = -inf leaves them; without the config key none is masked.
func TestVocabularyMask(t *testing.T) {
	sw, dir := firstModel(t)
	img := engineImage(t, sw, sw.Images[0])
	c := sw.Cases[0]
	for _, masked := range []bool{true, false} {
		m, err := load(dir, func(cfg *model.Config) {
			if !masked {
				cfg.Text.OutputVocab = 0
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if n := m.Config().Text.OutputVocab; masked && n != 151665 {
			t.Fatalf("output_vocab_size %d, want 151665", n)
		}
		_, first := greedy(t, m, c.InputIDs, img, 1)
		m.Close()
		for id, v := range first {
			inf := math.IsInf(float64(v), -1)
			if want := masked && id >= 151665; inf != want || (!want && math.IsNaN(float64(v))) {
				t.Fatalf("masked %t: logit %d is %v", masked, id, v)
			}
		}
	}
}

// TestSweepCatchesCausalImage: the same engine with the image block causal (an HF Qwen model's
// prefill) fails every sweep case where the reference's tokens or first-step logits change when
// its vision split is prefilled causally: the sweep tells the bidirectional block from a causal
// one. (A one-layer model cannot: the image rows' outputs feed no later layer.)
func TestSweepCatchesCausalImage(t *testing.T) {
	path := fixture.SweepPathFor(lance.ModelType)
	sw, err := fixture.LoadSweepFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var extra sweepExtra
	if err := json.Unmarshal(raw, &extra); err != nil {
		t.Fatal(err)
	}
	pixels := map[string]model.Image{}
	for _, img := range sw.Images {
		pixels[img.Name] = engineImage(t, sw, img)
	}
	caught, want := 0, 0
	for mi, m := range sw.Models {
		if !slices.ContainsFunc(extra.Models[mi].Results, func(r struct {
			Case              string
			CausalSpanDiffers bool `json:"causal_span_differs"`
		}) bool {
			return r.CausalSpanDiffers
		}) {
			continue
		}
		dir := t.TempDir()
		if err := fixture.WriteSeeded(dir, m); err != nil {
			t.Fatal(err)
		}
		mm, err := load(dir, func(c *model.Config) { c.Text.BidirectionalImage = false })
		if err != nil {
			t.Fatal(err)
		}
		for ci, c := range sw.Cases {
			if !extra.Models[mi].Results[ci].CausalSpanDiffers {
				continue
			}
			want++
			r := m.Results[ci]
			tokens, first := greedy(t, mm, c.InputIDs, pixels[c.Image], len(r.Tokens))
			worst := 0.0
			for i, id := range r.LogitIDs {
				worst = math.Max(worst, math.Abs(float64(first[id])-float64(r.LogitValues[i])))
			}
			if !slices.Equal(tokens, r.Tokens) || worst > fixture.SweepLogitTol {
				caught++
			} else {
				t.Errorf("%s/%s: a causal image block gives the reference's tokens and logits", m.Name, c.Name)
			}
		}
		mm.Close()
	}
	if want < 8 {
		t.Fatalf("only %d sweep cases where a causal image split changes the reference", want)
	}
	t.Logf("a causal image block fails %d of %d cases", caught, want)
}

// greedy prefills the prompt and decodes n tokens, returning them and the first step's logits.
func greedy(t *testing.T, m model.Model, ids []int32, img model.Image, n int) ([]int32, []float32) {
	t.Helper()
	ctx := context.Background()
	emb, err := m.EncodeVision(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	pos, err := model.PromptPositions(m.Config(), ids, []model.Grid{img.Grid})
	if err != nil {
		t.Fatal(err)
	}
	seq, err := m.NewSequence(len(ids) + n)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	logits, err := m.Prefill(ctx, seq, model.Prompt{IDs: ids, Positions: pos, Images: []*model.Embeddings{emb}})
	if err != nil {
		t.Fatal(err)
	}
	first := slices.Clone(logits)
	var out []int32
	tok := ml.Argmax(logits)
	for {
		out = append(out, tok)
		if len(out) == n {
			return out, first
		}
		at := int32(len(ids) + len(out) - 1 + pos.Delta)
		if logits, err = m.DecodeStep(ctx, seq, tok, at); err != nil {
			t.Fatal(err)
		}
		tok = ml.Argmax(logits)
	}
}

// TestBatchEqualsSingle: a batch of mixed sequences (joining while others decode, prompts
// prefilled in chunks that keep each image's bidirectional block whole, leaving at different
// steps), and the Scheduler's passes, give exactly the greedy tokens each gives alone, on the
// CPU backend, for two sweep checkpoints (GQA 1 and 4, two and three layers).
func TestBatchEqualsSingle(t *testing.T) {
	sw, err := fixture.LoadSweepFile(fixture.SweepPathFor(lance.ModelType))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range sw.Models {
		if m.Name != "g3-h60" && m.Name != "g4-h24" {
			continue
		}
		t.Run(m.Name, func(t *testing.T) {
			dir := t.TempDir()
			if err := fixture.WriteSeeded(dir, m); err != nil {
				t.Fatal(err)
			}
			mm, err := load(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer mm.Close()
			reqs, err := fixture.SweepRequests(sw, mm.Config())
			if err != nil {
				t.Fatal(err)
			}
			fixture.CheckBatchEqualsSingle(t, mm, reqs)
		})
	}
}

// TestChunkCuttingBlockRefused: a prefill chunk that ends inside an image's bidirectional block
// (after <|vision_start|>, or before <|vision_end|>) is refused, since its rows would need keys
// the pass does not write; the chunk that ends right after the block is taken.
func TestChunkCuttingBlockRefused(t *testing.T) {
	sw, dir := firstModel(t)
	m, err := load(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cfg := m.Config()
	img := engineImage(t, sw, sw.Images[0])
	grid := img.Grid
	ctx := context.Background()
	emb, err := m.EncodeVision(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	ids := sw.Cases[0].InputIDs
	pos, err := model.PromptPositions(cfg, ids, []model.Grid{grid})
	if err != nil {
		t.Fatal(err)
	}
	first := slices.Index(ids, cfg.ImageTokenID)
	last := first + emb.Tokens - 1
	for _, tc := range []struct {
		name string
		end  int
		ok   bool
	}{
		{"after <|vision_start|>", first, false},
		{"before <|vision_end|>", last + 1, false},
		{"after <|vision_end|>", last + 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seq, err := m.NewSequence(len(ids))
			if err != nil {
				t.Fatal(err)
			}
			defer seq.Close()
			rows := min(tc.end, last+1) - first // the placeholders in the chunk
			in := model.Input{Seq: seq, IDs: ids[:tc.end], Images: []*model.Embeddings{{Tokens: rows,
				Dim: emb.Dim, Data: emb.Data[:rows*emb.Dim]}},
				Positions: model.Positions{T: pos.T[:tc.end], H: pos.H[:tc.end], W: pos.W[:tc.end]}}
			if tc.end == first {
				in.Images = nil
			}
			_, err = m.Forward(ctx, []model.Input{in})
			if tc.ok != (err == nil) || !tc.ok && !errors.Is(err, ml.ErrInvalidInput) {
				t.Errorf("a chunk of %d tokens (placeholders %d to %d): %v", tc.end, first, last, err)
			}
		})
	}
}

// TestPromptHeads: prompts whose head was kept (the system and user turns' tokens before
// <|vision_start|>: the block's first token is not part of it, its keys depend on the image)
// copy its KV rows and give exactly the tokens of a model that keeps no head.
func TestPromptHeads(t *testing.T) {
	sw, dir := firstModel(t)
	ctx := context.Background()
	none, err := loadWith(dir, nil, lance.Options{Heads: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer none.Close()
	m, err := load(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	reqs, err := fixture.SweepRequests(sw, m.Config())
	if err != nil {
		t.Fatal(err)
	}
	reqs = append(reqs, reqs...) // every head seen twice before the second round's prompts
	want, err := fixture.Alone(ctx, none, reqs)
	if err != nil {
		t.Fatal(err)
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
	if kept, hits := m.PromptHeads(); kept == 0 || hits == 0 {
		t.Fatalf("%d heads kept, %d prompts copied one", kept, hits)
	}
}
