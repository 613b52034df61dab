package core_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iris-vlm/iris/core"
	"github.com/iris-vlm/iris/core/coretest"
	"github.com/iris-vlm/iris/core/internal/model"
)

// caseNamed is one reference case of a fixture model.
func caseNamed(t *testing.T, fixtureName, name string) coretest.Case {
	t.Helper()
	for _, c := range coretest.Cases(t, fixtureName) {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("%s: no case %s", fixtureName, name)
	return coretest.Case{}
}

// hasStage reports whether the timings list stage.
func hasStage(ts core.Timings, stage string) bool {
	return slices.ContainsFunc(ts, func(s core.StageTiming) bool { return s.Stage == stage })
}

// metric reads one sample of the registry: the counter or gauge name with the label value
// (label result for the lookups counter; empty for none).
func metric(t *testing.T, reg *prometheus.Registry, name, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := result == ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					match = true
				}
			}
			if !match {
				continue
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s{result=%q}", name, result)
	return 0
}

// TestEmbeddingCache runs each real tiny model with the cache off and on: a repeated image's
// answer is the uncached answer token for token, its vision stage is absent (vision_cached
// instead) and the counter shows a hit; the same image at another budget (another plan, another
// grid) misses.
func TestEmbeddingCache(t *testing.T) {
	for _, name := range []string{"tiny-untied", coretest.Qwen3} {
		t.Run(name, func(t *testing.T) {
			dir := coretest.Bundle(t, name, 4096)
			c := caseNamed(t, name, "rect_320x240")
			open := func(capBytes int64) (*core.Runtime, *prometheus.Registry) {
				reg := prometheus.NewRegistry()
				rt, err := core.Open(t.Context(), core.Config{Bundles: []string{dir}, EmbeddingCacheBytes: capBytes}, core.WithRegisterer(reg))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = rt.Close() })
				return rt, reg
			}
			ask := func(rt *core.Runtime, p core.Params) *core.Result {
				t.Helper()
				p.MaxTokens, p.IgnoreEOS = 6, true
				res, err := rt.Generate(t.Context(), core.Request{Model: name, Text: c.Question, Image: c.Image, Params: p}, nil)
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			plain, _ := open(0)
			small := core.Params{MaxPixels: 65536} // fewer tokens, at both families' smallest budget
			want, wantSmall := ask(plain, core.Params{}), ask(plain, small)
			if want.Usage.ImageTokens == wantSmall.Usage.ImageTokens {
				t.Fatalf("the small budget gives the same %d image tokens: pick a smaller one", want.Usage.ImageTokens)
			}
			cached, reg := open(core.DefaultEmbeddingCacheBytes)
			for _, step := range []struct {
				name   string
				p      core.Params
				want   *core.Result
				hit    bool
				hits   float64
				misses float64
			}{
				{"first", core.Params{}, want, false, 0, 1},
				{"repeat", core.Params{}, want, true, 1, 1},
				{"another budget", small, wantSmall, false, 1, 2},
				{"its repeat", small, wantSmall, true, 2, 2},
				{"the first again", core.Params{}, want, true, 3, 2},
			} {
				t.Run(step.name, func(t *testing.T) {
					res := ask(cached, step.p)
					if !slices.Equal(res.TokenIDs, step.want.TokenIDs) || res.Usage != step.want.Usage {
						t.Errorf("tokens %v usage %+v, uncached %v %+v", res.TokenIDs, res.Usage, step.want.TokenIDs, step.want.Usage)
					}
					if hasStage(res.Timings, core.StageVision) == step.hit || hasStage(res.Timings, core.StageVisionCached) != step.hit {
						t.Errorf("hit %v, timings %+v", step.hit, res.Timings)
					}
					// the warm-up image is not asked here: lookups are this test's alone
					if h, m := metric(t, reg, "iris_embedding_cache_lookups_total", "hit"), metric(t, reg, "iris_embedding_cache_lookups_total", "miss"); h != step.hits || m != step.misses {
						t.Errorf("lookups: %v hits %v misses, want %v %v", h, m, step.hits, step.misses)
					}
				})
			}
			if hasStage(want.Timings, core.StageVisionCached) || !hasStage(want.Timings, core.StageVision) {
				t.Errorf("cache off: timings %+v", want.Timings)
			}
			if n := metric(t, reg, "iris_embedding_cache_bytes", ""); n <= 0 || n > core.DefaultEmbeddingCacheBytes {
				t.Errorf("cache bytes %v", n)
			}
		})
	}
}

