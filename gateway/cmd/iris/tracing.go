package main

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/iris-vlm/iris/gateway/config"
	"github.com/iris-vlm/iris/gateway/telemetry"
)

// setupTracing installs the tracer provider of `iris serve` (exporting nothing unless the
// config or the OTEL_* variables ask) and returns it with its propagator and a flush function.
func setupTracing(ctx context.Context, c config.Telemetry, logger *slog.Logger) (trace.TracerProvider, propagation.TextMapPropagator, func(context.Context) error, error) {
	tel, err := telemetry.Setup(ctx, telemetry.Config{
		Exporter: c.Exporter, Endpoint: c.Endpoint, Insecure: c.Insecure, Headers: c.Headers,
		ServiceName: c.ServiceName, ServiceVersion: version(), SampleRatio: c.SampleRatio,
		Logger: logger,
	})
	if err != nil {
		return nil, nil, nil, err
	}
	tel.Install()
	return tel.TracerProvider(), tel.Propagator(), tel.Shutdown, nil
}
