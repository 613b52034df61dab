// Package telemetry sets up the gateway's OpenTelemetry tracing: a TracerProvider exporting
// over OTLP/HTTP or OTLP/gRPC, configured by a small struct (filled from gateway.toml) or by the
// standard OTEL_* environment variables, and the W3C trace-context propagator. Nothing is
// exported unless asked for.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Exporters.
const (
	ExporterNone     = "none"
	ExporterOTLPHTTP = "otlp-http"
	ExporterOTLPGRPC = "otlp-grpc"
)

// Config configures tracing. The zero value exports nothing unless the environment asks for it.
type Config struct {
	// Exporter is "none", "otlp-http" or "otlp-grpc". Empty defers to the environment:
	// OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none export nothing; OTEL_TRACES_EXPORTER=otlp,
	// or an OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT with no OTEL_TRACES_EXPORTER, export over the
	// protocol of OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL (grpc, http/protobuf or http/json;
	// default http/protobuf); anything else exports nothing.
	Exporter string
	// Endpoint is host:port or a URL. An http(s) URL without a path gets /v1/traces (OTLP/HTTP).
	// Empty: the exporter reads OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, else its default
	// (localhost:4318 or localhost:4317).
	Endpoint string
	// Insecure sends to a host:port endpoint without TLS (a URL's scheme decides by itself).
	Insecure bool
	// Headers are sent with every export (e.g. an authorization header).
	Headers map[string]string
	// Compression is "" (none) or "gzip".
	Compression string
	// Encoding is "protobuf" (default) or "json", for otlp-http only.
	Encoding string
	// Timeout bounds one export (default: the exporter's, 10 s).
	Timeout time.Duration
	// BatchDelay is how long spans wait before a batch is sent (default: OTEL_BSP_SCHEDULE_DELAY,
	// else 5 s). Profiling runs use a short one so that spans arrive soon after each request.
	BatchDelay time.Duration
	// ServiceName names the process in traces (default "iris"; OTEL_SERVICE_NAME wins).
	ServiceName    string
	ServiceVersion string
	// SampleRatio is the fraction of new traces recorded, in (0, 1]; 0 means 1. A sampled
	// parent (traceparent header) is always followed.
	SampleRatio float64
	// Logger receives export failures (once, then at most once a minute while they last, and
	// the recovery) and OpenTelemetry's other errors once Install is called (default:
	// slog.Default()).
	Logger *slog.Logger
}

// Telemetry is the gateway's tracing setup.
type Telemetry struct {
	provider trace.TracerProvider
	sdk      *sdktrace.TracerProvider
	prop     propagation.TextMapPropagator
	desc     string
	log      *slog.Logger
}

// Setup builds the tracing setup of cfg. The returned Telemetry must be shut down to flush the
// last spans.
func Setup(ctx context.Context, cfg Config) (*Telemetry, error) {
	t := &Telemetry{
		provider: noop.NewTracerProvider(),
		prop:     propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		desc:     ExporterNone,
		log:      cfg.Logger,
	}
	if t.log == nil {
		t.log = slog.Default()
	}
	exporter, encoding, err := resolve(cfg)
	if err != nil {
		return nil, err
	}
	if exporter == ExporterNone {
		return t, nil
	}
	if cfg.SampleRatio < 0 || cfg.SampleRatio > 1 {
		return nil, fmt.Errorf("telemetry: sample ratio %v is outside (0, 1]", cfg.SampleRatio)
	}
	var exp sdktrace.SpanExporter
	switch exporter {
	case ExporterOTLPHTTP:
		exp, t.desc, err = httpExporter(ctx, cfg, encoding)
	case ExporterOTLPGRPC:
		exp, t.desc, err = grpcExporter(ctx, cfg)
	}
	if err != nil {
		return nil, err
	}
	name := cfg.ServiceName
	if name == "" {
		name = "iris"
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", name)}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", cfg.ServiceVersion))
	}
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithAttributes(attrs...), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	var bsp []sdktrace.BatchSpanProcessorOption
	if cfg.BatchDelay > 0 {
		bsp = append(bsp, sdktrace.WithBatchTimeout(cfg.BatchDelay))
	}
	sampler := sdktrace.ParentBased(sdktrace.AlwaysSample())
	if cfg.SampleRatio > 0 && cfg.SampleRatio < 1 {
		sampler = sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))
	}
	t.sdk = sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(newQuietExporter(exp, t.log, t.desc), bsp...),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler),
	)
	t.provider = t.sdk
	return t, nil
}

// resolve picks the exporter and the OTLP/HTTP encoding from cfg, then the environment.
func resolve(cfg Config) (exporter, encoding string, err error) {
	encoding = cfg.Encoding
	switch encoding {
	case "", "protobuf", "json":
	default:
		return "", "", fmt.Errorf("telemetry: encoding %q is not protobuf or json", encoding)
	}
	switch cfg.Exporter {
	case ExporterNone, ExporterOTLPHTTP, ExporterOTLPGRPC:
		return cfg.Exporter, encoding, nil
	case "":
	default:
		return "", "", fmt.Errorf("telemetry: exporter %q is not none, otlp-http or otlp-grpc", cfg.Exporter)
	}
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return ExporterNone, "", nil
	}
	switch v := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")); v {
	case "none":
		return ExporterNone, "", nil
	case "":
		if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return ExporterNone, "", nil
		}
	case "otlp":
	default:
		return "", "", fmt.Errorf("telemetry: OTEL_TRACES_EXPORTER=%q is not supported (otlp or none)", v)
	}
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch proto {
	case "grpc":
		return ExporterOTLPGRPC, "", nil
	case "", "http/protobuf":
		return ExporterOTLPHTTP, encoding, nil
	case "http/json":
		return ExporterOTLPHTTP, "json", nil
	}
	return "", "", fmt.Errorf("telemetry: OTLP protocol %q is not grpc, http/protobuf or http/json", proto)
}

