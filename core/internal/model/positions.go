package model

import (
	"fmt"

	"github.com/iris-vlm/iris/core/internal/ml"
)

// PromptPositions are the rotary positions of a prompt for cfg's decoder, from the images'
// grids alone (images without patch masks or tile places): PromptPositionsOf on images of those
// grids.
func PromptPositions(cfg *Config, ids []int32, grids []Grid) (Positions, error) {
	imgs := make([]Image, len(grids))
	for i, g := range grids {
		imgs[i].Grid = g
	}
	return PromptPositionsOf(cfg, ids, imgs)
}

// PromptPositionsOf are the rotary positions of a prompt for cfg's decoder: multimodal
// (Positions3D, from the images' grids) or, for a decoder with plain 1-D RoPE
// (TextConfig.Rope1D), the token index on all three rows with Delta 0 (image tokens are ordinary
// positions; the placeholders must number the images' tokens, ImageTokens, in as many runs as
// the frame makes). Every caller (Generate, the fixtures, the GPU checks) computes positions
// through it.
func PromptPositionsOf(cfg *Config, ids []int32, imgs []Image) (Positions, error) {
	merge := cfg.Vision.MergeSize
	if !cfg.Text.Rope1D {
		grids := make([]Grid, len(imgs))
		for i := range imgs {
			grids[i] = imgs[i].Grid
		}
		return Positions3D(ids, cfg.ImageTokenID, grids, merge)
	}
	need := 0
	for i := range imgs {
		g := imgs[i].Grid
		if merge <= 0 || g.T <= 0 || g.H <= 0 || g.W <= 0 || g.H%merge != 0 || g.W%merge != 0 {
			return Positions{}, fmt.Errorf("image %d: grid %v not a positive multiple of merge %d: %w", i, g, merge, ml.ErrInvalidInput)
		}
		n, err := ImageTokens(cfg, &imgs[i])
		if err != nil {
			return Positions{}, fmt.Errorf("image %d: %w", i, err)
		}
		need += n
	}
	n := len(ids)
	p := Positions{T: make([]int32, n), H: make([]int32, n), W: make([]int32, n)}
	got := 0
	for i, id := range ids {
		if id == cfg.ImageTokenID {
			got++
		}
		p.T[i], p.H[i], p.W[i] = int32(i), int32(i), int32(i)
	}
	if got != need {
		return Positions{}, fmt.Errorf("%d image placeholder tokens, the %d images need %d: %w", got, len(imgs), need, ml.ErrInvalidInput)
	}
	return p, nil
}

// Positions3D computes the multimodal rotary positions of a prompt, as get_rope_index in
// transformers 5.17 (models/qwen2_5_vl/modeling_qwen2_5_vl.py):
//
//   - text tokens advance all three axes together: (cur, cur, cur), cur++;
//   - each run of imageTokenID tokens is one image with grid g; over its LLM grid
//     (T, H/merge, W/merge) token (t, row, col) gets (cur+t, cur+row, cur+col), and after the run
//     cur += max(H, W)/merge;
//   - Delta = max(position)+1 - len(ids), so a decode step at absolute index i uses i+Delta on
//     every axis.
//
// grids holds one grid per image run, in order. A run whose length disagrees with its grid, or a
// count of runs unequal to len(grids), is an ErrInvalidInput.
func Positions3D(ids []int32, imageTokenID int32, grids []Grid, merge int) (Positions, error) {
	n := len(ids)
	p := Positions{T: make([]int32, n), H: make([]int32, n), W: make([]int32, n)}
	if merge <= 0 {
		return Positions{}, fmt.Errorf("merge size %d: %w", merge, ml.ErrInvalidInput)
	}
	cur, maxPos := int32(0), int32(-1)
	image := 0
	for i := 0; i < n; {
		if ids[i] != imageTokenID {
			p.T[i], p.H[i], p.W[i] = cur, cur, cur
			maxPos = max(maxPos, cur)
			cur++
			i++
			continue
		}
		j := i
		for j < n && ids[j] == imageTokenID {
			j++
		}
		if image >= len(grids) {
			return Positions{}, fmt.Errorf("image run %d at token %d has no grid: %w", image, i, ml.ErrInvalidInput)
		}
		g := grids[image]
		if g.T <= 0 || g.H <= 0 || g.W <= 0 || g.H%merge != 0 || g.W%merge != 0 {
			return Positions{}, fmt.Errorf("image %d: grid %v not a positive multiple of merge %d: %w", image, g, merge, ml.ErrInvalidInput)
		}
		h, w := g.H/merge, g.W/merge
		if want := g.T * h * w; j-i != want {
			return Positions{}, fmt.Errorf("image %d: %d placeholder tokens, grid %v needs %d: %w", image, j-i, g, want, ml.ErrInvalidInput)
		}
		k := i
		for t := range g.T {
			for row := range h {
				for col := range w {
					p.T[k], p.H[k], p.W[k] = cur+int32(t), cur+int32(row), cur+int32(col)
					maxPos = max(maxPos, p.T[k], p.H[k], p.W[k])
					k++
				}
			}
		}
		cur += int32(max(h, w))
		image++
		i = j
	}
	if image != len(grids) {
		return Positions{}, fmt.Errorf("%d image runs in the prompt, %d images: %w", image, len(grids), ml.ErrInvalidInput)
	}
	p.Delta = int(maxPos) + 1 - n
	return p, nil
}

// Slice is the positions of tokens [from, to).
func (p Positions) Slice(from, to int) Positions {
	return Positions{T: p.T[from:to], H: p.H[from:to], W: p.W[from:to], Delta: p.Delta}
}
