package engine

import (
	"fmt"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
)

// Check validates a request against the model's config and limits without running anything.
// It returns nil, an ErrInvalidInput, or a *BoundsError.
func Check(cfg *model.Config, lim model.Limits, req *Request) error {
	if len(req.IDs) == 0 {
		return fmt.Errorf("empty prompt: %w", ml.ErrInvalidInput)
	}
	if req.MaxNewTokens < 1 {
		return fmt.Errorf("max new tokens %d: %w", req.MaxNewTokens, ml.ErrInvalidInput)
	}
	for i, id := range req.IDs {
		if id < 0 || int(id) >= cfg.Text.Vocab {
			return fmt.Errorf("token %d: id %d outside the vocabulary of %d: %w", i, id, cfg.Text.Vocab, ml.ErrInvalidInput)
		}
	}
	if err := checkSampling(req.Sampling); err != nil {
		return err
	}
	if len(req.Images) > lim.MaxImages {
		return &model.BoundsError{Err: model.ErrImageTooLarge, What: "number of images", Got: len(req.Images), Limit: lim.MaxImages}
	}
	v := &cfg.Vision
	runs := imageRuns(req.IDs, cfg.ImageTokenID)
	if len(runs) < len(req.Images) || (len(req.Images) == 0 && len(runs) > 0) {
		return fmt.Errorf("%d image placeholder runs, %d images: %w", len(runs), len(req.Images), ml.ErrInvalidInput)
	}
	// An image's placeholders may lie in several runs (a frame of several image spans, plugin
	// ABI 2: special tokens between them): runs go to the images in order until each has its
	// tokens (model.ImageTokens: the grid's, or its family's count of a masked image). The rows fill the placeholders in order either way.
	next := 0
	for i, img := range req.Images {
		g := img.Grid
		if g.T <= 0 || g.H <= 0 || g.W <= 0 || g.H%v.MergeSize != 0 || g.W%v.MergeSize != 0 {
			return fmt.Errorf("image %d: grid %v is not a positive multiple of the merge size %d: %w", i, g, v.MergeSize, ml.ErrInvalidInput)
		}
		if f := v.FixedGrid; f > 0 && (g.H != f || g.W != f) {
			return fmt.Errorf("image %d: grid %v: the vision tower takes frames of %dx%d patches: %w", i, g, f, f, ml.ErrInvalidInput)
		}
		if g.H > lim.MaxGridSide || g.W > lim.MaxGridSide {
			return &model.BoundsError{Err: model.ErrImageTooLarge, What: fmt.Sprintf("image %d grid side", i), Got: max(g.H, g.W), Limit: lim.MaxGridSide}
		}
		if g.Patches() > lim.MaxImagePatches {
			return &model.BoundsError{Err: model.ErrImageTooLarge, What: fmt.Sprintf("image %d patches", i), Got: g.Patches(), Limit: lim.MaxImagePatches}
		}
		if err := img.CheckMasks(); err != nil {
			return fmt.Errorf("image %d: %w", i, err)
		}
		if err := img.CheckTiles(); err != nil {
			return fmt.Errorf("image %d: %w", i, err)
		}
		need, err := model.ImageTokens(cfg, &img)
		if err != nil {
			return fmt.Errorf("image %d: %w", i, err)
		}
		got := 0
		for got < need && next < len(runs) {
			got += runs[next]
			next++
		}
		if got != need {
			return fmt.Errorf("image %d: %d placeholder tokens, the image (grid %v) needs %d: %w", i, got, g, need, ml.ErrInvalidInput)
		}
		if e := img.Embeddings; e != nil {
			if !e.Fits(got, cfg.EmbedDim()) {
				return fmt.Errorf("image %d: embeddings %dx%d do not fit %d tokens of width %d: %w", i, e.Tokens, e.Dim, got, cfg.EmbedDim(), ml.ErrInvalidInput)
			}
		} else if len(img.Pixels) != g.Patches()*v.PatchDim() {
			return fmt.Errorf("image %d: %d pixel values, grid %v needs %d: %w", i, len(img.Pixels), g, g.Patches()*v.PatchDim(), ml.ErrInvalidInput)
		}
	}
	if next != len(runs) {
		return fmt.Errorf("%d image placeholder runs, %d of them for %d images: %w", len(runs), next, len(req.Images), ml.ErrInvalidInput)
	}
	total := len(req.IDs) + req.MaxNewTokens
	if total > lim.ContextLength {
		return &model.BoundsError{Err: model.ErrContextExceeded, What: "prompt plus max new tokens", Got: total, Limit: lim.ContextLength}
	}
	// LongRoPE: a prompt within original_max_position_embeddings runs the short factors and may
	// not grow past it (model.TextConfig.LongRoPE: the reference's switch there is not followed)
	if t := &cfg.Text; len(t.RopeLongFactors) > 0 && len(req.IDs) <= t.RopeOriginalMax && total > t.RopeOriginalMax {
		return &model.BoundsError{Err: model.ErrContextExceeded,
			What: "prompt plus max new tokens of a prompt within original_max_position_embeddings (LongRoPE's short factors)", Got: total, Limit: t.RopeOriginalMax}
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
