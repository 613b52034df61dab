package main

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/iris-vlm/iris/gateway/config"
)

// setupTracing returns the tracer provider of `iris serve` and a function that flushes it.
func setupTracing(ctx context.Context, c config.Telemetry) (trace.TracerProvider, func(context.Context) error, error) {
	_ = ctx
	_ = c
	return otel.GetTracerProvider(), func(context.Context) error { return nil }, nil
}
