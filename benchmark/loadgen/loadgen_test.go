package loadgen

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iris-vlm/iris/benchmark/aiperf"
)

func TestEndpointURL(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:8080":                 "http://127.0.0.1:8080/v1/chat/completions",
		"http://h:1":                     "http://h:1/v1/chat/completions",
		"http://h:1/":                    "http://h:1/v1/chat/completions",
		"https://h/v1":                   "https://h/v1/chat/completions",
		"http://h:1/custom/path":         "http://h:1/custom/path",
		"http://h:1/v1/chat/completions": "http://h:1/v1/chat/completions",
	} {
		got, err := EndpointURL(in)
		if err != nil || got != want {
			t.Errorf("%s: %s %v, want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"ftp://h/x", "http://", "http://[::1"} {
		if _, err := EndpointURL(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

const body = `{"messages":[{"role":"user","content":[{"type":"text","text":"q"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}],"model":"m","stream":true}`

// sseServer streams "A", "B" in two events split across writes, then usage and [DONE]; the
// request numbered fail gets a 503.
func sseServer(t *testing.T, fail int64, seen *sync.Map) *httptest.Server {
	var n atomic.Int64
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := n.Add(1)
		seen.Store(r.Header.Get("X-Request-ID"), r.Header.Get("Accept")+"|"+r.Header.Get("X-Correlation-ID")+"|"+r.Header.Get("User-Agent"))
		if k == fail {
			http.Error(w, `{"error":"busy"}`, http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		fl := w.(http.Flusher)
		// each piece flushed 2 ms after the last: a stream that takes time, split across reads
		write := func(s string) { _, _ = w.Write([]byte(s)); fl.Flush(); time.Sleep(2 * time.Millisecond) }
		write(`data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n")
		write(`data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"A"}}]}` + "\r\n\r\n")
		write(`data: {"object":"chat.completion.chunk","choi`)
		write(`ces":[{"index":0,"delta":{"content":"B"},"finish_reason":"stop"}]}` + "\n\n: keep-alive\n\n")
		write(`data: {"object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}` + "\n\n")
		write("data: [DONE]\n\n")
	}))
}

func TestRunStreams(t *testing.T) {
	var seen sync.Map
	srv := sseServer(t, 4, &seen)
	defer srv.Close()
	var calls atomic.Int64
	res, err := Run(t.Context(), Config{URL: srv.URL, Concurrency: 2, Warmup: 2, Requests: 5, UserAgent: "ua",
		Progress: func(string, int, int) { calls.Add(1) }},
		[]Item{{Body: []byte(body), Stream: true, SessionID: "a"}, {Body: []byte(body), Stream: true, SessionID: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Exchanges) != 7 || calls.Load() != 7 {
		t.Fatalf("%d exchanges, %d progress calls", len(res.Exchanges), calls.Load())
	}
	phases := map[string]int{}
	sessions := map[string]int{}
	var failed int
	for _, ex := range res.Exchanges {
		md := ex.Raw.Metadata
		phases[md.BenchmarkPhase]++
		sessions[md.ConversationID]++
		h, _ := seen.Load(md.XRequestID)
		if h != "text/event-stream|"+md.XCorrelationID+"|ua" {
			t.Errorf("server saw %v for %s", h, md.XRequestID)
		}
		if ex.Raw.Error != nil {
			failed++
			if ex.Raw.Error.Code != 503 || ex.Raw.Error.Type != "Service Unavailable" || !strings.Contains(ex.Raw.Error.Message, "busy") {
				t.Errorf("error %+v", ex.Raw.Error)
			}
			continue
		}
		if got := ex.Answer.Text(); got != "AB" || ex.Answer.Usage == nil || ex.Answer.Usage.CompletionTokens != 2 || ex.Answer.FinishReason != "stop" {
			t.Errorf("answer %q %+v", got, ex.Answer)
		}
		c := ex.Answer.Contents
		if len(c) != 2 || c[0].PerfNS <= ex.Raw.StartPerfNS || c[1].PerfNS <= c[0].PerfNS {
			t.Errorf("timestamps start %d contents %+v", ex.Raw.StartPerfNS, c)
		}
		if md.RequestEndNS <= md.RequestStartNS || md.RequestAckNS < md.RequestStartNS {
			t.Errorf("metadata times %+v", md)
		}
		if ex.Images != 1 || ex.Transport.BytesSent != int64(len(body)) || ex.Transport.BytesReceived == 0 {
			t.Errorf("transport %+v images %d", ex.Transport, ex.Images)
		}
	}
	if phases[aiperf.PhaseWarmup] != 2 || phases[aiperf.PhaseProfiling] != 5 || failed != 1 {
		t.Errorf("phases %v, %d failed", phases, failed)
	}
	// Seven requests over two rows, in order from warmup on.
	if sessions["a"] != 4 || sessions["b"] != 3 {
		t.Errorf("sessions %v", sessions)
	}
	w := res.Windows[aiperf.PhaseProfiling]
	if w.EndNS <= w.StartNS || res.Windows[aiperf.PhaseWarmup].EndNS > w.StartNS {
		t.Errorf("windows %+v", res.Windows)
	}
}

func TestRunRecordsFailures(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"no content", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":""}}]}`))
		}, "InvalidInferenceResultError"},
		{"wrong object", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"object":"text_completion","choices":[{"index":0,"message":{"content":"x"}}]}`))
		}, "InvalidInferenceResultError"},
		{"sse error", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("event: error\ndata: {\"error\":\"engine died\"}\n\n"))
		}, "SSEResponseError"},
		// a server slower than the 100 ms request timeout: the sleep is the slowness under test
		{"timeout", func(w http.ResponseWriter, r *http.Request) { time.Sleep(300 * time.Millisecond) }, "TimeoutError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			res, err := Run(t.Context(), Config{URL: srv.URL, Concurrency: 1, Requests: 1, Timeout: 100 * time.Millisecond},
				[]Item{{Body: []byte(body), SessionID: "a"}})
			if err != nil {
				t.Fatal(err)
			}
			e := res.Exchanges[0].Raw.Error
			if e == nil || e.Type != tt.want {
				t.Errorf("error %+v, want %s", e, tt.want)
			}
		})
	}
	res, err := Run(t.Context(), Config{URL: "http://127.0.0.1:1", Concurrency: 1, Requests: 1}, []Item{{Body: []byte(body)}})
	if err != nil || res.Exchanges[0].Raw.Error == nil || res.Exchanges[0].Raw.Error.Type != "ClientConnectionError" {
		t.Errorf("connection refused: %v %+v", err, res)
	}
}

func TestRunNonStreaming(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"chat.completion","choices":[{"index":0,"finish_reason":"length","message":{"role":"assistant","content":"Cat"}}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6},"iris":{"image":{"sha256":"ab"},"bundle":{"name":"demo","digest":"cd"}}}`))
	}))
	defer srv.Close()
	res, err := Run(t.Context(), Config{URL: srv.URL, Concurrency: 3, Requests: 2}, []Item{{Body: []byte(body)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range res.Exchanges {
		a := ex.Answer
		if ex.Raw.Error != nil || a.Text() != "Cat" || a.FinishReason != "length" || a.Iris == nil || a.Iris.Image.SHA256 != "ab" ||
			len(ex.Raw.Responses) != 1 || ex.Raw.Responses[0].IsSSE() {
			t.Errorf("exchange %+v", ex)
		}
	}
}

func TestRunRefuses(t *testing.T) {
	if _, err := Run(t.Context(), Config{URL: "u", Concurrency: 1, Requests: 1}, nil); err == nil {
		t.Error("no items accepted")
	}
	if _, err := Run(t.Context(), Config{URL: "u", Concurrency: 0, Requests: 1}, []Item{{}}); err == nil {
		t.Error("zero concurrency accepted")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Run(ctx, Config{URL: "http://127.0.0.1:1", Concurrency: 1, Requests: 3}, []Item{{Body: []byte(body)}}); err == nil {
		t.Error("a canceled run reported success")
	}
}
