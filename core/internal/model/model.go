// Package model is the contract between a model family and the engine that runs it: the
// interfaces a family implements, the graph config parsed from config.json (with each family's
// registered defaults), rotary positions (multimodal 3-D or plain 1-D), the declared bounds and
// the checks that refuse a prompt or an image before any kernel runs.
//
// A model family (core/internal/models/<family>, written over the op set of core/internal/ml and
// run by a backend: ml/cpu on the CPU, ml/cuda on the GPU) implements [Model], [Sequence] and the
// batch-first [Batcher], and may implement [DeviceEncoder] (image rows kept in backend memory),
// [BatchEncoder] (several images in one tower pass), [GreedyModel] (the greedy choice taken in
// place) and [Pooled] (KV blocks in use), which the engine (core/internal/engine) and the runtime
// use when present. This package imports nothing of the project but the op set's errors, and no
// cgo.
//
// # Notes
//
//   - A [Model] is safe for concurrent use; a model may serialise calls (one pass at a time on
//     its backend).
//   - A [Sequence] (one KV cache) is used by one request at a time: its methods and the Model
//     methods that take it must not be called concurrently for the same Sequence.
package model

import (
	"context"
	"fmt"
	"time"

	"github.com/iris-vlm/iris/core/internal/ml"
)

// Grid is an image's patch grid (temporal, height, width), as image_grid_thw.
type Grid struct {
	T, H, W int
}

// Patches is the number of pixel rows the grid holds.
func (g Grid) Patches() int { return g.T * g.H * g.W }

// Tokens is the number of prompt placeholder tokens the grid becomes after a merge x merge merger.
func (g Grid) Tokens(merge int) int {
	if merge <= 0 {
		return 0
	}
	return g.T * (g.H / merge) * (g.W / merge)
}

// Image is one preprocessed image: pixel_values rows in merge-block order (or, for an image
// of several views, each view's rows in raster order, the views one after the other as the
// frames of Grid).
type Image struct {
	// Pixels holds Grid.Patches() rows of Config.Vision.PatchDim() float32 values.
	Pixels []float32
	Grid   Grid
	// Masks, when set, holds one patch mask per frame of Grid (Grid.T of them; for an image of
	// several views, one per view, in view order): the rectangle of that frame's patches the
	// vision encoder attends to. Patches outside it are padding (Phi-4-multimodal's crops padded
	// white past the image's edge): a family masks them as attention keys, may derive positions
	// from the rectangle (Phi-4 stretches the valid rows and columns over its position table)
	// and lays out its tokens by it; how many tokens an image becomes is then the family's
	// count, not Grid.Tokens. nil: every patch of every frame is valid.
	Masks []PatchRect
	// Tiles, when set, holds one rectangle per frame (as Masks) saying where the frame was cut
	// from the image's canvas, in patches: a tile of the canvas (columns [X, X+W) of rows [Y,
	// Y+H) of the canvas' patch grid), or the zero rectangle for a frame that shows the whole
	// canvas (an overview: Phi-4-multimodal's global view, InternVL's thumbnail). A family that
	// lays its tokens out by the tiles' places (Phi-4 stitches its crops' features into one map)
	// reads it; nil: the frames' places are not known.
	Tiles []PatchRect
	// Embeddings, when set, are reused instead of running the vision tower (a cache hit).
	Embeddings *Embeddings
}

// PatchRect is a rectangle of one frame's patch grid: columns [X, X+W) of rows [Y, Y+H).
type PatchRect struct {
	X, Y, W, H int
}

// Contains reports whether the patch at row y, column x lies inside r.
func (r PatchRect) Contains(y, x int) bool {
	return x >= r.X && x < r.X+r.W && y >= r.Y && y < r.Y+r.H
}

// Mask returns frame t's patch mask: Masks[t], or the whole H×W frame when Masks is nil.
func (img *Image) Mask(t int) PatchRect {
	if img.Masks == nil {
		return PatchRect{W: img.Grid.W, H: img.Grid.H}
	}
	return img.Masks[t]
}

// CheckMasks reports whether Masks is nil or holds one non-empty rectangle inside the frame for
// each of Grid.T frames.
func (img *Image) CheckMasks() error {
	if img.Masks == nil {
		return nil
	}
	g := img.Grid
	if len(img.Masks) != g.T {
		return fmt.Errorf("%d patch masks for %d frames: %w", len(img.Masks), g.T, ml.ErrInvalidInput)
	}
	for t, r := range img.Masks {
		if r.X < 0 || r.Y < 0 || r.W < 1 || r.H < 1 || r.X+r.W > g.W || r.Y+r.H > g.H {
			return fmt.Errorf("frame %d: patch mask %+v outside the %dx%d frame: %w", t, r, g.H, g.W, ml.ErrInvalidInput)
		}
	}
	return nil
}

// CheckTiles reports whether Tiles is nil or holds, for each of Grid.T frames, either the zero
// rectangle (the whole canvas) or a non-empty rectangle at non-negative patch coordinates.
func (img *Image) CheckTiles() error {
	if img.Tiles == nil {
		return nil
	}
	if len(img.Tiles) != img.Grid.T {
		return fmt.Errorf("%d tile places for %d frames: %w", len(img.Tiles), img.Grid.T, ml.ErrInvalidInput)
	}
	for t, r := range img.Tiles {
		if r != (PatchRect{}) && (r.X < 0 || r.Y < 0 || r.W < 1 || r.H < 1) {
			return fmt.Errorf("frame %d: tile place %+v: %w", t, r, ml.ErrInvalidInput)
		}
	}
	return nil
}

