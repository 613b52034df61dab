package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

func post(t *testing.T, h http.Handler, contentType string, body []byte, gz bool) *httptest.ResponseRecorder {
	t.Helper()
	if gz {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(body)
		_ = zw.Close()
		body = b.Bytes()
	}
	req := httptest.NewRequest(http.MethodPost, TracesPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	if gz {
		req.Header.Set("Content-Encoding", "gzip")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func wantBreakdown(t *testing.T, r *Receiver) {
	t.Helper()
	b, ok := r.Lookup("req-7")
	if !ok {
		t.Fatal("req-7 not joined")
	}
	want := Breakdown{ServerNS: 82_000_000, TaskNS: 80_000_000, ImageTokens: 64,
		Stages: map[string]int64{"vision": 30_000_000, "decode": 39_000_000}}
	if b.ServerNS != want.ServerNS || b.TaskNS != want.TaskNS || b.ImageTokens != want.ImageTokens || len(b.Stages) != 2 ||
		b.Stages["vision"] != want.Stages["vision"] || b.Stages["decode"] != want.Stages["decode"] {
		t.Errorf("breakdown %+v, want %+v", b, want)
	}
	if _, ok := r.Lookup("req-8"); ok {
		t.Error("an unknown request joined")
	}
}

func TestReceiveJSON(t *testing.T) {
	body, err := os.ReadFile("testdata/export.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, gz := range []bool{false, true} {
		r := NewReceiver()
		w := post(t, r, "application/json; charset=utf-8", body, gz)
		if w.Code != http.StatusOK || w.Body.String() != "{}" || w.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("gzip=%v: %d %q", gz, w.Code, w.Body.String())
		}
		if n := len(r.Spans()); n != 5 {
			t.Fatalf("gzip=%v: %d spans", gz, n)
		}
		wantBreakdown(t, r)
		for _, s := range r.Spans() {
			if s.Name == SpanGenerate && (s.Attrs["iris.ok"] != true || s.Attrs["iris.ratio"] != 0.5) {
				t.Errorf("attributes %v", s.Attrs)
			}
		}
	}
}

// TestReceiveProtobuf round-trips the JSON fixture through the protobuf encoding.
func TestReceiveProtobuf(t *testing.T) {
	body, err := os.ReadFile("testdata/export.json")
	if err != nil {
		t.Fatal(err)
	}
	spans, err := DecodeJSON(body)
	if err != nil {
		t.Fatal(err)
	}
	pb := toProto(t, spans)
	r := NewReceiver()
	w := post(t, r, "application/x-protobuf", pb, false)
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/x-protobuf" {
		t.Fatalf("%d %q", w.Code, w.Body.String())
	}
	var resp coltracepb.ExportTraceServiceResponse
	if err := proto.Unmarshal(w.Body.Bytes(), &resp); err != nil {
		t.Fatalf("response is not an ExportTraceServiceResponse: %v", err)
	}
	wantBreakdown(t, r)
}

func TestReceiveRefuses(t *testing.T) {
	r := NewReceiver()
	tests := []struct {
		name, ct string
		body     []byte
		want     int
	}{
		{"text", "text/plain", []byte("x"), http.StatusUnsupportedMediaType},
		{"bad json", "application/json", []byte("{"), http.StatusBadRequest},
		{"bad kind", "application/json", []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"x","kind":"SPAN_KIND_NOPE"}]}]}]}`), http.StatusBadRequest},
		{"bad time", "application/json", []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"x","startTimeUnixNano":"soon"}]}]}]}`), http.StatusBadRequest},
		{"bad protobuf", "application/x-protobuf", []byte{0xff, 0xff, 0xff}, http.StatusBadRequest},
	}
	for _, tt := range tests {
		if w := post(t, r, tt.ct, tt.body, false); w.Code != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, w.Code, tt.want)
		}
	}
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, TracesPath, nil))
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", w.Code)
	}
	if len(r.Spans()) != 0 {
		t.Error("refused requests stored spans")
	}
}

// TestSDKExporter sends real SDK spans over HTTP to a listening receiver, then waits for them.
func TestSDKExporter(t *testing.T) {
	srv, err := Listen(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Close(context.Background()) }()
	for _, enc := range []otlptracehttp.Encoding{otlptracehttp.EncodingProtobuf, otlptracehttp.EncodingJSON} {
		exp, err := otlptracehttp.New(t.Context(), otlptracehttp.WithEndpoint(srv.Addr), otlptracehttp.WithInsecure(),
			otlptracehttp.WithEncoding(enc), otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
		if err != nil {
			t.Fatal(err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(10*time.Millisecond)))
		id := "sdk-" + string(rune('0'+enc))
		ctx, gen := tp.Tracer("t").Start(t.Context(), SpanGenerate)
		gen.SetAttributes(attribute.String(AttrRequestID, id))
		_, st := tp.Tracer("t").Start(ctx, "iris.prefill")
		st.End()
		gen.End()
		wctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		n := srv.WaitFor(wctx, []string{id}, 50*time.Millisecond)
		cancel()
		if n != 1 {
			t.Fatalf("encoding %d: found %d of 1", enc, n)
		}
		if b, _ := srv.Lookup(id); b.Stages["prefill"] <= 0 {
			t.Errorf("encoding %d: breakdown %+v", enc, b)
		}
		_ = tp.Shutdown(t.Context())
	}
}

func TestWaitForGivesUp(t *testing.T) {
	r := NewReceiver()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel()
	if n := r.WaitFor(ctx, []string{"missing"}, time.Millisecond); n != 0 {
		t.Errorf("found %d", n)
	}
}