// TestEmbeddingCacheCap streams distinct images through a cache that holds about one of them:
// the bytes never pass the cap, evicted images miss again and still answer as uncached.
func TestEmbeddingCacheCap(t *testing.T) {
	const name = "tiny-untied"
	dir := coretest.Bundle(t, name, 4096)
	var cases []coretest.Case
	for _, c := range coretest.Cases(t, name) {
		if c.PromptTokens < 150 { // the small ones: the test is about counting, not size
			cases = append(cases, c)
		}
	}
	if len(cases) < 3 {
		t.Fatalf("%d cases, want >= 3", len(cases))
	}
	plain, err := core.Open(t.Context(), core.Config{Bundles: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plain.Close() })
	ask := func(rt *core.Runtime, c coretest.Case) *core.Result {
		t.Helper()
		res, err := rt.Generate(t.Context(), core.Request{Model: name, Text: c.Question, Image: c.Image, Params: core.Params{MaxTokens: 3, IgnoreEOS: true}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// the cap: about half the cases' rows (fp32 on the CPU), never less than the largest one's
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	var (
		wants          [][]int32
		total, largest int64
		perToken       = int64(cfg.EmbedDim()) * 4
	)
	for _, c := range cases {
		res := ask(plain, c)
		wants = append(wants, res.TokenIDs)
		n := int64(res.Usage.ImageTokens) * perToken
		total, largest = total+n, max(largest, n)
	}
	capBytes := max(total/2, largest)
	reg := prometheus.NewRegistry()
	rt, err := core.Open(t.Context(), core.Config{Bundles: []string{dir}, EmbeddingCacheBytes: capBytes}, core.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	most := 0.0
	for round := range 2 {
		for i, c := range cases {
			if res := ask(rt, c); !slices.Equal(res.TokenIDs, wants[i]) {
				t.Errorf("round %d %s: tokens %v, uncached %v", round, c.Name, res.TokenIDs, wants[i])
			}
			n := metric(t, reg, "iris_embedding_cache_bytes", "")
			if n > float64(capBytes) {
				t.Fatalf("round %d %s: %v bytes cached, cap %d", round, c.Name, n, capBytes)
			}
			most = max(most, n)
		}
	}
	if most == 0 {
		t.Error("nothing was ever cached: the cap is below every image")
	}
	// the cases cycle through a cache smaller than all of them: LRU keeps none for its next turn
	if h := metric(t, reg, "iris_embedding_cache_lookups_total", "hit"); h != 0 {
		t.Errorf("%v hits in an LRU cycle larger than the cache", h)
	}
}

// TestEmbeddingCacheConcurrent sends one image from several goroutines at once to a model with
// several workers (run with -race): the first ones miss together (one encoding is kept, the
// others free their own rows), later ones borrow the cached rows, and every answer is the
// reference's.
func TestEmbeddingCacheConcurrent(t *testing.T) {
	const name = "tiny-untied"
	dir := coretest.Bundle(t, name, 4096)
	c := caseNamed(t, name, "rect_320x240")
	rt, err := core.Open(t.Context(), core.Config{Bundles: []string{dir}, Workers: 4, EmbeddingCacheBytes: core.DefaultEmbeddingCacheBytes})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := rt.Close(); err != nil {
			t.Error(err)
		}
	}()
	req := core.Request{Model: name, Text: c.Question, Image: c.Image, Params: core.Params{MaxTokens: 4, IgnoreEOS: true}}
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		got [][]int32
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := rt.Generate(t.Context(), req, nil)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			got = append(got, res.TokenIDs)
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, g := range got[1:] {
		if !slices.Equal(g, got[0]) {
			t.Fatalf("concurrent answers differ: %v, %v", g, got[0])
		}
	}
	if len(got) != 8 || !slices.Equal(got[0], c.Tokens[:4]) {
		t.Fatalf("%d answers, first %v; transformers %v", len(got), got[0], c.Tokens[:4])
	}
}
