package middleware

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	os.Exit(m.Run())
}

func newEngine(mw ...gin.HandlerFunc) *gin.Engine {
	e := gin.New()
	e.Use(mw...)
	return e
}

func get(t *testing.T, h http.Handler, path string, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), "GET", path, nil)
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

var uuidRe = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestRequestID(t *testing.T) {
	e := newEngine(RequestID())
	var seen, seenCorr string
	e.GET("/", func(c *gin.Context) { seen, seenCorr = RequestIDOf(c), CorrelationIDOf(c) })
	tests := []struct {
		name     string
		id, corr string
		wantID   string // "" means a fresh UUID
		wantCorr string
	}{
		{"echoed", "abc-123", "corr-1", "abc-123", "corr-1"},
		{"generated", "", "", "", ""},
		{"space replaced", "a b", "", "", ""},
		{"control replaced", "a\x01b", "", "", ""},
		{"non-ascii replaced", "idé", "", "", ""},
		{"too long replaced", strings.Repeat("x", 129), strings.Repeat("y", 129), "", ""},
		{"longest kept", strings.Repeat("x", 128), "c", strings.Repeat("x", 128), "c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.id != "" {
				h.Set(HeaderRequestID, tt.id)
			}
			if tt.corr != "" {
				h.Set(HeaderCorrelationID, tt.corr)
			}
			w := get(t, e, "/", h)
			got := w.Header().Get(HeaderRequestID)
			if tt.wantID == "" && !uuidRe.MatchString(got) || tt.wantID != "" && got != tt.wantID {
				t.Errorf("request id %q, want %q", got, tt.wantID)
			}
			if seen != got {
				t.Errorf("handler saw %q, header says %q", seen, got)
			}
			if w.Header().Get(HeaderCorrelationID) != tt.wantCorr || seenCorr != tt.wantCorr {
				t.Errorf("correlation id %q (handler %q), want %q", w.Header().Get(HeaderCorrelationID), seenCorr, tt.wantCorr)
			}
		})
	}
	if a, b := newID(), newID(); a == b {
		t.Error("two generated ids are equal")
	}
}

func TestRecovery(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	e := newEngine(RequestID(), Recovery(log))
	e.GET("/panic", func(*gin.Context) { panic("boom at handler") })
	e.GET("/panic-stream", func(c *gin.Context) {
		c.Header("Content-Type", "text/event-stream")
		_, _ = c.Writer.WriteString("data: {}\n\n")
		panic("boom mid-stream")
	})
	e.GET("/abort", func(*gin.Context) { panic(http.ErrAbortHandler) })
	e.GET("/ok", func(c *gin.Context) { c.String(200, "fine") })

	w := get(t, e, "/panic", http.Header{HeaderRequestID: {"req-p"}})
	if w.Code != 500 {
		t.Fatalf("status %d", w.Code)
	}
	var body struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Error["code"] != "internal_error" ||
		body.Error["message"] != "internal error" || body.Error["type"] != "server_error" {
		t.Fatalf("body %s", w.Body)
	}
	if strings.Contains(w.Body.String(), "boom") {
		t.Error("the panic value reached the client")
	}
	if !strings.Contains(logs.String(), `"request_id":"req-p"`) || !strings.Contains(logs.String(), "boom at handler") || !strings.Contains(logs.String(), "goroutine") {
		t.Errorf("log %s", logs.String())
	}
	if w := get(t, e, "/ok", nil); w.Code != 200 {
		t.Fatalf("after a panic: %d", w.Code)
	}

	w = get(t, e, "/panic-stream", nil)
	if !strings.HasSuffix(w.Body.String(), "event: error\ndata: {\"error\":{\"message\":\"internal error\",\"type\":\"server_error\",\"param\":null,\"code\":\"internal_error\"}}\n\ndata: [DONE]\n\n") {
		t.Errorf("mid-stream panic: %q", w.Body.String())
	}

	defer func() {
		if v := recover(); v != http.ErrAbortHandler { //nolint:errorlint // the sentinel itself is re-raised
			t.Errorf("recovered %v, want http.ErrAbortHandler re-raised", v)
		}
	}()
	get(t, e, "/abort", nil)
}

