// Package gotocr2 is transformers' GotOcr2-style tiled-canvas search, which InternVL's and
// DeepSeek-OCR-2's image processors share (get_all_supported_aspect_ratios and
// get_optimal_tiled_canvas, transformers 5.17): which grid of square tiles an image is resized
// onto.
package gotocr2

import (
	"math"
	"slices"
)

// Grid is Cols × Rows tiles.
type Grid struct {
	Cols, Rows int
}

// Tiles returns Cols·Rows.
func (g Grid) Tiles() int { return g.Cols * g.Rows }

// AspectRatios is get_all_supported_aspect_ratios(minTiles, maxTiles): every (cols, rows) with
// minTiles <= cols·rows <= maxTiles, generated cols-outer, rows-inner, then stable-sorted by
// cols·rows. The order decides ties, so it is kept exactly.
func AspectRatios(minTiles, maxTiles int) []Grid {
	var out []Grid
	for c := 1; c <= maxTiles; c++ {
		for r := 1; r <= maxTiles; r++ {
			if n := c * r; n <= maxTiles && n >= minTiles {
				out = append(out, Grid{Cols: c, Rows: r})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Grid) int { return a.Tiles() - b.Tiles() })
	return out
}

// OptimalCanvas is get_optimal_tiled_canvas((height, width), (tile, tile), minTiles, maxTiles):
// the grid whose cols/rows is closest to width/height (float64, as Python computes it); on an
// exact tie the later grid in AspectRatios' order wins while the image's area exceeds half the
// later grid's area (width·height > 0.5·tile²·cols·rows). An empty list (minTiles > maxTiles)
// gives the reference's initial (1, 1). width and height must be positive.
func OptimalCanvas(width, height, tile, minTiles, maxTiles int) Grid {
	aspect := float64(width) / float64(height)
	area := float64(width) * float64(height) // exact: both sides are at most 2^15
	best, bestDiff := Grid{Cols: 1, Rows: 1}, math.Inf(1)
	for _, g := range AspectRatios(minTiles, maxTiles) {
		diff := math.Abs(aspect - float64(g.Cols)/float64(g.Rows))
		switch {
		case diff < bestDiff:
			best, bestDiff = g, diff
		case diff == bestDiff:
			if area > 0.5*float64(tile)*float64(tile)*float64(g.Cols)*float64(g.Rows) {
				best = g
			}
		}
	}
	return best
}