// Embeddings are vision-tower outputs, one row per placeholder token: in host memory (Data), or
// left on the device of the model that encoded them (Device; see [DeviceEncoder]).
type Embeddings struct {
	Tokens, Dim int
	Data        []float32 // Tokens*Dim values; nil when Device holds them
	// Device holds the rows on the device of the model that encoded them. Only that model's
	// Prefill reads them, and whoever asked for them calls Release once done.
	Device DeviceRows
}

// DeviceRows are embeddings a backend keeps on its device.
type DeviceRows interface {
	// Release hands the memory back to the backend; the rows must not be used after it. It is
	// safe to call more than once.
	Release()
}

// Fits reports whether e holds tokens rows of width dim, in host or device memory.
func (e *Embeddings) Fits(tokens, dim int) bool {
	if e.Tokens != tokens || e.Dim != dim {
		return false
	}
	if e.Device != nil {
		return e.Data == nil
	}
	return len(e.Data) == e.Tokens*e.Dim
}

// GreedyModel is a [Model] that can take the greedy choice ([ml.Argmax]) on its device, sparing the
// copy of the logits to the host and the host's scan over the vocabulary at every step.
// The engine's generate loop uses it for greedy requests.
type GreedyModel interface {
	// PrefillGreedy is Prefill returning the argmax of the last token's logits.
	PrefillGreedy(ctx context.Context, seq Sequence, p Prompt) (int32, error)
	// DecodeStepGreedy is DecodeStep returning the argmax of the new logits.
	DecodeStepGreedy(ctx context.Context, seq Sequence, token int32, pos int32) (int32, error)
}

// DeviceEncoder is a [Model] that can keep vision-tower outputs on its device for its own
// Prefill, sparing them a round trip through host memory. The engine's generate loop uses it when a model has it.
type DeviceEncoder interface {
	// EncodeVisionDevice is EncodeVision with the result's rows in Embeddings.Device.
	EncodeVisionDevice(ctx context.Context, img Image) (*Embeddings, error)
}

// BatchEncoder is a [Model] that runs the vision tower on several images in one pass, each
// image getting the rows it gets alone (no attention crosses images), sparing the launches of a
// pass per image. The engine's scheduler uses it for the images of a round when a model has it.
type BatchEncoder interface {
	// EncodeVisionBatch is [Encode] on each image: out[i] holds image i's rows, on the device
	// when the model is a [DeviceEncoder] (each image's released on its own). An error fails
	// the whole batch.
	EncodeVisionBatch(ctx context.Context, imgs []Image) ([]*Embeddings, error)
}

// ParallelEncoder is a [Model] whose vision tower can run beside its other calls (on a GPU, a
// stream of its own): while ParallelVision holds, the engine's scheduler encodes images in a loop of
// their own instead of between its passes.
type ParallelEncoder interface {
	ParallelVision() bool
}

// VisionLaner is a [ParallelEncoder] whose tower runs several passes at once (on a GPU, a stream
// each): the engine's scheduler runs VisionLanes loops of the tower, so that one pass's host work overlaps
// another's kernels.
type VisionLaner interface {
	VisionLanes() int
}

// Positions are the rotary positions of a prompt: three rows (t, h, w) of one value per token,
// and the offset a decode step adds to its absolute index (rope_delta).
type Positions struct {
	T, H, W []int32
	Delta   int
}

// Prompt is the input of a prefill.
type Prompt struct {
	IDs       []int32
	Positions Positions
	// Images replace, in order, the embeddings of the runs of Config.ImageTokenID in IDs.
	Images []*Embeddings
}

// Model is a loaded model that a backend runs.
type Model interface {
	// Config is the graph the model was loaded with; callers must not modify it.
	Config() *Config
	// Limits are the bounds the model was loaded with.
	Limits() Limits
	// EncodeVision runs the vision tower on one image.
	EncodeVision(ctx context.Context, img Image) (*Embeddings, error)
	// NewSequence allocates a KV cache for up to capacity tokens.
	NewSequence(capacity int) (Sequence, error)
	// Prefill appends the prompt to seq and returns the logits of its last token. The slice
	// belongs to seq and stays valid until the next call with seq.
	Prefill(ctx context.Context, seq Sequence, p Prompt) ([]float32, error)
	// DecodeStep appends token at rotary position pos (all three axes: absolute index plus
	// Positions.Delta) and returns its logits, valid until the next call with seq.
	DecodeStep(ctx context.Context, seq Sequence, token int32, pos int32) ([]float32, error)
	// Close releases the model; it is safe to call more than once.
	Close() error
}

// Sequence is one request's KV cache.
type Sequence interface {
	// Len is the number of tokens in the cache; Cap the most it can hold.
	Len() int
	Cap() int
	// Reset empties the cache for reuse.
	Reset()
	// Close releases the cache; it is safe to call more than once.
	Close() error
}

// Timings are the wall times of the engine stages of one request.
type Timings struct {
	Vision  time.Duration
	Prefill time.Duration
	Decode  time.Duration
}