func TestRenderAndErrorType(t *testing.T) {
	tests := []struct {
		err        *HTTPError
		wantType   string
		wantRetry  string
		wantParam  any
		wantStatus int
	}{
		{&HTTPError{Status: 400, Code: "invalid_value", Param: "top_p", Message: "m"}, "invalid_request_error", "", "top_p", 400},
		{&HTTPError{Status: 404, Code: "model_not_found", Message: "m"}, "invalid_request_error", "", nil, 404},
		{&HTTPError{Status: 429, Code: "server_busy", Message: "m", RetryAfter: 1500 * time.Millisecond}, "rate_limit_error", "2", nil, 429},
		{&HTTPError{Status: 503, Code: "shutting_down", Message: "m"}, "service_unavailable_error", "", nil, 503},
		{&HTTPError{Status: 504, Code: "timeout", Message: "m"}, "timeout_error", "", nil, 504},
		{&HTTPError{Status: 500, Code: "internal_error", Message: "m", Err: errors.New("secret detail")}, "server_error", "", nil, 500},
	}
	for _, tt := range tests {
		t.Run(tt.err.Code, func(t *testing.T) {
			e := newEngine()
			e.GET("/", func(c *gin.Context) { Render(c, tt.err) })
			w := get(t, e, "/", nil)
			if w.Code != tt.wantStatus || w.Header().Get("Retry-After") != tt.wantRetry {
				t.Errorf("status %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
			}
			var body struct {
				Error map[string]any `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if body.Error["type"] != tt.wantType || body.Error["param"] != tt.wantParam || body.Error["code"] != tt.err.Code {
				t.Errorf("body %s", w.Body)
			}
			if strings.Contains(w.Body.String(), "secret") {
				t.Error("the cause reached the client")
			}
		})
	}
}

func TestRenderClientClosedSendsNothing(t *testing.T) {
	e := newEngine()
	var code string
	e.GET("/", func(c *gin.Context) {
		Render(c, &HTTPError{Status: StatusClientClosed, Code: "client_closed", Message: "gone"})
		code = ErrorCode(c)
	})
	w := get(t, e, "/", nil)
	if w.Code != StatusClientClosed || w.Body.Len() != 0 || code != "client_closed" {
		t.Fatalf("status %d body %q code %q", w.Code, w.Body, code)
	}
}

func TestBodyLimit(t *testing.T) {
	e := newEngine(BodyLimit(16))
	e.POST("/", func(c *gin.Context) {
		b, err := io.ReadAll(c.Request.Body)
		if IsTooLarge(err) {
			Render(c, TooLarge(16))
			return
		}
		c.String(200, "%d", len(b))
	})
	tests := []struct {
		name   string
		body   string
		length int64
		want   int
	}{
		{"under", "0123456789", 10, 200},
		{"at the cap", "0123456789abcdef", 16, 200},
		{"declared over", "0123456789abcdefg", 17, 413},
		{"chunked over", "0123456789abcdefg", -1, 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequestWithContext(t.Context(), "POST", "/", strings.NewReader(tt.body))
			req.ContentLength = tt.length
			w := httptest.NewRecorder()
			e.ServeHTTP(w, req)
			if w.Code != tt.want {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			if tt.want == 413 && !strings.Contains(w.Body.String(), `"code":"request_too_large"`) {
				t.Errorf("body %s", w.Body)
			}
		})
	}
}

func TestAccessLogKeys(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := newEngine(RequestID(), AccessLog(log, "/probe"))
	e.GET("/ok", func(c *gin.Context) { SetBundle(c, "b1"); c.String(200, "x") })
	e.GET("/bad", func(c *gin.Context) {
		Render(c, &HTTPError{Status: 500, Code: "internal_error", Message: "internal error", Err: errors.New("cause")})
	})
	e.GET("/probe", func(c *gin.Context) { c.String(503, "not yet") })
	get(t, e, "/ok", http.Header{HeaderRequestID: {"r1"}})
	get(t, e, "/bad", http.Header{HeaderRequestID: {"r2"}})
	get(t, e, "/probe", http.Header{HeaderRequestID: {"r3"}})
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("log lines %q", lines)
	}
	var ok, bad, probe map[string]any
	for i, m := range []*map[string]any{&ok, &bad, &probe} {
		if err := json.Unmarshal([]byte(lines[i]), m); err != nil {
			t.Fatal(err)
		}
	}
	if ok["request_id"] != "r1" || ok["bundle"] != "b1" || ok["status"] != float64(200) || ok["level"] != "INFO" || ok["dur"] == nil {
		t.Errorf("ok line %v", ok)
	}
	if bad["status"] != float64(500) || bad["code"] != "internal_error" || bad["level"] != "ERROR" || bad["err"] != "cause" {
		t.Errorf("bad line %v", bad)
	}
	if probe["status"] != float64(503) || probe["level"] != "DEBUG" {
		t.Errorf("probe line %v", probe)
	}
}

func TestTracingContinuesTrace(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	prop := propagation.TraceContext{}
	e := newEngine(RequestID(), Tracing(tp, prop))
	var inHandler trace.SpanContext
	e.GET("/x/:id", func(c *gin.Context) {
		inHandler = trace.SpanContextFromContext(c.Request.Context())
		Render(c, &HTTPError{Status: 503, Code: "shutting_down", Message: "m"})
	})
	get(t, e, "/x/1", http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, HeaderRequestID: {"rt"}})
	spans := sr.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	s := spans[0]
	if s.Name() != "GET /x/:id" || s.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" ||
		s.Parent().SpanID().String() != "00f067aa0ba902b7" || !s.Parent().IsRemote() {
		t.Errorf("span %s trace %s parent %s", s.Name(), s.SpanContext().TraceID(), s.Parent().SpanID())
	}
	if inHandler.SpanID() != s.SpanContext().SpanID() {
		t.Error("the handler's context does not carry the request span")
	}
	if s.Status().Code.String() != "Error" {
		t.Errorf("a 503 span has status %v", s.Status())
	}
	// Without a traceparent a new trace starts.
	get(t, e, "/x/2", nil)
	if s2 := sr.Ended()[1]; s2.Parent().IsValid() {
		t.Error("a request without trace context got a parent")
	}
}

func TestHTTPMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewHTTPMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(m.Handler())
	e.GET("/a", func(c *gin.Context) { c.String(200, "a") })
	e.GET("/b", func(c *gin.Context) { Render(c, &HTTPError{Status: 400, Code: "invalid_json", Message: "m"}) })
	get(t, e, "/a", nil)
	get(t, e, "/b", nil)
	get(t, e, "/nowhere", nil)
	req := httptest.NewRequestWithContext(t.Context(), "BREW", "/a", nil)
	e.ServeHTTP(httptest.NewRecorder(), req)
	got := map[string]float64{}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "iris_http_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got[strings.Join(labels, ",")] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{
		"code=invalid_json,method=GET,route=/b,status=400": 1,
		"code=ok,method=GET,route=/a,status=200":           1,
		"code=ok,method=GET,route=unmatched,status=404":    1,
		"code=ok,method=other,route=unmatched,status=404":  1,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("requests_total %v, want %v", got, want)
	}
	if _, err := NewHTTPMetrics(reg); err == nil {
		t.Error("registered the same collectors twice")
	}
}
