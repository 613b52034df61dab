package core

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/iris-vlm/iris/core/internal/plugin"

	"github.com/iris-vlm/iris/bundles"
)

// Image is a request image: 8-bit RGB, row-major, 3 bytes a pixel. The runtime hands it to the
// task while its pixels may still be decoding (the header gives Info, Width, Height and
// HasAlpha from the start): read Pix only after Await.
type Image struct {
	Info   ImageInfo
	Width  int
	Height int
	Pix    []byte
	// HasAlpha is true when the file carried transparency (dropped, as the reference does).
	HasAlpha bool

	// decoded is closed once Pix is set or decoding failed (err); nil when Pix was set from
	// the start.
	decoded chan struct{}
	err     error
}

// Await waits until Pix is decoded and returns the decoding's error: a client error for a
// corrupt file. The task can do what needs only the header (a plugin's plan, the prompt) while
// the pixels decode.
func (img *Image) Await(ctx context.Context) error {
	if img.decoded == nil {
		return nil
	}
	select {
	case <-img.decoded:
		return img.err
	case <-ctx.Done():
		return AsError(ctx.Err())
	}
}

// VisionInput is what a vision-language task receives: the runtime has already resolved the
// bundle, checked the image's header (its pixels may still be decoding: Image.Await) and
// applied the generation defaults.
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
	// EmbeddingCacheBytes caps the task's image-embedding cache; 0 disables it.
	EmbeddingCacheBytes int64
	// MaxBatch and BatchTokens bound one engine pass of the task's scheduler (inputs, tokens).
	MaxBatch, BatchTokens int
	// KVCacheTokens sizes the engine's KV-cache pool in tokens (0: the engine's default).
	KVCacheTokens int
	// VisionAlone turns batched vision off: the tower takes one image at a time.
	VisionAlone bool
	// VisionPatches caps the patches of one vision-tower pass (0: the engine's default).
	VisionPatches int
	// DecodeApart keeps decode steps out of prefill passes.
	DecodeApart bool
	// DecodeByRequest has requests send their decode steps (no scheduler chains).
	DecodeByRequest bool
	// DecodeHold and DecodeHoldRows hold rounds of decode steps alone for the tower's prompts
	// (engine.SchedulerOptions).
	DecodeHold     time.Duration
	DecodeHoldRows int
	// VisionSerial keeps a cuda model's tower on the decoder's stream, between its passes.
	VisionSerial bool
	// VisionLanes is how many tower passes run at once beside the decoder's (0: the model's default).
	VisionLanes int
	// FusedSwiGLU puts a cuda model's SwiGLU in its gate/up products (Config.FusedSwiGLU).
	FusedSwiGLU bool
	// PromptHeads is how many prompt heads keep their KV rows for reuse (0: 8; negative: none).
	PromptHeads int
	// Registerer takes the task's Prometheus collectors (never nil).
	Registerer prometheus.Registerer
	// Tracer starts the task's spans (never nil).
	Tracer trace.Tracer
	// Logger logs with the bundle attribute set (never nil).
	Logger *slog.Logger

	tracerProvider trace.TracerProvider
	host           *plugin.Host
}
