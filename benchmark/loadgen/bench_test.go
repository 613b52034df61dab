package loadgen

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkClientOverhead is the profiler's own cost per streamed request against a server that
// answers at once: what it adds to every measured latency, at concurrency 1.
func BenchmarkClientOverhead(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(`data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"A"}}]}` + "\n\n" +
			`data: {"object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}` + "\n\ndata: [DONE]\n\n"))
	}))
	defer srv.Close()
	items := []Item{{Body: []byte(body), Stream: true}}
	b.ReportAllocs()
	for b.Loop() {
		res, err := Run(b.Context(), Config{URL: srv.URL, Concurrency: 1, Requests: 100}, items)
		if err != nil || len(res.Exchanges) != 100 {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100)/1e3, "µs/request")
}
