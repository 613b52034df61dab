package model

import (
	"fmt"

	"github.com/iris-vlm/iris/core/internal/ml"
)

// PrefillInput is a Prompt laid out the way a family's prefill consumes it.
type PrefillInput struct {
	// Pos holds the t, h and w rows of the positions, one after the other (3*len(IDs)).
	Pos []int32
	// Slots are the indexes of the image placeholders in IDs, in order: the rows of p.Images,
	// one image after the other, go there (masked_scatter).
	Slots []int32
}

// Flatten checks p against cfg (a prompt's images are all in host memory or all on the device)
// and lays it out for a prefill. Families share it so that every one validates the same way.
func (p Prompt) Flatten(cfg *Config) (*PrefillInput, error) {
	n := len(p.IDs)
	if n == 0 || len(p.Positions.T) != n || len(p.Positions.H) != n || len(p.Positions.W) != n {
		return nil, fmt.Errorf("prefill of %d tokens with %d positions: %w", n, len(p.Positions.T), ml.ErrInvalidInput)
	}
	vocab := int32(cfg.Text.Vocab)
	out := &PrefillInput{Pos: make([]int32, 0, 3*n)}
	for i, id := range p.IDs {
		if id < 0 || id >= vocab {
			return nil, fmt.Errorf("token %d: id %d outside the vocabulary: %w", i, id, ml.ErrInvalidInput)
		}
		if id == cfg.ImageTokenID {
			out.Slots = append(out.Slots, int32(i))
		}
	}
	out.Pos = append(append(append(out.Pos, p.Positions.T...), p.Positions.H...), p.Positions.W...)
	hidden, rows, onDevice := cfg.EmbedDim(), 0, 0
	for _, e := range p.Images {
		if e == nil || !e.Fits(e.Tokens, hidden) {
			return nil, fmt.Errorf("image embeddings do not have width %d: %w", hidden, ml.ErrInvalidInput)
		}
		rows += e.Tokens
		if e.Device != nil {
			onDevice++
		}
	}
	if rows != len(out.Slots) {
		return nil, fmt.Errorf("%d image embedding rows for %d placeholder tokens: %w", rows, len(out.Slots), ml.ErrInvalidInput)
	}
	if onDevice > 0 && onDevice < len(p.Images) {
		return nil, fmt.Errorf("%d of %d images' embeddings on the device: %w", onDevice, len(p.Images), ml.ErrInvalidInput)
	}
	return out, nil
}

// CheckImage validates one image against cfg and lim before a backend runs its vision tower.
// Backends share it so that every one refuses the same images the same way.
func CheckImage(cfg *Config, lim Limits, img Image) error {
	v := &cfg.Vision
	g := img.Grid
	if g.T <= 0 || g.H <= 0 || g.W <= 0 || g.H%v.MergeSize != 0 || g.W%v.MergeSize != 0 {
		return fmt.Errorf("grid %v: %w", g, ml.ErrInvalidInput)
	}
	if f := v.FixedGrid; f > 0 && (g.H != f || g.W != f) {
		return fmt.Errorf("grid %v: the vision tower takes frames of %dx%d patches: %w", g, f, f, ml.ErrInvalidInput)
	}
	if g.Patches() > lim.MaxImagePatches || g.H > lim.MaxGridSide || g.W > lim.MaxGridSide {
		return &BoundsError{Err: ErrImageTooLarge, What: "image patches", Got: g.Patches(), Limit: lim.MaxImagePatches}
	}
	if len(img.Pixels) != g.Patches()*v.PatchDim() {
		return fmt.Errorf("%d pixel values for grid %v: %w", len(img.Pixels), g, ml.ErrInvalidInput)
	}
	if err := img.CheckMasks(); err != nil {
		return err
	}
	if err := img.CheckTiles(); err != nil {
		return err
	}
	_, err := ImageTokens(cfg, &img)
	return err
}
