package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/iris-vlm/iris/core"
	"github.com/iris-vlm/iris/gateway/config"
	"github.com/iris-vlm/iris/gateway/server"
)

// post sends a chat body without a *testing.T, for use in goroutines.
func post(ctx context.Context, h http.Handler, body, id string) *http.Response {
	req, err := http.NewRequestWithContext(ctx, "POST", chatPath, strings.NewReader(body))
	if err != nil {
		panic(err)
	}
	req.Header.Set("X-Request-ID", id)
	return serve(h, req)
}

func TestBusyGets429WithRetryAfter(t *testing.T) {
	e := newEnv(t) // one worker and one queue slot per model
	hold := chat(bundleSlow, []any{textPart(doHold), imagePart(pngURL)}, nil)
	statuses := make(chan int, 2)
	for i := range 2 {
		go func() { statuses <- post(t.Context(), e.srv.Handler(), hold, "hold-"+strconv.Itoa(i)).StatusCode }()
	}
	waitFor(t, "two admitted requests", func() bool { return e.insideOf(bundleSlow) == 2 })

	resp := e.do(t, "POST", chatPath, hold, nil)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	checkError(t, body, "server_busy", "")
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("Retry-After %q", resp.Header.Get("Retry-After"))
	}
	if !strings.Contains(string(body), `"type":"rate_limit_error"`) {
		t.Errorf("error type: %s", body)
	}
	// Another model is not affected.
	if resp := e.do(t, "POST", chatPath, vl(nil), nil); resp.StatusCode != 200 {
		t.Errorf("another model got %d", resp.StatusCode)
	}
	close(e.rec.release)
	for range 2 {
		if s := <-statuses; s != 200 {
			t.Errorf("a held request finished with %d", s)
		}
	}
}

func TestBodyLimit(t *testing.T) {
	e := newEnv(t, func(c *envConfig) { c.server.MaxBodyBytes = 64 << 10 })
	// A declared length over the cap is refused before the body is read.
	lazy := &countingReader{n: 100 << 10}
	req := httptest.NewRequestWithContext(t.Context(), "POST", chatPath, lazy)
	req.ContentLength = lazy.n
	resp := serve(e.srv.Handler(), req)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("declared length: status %d: %s", resp.StatusCode, body)
	}
	checkError(t, body, "request_too_large", "")
	if lazy.read.Load() != 0 {
		t.Errorf("%d bytes were read of a body refused by its length", lazy.read.Load())
	}
	// A chunked body is cut off at the cap.
	lazy = &countingReader{n: 100 << 10}
	req = httptest.NewRequestWithContext(t.Context(), "POST", chatPath, lazy)
	req.ContentLength = -1
	resp = serve(e.srv.Handler(), req)
	body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked: status %d: %s", resp.StatusCode, body)
	}
	checkError(t, body, "request_too_large", "")
	if got := lazy.read.Load(); got > 65<<10 {
		t.Errorf("read %d bytes past a 64 KiB cap", got)
	}
	// Just under the cap is served.
	small := chat(bundleVL, okParts, map[string]any{"user": strings.Repeat("u", 1000)})
	if resp := e.do(t, "POST", chatPath, small, nil); resp.StatusCode != 200 {
		t.Errorf("a small body got %d", resp.StatusCode)
	}
}

