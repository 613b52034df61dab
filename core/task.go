package core

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/iris-vlm/iris/core/internal/plugin"

	"github.com/iris-vlm/iris/bundles"
)

// Image is a decoded request image: 8-bit RGB, row-major, 3 bytes a pixel.
type Image struct {
	Info   ImageInfo
	Width  int
	Height int
	Pix    []byte
	// HasAlpha is true when the file carried transparency (dropped, as the reference does).
	HasAlpha bool
}

// VisionInput is what a vision-language task receives: the runtime has already resolved the
// bundle, checked and decoded the image and applied the generation defaults.
type VisionInput struct {
	RequestID string
	Question  string
	TextFirst bool
	Image     *Image
	Params    Resolved
}

// TextInput is what a text-generation task receives.
type TextInput struct {
	RequestID string
	Question  string
	Params    Resolved
}

// Emit receives a running request's events; an error from it (the client went away) stops the
// request.
type Emit func(Event) error

// VisionTask answers one image question. Only requests that carry an image reach it, and an image
// request reaches nothing else.
type VisionTask interface {
	Answer(ctx context.Context, in *VisionInput, emit Emit) (*Result, error)
	Close() error
}

// TextTask completes a text-only prompt. It never sees an image: the types keep image requests
// away from it.
type TextTask interface {
	Complete(ctx context.Context, in *TextInput, emit Emit) (*Result, error)
	Close() error
}

// VisionTaskFactory builds the vision-language task of a bundle that declares one.
type VisionTaskFactory func(ctx context.Context, b *bundles.Bundle, env *TaskEnv) (VisionTask, error)

// TextTaskFactory builds the text-generation task of a bundle that declares one.
type TextTaskFactory func(ctx context.Context, b *bundles.Bundle, env *TaskEnv) (TextTask, error)

// TaskEnv carries the shared services a task factory may use.
type TaskEnv struct {
	// CacheDir holds compiled plugins across restarts; empty disables the disk cache.
	CacheDir string
	// Registerer takes the task's Prometheus collectors (never nil).
	Registerer prometheus.Registerer
	// Tracer starts the task's spans (never nil).
	Tracer trace.Tracer
	// Logger logs with the bundle attribute set (never nil).
	Logger *slog.Logger

	tracerProvider trace.TracerProvider
	host           *plugin.Host
}
