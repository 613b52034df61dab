package engine

import (
	"errors"
	"fmt"
)

// Errors a request can be refused with before any kernel runs. All are the client's to fix.
var (
	// ErrInvalidInput: the request is malformed (no tokens, ids outside the vocabulary, a grid
	// that disagrees with its pixels or its placeholder tokens).
	ErrInvalidInput = errors.New("invalid engine input")
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

// DefaultLimits are the model's own ceilings: its max_position_embeddings, and the Qwen2-VL
// processor's default max_pixels (12845056 = 16384 merged tokens of 28x28 pixels).
func DefaultLimits(cfg *Config) Limits {
	patches := 12845056 / (cfg.Vision.PatchSize * cfg.Vision.PatchSize)
	return Limits{
		ContextLength:   cfg.Text.MaxPositions,
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
		return fmt.Errorf("sequence capacity %d: %w", capacity, ErrInvalidInput)
	}
	if capacity > lim.ContextLength {
		return &BoundsError{Err: ErrContextExceeded, What: "sequence capacity", Got: capacity, Limit: lim.ContextLength}
	}
	return nil
}

// Check validates a request against the model's config and limits without running anything.
// It returns nil, an ErrInvalidInput, or a *BoundsError.
func Check(cfg *Config, lim Limits, req *Request) error {
	if len(req.IDs) == 0 {
		return fmt.Errorf("empty prompt: %w", ErrInvalidInput)
	}
	if req.MaxNewTokens < 1 {
		return fmt.Errorf("max new tokens %d: %w", req.MaxNewTokens, ErrInvalidInput)
	}
	for i, id := range req.IDs {
		if id < 0 || int(id) >= cfg.Text.Vocab {
			return fmt.Errorf("token %d: id %d outside the vocabulary of %d: %w", i, id, cfg.Text.Vocab, ErrInvalidInput)
		}
	}
	if err := checkSampling(req.Sampling); err != nil {
		return err
	}
	if len(req.Images) > lim.MaxImages {
		return &BoundsError{Err: ErrImageTooLarge, What: "number of images", Got: len(req.Images), Limit: lim.MaxImages}
	}
	v := &cfg.Vision
	runs := imageRuns(req.IDs, cfg.ImageTokenID)
	if len(runs) < len(req.Images) || (len(req.Images) == 0 && len(runs) > 0) {
		return fmt.Errorf("%d image placeholder runs, %d images: %w", len(runs), len(req.Images), ErrInvalidInput)
	}
	// An image's placeholders may lie in several runs (a frame of several image spans, plugin
	// ABI 2: special tokens between them): runs go to the images in order until each has its
	// grid's tokens. The rows fill the placeholders in order either way.
	next := 0
	for i, img := range req.Images {
		g := img.Grid
		if g.T <= 0 || g.H <= 0 || g.W <= 0 || g.H%v.MergeSize != 0 || g.W%v.MergeSize != 0 {
			return fmt.Errorf("image %d: grid %v is not a positive multiple of the merge size %d: %w", i, g, v.MergeSize, ErrInvalidInput)
		}
		if f := v.FixedGrid; f > 0 && (g.H != f || g.W != f) {
			return fmt.Errorf("image %d: grid %v: the vision tower takes frames of %dx%d patches: %w", i, g, f, f, ErrInvalidInput)
		}
		if g.H > lim.MaxGridSide || g.W > lim.MaxGridSide {
			return &BoundsError{Err: ErrImageTooLarge, What: fmt.Sprintf("image %d grid side", i), Got: max(g.H, g.W), Limit: lim.MaxGridSide}
		}
		if g.Patches() > lim.MaxImagePatches {
			return &BoundsError{Err: ErrImageTooLarge, What: fmt.Sprintf("image %d patches", i), Got: g.Patches(), Limit: lim.MaxImagePatches}
		}
		need, got := g.Tokens(v.MergeSize), 0
		for got < need && next < len(runs) {
			got += runs[next]
			next++
		}
		if got != need {
			return fmt.Errorf("image %d: %d placeholder tokens, grid %v needs %d: %w", i, got, g, need, ErrInvalidInput)
		}
		if e := img.Embeddings; e != nil {
			if !e.fits(got, cfg.EmbedDim()) {
				return fmt.Errorf("image %d: embeddings %dx%d do not fit %d tokens of width %d: %w", i, e.Tokens, e.Dim, got, cfg.EmbedDim(), ErrInvalidInput)
			}
		} else if len(img.Pixels) != g.Patches()*v.PatchDim() {
			return fmt.Errorf("image %d: %d pixel values, grid %v needs %d: %w", i, len(img.Pixels), g, g.Patches()*v.PatchDim(), ErrInvalidInput)
		}
	}
	if next != len(runs) {
		return fmt.Errorf("%d image placeholder runs, %d of them for %d images: %w", len(runs), next, len(req.Images), ErrInvalidInput)
	}
	if total := len(req.IDs) + req.MaxNewTokens; total > lim.ContextLength {
		return &BoundsError{Err: ErrContextExceeded, What: "prompt plus max new tokens", Got: total, Limit: lim.ContextLength}
	}
	return nil
}

// imageRuns returns the length of each run of id in ids.
func imageRuns(ids []int32, id int32) []int {
	var runs []int
	for i := 0; i < len(ids); {
		if ids[i] != id {
			i++
			continue
		}
		j := i
		for j < len(ids) && ids[j] == id {
			j++
		}
		runs = append(runs, j-i)
		i = j
	}
	return runs
}
