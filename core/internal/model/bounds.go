package model

import (
	"errors"
	"fmt"

	"github.com/iris-vlm/iris/core/internal/ml"
)

// Errors a request can be refused with before any kernel runs. All are the client's to fix.
var (
	// ErrContextExceeded: prompt tokens (image tokens included) plus max new tokens exceed the
	// context length.
	ErrContextExceeded = errors.New("context length exceeded")
	// ErrImageTooLarge: an image's grid, or the number of images, exceeds the declared bounds.
	ErrImageTooLarge = errors.New("image exceeds the declared bounds")
)

// Limits are the bounds a model declares (the bundle sets them at load).
type Limits struct {
	// ContextLength caps prompt tokens plus new tokens in one sequence.
	ContextLength int
	// MaxImages caps the images of one request.
	MaxImages int
	// MaxImagePatches caps T*H*W of one image; MaxGridSide caps H and W (in patches).
	MaxImagePatches int
	MaxGridSide     int
}

// DefaultLimits are the model's own ceilings: its max_position_embeddings (with LongRoPE's short
// factors alone, its original_max_position_embeddings: TextConfig.LongRoPE), and the Qwen2-VL
// processor's default max_pixels (12845056 = 16384 merged tokens of 28x28 pixels).
func DefaultLimits(cfg *Config) Limits {
	patches := 12845056 / (cfg.Vision.PatchSize * cfg.Vision.PatchSize)
	ctx := cfg.Text.MaxPositions
	if t := &cfg.Text; len(t.RopeFactors) > 0 && len(t.RopeLongFactors) == 0 && t.RopeOriginalMax > 0 {
		ctx = min(ctx, t.RopeOriginalMax)
	}
	return Limits{
		ContextLength:   ctx,
		MaxImages:       8,
		MaxImagePatches: patches,
		MaxGridSide:     patches,
	}
}

// BoundsError is a refusal for a request over a limit; it unwraps to ErrContextExceeded or
// ErrImageTooLarge.
type BoundsError struct {
	Err   error
	What  string
	Got   int
	Limit int
}

func (e *BoundsError) Error() string {
	return fmt.Sprintf("%s: %s is %d, the limit is %d", e.Err, e.What, e.Got, e.Limit)
}

func (e *BoundsError) Unwrap() error { return e.Err }

// CheckCapacity validates a sequence capacity against lim before a backend allocates its cache.
// Backends share it so that every one refuses the same capacities the same way.
func CheckCapacity(lim Limits, capacity int) error {
	if capacity <= 0 {
		return fmt.Errorf("sequence capacity %d: %w", capacity, ml.ErrInvalidInput)
	}
	if capacity > lim.ContextLength {
		return &BoundsError{Err: ErrContextExceeded, What: "sequence capacity", Got: capacity, Limit: lim.ContextLength}
	}
	return nil
}
