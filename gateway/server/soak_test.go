package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iris-vlm/iris/core"
	"github.com/iris-vlm/iris/core/coretest"
	"github.com/iris-vlm/iris/gateway/config"
	"github.com/iris-vlm/iris/gateway/openai"
	"github.com/iris-vlm/iris/gateway/server"
)

// Soak sizes. Without -race the soak runs soakCI requests, the full count (~15 s on 2
// cores); under -race (as `just test` runs it, ~6x slower) soakCIRace, to stay well inside CI's
// budget. IRIS_SOAK=2000 runs the full count under -race by hand; -short skips the soak.
// IRIS_SOAK_HEAPPROFILE=file writes a heap profile after the run (go tool pprof -sample_index=inuse_space).
const (
	soakCI       = 2000
	soakConc     = 64
	soakWarmFrac = 5 // the first 1/soakWarmFrac of the requests warm up before RSS is read
	// soakRSSSlack is the absolute slack of the RSS check beside its 10%: the Go runtime keeps
	// whole heap arenas and span caches it does not hand back at once, the race detector's
	// shadow memory grows with the heap addresses it has seen, and thread stacks of the 64
	// client and handler goroutines come and go, each a few MiB that are not a leak. Under -race
	// soakRaceRSSSlack is added for the detector's own memory.
	soakRSSSlack = 16 << 20
)

// soakKind is one sort of request of the soak.
type soakKind int

const (
	soakGood   soakKind = iota // answered 200, equal to the same request alone
	soakBad                    // refused with the 4xx it gets alone
	soakCancel                 // the client gives up mid-request
)

// soakReq is one distinct request: its body and what it gets alone.
type soakReq struct {
	name   string
	kind   soakKind
	stream bool
	body   string
	// status and answer are what the request got alone (the first pass).
	status int
	answer string
}

func soakCount(t *testing.T) int {
	if s := os.Getenv("IRIS_SOAK"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("IRIS_SOAK=%q: want a positive count", s)
		}
		return n
	}
	if testing.Short() {
		t.Skip("soak skipped in -short mode")
	}
	if raceEnabled {
		return soakCIRace
	}
	return soakCI
}

