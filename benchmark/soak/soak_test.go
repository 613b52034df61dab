package soak_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/iris-vlm/iris/benchmark/soak"
	"github.com/iris-vlm/iris/core/coretest"
	"github.com/iris-vlm/iris/gateway/servertest"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	os.Exit(m.Run())
}

// realServer serves model's tiny fixture through the real runtime and gateway.
func realServer(t *testing.T, model string) *httptest.Server {
	t.Helper()
	return servertest.Start(t, coretest.Bundle(t, model, 1024))
}

// TestRealServer soaks the real gateway on the tiny engine: every check passes, every kind is
// sent, and the pause sees the requests before it done.
func TestRealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("soak skipped in -short mode")
	}
	const model = "tiny-untied"
	ts := realServer(t, model)
	cases := coretest.Cases(t, model)
	var images []soak.Image
	for _, c := range cases {
		images = append(images, soak.Image{Name: c.Name, MediaType: http.DetectContentType(c.Image), Data: c.Image})
	}
	reqs := soak.Mix(model, images, cases[0].Question, 10)
	if err := soak.Alone(t.Context(), ts.Client(), ts.URL, reqs); err != nil {
		t.Fatal(err)
	}
	for _, r := range reqs {
		if r.Kind == soak.Bad {
			t.Logf("%s alone: %d", r.Name, r.Status)
		}
	}
	paused := -1
	res, err := soak.Run(t.Context(), soak.Config{
		URL: ts.URL, Client: ts.Client(), Requests: reqs,
		N: 60, Concurrency: 8, Bad: 0.1, Cancel: 0.1, Seed: 14,
		Pauses:  []int{12},
		OnPause: func(_ context.Context, done int) error { paused = done; return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d requests at c=%d in %v: %v; good latency p50 %v p99 %v", res.Requests, res.Concurrency, res.Duration, res.Counts, res.Latency.P50, res.Latency.P99)
	if !res.OK() {
		t.Fatalf("soak failed: %d failures, %d 5xx: %s", res.Failed, res.Status5xx, strings.Join(res.Failures, "; "))
	}
	total := 0
	for _, kind := range []string{"good", "bad", "cancel"} {
		n := 0
		for _, k := range res.Counts[kind] {
			n += k
		}
		if n == 0 {
			t.Errorf("no %s requests in %v", kind, res.Counts)
		}
		total += n
	}
	if total != 60 || res.Latency.N != res.Counts["good"]["ok"] {
		t.Errorf("counted %d requests, %d good latencies; want 60 and %d", total, res.Latency.N, res.Counts["good"]["ok"])
	}
	byImage := 0
	for im, l := range res.LatencyByImage {
		if !slices.ContainsFunc(images, func(x soak.Image) bool { return x.Name == im }) {
			t.Errorf("latency of image %q: not one of the mix's images", im)
		}
		byImage += l.N
	}
	if byImage != res.Latency.N {
		t.Errorf("%d good latencies by image, %d in all", byImage, res.Latency.N)
	}
	if paused != 12 {
		t.Errorf("OnPause saw %d, want 12", paused)
	}
}

// fakeServer answers "yes" to any JSON body (streamed when asked) and 400 to anything else;
// from its call after the first `after`, fault(call) may write another answer instead.
func fakeServer(t *testing.T, after int64, fault func(w http.ResponseWriter, call int64) bool) *httptest.Server {
	var calls atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body struct{ Stream bool }
		if err := json.Unmarshal(raw, &body); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		if n := calls.Add(1); n > after && fault(w, n-after) {
			return
		}
		if body.Stream {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"ye\"}}]}\n\n")
			_, _ = fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"s\"}}]}\n\ndata: [DONE]\n\n")
			return
		}
		_, _ = fmt.Fprint(w, `{"choices":[{"message":{"content":"yes"}}]}`)
	}))
	t.Cleanup(ts.Close)
	return ts
}

// TestFaults: a server that answers 500 once, or another answer once, or breaks a stream
// fails the soak with that reason.
func TestFaults(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(w http.ResponseWriter, call int64) bool
		want  string // in the first failure; "" for a passing run
	}{
		{"none", func(http.ResponseWriter, int64) bool { return false }, ""},
		{"500 once", func(w http.ResponseWriter, call int64) bool {
			if call != 7 {
				return false
			}
			http.Error(w, "boom", http.StatusInternalServerError)
			return true
		}, "status 500, alone 200"},
		{"another answer", func(w http.ResponseWriter, call int64) bool {
			if call != 3 {
				return false
			}
			_, _ = fmt.Fprint(w, `{"choices":[{"message":{"content":"no"}}]}`)
			return true
		}, `answer "no", alone "yes"`},
		{"stream without [DONE]", func(w http.ResponseWriter, call int64) bool {
			if call != 5 {
				return false
			}
			_, _ = fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"ye\"}}]}\n\n")
			return true
		}, "without [DONE]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reqs := []*soak.Request{
				{Name: "plain", Kind: soak.Good, Body: []byte(`{}`)},
				{Name: "stream", Kind: soak.Good, Stream: true, Body: []byte(`{"stream":true}`)},
				{Name: "bad", Kind: soak.Bad, Body: []byte(`{`)},
			}
			ts := fakeServer(t, 2, tc.fault) // the bad input never counts: the first pass is 2 calls
			if err := soak.Alone(t.Context(), ts.Client(), ts.URL, reqs); err != nil {
				t.Fatal(err)
			}
			// one client, so the fault's call number is the request's; both goods are served in turn
			res, err := soak.Run(t.Context(), soak.Config{URL: ts.URL, Client: ts.Client(), Requests: reqs, N: 40, Concurrency: 1, Bad: 0.2, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if !res.OK() {
					t.Fatalf("failed: %v", res.Failures)
				}
				return
			}
			if res.OK() || res.Failed != 1 || len(res.Failures) != 1 || !strings.Contains(res.Failures[0], tc.want) {
				t.Fatalf("failures %d %q (5xx %d); want one with %q", res.Failed, res.Failures, res.Status5xx, tc.want)
			}
		})
	}
}

// TestAloneRefusals: a first pass where a good request is refused, or a bad one answered,
// stops before the soak.
func TestAloneRefusals(t *testing.T) {
	ts := fakeServer(t, 0, func(http.ResponseWriter, int64) bool { return false })
	for _, tc := range []struct {
		name string
		req  *soak.Request
		want string
	}{
		{"good refused", &soak.Request{Name: "g", Kind: soak.Good, Body: []byte(`{`)}, "status 400, want 200"},
		{"bad answered", &soak.Request{Name: "b", Kind: soak.Bad, Body: []byte(`{}`)}, "status 200, want a 4xx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := soak.Alone(t.Context(), ts.Client(), ts.URL, []*soak.Request{tc.req})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Alone: %v, want %q", err, tc.want)
			}
		})
	}
}
