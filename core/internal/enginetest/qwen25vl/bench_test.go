package qwen25vl_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/iris-vlm/iris/core/internal/enginetest/fixture"
	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/ml/cpu"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models/qwen25vl"
)

// Benchmarks. Speed is measured here, never asserted by a test. Typical runs (2 threads, as
// docs/perf.md records them):
//
//	go test ./core/internal/models/qwen25vl -run '^$' -bench Tiny -benchtime 20x
//	IRIS_BENCH_DIR=$PWD/.build/bench go test ./core/internal/models/qwen25vl -run '^$' -bench Mid -benchtime 5x -timeout 30m
//
// BenchmarkMid needs the checkpoint `just bench-engine-model` generates (never committed). Both
// benchmarks print the transformers figures `just bench-engine-baseline` recorded in .build/bench
// for the same checkpoint and case, and fail if the greedy tokens differ.

const benchThreads = 2

// stages times the engine stages of one case: vision, prefill, and decode of n tokens.
func stages(b *testing.B, m *qwen25vl.Model, c *fixture.Case, img model.Image, n int) (vision, prefill, decode time.Duration, tokens []int32) {
	ctx := context.Background()
	t0 := time.Now()
	emb, err := m.EncodeVision(ctx, img)
	if err != nil {
		b.Fatal(err)
	}
	t1 := time.Now()
	pos, err := model.PromptPositions(m.Config(), c.InputIDs, []model.Grid{img.Grid})
	if err != nil {
		b.Fatal(err)
	}
	seq, err := m.NewSequence(len(c.InputIDs) + n)
	if err != nil {
		b.Fatal(err)
	}
	defer seq.Close()
	logits, err := m.Prefill(ctx, seq, model.Prompt{IDs: c.InputIDs, Positions: pos, Images: []*model.Embeddings{emb}})
	if err != nil {
		b.Fatal(err)
	}
	t2 := time.Now()
	tok := ml.Argmax(logits)
	tokens = append(tokens, tok)
	for i := 1; i < n; i++ {
		at := len(c.InputIDs) + i - 1
		if logits, err = m.DecodeStep(ctx, seq, tok, int32(at+pos.Delta)); err != nil {
			b.Fatal(err)
		}
		tok = ml.Argmax(logits)
		tokens = append(tokens, tok)
	}
	return t1.Sub(t0), t2.Sub(t1), time.Since(t2), tokens
}

// runStages reports the best of b.N runs per stage: on a shared machine the best run measures
// the code, the others the neighbours. ns/op is the mean of whole runs.
func runStages(b *testing.B, m *qwen25vl.Model, c *fixture.Case, img model.Image, n int) []int32 {
	var vision, prefill, decode time.Duration
	var tokens []int32
	stages(b, m, c, img, 2) // warm-up: page in the mapping, start the threads
	b.ResetTimer()
	for b.Loop() {
		v, p, d, t := stages(b, m, c, img, n)
		if vision == 0 || v < vision {
			vision = v
		}
		if prefill == 0 || p < prefill {
			prefill = p
		}
		if decode == 0 || d < decode {
			decode = d
		}
		tokens = t
	}
	b.ReportMetric(float64(vision.Microseconds())/1e3, "vision-ms")
	b.ReportMetric(float64(prefill.Microseconds())/1e3, "prefill-ms")
	b.ReportMetric(float64(n-1)/decode.Seconds(), "decode-tok/s")
	return tokens
}

// baseline is what scripts/reference/bench_baseline.py measured for transformers.
type baseline struct {
	VisionMS    float64 `json:"vision_ms"`
	PrefillMS   float64 `json:"prefill_ms"`
	DecodeTPS   float64 `json:"decode_tps"`
	GenerateTPS float64 `json:"generate_decode_tps"`
	NewTokens   int     `json:"new_tokens"`
	Tokens      []int32 `json:"tokens"`
	Threads     int     `json:"threads"`
}

func benchDir() string {
	if dir := os.Getenv("IRIS_BENCH_DIR"); dir != "" {
		return dir
	}
	return filepath.Join(fixture.Root(), "..", "..", "..", "..", ".build", "bench")
}

// compare runs the case for the baseline's token count (n without one), checks the greedy tokens
// against it, and logs both sides.
func compare(b *testing.B, m *qwen25vl.Model, c *fixture.Case, img model.Image, name string, n int) {
	var base baseline
	data, err := os.ReadFile(filepath.Join(benchDir(), "baseline-"+name+"-"+c.Name+".json"))
	if err == nil {
		if err := json.Unmarshal(data, &base); err != nil {
			b.Fatal(err)
		}
		n = base.NewTokens
	}
	tokens := runStages(b, m, c, img, n)
	if base.Tokens == nil {
		b.Logf("no transformers baseline for %s/%s (just bench-engine-baseline)", name, c.Name)
		return
	}
	if !slices.Equal(tokens, base.Tokens) {
		b.Errorf("greedy tokens differ from transformers:\n got %v\nwant %v", tokens, base.Tokens)
	}
	b.Logf("transformers (%d threads, best run): vision %.1f ms, prefill %.1f ms, decode %.2f tok/s (generate(): %.2f tok/s)",
		base.Threads, base.VisionMS, base.PrefillMS, base.DecodeTPS, base.GenerateTPS)
}

// BenchmarkTiny times the committed tiny fixture on the windows_448x336 case (192 image tokens).
func BenchmarkTiny(b *testing.B) {
	m := loadFixture(b, "tiny-untied", cpu.Options{Threads: benchThreads})
	c, img := fixture.MustCase(b, "windows_448x336")
	compare(b, m, c, img, "tiny-untied", 24)
}

// BenchmarkMid times a Qwen2.5-0.5B-sized decoder with a small vision tower (generated, never
// committed) against transformers on the same checkpoint and case.
func BenchmarkMid(b *testing.B) {
	dir := benchDir()
	if _, err := os.Stat(filepath.Join(dir, "qwen25vl-mid", "config.json")); err != nil {
		b.Skipf("no benchmark model in %s (just bench-engine-model): %v", dir, err)
	}
	m, err := Load(filepath.Join(dir, "qwen25vl-mid"), cpu.Options{Threads: benchThreads}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	c, err := fixture.LoadCaseFrom(filepath.Join(dir, "cases"), "bench_448x336")
	if err != nil {
		b.Fatal(err)
	}
	img, err := c.EngineImage()
	if err != nil {
		b.Fatal(err)
	}
	compare(b, m, c, img, "qwen25vl-mid", 32)
}