// TestSoak sends mixed requests at c=64 to the real gateway over the real runtime with both
// fixture families loaded: streamed and plain, ~10% bad inputs, ~10% client cancellations. No
// 5xx anywhere, every good answer equals the same request's answer alone, bad inputs get their
// 4xx, the KV pools are back to zero blocks in use, and RSS after the run is within 10% (plus
// soakRSSSlack) of RSS after the warm-up part (under -race: of RSS halfway through).
func TestSoak(t *testing.T) {
	n := soakCount(t)
	reg := prometheus.NewRegistry()
	logger := slog.New(slog.DiscardHandler)
	models := []string{"tiny-untied", coretest.Qwen3}
	rc := config.Default().Runtime
	rc.Bundles = nil
	for _, m := range models {
		rc.Bundles = append(rc.Bundles, coretest.Bundle(t, m, 1024))
	}
	rt, err := core.Open(t.Context(), rc.Core(), core.WithRegisterer(reg), core.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	if err := rt.Warmup(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(config.Default().Server, server.Deps{Backend: rt, Registry: reg, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	var statuses statusCounts
	ts := httptest.NewServer(statuses.wrap(srv.Handler()))
	t.Cleanup(ts.Close)
	client := ts.Client()
	client.Transport.(*http.Transport).MaxIdleConnsPerHost = soakConc

	reqs := soakRequests(t, models)
	// First pass: each distinct request alone.
	for _, r := range reqs {
		if r.kind == soakCancel {
			continue
		}
		st, ans, err := soakDo(context.Background(), client, ts.URL, r, nil)
		if err != nil {
			t.Fatalf("%s alone: %v", r.name, err)
		}
		r.status, r.answer = st, ans
		switch {
		case r.kind == soakGood && st != http.StatusOK:
			t.Fatalf("%s alone: status %d: %s", r.name, st, ans)
		case r.kind == soakBad && (st < 400 || st >= 500 || st == http.StatusTooManyRequests):
			t.Fatalf("%s alone: status %d, want a 4xx refusal: %s", r.name, st, ans)
		}
	}

	// The mix: a seeded schedule, so a failure replays.
	rng := rand.New(rand.NewPCG(14, uint64(n)))
	var good, bad, cancel []*soakReq
	for _, r := range reqs {
		switch r.kind {
		case soakGood:
			good = append(good, r)
		case soakBad:
			bad = append(bad, r)
		default:
			cancel = append(cancel, r)
		}
	}
	sched := make([]*soakReq, n)
	for i := range sched {
		switch rng.IntN(10) {
		case 0:
			sched[i] = bad[rng.IntN(len(bad))]
		case 1:
			sched[i] = cancel[rng.IntN(len(cancel))]
		default:
			sched[i] = good[rng.IntN(len(good))]
		}
	}
	cancelAfter := make([]time.Duration, n) // for plain cancellations: 0..20 ms after sending
	for i := range cancelAfter {
		cancelAfter[i] = time.Duration(rng.IntN(20_000)) * time.Microsecond
	}

	var mu sync.Mutex
	var failures []string
	counts := map[string]int{}
	run := func(from, to int) {
		next := atomic.Int64{}
		next.Store(int64(from))
		var wg sync.WaitGroup
		for range soakConc {
			wg.Go(func() {
				for {
					i := int(next.Add(1) - 1)
					if i >= to {
						return
					}
					r := sched[i]
					msg, outcome := soakOne(client, ts.URL, r, cancelAfter[i])
					mu.Lock()
					counts[outcome]++
					if msg != "" && len(failures) < 20 {
						failures = append(failures, fmt.Sprintf("request %d (%s): %s", i, r.name, msg))
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}

	start := time.Now()
	warm := n / soakWarmFrac
	run(0, warm)
	waitIdle(t, rt)
	rssWarm, haveRSS := settledRSS()
	mid := warm + (n-warm)/2
	run(warm, mid)
	waitIdle(t, rt)
	rssMid, _ := settledRSS()
	run(mid, n)
	took := time.Since(start)
	waitIdle(t, rt)
	rssEnd, _ := settledRSS()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("Go heap after the run: %d MiB live (HeapAlloc), %d MiB in spans (HeapInuse), %d MiB from the OS (HeapSys-HeapReleased); stacks %d MiB; total Go Sys %d MiB",
		ms.HeapAlloc>>20, ms.HeapInuse>>20, (ms.HeapSys-ms.HeapReleased)>>20, ms.StackSys>>20, ms.Sys>>20)
	if p := os.Getenv("IRIS_SOAK_HEAPPROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}

	t.Logf("%d requests at c=%d in %v (%.1f/s); outcomes %v; server statuses %v", n, soakConc, took.Round(time.Millisecond), float64(n)/took.Seconds(), counts, statuses.snapshot())
	for _, f := range failures {
		t.Error(f)
	}
	for st, k := range statuses.snapshot() {
		if st >= 500 {
			t.Errorf("the server answered %d %d time(s); want no 5xx", k, st)
		}
		if st == http.StatusTooManyRequests {
			t.Errorf("the server answered 429 %d time(s) at c=%d with a queue of %d a model", k, soakConc, core.DefaultQueueDepth)
		}
	}
	if haveRSS {
		// Without -race RSS after the run is within 10% (+ slack) of RSS after the warm-up. Under
		// -race the detector's shadow memory follows the highest heap the run reaches, which 64
		// requests batched at once push past the warm-up's (+209 MiB over 400 requests, with a
		// flat Go heap), so there the second half of the run is held to the first's end: a leak
		// keeps growing, a high-water mark does not.
		base, what := rssWarm, "after warm-up"
		if raceEnabled {
			base, what = rssMid, "halfway through the run"
		}
		limit := base + base/10 + soakRSSSlack + soakRaceRSSSlack
		t.Logf("RSS after warm-up %d MiB, halfway %d MiB, after the run %d MiB (limit %d MiB: %s +10%%)", rssWarm>>20, rssMid>>20, rssEnd>>20, limit>>20, what)
		if rssEnd > limit {
			t.Errorf("RSS grew from %d MiB %s to %d MiB after the run; want at most %d MiB (+10%% +%d MiB)", base>>20, what, rssEnd>>20, limit>>20, (soakRSSSlack+soakRaceRSSSlack)>>20)
		}
	}
}

// soakRequests builds the distinct requests: for each model and case, plain and streamed good
// requests at two answer lengths, bad inputs of several sorts, and cancellations.
func soakRequests(t *testing.T, models []string) []*soakReq {
	var out []*soakReq
	add := func(name string, kind soakKind, stream bool, body string) {
		out = append(out, &soakReq{name: name, kind: kind, stream: stream, body: body})
	}
	streamOpts := map[string]any{"stream": true, "stream_options": map[string]bool{"include_usage": true}}
	merge := func(a, b map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range a {
			m[k] = v
		}
		for k, v := range b {
			m[k] = v
		}
		return m
	}
	for _, model := range models {
		cases := coretest.Cases(t, model)
		for _, c := range cases {
			for _, stream := range []bool{false, true} {
				var extra map[string]any
				mode := "plain"
				if stream {
					extra, mode = streamOpts, "stream"
				}
				add(fmt.Sprintf("%s/%s/%s", model, c.Name, mode), soakGood, stream, e2eBody(model, c, extra))
				add(fmt.Sprintf("%s/%s/%s/short", model, c.Name, mode), soakGood, stream, e2eBody(model, c, merge(extra, map[string]any{"max_tokens": 2})))
				add(fmt.Sprintf("%s/%s/%s/cancel", model, c.Name, mode), soakCancel, stream, e2eBody(model, c, merge(extra, map[string]any{"max_tokens": 64})))
			}
		}
		c := cases[0]
		img := imagePart(dataURL("image/png", c.Image))
		bads := []struct{ name, body string }{
			{"corrupt image", chat(model, []any{imagePart(dataURL("image/png", c.Image[:len(c.Image)/2])), textPart(c.Question)}, nil)},
			{"not an image", chat(model, []any{imagePart(dataURL("image/png", []byte("definitely not a PNG"))), textPart(c.Question)}, nil)},
			{"two images", chat(model, []any{img, img, textPart(c.Question)}, nil)},
			{"over-long prompt", chat(model, []any{img, textPart(strings.Repeat("Describe every pixel of the image. ", 400))}, nil)},
			{"over-long answer", e2eBody(model, c, map[string]any{"max_tokens": 100000})},
			{"bad json", `{"model":"` + model + `","messages":[`},
			{"unknown model", e2eBody(model+"-nope", c, nil)},
			{"bad temperature", e2eBody(model, c, map[string]any{"temperature": -1})},
			{"streamed corrupt image", chat(model, []any{imagePart(dataURL("image/png", c.Image[:len(c.Image)/2])), textPart(c.Question)}, streamOpts)},
		}
		for _, b := range bads {
			add(model+"/bad/"+b.name, soakBad, false, b.body)
		}
	}
	return out
}

// soakOne sends one request of the mix and checks it; it returns a failure message ("" when
// it passed) and the outcome counted in the log.
func soakOne(client *http.Client, url string, r *soakReq, cancelAfter time.Duration) (string, string) {
	switch r.kind {
	case soakCancel:
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var onChunk func()
		if r.stream {
			onChunk = cancel // give up after the first event
		} else {
			time.AfterFunc(cancelAfter, cancel)
		}
		st, body, err := soakDo(ctx, client, url, r, onChunk)
		switch {
		case err != nil:
			return "", "canceled"
		case st >= 500:
			return fmt.Sprintf("status %d: %s", st, body), "5xx"
		default:
			return "", "cancel-too-late-" + strconv.Itoa(st)
		}
	default:
		st, ans, err := soakDo(context.Background(), client, url, r, nil)
		switch {
		case err != nil:
			return err.Error(), "error"
		case st != r.status:
			return fmt.Sprintf("status %d, alone %d: %s", st, r.status, ans), strconv.Itoa(st)
		case r.kind == soakGood && ans != r.answer:
			return fmt.Sprintf("answer %q, alone %q", ans, r.answer), "wrong"
		}
		return "", strconv.Itoa(st)
	}
}

// soakDo sends r and returns the status and the answer: the message content of a 200, the
// concatenated deltas of a 200 stream (an error event is an error), the body otherwise.
// onChunk, if set, runs after the first streamed event.
func soakDo(ctx context.Context, client *http.Client, url string, r *soakReq, onChunk func()) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url+chatPath, strings.NewReader(r.body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw), err
	}
	if !r.stream {
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, "", err
		}
		var cc openai.ChatCompletion
		if err := json.Unmarshal(raw, &cc); err != nil {
			return 0, "", fmt.Errorf("decode %q: %w", raw, err)
		}
		if len(cc.Choices) != 1 {
			return 0, "", fmt.Errorf("no answer in %s", raw)
		}
		return resp.StatusCode, cc.Choices[0].Message.Content, nil
	}
	var text strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	done := false
	for sc.Scan() {
		line := sc.Bytes()
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			if bytes.HasPrefix(line, []byte("event: error")) {
				return 0, "", fmt.Errorf("error event in the stream")
			}
			continue
		}
		if onChunk != nil {
			onChunk()
			onChunk = nil
		}
		if string(data) == "[DONE]" {
			done = true
			continue
		}
		var chunk openai.ChatCompletionChunk
		if err := json.Unmarshal(data, &chunk); err != nil {
			return 0, "", fmt.Errorf("chunk %q: %w", data, err)
		}
		for _, ch := range chunk.Choices {
			if ch.Delta.Content != nil {
				text.WriteString(*ch.Delta.Content)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return 0, "", err
	}
	if !done {
		return 0, "", fmt.Errorf("stream ended without [DONE] after %q", text.String())
	}
	return resp.StatusCode, text.String(), nil
}

// waitIdle waits until no request is inside any model and every KV pool is back to zero
// blocks in use (a cancelled request frees its blocks at its next step, after its client is
// gone), and fails the test if that takes over 10 s.
func waitIdle(t *testing.T, rt *core.Runtime) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		busy := ""
		for _, s := range rt.Stats() {
			if s.Inside != 0 || s.Running != 0 || s.Queued != 0 || s.KVUsed != 0 {
				busy += fmt.Sprintf(" %s: inside %d running %d queued %d KV %d/%d blocks;", s.Model, s.Inside, s.Running, s.Queued, s.KVUsed, s.KVTotal)
			}
		}
		if busy == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the last answer the runtime is still busy:%s want every KV pool back to zero blocks in use", busy)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// settledRSS returns the process's resident set after a GC that hands freed memory back to the
// OS (so the figure is what is live plus what the runtime keeps, not garbage awaiting the
// next cycle); false where /proc/self/status is not there (not Linux).
func settledRSS() (int64, bool) {
	// what an idle server does (reclaimHeap): the Go heap and the C heap's free pages back to the OS
	runtime.GC()
	debug.FreeOSMemory()
	core.TrimNativeHeap()
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, false
			}
			return kb << 10, true
		}
	}
	return 0, false
}

// statusCounts counts the statuses the server wrote, cancelled requests' included (which the
// client never sees).
type statusCounts struct {
	mu sync.Mutex
	m  map[int]int
}

func (s *statusCounts) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		s.mu.Lock()
		if s.m == nil {
			s.m = map[int]int{}
		}
		s.m[sw.status]++
		s.mu.Unlock()
	})
}

func (s *statusCounts) snapshot() map[int]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int]int, len(s.m))
	for k, v := range s.m {
		out[k] = v
	}
	return out
}

// statusWriter records the first status written; Flush and Unwrap keep streaming working.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
