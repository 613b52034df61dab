package server_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/iris-vlm/iris/bundles"
	"github.com/iris-vlm/iris/core"
	"github.com/iris-vlm/iris/core/coretest"
	"github.com/iris-vlm/iris/gateway/config"
)

// scrape reads GET /metrics into sample -> value, a sample being `name{labels}` as exposed.
func scrape(t *testing.T, h http.Handler) map[string]float64 {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", "/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp := serve(h, req)
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// TestInferenceGatewayGauges: iris_requests_queued and iris_requests_running follow requests as
// they wait for a worker, run and finish, per model.
func TestInferenceGatewayGauges(t *testing.T) {
	e := newEnv(t, func(c *envConfig) { c.core.Workers, c.core.QueueDepth = 2, 4 })
	hold := chat(bundleSlow, []any{textPart(doHold), imagePart(pngURL)}, nil)
	holdStream := chat(bundleSlow, []any{textPart(doHold), imagePart(pngURL)}, streamOn)
	statuses := make(chan int, 8)
	sent := 0
	add := func(n int) {
		for range n {
			body := hold
			if sent%2 == 1 {
				body = holdStream
			}
			id := "gauge-" + strconv.Itoa(sent)
			sent++
			go func() { statuses <- post(t.Context(), e.srv.Handler(), body, id).StatusCode }()
		}
	}
	release := func(n int) {
		for range n {
			e.rec.release <- struct{}{}
		}
	}
	steps := []struct {
		name            string
		do              func()
		queued, running float64
	}{
		{"idle", func() {}, 0, 0},
		{"one runs", func() { add(1) }, 0, 1},
		{"two run, one waits", func() { add(2) }, 1, 2},
		{"two run, three wait", func() { add(2) }, 3, 2},
		{"one finishes", func() { release(1) }, 2, 2},
		{"three more finish", func() { release(3) }, 0, 1},
		{"all finish", func() { release(1) }, 0, 0},
	}
	for _, st := range steps {
		st.do()
		var m map[string]float64
		ok := func() bool {
			m = scrape(t, e.srv.Handler())
			return m[`iris_requests_queued{model="slow"}`] == st.queued && m[`iris_requests_running{model="slow"}`] == st.running
		}
		waitFor(t, st.name, ok)
		for _, other := range []string{bundleVL, bundleText} {
			for _, g := range []string{"iris_requests_queued", "iris_requests_running"} {
				if v, has := m[g+`{model="`+other+`"}`]; !has || v != 0 {
					t.Errorf("%s: %s{model=%q} = %v (exposed %v), want 0", st.name, g, other, v, has)
				}
			}
		}
	}
	for range sent {
		if s := <-statuses; s != http.StatusOK {
			t.Errorf("a held request finished with %d", s)
		}
	}
}

// pooledVision is the fake vision task with a KV pool whose use the test sets.
type pooledVision struct {
	fakeVision
	used, total atomic.Int64
}

func (p *pooledVision) KVUse() (used, total int) { return int(p.used.Load()), int(p.total.Load()) }

// headedVision is pooledVision keeping prompt heads, whose counts the test sets.
type headedVision struct {
	pooledVision
	kept, hits atomic.Int64
}

func (p *headedVision) PromptHeads() (kept int, hits int64) { return int(p.kept.Load()), p.hits.Load() }

// TestPromptHeadMetrics: iris_prompt_heads and iris_prompt_head_hits_total follow the engine's
// counts for a model that keeps prompt heads, and are absent for one that does not.
func TestPromptHeadMetrics(t *testing.T) {
	var task *headedVision // the last vision bundle's: slow
	e := newEnv(t, func(c *envConfig) {
		c.coreOpts = append(c.coreOpts, core.WithVisionTask(func(context.Context, *bundles.Bundle, *core.TaskEnv) (core.VisionTask, error) {
			task = &headedVision{pooledVision: pooledVision{fakeVision: fakeVision{rec: newRecorder()}}}
			return task, nil
		}))
	})
	for _, tt := range []struct{ kept, hits int64 }{{0, 0}, {1, 0}, {3, 7}, {8, 1200}} {
		task.kept.Store(tt.kept)
		task.hits.Store(tt.hits)
		m := scrape(t, e.srv.Handler())
		if v, has := m[`iris_prompt_heads{model="slow"}`]; !has || v != float64(tt.kept) {
			t.Errorf("iris_prompt_heads = %v (exposed %v), want %d", v, has, tt.kept)
		}
		if v, has := m[`iris_prompt_head_hits_total{model="slow"}`]; !has || v != float64(tt.hits) {
			t.Errorf("iris_prompt_head_hits_total = %v (exposed %v), want %d", v, has, tt.hits)
		}
		for _, name := range []string{"iris_prompt_heads", "iris_prompt_head_hits_total"} {
			if v, has := m[name+`{model="text"}`]; has {
				t.Errorf("the text model keeps no heads, yet %s = %v is exposed", name, v)
			}
		}
	}
}

// TestKVCacheUtilizationGauge: iris_kv_cache_utilization is the pool's fraction of blocks in use
// for a model whose task has a KV pool, and absent for one without.
func TestKVCacheUtilizationGauge(t *testing.T) {
	var pool *pooledVision // the last vision bundle's: slow
	e := newEnv(t, func(c *envConfig) {
		c.coreOpts = append(c.coreOpts, core.WithVisionTask(func(context.Context, *bundles.Bundle, *core.TaskEnv) (core.VisionTask, error) {
			pool = &pooledVision{fakeVision: fakeVision{rec: newRecorder()}}
			return pool, nil
		}))
	})
	tests := []struct {
		used, total int64
		want        float64
		exposed     bool
	}{
		{0, 0, 0, false}, // no pool yet: absent, not 0
		{0, 64, 0, true},
		{16, 64, 0.25, true},
		{64, 64, 1, true},
	}
	for _, tt := range tests {
		pool.used.Store(tt.used)
		pool.total.Store(tt.total)
		m := scrape(t, e.srv.Handler())
		v, has := m[`iris_kv_cache_utilization{model="slow"}`]
		if has != tt.exposed || v != tt.want {
			t.Errorf("%d/%d blocks: utilization %v (exposed %v), want %v (exposed %v)", tt.used, tt.total, v, has, tt.want, tt.exposed)
		}
		if v, has := m[`iris_kv_cache_utilization{model="text"}`]; has {
			t.Errorf("the text model has no pool, yet utilization %v is exposed", v)
		}
	}
}

// TestDefaultQueueTakesC128: with the default configuration, 128 concurrent streamed requests
// to one model are admitted and wait (none gets 429); once the model's capacity (its worker
// and DefaultQueueDepth) is full, the next gets 429 server_busy with Retry-After.
func TestDefaultQueueTakesC128(t *testing.T) {
	e := newEnv(t, func(c *envConfig) {
		rc := config.Default().Runtime
		rc.Bundles = c.core.Bundles
		c.core = rc.Core()
	})
	stop := make(chan struct{})
	defer close(stop)
	go func() { // the fake reports each holder; nobody here needs to know
		for {
			select {
			case <-e.rec.holding:
			case <-stop:
				return
			}
		}
	}()
	var capacity int
	for _, s := range e.rt.Stats() {
		if s.Model == bundleSlow {
			capacity = s.Capacity
		}
	}
	if want := core.DefaultWorkers + core.DefaultQueueDepth; capacity != want || capacity <= 128 {
		t.Fatalf("default capacity %d, want %d (> 128)", capacity, want)
	}
	hold := chat(bundleSlow, []any{textPart(doHold), imagePart(pngURL)}, streamOn)
	statuses := make(chan int, capacity)
	sent := 0
	add := func(n int) {
		for range n {
			id := "c128-" + strconv.Itoa(sent)
			sent++
			go func() { statuses <- post(t.Context(), e.srv.Handler(), hold, id).StatusCode }()
		}
	}
	add(128)
	waitFor(t, "128 admitted requests", func() bool { return e.insideOf(bundleSlow) == 128 })
	select {
	case s := <-statuses:
		t.Fatalf("at c=128 a request finished early with %d", s)
	default:
	}
	m := scrape(t, e.srv.Handler())
	if q, r := m[`iris_requests_queued{model="slow"}`], m[`iris_requests_running{model="slow"}`]; q != 128-core.DefaultWorkers || r != core.DefaultWorkers {
		t.Errorf("at c=128: queued %v running %v, want %d and %d", q, r, 128-core.DefaultWorkers, core.DefaultWorkers)
	}

	add(capacity - 128)
	waitFor(t, "a full queue", func() bool { return e.insideOf(bundleSlow) == capacity })
	resp := e.do(t, "POST", chatPath, hold, nil)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("request %d: status %d: %s", capacity+1, resp.StatusCode, body)
	}
	checkError(t, body, "server_busy", "")
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("Retry-After %q", resp.Header.Get("Retry-After"))
	}
	close(e.rec.release)
	for range capacity {
		if s := <-statuses; s != http.StatusOK {
			t.Errorf("a queued request finished with %d", s)
		}
	}
}