// TestDefaultBodyLimit checks the 32 MiB default with a declared length just over it.
func TestDefaultBodyLimit(t *testing.T) {
	e := newEnv(t)
	lazy := &countingReader{n: 32<<20 + 1}
	req := httptest.NewRequestWithContext(t.Context(), "POST", chatPath, lazy)
	req.ContentLength = lazy.n
	if resp := serve(e.srv.Handler(), req); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

// countingReader yields n spaces and counts what was read.
type countingReader struct {
	n    int64
	read atomic.Int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	left := r.n - r.read.Load()
	if left <= 0 {
		return 0, io.EOF
	}
	k := min(int64(len(p)), left)
	for i := range k {
		p[i] = ' '
	}
	r.read.Add(k)
	return int(k), nil
}

func TestMetrics(t *testing.T) {
	e := newEnv(t)
	for _, b := range []string{vl(nil), `{`, chat(bundleVL, okParts, streamOn)} {
		e.do(t, "POST", chatPath, b, nil)
	}
	resp := e.do(t, "GET", "/metrics", "", nil)
	raw, _ := io.ReadAll(resp.Body)
	text := string(raw)
	for _, want := range []string{
		`iris_http_requests_total{code="ok",method="POST",route="/v1/chat/completions",status="200"} 2`,
		`iris_http_requests_total{code="invalid_json",method="POST",route="/v1/chat/completions",status="400"} 1`,
		`iris_http_request_duration_seconds_count{method="POST",route="/v1/chat/completions"} 3`,
		`iris_http_requests_in_flight 1`,
		`iris_stage_duration_seconds_count{bundle="vl",stage="vision"} 2`,
		`iris_stage_duration_seconds_count{bundle="vl",stage="queue"} 2`,
		`iris_stage_duration_seconds_count{bundle="vl",stage="decode_image"} 2`,
		`iris_tokens_total{bundle="vl",kind="image"} 12`,
		`iris_tokens_total{bundle="vl",kind="completion"} 22`,
		`iris_request_image_tokens_count{bundle="vl"} 2`,
		`iris_time_to_first_token_seconds_count{bundle="vl"} 2`,
		`iris_queue_requests{model="vl"} 0`,
		`iris_queue_capacity{model="vl"} 2`,
		`iris_queue_capacity{model="text"} 2`,
		`iris_requests_queued{model="vl"} 0`,
		`iris_requests_running{model="vl"} 0`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Log(text)
	}
}

func TestAccessLog(t *testing.T) {
	e := newEnv(t)
	const secret = "SECRET-QUESTION-TEXT"
	body := chat(bundleVL, []any{textPart(secret), imagePart(pngURL)}, nil)
	e.do(t, "POST", chatPath, body, http.Header{"X-Request-Id": {"req-log-ok"}, "X-Correlation-Id": {"corr-log"}})
	e.do(t, "POST", chatPath, `{"model":"vl","messages":"`+secret+`"}`, http.Header{"X-Request-Id": {"req-log-bad"}})

	logs := e.logs.String()
	if strings.Contains(logs, secret) || strings.Contains(logs, pngURL[22:60]) {
		t.Fatal("the log holds request payload")
	}
	lines := map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if m["msg"] == "request" {
			lines[m["request_id"].(string)] = m
		}
	}
	ok, bad := lines["req-log-ok"], lines["req-log-bad"]
	if ok == nil || bad == nil {
		t.Fatalf("access lines missing: %v", lines)
	}
	for _, k := range []string{"request_id", "bundle", "status", "dur", "method", "path", "code", "bytes", "client"} {
		if _, has := ok[k]; !has {
			t.Errorf("access line lacks %s: %v", k, ok)
		}
	}
	if ok["bundle"] != bundleVL || ok["status"] != float64(200) || ok["correlation_id"] != "corr-log" || ok["path"] != chatPath {
		t.Errorf("access line %v", ok)
	}
	if bad["status"] != float64(400) || bad["code"] != "invalid_type" {
		t.Errorf("access line %v", bad)
	}
}

