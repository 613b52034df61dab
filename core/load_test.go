package core_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/iris-vlm/iris/bundles"
	"github.com/iris-vlm/iris/core"
	"github.com/iris-vlm/iris/core/coretest"
	"github.com/iris-vlm/iris/internal/poll"
)

// statsOf returns the stats of one model.
func statsOf(t *testing.T, rt *core.Runtime, model string) core.Stats {
	t.Helper()
	for _, s := range rt.Stats() {
		if s.Model == model {
			return s
		}
	}
	t.Fatalf("no stats for %s", model)
	return core.Stats{}
}

// TestStatsQueuedAndRunning: the counts follow requests as they queue, run, are canceled while
// waiting and finish.
func TestStatsQueuedAndRunning(t *testing.T) {
	block := make(chan struct{})
	f := open(t, core.Config{Bundles: []string{testBundle(t, "vl", bundles.TaskVisionLanguage)}, Workers: 2, QueueDepth: 4}, &echoVision{block: block})
	img := pngBytes(t, 8, 8)
	done := make(chan error, 8)
	var cancels []context.CancelFunc
	add := func(n int) {
		for range n {
			ctx, cancel := context.WithCancel(context.Background())
			cancels = append(cancels, cancel)
			go func() {
				_, err := f.rt.Generate(ctx, core.Request{Model: "vl", Text: "hi", Image: img}, nil)
				done <- err
			}()
		}
	}
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	steps := []struct {
		name                    string
		do                      func()
		queued, running, inside int
	}{
		{"idle", func() {}, 0, 0, 0},
		{"one runs", func() { add(1) }, 0, 1, 1},
		{"two run, one waits", func() { add(2) }, 1, 2, 3},
		{"two wait", func() { add(1) }, 2, 2, 4},
		{"a waiting one is canceled", func() { cancels[len(cancels)-1]() }, 1, 2, 3},
		{"one finishes, a waiting one runs", func() { block <- struct{}{} }, 0, 2, 2},
		{"all finish", func() { block <- struct{}{}; block <- struct{}{} }, 0, 0, 0},
	}
	for _, st := range steps {
		st.do()
		poll.Until(t, 10*time.Second, fmt.Sprintf("%s: queued %d running %d inside %d", st.name, st.queued, st.running, st.inside), func() string {
			s := statsOf(t, f.rt, "vl")
			if s.Queued == st.queued && s.Running == st.running && s.Inside == st.inside {
				return ""
			}
			return fmt.Sprintf("queued %d running %d inside %d", s.Queued, s.Running, s.Inside)
		})
	}
	canceled := 0
	for range 4 {
		if err := <-done; code(err) == "request_canceled" {
			canceled++
		} else if err != nil {
			t.Errorf("a request failed: %v", err)
		}
	}
	if canceled != 1 {
		t.Errorf("%d requests canceled, want 1", canceled)
	}
}

// pooledVision is an echo task whose engine reports a KV pool.
type pooledVision struct {
	echoVision
	used, total int
}

func (p *pooledVision) KVUse() (used, total int) { return p.used, p.total }

// TestStatsKV: a task with a KV pool reports its use; one without reports none.
func TestStatsKV(t *testing.T) {
	tests := []struct {
		name        string
		task        core.VisionTask
		used, total int
	}{
		{"pooled", &pooledVision{used: 3, total: 8}, 3, 8},
		{"empty pool", &pooledVision{used: 0, total: 8}, 0, 8},
		{"no pool", &echoVision{}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt, err := core.Open(t.Context(), core.Config{Bundles: []string{testBundle(t, "vl", bundles.TaskVisionLanguage)}},
				core.WithVisionTask(func(context.Context, *bundles.Bundle, *core.TaskEnv) (core.VisionTask, error) { return tt.task, nil }))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = rt.Close() })
			if s := statsOf(t, rt, "vl"); s.KVUsed != tt.used || s.KVTotal != tt.total {
				t.Fatalf("KV %d/%d, want %d/%d", s.KVUsed, s.KVTotal, tt.used, tt.total)
			}
		})
	}
}

// TestStatsKVRealModel: the default task reports its engine's KV pool: empty at rest, in use
// while a request generates, empty again after it.
func TestStatsKVRealModel(t *testing.T) {
	for _, model := range []string{"tiny-untied", coretest.Qwen3} {
		t.Run(model, func(t *testing.T) {
			rt, err := core.Open(t.Context(), core.Config{Bundles: []string{coretest.Bundle(t, model, 1024)}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = rt.Close() })
			s := statsOf(t, rt, model)
			if s.KVTotal <= 0 || s.KVUsed != 0 {
				t.Fatalf("at rest: KV %d/%d, want 0 of a positive total", s.KVUsed, s.KVTotal)
			}
			c := coretest.Cases(t, model)[0]
			var during []core.Stats
			_, err = rt.Generate(t.Context(), core.Request{Model: model, Text: c.Question, Image: c.Image, Params: core.Params{MaxTokens: 3, IgnoreEOS: true}},
				func(ev core.Event) error {
					if ev.Kind == core.EventDelta {
						during = append(during, statsOf(t, rt, model))
					}
					return nil
				})
			if err != nil {
				t.Fatal(err)
			}
			if len(during) == 0 {
				t.Fatal("no delta")
			}
			for _, d := range during {
				if d.KVUsed <= 0 || d.KVUsed > d.KVTotal || d.KVTotal != s.KVTotal || d.Running != 1 || d.Queued != 0 {
					t.Fatalf("while generating: %+v (total at rest %d)", d, s.KVTotal)
				}
			}
			if after := statsOf(t, rt, model); after.KVUsed != 0 || after.Running != 0 {
				t.Fatalf("after: %+v, want the pool empty and nothing running", after)
			}
		})
	}
}

// TestKVCacheTokens: runtime.kv_cache_tokens sizes the pool (in blocks of 16 tokens); less than
// one context is refused at load.
func TestKVCacheTokens(t *testing.T) {
	dir := coretest.Bundle(t, "tiny-untied", 1024)
	rt, err := core.Open(t.Context(), core.Config{Bundles: []string{dir}, KVCacheTokens: 5000})
	if err != nil {
		t.Fatal(err)
	}
	s := statsOf(t, rt, "tiny-untied")
	_ = rt.Close()
	if s.KVTotal != (5000+15)/16 {
		t.Fatalf("a pool of 5000 tokens has %d blocks, want %d", s.KVTotal, (5000+15)/16)
	}
	if _, err := core.Open(t.Context(), core.Config{Bundles: []string{dir}, KVCacheTokens: 1000}); err == nil || !strings.Contains(err.Error(), "less than one context") {
		t.Fatalf("a pool smaller than the 1024-token context: %v", err)
	}
}
