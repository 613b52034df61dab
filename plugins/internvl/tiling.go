package main

import "github.com/iris-vlm/iris/plugins/internal/gotocr2"

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

// aspectRatios is gotocr2.AspectRatios as Tilings.
func aspectRatios(minTiles, maxTiles int) []Tiling {
	var out []Tiling
	for _, g := range gotocr2.AspectRatios(minTiles, maxTiles) {
		out = append(out, Tiling(g))
	}
	return out
}

// OptimalTiling is transformers' get_optimal_tiled_canvas((height, width), (tile, tile),
// minTiles, maxTiles): gotocr2.OptimalCanvas.
func OptimalTiling(width, height, tile, minTiles, maxTiles int) Tiling {
	return Tiling(gotocr2.OptimalCanvas(width, height, tile, minTiles, maxTiles))
}
