package telemetry

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/iris-vlm/iris/benchmark/otlp"
)

// clearEnv unsets every variable Setup reads, so that the test machine's environment cannot
// change the result.
func clearEnv(t *testing.T) {
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_EXPORTER_OTLP_HEADERS"} {
		t.Setenv(k, "")
	}
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name     string
		cfg      Config
		env      map[string]string
		exporter string
		encoding string
		wantErr  string
	}{
		{name: "nothing exports by default", exporter: ExporterNone},
		{name: "config none", cfg: Config{Exporter: "none"}, env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, exporter: ExporterNone},
		{name: "config wins over env", cfg: Config{Exporter: "otlp-grpc"}, env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, exporter: ExporterOTLPGRPC},
		{name: "env otlp defaults to http/protobuf", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, exporter: ExporterOTLPHTTP},
		{name: "env endpoint alone enables", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, exporter: ExporterOTLPHTTP},
		{name: "env grpc", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, exporter: ExporterOTLPGRPC},
		{name: "env traces protocol wins", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, exporter: ExporterOTLPHTTP, encoding: "json"},
		{name: "env none", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, exporter: ExporterNone},
		{name: "sdk disabled", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, exporter: ExporterNone},
		{name: "unknown config exporter", cfg: Config{Exporter: "zipkin"}, wantErr: "not none, otlp-http or otlp-grpc"},
		{name: "unknown env exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, wantErr: "not supported"},
		{name: "unknown protocol", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "thrift"}, wantErr: "not grpc"},
		{name: "unknown encoding", cfg: Config{Exporter: "otlp-http", Encoding: "xml"}, wantErr: "not protobuf or json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			exp, enc, err := resolve(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if exp != tt.exporter || enc != tt.encoding {
				t.Errorf("got %s/%q, want %s/%q", exp, enc, tt.exporter, tt.encoding)
			}
		})
	}
}

func TestDefaultExportsNothing(t *testing.T) {
	clearEnv(t)
	tel, err := Setup(t.Context(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	if tel.Enabled() || tel.String() != ExporterNone {
		t.Errorf("default setup exports: %s", tel)
	}
	_, span := tel.TracerProvider().Tracer("t").Start(t.Context(), "x")
	if span.SpanContext().IsValid() {
		t.Error("a no-op provider must not record spans")
	}
	span.End()
	if err := tel.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestOTLPHTTPExport sends spans to the profiler's receiver in both encodings; Shutdown must
// flush them.
func TestOTLPHTTPExport(t *testing.T) {
	for _, enc := range []string{"protobuf", "json"} {
		t.Run(enc, func(t *testing.T) {
			clearEnv(t)
			rcv := otlp.NewReceiver()
			var contentType string
			var mu sync.Mutex
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				contentType = r.Header.Get("Content-Type")
				mu.Unlock()
				if r.URL.Path != otlp.TracesPath {
					http.NotFound(w, r)
					return
				}
				rcv.ServeHTTP(w, r)
			}))
			defer srv.Close()
			tel, err := Setup(t.Context(), Config{Exporter: ExporterOTLPHTTP, Endpoint: srv.URL, Encoding: enc, ServiceName: "iris-test", BatchDelay: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			if !tel.Enabled() || !strings.Contains(tel.String(), srv.URL+"/v1/traces") {
				t.Errorf("setup: %s", tel)
			}
			emit(t, tel)
			if err := tel.Shutdown(t.Context()); err != nil {
				t.Fatal(err)
			}
			checkReceived(t, rcv.Spans())
			want := map[string]string{"protobuf": "application/x-protobuf", "json": "application/json"}[enc]
			if contentType != want {
				t.Errorf("content type %q, want %q", contentType, want)
			}
			if err := tel.Shutdown(t.Context()); err != nil {
				t.Errorf("second shutdown: %v", err)
			}
		})
	}
}

func emit(t *testing.T, tel *Telemetry) {
	t.Helper()
	ctx, parent := tel.TracerProvider().Tracer("t").Start(t.Context(), otlp.SpanGenerate)
	parent.SetAttributes(attribute.String(otlp.AttrRequestID, "req-1"), attribute.Int(otlp.AttrImageTok, 64))
	_, child := tel.TracerProvider().Tracer("t").Start(ctx, "iris.vision")
	child.End()
	parent.End()
}

func checkReceived(t *testing.T, spans []otlp.Span) {
	t.Helper()
	if len(spans) != 2 {
		t.Fatalf("received %d spans, want 2", len(spans))
	}
	rcv := otlp.NewReceiver()
	rcv.Add(spans)
	b, ok := rcv.Lookup("req-1")
	if !ok {
		t.Fatal("request not joined")
	}
	if _, has := b.Stages["vision"]; !has || b.ImageTokens != 64 {
		t.Errorf("breakdown %+v", b)
	}
}

type traceService struct {
	coltracepb.UnimplementedTraceServiceServer
	mu  sync.Mutex
	got []*coltracepb.ExportTraceServiceRequest
}

func (s *traceService) Export(_ context.Context, r *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.mu.Lock()
	s.got = append(s.got, r)
	s.mu.Unlock()
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func TestOTLPGRPCExport(t *testing.T) {
	clearEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	svc := &traceService{}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, svc)
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()
	tel, err := Setup(t.Context(), Config{Exporter: ExporterOTLPGRPC, Endpoint: ln.Addr().String(), Insecure: true, BatchDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	emit(t, tel)
	if err := tel.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	var spans []otlp.Span
	for _, r := range svc.got {
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		s, err := otlp.DecodeProtobuf(b)
		if err != nil {
			t.Fatal(err)
		}
		spans = append(spans, s...)
	}
	checkReceived(t, spans)
}

func TestEnvEndpoint(t *testing.T) {
	clearEnv(t)
	rcv := otlp.NewReceiver()
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "from-env")
	tel, err := Setup(t.Context(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	emit(t, tel)
	if err := tel.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkReceived(t, rcv.Spans())
}

func TestPropagatorIsW3C(t *testing.T) {
	clearEnv(t)
	rcv := otlp.NewReceiver()
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	tel, err := Setup(t.Context(), Config{Exporter: ExporterOTLPHTTP, Endpoint: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tel.Shutdown(t.Context()) }()
	ctx, span := tel.TracerProvider().Tracer("t").Start(t.Context(), "x")
	defer span.End()
	h := http.Header{}
	tel.Propagator().Inject(ctx, propagation.HeaderCarrier(h))
	tp := h.Get("traceparent")
	if !strings.HasPrefix(tp, "00-"+span.SpanContext().TraceID().String()+"-") {
		t.Errorf("traceparent %q", tp)
	}
	in := tel.Propagator().Extract(t.Context(), propagation.HeaderCarrier(h))
	_, child := tel.TracerProvider().Tracer("t").Start(in, "y")
	if child.SpanContext().TraceID() != span.SpanContext().TraceID() {
		t.Error("extracted context does not continue the trace")
	}
	child.End()
}

func TestBadEndpoint(t *testing.T) {
	clearEnv(t)
	for _, cfg := range []Config{
		{Exporter: ExporterOTLPHTTP, Endpoint: "ftp://x:1"},
		{Exporter: ExporterOTLPGRPC, Endpoint: "x:1", Encoding: "json"},
		{Exporter: ExporterOTLPHTTP, Endpoint: "x:1", Compression: "zstd"},
		{Exporter: ExporterOTLPHTTP, SampleRatio: 2},
	} {
		if _, err := Setup(t.Context(), cfg); err == nil {
			t.Errorf("%+v: accepted", cfg)
		}
	}
}