func TestTraceContinuesCallersTrace(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	e := newEnv(t, func(c *envConfig) {
		c.deps.TracerProvider = tp
		c.coreOpts = append(c.coreOpts, core.WithTracerProvider(tp))
	})
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	resp := e.do(t, "POST", chatPath, vl(nil), http.Header{
		"Traceparent":  {"00-" + traceID + "-" + parentID + "-01"},
		"X-Request-Id": {"req-trace"},
	})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var srv, gen sdktrace.ReadOnlySpan
	stages := 0
	for _, s := range sr.Ended() {
		switch {
		case s.Name() == "POST /v1/chat/completions":
			srv = s
		case s.Name() == "iris.generate":
			gen = s
		case strings.HasPrefix(s.Name(), "iris."):
			stages++
		}
	}
	if srv == nil || gen == nil {
		t.Fatalf("spans %v", sr.Ended())
	}
	if srv.SpanContext().TraceID().String() != traceID || srv.Parent().SpanID().String() != parentID || srv.SpanKind() != trace.SpanKindServer {
		t.Errorf("server span trace %s parent %s kind %v", srv.SpanContext().TraceID(), srv.Parent().SpanID(), srv.SpanKind())
	}
	if gen.Parent().SpanID() != srv.SpanContext().SpanID() {
		t.Error("the runtime's span is not a child of the request span")
	}
	attrs := map[string]string{}
	for _, a := range srv.Attributes() {
		attrs[string(a.Key)] = a.Value.String()
	}
	if attrs["iris.request_id"] != "req-trace" || attrs["http.response.status_code"] != "200" || attrs["http.route"] != chatPath || attrs["iris.bundle"] != bundleVL {
		t.Errorf("server span attributes %v", attrs)
	}
	if stages < len(fakeStages) {
		t.Errorf("%d stage spans", stages)
	}
}

func TestRunDrainsThenShutsDown(t *testing.T) {
	e := newEnv(t, func(c *envConfig) { c.server.ShutdownTimeout = 10 * time.Second })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- e.srv.Run(ctx, ln) }()

	status := make(chan int, 1)
	go func() {
		resp, err := http.Post("http://"+ln.Addr().String()+chatPath, "application/json",
			strings.NewReader(chat(bundleSlow, []any{textPart(doHold), imagePart(pngURL)}, nil)))
		if err != nil {
			status <- -1
			return
		}
		_ = resp.Body.Close()
		status <- resp.StatusCode
	}()
	<-e.rec.holding
	stop()
	waitFor(t, "readyz to report draining", func() bool {
		return e.do(t, "GET", "/readyz", "", nil).StatusCode == http.StatusServiceUnavailable
	})
	close(e.rec.release)
	if s := <-status; s != 200 {
		t.Errorf("the running request finished with %d", s)
	}
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

func TestRunCutsOffAfterShutdownTimeout(t *testing.T) {
	e := newEnv(t, func(c *envConfig) { c.server.ShutdownTimeout = 50 * time.Millisecond })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- e.srv.Run(ctx, ln) }()
	go func() {
		resp, err := http.Post("http://"+ln.Addr().String()+chatPath, "application/json",
			strings.NewReader(chat(bundleSlow, []any{textPart(doBlock), imagePart(pngURL)}, map[string]any{"stream": true})))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	}()
	<-e.rec.blocking
	stop()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "cut off") {
		t.Errorf("Run: %v", err)
	}
	select {
	case <-e.rec.canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("the cut-off request's context was not canceled")
	}
}

func TestReadyz(t *testing.T) {
	e := newEnv(t)
	if resp := e.do(t, "GET", "/readyz", "", nil); resp.StatusCode != 200 {
		t.Fatalf("ready runtime: %d", resp.StatusCode)
	}
	e.srv.Drain()
	resp := e.do(t, "GET", "/readyz", "", nil)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || !strings.Contains(string(body), "draining") {
		t.Fatalf("draining: %d %s", resp.StatusCode, body)
	}
	// A closed runtime is not ready either.
	e2 := newEnv(t)
	_ = e2.rt.Close()
	if resp := e2.do(t, "GET", "/readyz", "", nil); resp.StatusCode != 503 {
		t.Fatalf("closed runtime: %d", resp.StatusCode)
	}
	if resp := e2.do(t, "GET", "/healthz", "", nil); resp.StatusCode != 200 {
		t.Fatalf("healthz of a closed runtime: %d", resp.StatusCode)
	}
	if resp := e2.do(t, "POST", chatPath, vl(nil), nil); resp.StatusCode != 503 {
		t.Fatalf("chat on a closed runtime: %d", resp.StatusCode)
	}
}

