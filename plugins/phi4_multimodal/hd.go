package main

import (
	"fmt"
	"math"
	"slices"
)

// Grid is a crop grid: Cols × Rows crops of CropSize pixels.
type Grid struct {
	Cols, Rows int
}

// Crops returns the number of crops, the global view not counted.
func (g Grid) Crops() int { return g.Cols * g.Rows }

// HD is Phi4MultimodalImageProcessor.dynamic_preprocess for one image: the crop grid, the size
// the image is resized to (keeping its aspect ratio), the white padding right and below that
// fills the canvas of Cols·CropSize × Rows·CropSize, and the canvas' valid patches.
type HD struct {
	Grid
	// NewW, NewH are the resized image's size; PadW, PadH the white pad right and below it.
	NewW, NewH int
	PadW, PadH int
	// MaskCols, MaskRows are the canvas' valid patch columns and rows: its last floor(pad/14)
	// patch columns (rows) are masked once the pad reaches a whole patch.
	MaskCols, MaskRows int
}

// ExtremeError is the reference's ValueError for an image whose resized short side (or canvas
// side) would be under 10 pixels.
type ExtremeError struct {
	NewW, NewH int
}

func (e *ExtremeError) Error() string {
	return fmt.Sprintf("the aspect ratio is very extreme (%d, %d)", e.NewW, e.NewH)
}

// Layout computes dynamic_preprocess(image, crop, patch, crop/patch, max_num=maxCrops) for a
// w×h image, operation for operation (float64 where Python divides, int() truncation):
//
//  1. the grid is (ceil(w/crop), ceil(h/crop)); when that is more than maxCrops crops, the grid
//     whose cols/rows is closest to w/h among every grid of 1 to maxCrops crops
//     (find_closest_aspect_ratio: on an exact tie the later grid in order of crop count wins
//     while w·h > 0.5·crop²·cols·rows);
//  2. the image is scaled by min(crop·cols/w, crop·rows/h): the side of the smaller ratio
//     fills the canvas, the other is int(side·ratio) and the rest of the canvas is padding;
//  3. the last floor(pad/patch) patch columns (rows) are masked when the pad is at least a
//     patch.
//
// A resized side (or canvas side) under 10 pixels is the reference's ValueError
// (*ExtremeError). w and h must be positive.
func Layout(w, h, crop, patch, maxCrops int) (HD, error) {
	g := Grid{Cols: int(math.Ceil(float64(w) / float64(crop))), Rows: int(math.Ceil(float64(h) / float64(crop)))}
	if g.Crops() > maxCrops {
		g = closestGrid(float64(w)/float64(h), w, h, crop, grids(maxCrops))
	}
	tw, th := crop*g.Cols, crop*g.Rows
	ratioW, ratioH := float64(tw)/float64(w), float64(th)/float64(h)
	hd := HD{Grid: g, NewW: tw, NewH: th}
	if ratioW < ratioH {
		hd.NewH = int(float64(h) * ratioW)
		hd.PadH = th - hd.NewH
	} else {
		hd.NewW = int(float64(w) * ratioH)
		hd.PadW = tw - hd.NewW
	}
	side := crop / patch
	hd.MaskCols, hd.MaskRows = side*g.Cols, side*g.Rows
	if hd.PadW >= patch {
		hd.MaskCols -= hd.PadW / patch
	}
	if hd.PadH >= patch {
		hd.MaskRows -= hd.PadH / patch
	}
	if min(hd.NewH, th) < 10 || min(hd.NewW, tw) < 10 {
		return HD{}, &ExtremeError{NewW: hd.NewW, NewH: hd.NewH}
	}
	return hd, nil
}

// grids returns every (cols, rows) of 1 to maxCrops crops in order of crop count. The reference
// builds them as a Python set and sorts them by crop count, so grids of one count come in the
// set's iteration order; that order never decides the result, because no two grids of one
// count can tie for the closest aspect ratio (scripts/reference/golden_phi4.py checks it for
// every maxCrops up to 63), so they come here in (cols, rows) order.
func grids(maxCrops int) []Grid {
	var out []Grid
	for c := 1; c <= maxCrops; c++ {
		for r := 1; c*r <= maxCrops; r++ {
			out = append(out, Grid{Cols: c, Rows: r})
		}
	}
	slices.SortStableFunc(out, func(a, b Grid) int { return a.Crops() - b.Crops() })
	return out
}

// closestGrid is find_closest_aspect_ratio: the grid whose cols/rows is closest to aspect, the
// later one winning an exact tie while the image's area exceeds half the grid's.
func closestGrid(aspect float64, w, h, crop int, candidates []Grid) Grid {
	best, bestDiff := Grid{Cols: 1, Rows: 1}, math.Inf(1)
	area := float64(w) * float64(h) // exact: both sides are at most 2^15
	for _, g := range candidates {
		diff := math.Abs(aspect - float64(g.Cols)/float64(g.Rows))
		switch {
		case diff < bestDiff:
			best, bestDiff = g, diff
		case diff == bestDiff && area > 0.5*float64(crop)*float64(crop)*float64(g.Cols)*float64(g.Rows):
			best = g
		}
	}
	return best
}

// Tokens returns num_img_tokens for the layout: the global view's 16×16 tokens, one separator
// after each of its 16 rows, one separator between sub-crops and global view, and the kept
// cells of the stitched crops (mask[::2, ::2]) with a separator after each of their rows.
func (hd HD) Tokens() int {
	rows, cols := (hd.MaskRows+1)/2, (hd.MaskCols+1)/2
	return GlobalTokens + GlobalRows + 1 + rows*cols + rows
}