// endpointURL reports whether e is a URL (has a scheme) and parses it.
func endpointURL(e string) (*url.URL, bool, error) {
	if !strings.Contains(e, "://") {
		return nil, false, nil
	}
	u, err := url.Parse(e)
	if err != nil || u.Host == "" {
		return nil, true, fmt.Errorf("telemetry: endpoint %q is not a valid URL", e)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, true, fmt.Errorf("telemetry: endpoint %q: scheme must be http or https", e)
	}
	return u, true, nil
}

func httpExporter(ctx context.Context, cfg Config, encoding string) (sdktrace.SpanExporter, string, error) {
	var opts []otlptracehttp.Option
	desc := ExporterOTLPHTTP
	if cfg.Endpoint != "" {
		u, isURL, err := endpointURL(cfg.Endpoint)
		if err != nil {
			return nil, "", err
		}
		if isURL {
			if u.Path == "" || u.Path == "/" {
				u.Path = "/v1/traces"
			}
			opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
			desc += " " + u.String()
		} else {
			opts = append(opts, otlptracehttp.WithEndpoint(cfg.Endpoint))
			if cfg.Insecure {
				opts = append(opts, otlptracehttp.WithInsecure())
			}
			desc += " " + cfg.Endpoint
		}
	}
	if len(cfg.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
	}
	switch cfg.Compression {
	case "":
	case "gzip":
		opts = append(opts, otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
	default:
		return nil, "", fmt.Errorf("telemetry: compression %q is not gzip", cfg.Compression)
	}
	if encoding == "json" {
		opts = append(opts, otlptracehttp.WithEncoding(otlptracehttp.EncodingJSON))
		desc += " (json)"
	}
	if cfg.Timeout > 0 {
		opts = append(opts, otlptracehttp.WithTimeout(cfg.Timeout))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, "", fmt.Errorf("telemetry: otlp-http exporter: %w", err)
	}
	return exp, desc, nil
}

func grpcExporter(ctx context.Context, cfg Config) (sdktrace.SpanExporter, string, error) {
	var opts []otlptracegrpc.Option
	desc := ExporterOTLPGRPC
	if cfg.Endpoint != "" {
		_, isURL, err := endpointURL(cfg.Endpoint)
		if err != nil {
			return nil, "", err
		}
		if isURL {
			opts = append(opts, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
		} else {
			opts = append(opts, otlptracegrpc.WithEndpoint(cfg.Endpoint))
			if cfg.Insecure {
				opts = append(opts, otlptracegrpc.WithInsecure())
			}
		}
		desc += " " + cfg.Endpoint
	}
	if len(cfg.Headers) > 0 {
		opts = append(opts, otlptracegrpc.WithHeaders(cfg.Headers))
	}
	switch cfg.Compression {
	case "":
	case "gzip":
		opts = append(opts, otlptracegrpc.WithCompressor("gzip"))
	default:
		return nil, "", fmt.Errorf("telemetry: compression %q is not gzip", cfg.Compression)
	}
	if cfg.Encoding == "json" {
		return nil, "", errors.New("telemetry: the json encoding applies to otlp-http only")
	}
	if cfg.Timeout > 0 {
		opts = append(opts, otlptracegrpc.WithTimeout(cfg.Timeout))
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, "", fmt.Errorf("telemetry: otlp-grpc exporter: %w", err)
	}
	return exp, desc, nil
}

// TracerProvider returns the provider of the gateway's and the runtime's spans (a no-op one
// when nothing is exported).
func (t *Telemetry) TracerProvider() trace.TracerProvider { return t.provider }

// Propagator returns the W3C trace-context and baggage propagator.
func (t *Telemetry) Propagator() propagation.TextMapPropagator { return t.prop }

// Enabled reports whether spans are exported.
func (t *Telemetry) Enabled() bool { return t.sdk != nil }

// String describes the exporter for logs, e.g. "otlp-http http://127.0.0.1:4318/v1/traces".
func (t *Telemetry) String() string { return t.desc }

// Install makes the provider and the propagator the process-wide OpenTelemetry defaults, for
// libraries that use the globals, and sends OpenTelemetry's internal errors to the logger
// (rather than the standard log's format).
func (t *Telemetry) Install() {
	otel.SetTracerProvider(t.provider)
	otel.SetTextMapPropagator(t.prop)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		t.log.Warn("opentelemetry", "err", err)
	}))
}

// Shutdown flushes the spans not yet exported and stops the exporter. It is safe to call more
// than once.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t.sdk == nil {
		return nil
	}
	if err := t.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("telemetry: shutdown: %w", err)
	}
	return nil
}
