package main

import (
	"math"
	"slices"
)

// Tiling is the grid GotOcr2ImageProcessor cuts an image into: Cols × Rows tiles of the image
// resized once to (Cols·tile, Rows·tile), row-major, plus a thumbnail (the whole image resized to
// tile × tile) when there is more than one tile.
type Tiling struct {
	Cols, Rows int
}

// Tiles returns the number of grid tiles, the thumbnail not counted.
func (t Tiling) Tiles() int { return t.Cols * t.Rows }

// Views returns the number of pictures the vision encoder sees: the tiles, plus the thumbnail
// when there is more than one tile.
func (t Tiling) Views() int {
	if n := t.Tiles(); n > 1 {
		return n + 1
	}
	return 1
}

// aspectRatios is transformers' get_all_supported_aspect_ratios(minTiles, maxTiles): every
// (cols, rows) with minTiles <= cols·rows <= maxTiles, generated cols-outer, rows-inner, then
// stable-sorted by cols·rows. The order decides ties, so it is kept exactly.
func aspectRatios(minTiles, maxTiles int) []Tiling {
	var out []Tiling
	for c := 1; c <= maxTiles; c++ {
		for r := 1; r <= maxTiles; r++ {
			if n := c * r; n <= maxTiles && n >= minTiles {
				out = append(out, Tiling{Cols: c, Rows: r})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Tiling) int { return a.Tiles() - b.Tiles() })
	return out
}

// OptimalTiling is transformers' get_optimal_tiled_canvas((height, width), (tile, tile),
// minTiles, maxTiles): the grid whose cols/rows is closest to width/height (float64, as Python
// computes it); on an exact tie the later grid in aspectRatios' order wins while the image's
// area exceeds half the later grid's area (width·height > 0.5·tile²·cols·rows). An empty list
// (minTiles > maxTiles) gives the reference's initial (1, 1).
func OptimalTiling(width, height, tile, minTiles, maxTiles int) Tiling {
	aspect := float64(width) / float64(height)
	area := float64(width) * float64(height) // exact: both sides are at most 2^15
	best, bestDiff := Tiling{Cols: 1, Rows: 1}, math.Inf(1)
	for _, g := range aspectRatios(minTiles, maxTiles) {
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
