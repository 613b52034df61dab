package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkChatCompletion is one non-streamed image request through the whole gateway (router,
// middleware, validation, runtime admission and image decoding, JSON response) with the fake
// task: the gateway's own cost per request.
func BenchmarkChatCompletion(b *testing.B) {
	benchChat(b, chat(bundleVL, okParts, nil))
}

// BenchmarkChatStream is the same request streamed: 11 content chunks plus role, finish and
// usage chunks, each JSON-encoded and flushed as an SSE event.
func BenchmarkChatStream(b *testing.B) {
	benchChat(b, chat(bundleVL, okParts, streamOn))
}

func benchChat(b *testing.B, body string) {
	e := newEnv(b)
	h := e.srv.Handler()
	b.ReportAllocs()
	for b.Loop() {
		req, err := http.NewRequestWithContext(b.Context(), "POST", chatPath, strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		resp := serve(h, req)
		if resp.StatusCode != 200 {
			raw, _ := io.ReadAll(resp.Body)
			b.Fatalf("status %d: %s", resp.StatusCode, raw)
		}
	}
}