func TestRemoteImages(t *testing.T) {
	var hits atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/cat.png":
			_, _ = w.Write(png64x48)
		case "/big.png":
			_, _ = w.Write(noisyPNG(64, 64))
		case "/redirect":
			http.Redirect(w, r, "/cat.png", http.StatusFound)
		case "/empty":
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(upstream.Close)
	host := strings.TrimPrefix(upstream.URL, "http://")
	remote := config.RemoteImages{AllowHosts: []string{host}, AllowHTTP: true, MaxBytes: 4096, Timeout: 5 * time.Second}
	e := newEnv(t, func(c *envConfig) { c.server.RemoteImages = remote })

	tests := []struct {
		name, url string
		model     string
		status    int
		code      string
	}{
		{"allowed", upstream.URL + "/cat.png", bundleVL, 200, ""},
		{"other host", "http://images.example.com/cat.png", bundleVL, 400, "image_url_not_allowed"},
		{"https on an http-only upstream", "https://" + host + "/cat.png", bundleVL, 400, "image_fetch_failed"},
		{"not found", upstream.URL + "/missing.png", bundleVL, 400, "image_fetch_failed"},
		{"redirect not followed", upstream.URL + "/redirect", bundleVL, 400, "image_fetch_failed"},
		{"over the fetch cap", upstream.URL + "/big.png", bundleVL, 413, "image_too_large"},
		{"empty", upstream.URL + "/empty", bundleVL, 400, "image_empty"},
		{"unknown model fetches nothing", upstream.URL + "/cat.png", "nope", 404, "model_not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := hits.Load()
			resp := e.do(t, "POST", chatPath, chat(tt.model, []any{textPart(question), imagePart(tt.url)}, nil), nil)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if tt.code != "" {
				param := imageParam
				if tt.code == "model_not_found" {
					param = "model"
				}
				checkError(t, body, tt.code, param)
				if strings.Contains(string(body), upstream.URL) {
					t.Errorf("the error quotes the URL: %s", body)
				}
			} else if im := completionOf(t, body).Iris.Image; im.SHA256 != sha(png64x48) {
				t.Errorf("image %+v", im)
			}
			if tt.code == "model_not_found" && hits.Load() != before {
				t.Error("fetched an image for a model that does not exist")
			}
		})
	}

	// https only unless allow_http.
	remote.AllowHTTP = false
	scfg := config.Default().Server
	scfg.RemoteImages = remote
	srv, err := server.New(scfg, server.Deps{Backend: e.rt, Registry: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequestWithContext(t.Context(), "POST", chatPath,
		strings.NewReader(chat(bundleVL, []any{textPart(question), imagePart(upstream.URL + "/cat.png")}, nil)))
	resp := serve(srv.Handler(), req)
	body, _ := io.ReadAll(resp.Body)
	checkError(t, body, "image_url_not_allowed", imageParam)
}

func TestNewRefusesDuplicateRegistration(t *testing.T) {
	e := newEnv(t)
	reg := prometheus.NewRegistry()
	if _, err := server.New(config.Default().Server, server.Deps{Backend: e.rt, Registry: reg}); err != nil {
		t.Fatal(err)
	}
	if _, err := server.New(config.Default().Server, server.Deps{Backend: e.rt, Registry: reg}); err == nil {
		t.Fatal("a second server registered the same collectors")
	}
	if _, err := server.New(config.Default().Server, server.Deps{}); err == nil {
		t.Fatal("New accepted no backend")
	}
}

func TestRequestTimeout(t *testing.T) {
	// Long enough for the stream to start under a loaded race-enabled run.
	e := newEnv(t, func(c *envConfig) { c.server.RequestTimeout = 500 * time.Millisecond })
	resp := e.do(t, "POST", chatPath, chat(bundleSlow, []any{textPart(doBlock), imagePart(pngURL)}, nil), nil)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	checkError(t, body, "timeout", "")

	// After the stream started, the timeout is an error event.
	resp = e.do(t, "POST", chatPath, chat(bundleSlow, []any{textPart(doBlock), imagePart(pngURL)}, map[string]any{"stream": true}), nil)
	body, _ = io.ReadAll(resp.Body)
	events := parseSSE(t, string(body))
	if resp.StatusCode != 200 || len(events) != 3 || events[1].event != "error" || !strings.Contains(events[1].data, `"code":"timeout"`) || events[2].data != "[DONE]" {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
}
