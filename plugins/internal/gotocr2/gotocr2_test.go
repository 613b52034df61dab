package gotocr2

import (
	"slices"
	"testing"
)

// TestAspectRatios: get_all_supported_aspect_ratios' order (cols-outer, stable by count), which
// decides ties: its docstring's (1, 4), and DeepSeek-OCR-2's (2, 6).
func TestAspectRatios(t *testing.T) {
	for _, tc := range []struct {
		lo, hi int
		want   []Grid
	}{
		{1, 4, []Grid{{1, 1}, {1, 2}, {2, 1}, {1, 3}, {3, 1}, {1, 4}, {2, 2}, {4, 1}}},
		{2, 6, []Grid{{1, 2}, {2, 1}, {1, 3}, {3, 1}, {1, 4}, {2, 2}, {4, 1}, {1, 5}, {5, 1}, {1, 6}, {2, 3}, {3, 2}, {6, 1}}},
		{3, 2, nil},
	} {
		if got := AspectRatios(tc.lo, tc.hi); !slices.Equal(got, tc.want) {
			t.Errorf("AspectRatios(%d, %d) = %v, want %v", tc.lo, tc.hi, got, tc.want)
		}
	}
}

// TestOptimalCanvas pins the tie rule: at an exact midpoint of two ratios the later grid wins
// only while the image's area exceeds half of its canvas.
func TestOptimalCanvas(t *testing.T) {
	for _, tc := range []struct {
		w, h, tile, lo, hi int
		want               Grid
	}{
		{770, 616, 768, 2, 6, Grid{2, 2}},   // 5:4, between 1 and 3/2; area under half of 3x2's
		{1490, 1192, 768, 2, 6, Grid{3, 2}}, // the same ratio past it
		{1000, 1000, 768, 2, 6, Grid{2, 2}}, // a square: 2x2 is exact
		{500, 500, 448, 1, 12, Grid{1, 1}},  // InternVL's square tie stays 1x1 while small
		{500, 500, 448, 5, 4, Grid{1, 1}},   // no grid: the reference's initial 1x1
	} {
		if got := OptimalCanvas(tc.w, tc.h, tc.tile, tc.lo, tc.hi); got != tc.want {
			t.Errorf("OptimalCanvas(%d, %d, %d, %d..%d) = %v, want %v", tc.w, tc.h, tc.tile, tc.lo, tc.hi, got, tc.want)
		}
	}
}
