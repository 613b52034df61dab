package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
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

// BenchmarkChatStreamPhoto is the GPU benchmark's request (a 38.7 KB JPEG photo, 3 tokens,
// ignore_eos, usage chunk) with the fake task, served to a recorder: the handler's CPU cost with
// no network. The runtime's JPEG decoding is in it; profile with -cpuprofile and look past
// imageio.
func BenchmarkChatStreamPhoto(b *testing.B) {
	benchChat(b, photoBody(b, bundleVL))
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

// photoBody is the request of gpucheck's http benchmark on the reference photo.
func photoBody(tb testing.TB, model string) string {
	img, err := os.ReadFile("../../scripts/reference/testdata/photo_426x320.jpg")
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := json.Marshal(map[string]any{
		"model": model, "stream": true, "max_tokens": 3, "temperature": 0, "ignore_eos": true,
		"stream_options": map[string]bool{"include_usage": true},
		"messages": []any{map[string]any{"role": "user", "content": []any{
			imagePart(dataURL("image/jpeg", img)), textPart("Describe the picture."),
		}}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return string(raw)
}

// BenchmarkHTTPOutsideStages sends the photo request to the real pipeline (plugin, tokenizer,
// tiny C engine) over loopback TCP, as a client would, and splits each request's latency into
// the server's own stage timings and the rest: parsing, base64, validation, admission, tracing,
// SSE writes and transport. outside-us/op is that rest, the gateway's share of the latency.
func BenchmarkHTTPOutsideStages(b *testing.B) {
	const model = "tiny-untied"
	h := realServer(b, model)
	// handled is how long the last request spent in the handler (middleware included).
	var handled time.Duration
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		h.ServeHTTP(w, r)
		handled = time.Since(t0)
	}))
	defer srv.Close()
	body := []byte(photoBody(b, model))
	client := srv.Client()
	var total, stages time.Duration
	var outside, inHandler []float64
	for b.Loop() {
		t0 := time.Now()
		st := streamOnce(b, client, srv.URL+chatPath, body)
		d := time.Since(t0)
		total += d
		stages += st
		outside = append(outside, float64(d-st)/1e3)
		inHandler = append(inHandler, float64(handled-st)/1e3)
	}
	n := float64(b.N)
	b.ReportMetric(float64(total.Microseconds())/n, "e2e-us/op")
	b.ReportMetric(float64(stages.Microseconds())/n, "stages-us/op")
	b.ReportMetric(median(outside), "outside-p50-us")
	b.ReportMetric(median(inHandler), "handler-outside-p50-us")
}

func median(v []float64) float64 {
	slices.Sort(v)
	return v[len(v)/2]
}

// streamOnce sends one streamed request, reads it to the end and returns the sum of the
// sequential stage timings the finish chunk reports (frame and tokenize run beside pixels).
func streamOnce(tb testing.TB, client *http.Client, url string, body []byte) time.Duration {
	req, err := http.NewRequestWithContext(tb.Context(), "POST", url, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		raw, _ := io.ReadAll(resp.Body)
		tb.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" || !strings.Contains(data, "timings_ms") {
			continue
		}
		var chunk struct {
			Iris struct {
				TimingsMS map[string]float64 `json:"timings_ms"`
			} `json:"iris"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			tb.Fatal(err)
		}
		for k, v := range chunk.Iris.TimingsMS {
			if k != "frame" && k != "tokenize" {
				sum += v
			}
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(sum * 1e6)
}