// TestRealModelMetrics: after one image request to the real engine (the tiny model), its KV
// pool is exposed and empty again, nothing is left queued or running, and the scheduler's
// counters show its passes, its image, and time in the vision, prefill and decode phases.
func TestRealModelMetrics(t *testing.T) {
	const model = "tiny-untied"
	h := realServer(t, model)
	c := coretest.Cases(t, model)[0]
	if resp, raw := postJSON(t, h, e2eBody(model, c, nil)); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	m := scrape(t, h)
	t.Run("gauges", func(t *testing.T) {
		for _, sample := range []string{"iris_kv_cache_utilization", "iris_requests_queued", "iris_requests_running"} {
			if v, has := m[sample+`{model="`+model+`"}`]; !has || v != 0 {
				t.Errorf("%s = %v (exposed %v), want 0", sample, v, has)
			}
		}
		// the real engine keeps prompt heads: both exposed (their values: TestPromptHeadMetrics)
		for _, sample := range []string{"iris_prompt_heads", "iris_prompt_head_hits_total"} {
			if _, has := m[sample+`{model="`+model+`"}`]; !has {
				t.Errorf("%s not exposed for the real engine", sample)
			}
		}
	})
	t.Run("engine", func(t *testing.T) {
		for _, sample := range []string{
			`iris_engine_passes_total{bundle="tiny-untied"}`,
			`iris_engine_vision_images_total{bundle="tiny-untied"}`,
			`iris_engine_seconds_total{bundle="tiny-untied",phase="vision"}`,
			`iris_engine_seconds_total{bundle="tiny-untied",phase="prefill"}`,
			`iris_engine_seconds_total{bundle="tiny-untied",phase="decode"}`,
			// one request: its passes are batches of one
			`iris_engine_batch_passes_total{batch="1",bundle="tiny-untied",phase="decode"}`,
			`iris_engine_batch_seconds_total{batch="1",bundle="tiny-untied",phase="prefill"}`,
			`iris_engine_batch_passes_total{batch="1",bundle="tiny-untied",phase="vision"}`,
		} {
			if v := m[sample]; v <= 0 {
				t.Errorf("%s = %v, want > 0 (scraped %d samples)", sample, v, len(m))
			}
		}
		if _, has := m[`iris_engine_seconds_total{bundle="tiny-untied",phase="gather"}`]; !has {
			t.Error("no gather phase")
		}
		if v, has := m[`iris_engine_batch_passes_total{batch="2-3",bundle="tiny-untied",phase="decode"}`]; !has || v != 0 {
			t.Errorf("decode passes of 2-3 = %v (exposed %v), want 0 after one request", v, has)
		}
	})
}
