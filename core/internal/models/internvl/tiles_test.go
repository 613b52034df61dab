package internvl

import (
	"slices"
	"testing"
)

// TestTilePlan pins the layout of two tiles of 4x4 patches: the CLS row first in each tile's
// segment of 17 rows, the position table's rows repeating a tile, and the pixel shuffle's order
// (InternVLModel.pixel_shuffle: token (r, c) is patches (2r, 2c), (2r, 2c+1), (2r+1, 2c),
// (2r+1, 2c+1)).
func TestTilePlan(t *testing.T) {
	p := newTilePlan(2, 4, 2)
	if p.rows != 34 || p.tileRows != 17 {
		t.Fatalf("rows %d, tile rows %d", p.rows, p.tileRows)
	}
	if want := []int32{0, 17, 34}; !slices.Equal(p.bounds, want) {
		t.Errorf("bounds %v, want %v", p.bounds, want)
	}
	if p.patchRows[0] != 1 || p.patchRows[15] != 16 || p.patchRows[16] != 18 || p.posIDs[17] != 0 || p.posIDs[33] != 16 {
		t.Errorf("patch rows %v, position ids %v", p.patchRows, p.posIDs)
	}
	// tile 0: patch (row, col) is tower row 1 + 4*row + col; tile 1 starts at 18
	want := []int32{
		1, 2, 5, 6, 3, 4, 7, 8, // tokens (0, 0) and (0, 1)
		9, 10, 13, 14, 11, 12, 15, 16, // (1, 0), (1, 1)
		18, 19, 22, 23, 20, 21, 24, 25,
		26, 27, 30, 31, 28, 29, 32, 33,
	}
	if !slices.Equal(p.shuffle, want) {
		t.Errorf("shuffle\n got %v\nwant %v", p.shuffle, want)
	}
}
