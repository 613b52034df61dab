package pixels

import "fmt"

// Crop copies the dst.W×dst.H region of src whose top-left corner is (x, y) into dst (whose
// Pix is reused when its capacity suffices). The region must lie inside src.
func Crop(dst, src *RGB, x, y int) error {
	if err := src.check("source"); err != nil {
		return fmt.Errorf("cropping: %w", err)
	}
	if dst == nil || dst.W <= 0 || dst.H <= 0 || x < 0 || y < 0 || x+dst.W > src.W || y+dst.H > src.H {
		return fmt.Errorf("cropping: region outside the %dx%d source", src.W, src.H)
	}
	dst.Reset(dst.W, dst.H)
	for r := range dst.H {
		copy(dst.Row(r), src.Pix[3*((y+r)*src.W+x):3*((y+r)*src.W+x+dst.W)])
	}
	return nil
}

// Pad places src at (left, top) inside dst (dst.W×dst.H, Pix reused when its capacity
// suffices) and fills the border with fill. src must fit.
func Pad(dst, src *RGB, left, top int, fill [3]uint8) error {
	if err := src.check("source"); err != nil {
		return fmt.Errorf("padding: %w", err)
	}
	if dst == nil || left < 0 || top < 0 || left+src.W > dst.W || top+src.H > dst.H {
		return fmt.Errorf("padding: the %dx%d source does not fit at (%d,%d)", src.W, src.H, left, top)
	}
	dst.Reset(dst.W, dst.H)
	for i := 0; i < len(dst.Pix); i += 3 {
		dst.Pix[i], dst.Pix[i+1], dst.Pix[i+2] = fill[0], fill[1], fill[2]
	}
	for r := range src.H {
		copy(dst.Pix[3*((top+r)*dst.W+left):], src.Row(r))
	}
	return nil
}

// TileGrid returns how many size×size tiles cover src in each direction; src's sides must be
// multiples of size.
func TileGrid(src *RGB, size int) (rows, cols int, err error) {
	if err := src.check("source"); err != nil {
		return 0, 0, fmt.Errorf("tiling: %w", err)
	}
	if size <= 0 || src.W%size != 0 || src.H%size != 0 {
		return 0, 0, fmt.Errorf("tiling: %dx%d is not a whole number of %d-pixel tiles", src.W, src.H, size)
	}
	return src.H / size, src.W / size, nil
}

// Tile copies tile i (row-major: i = row·cols + col) of the size×size tiling of src into dst.
func Tile(dst, src *RGB, size, i int) error {
	rows, cols, err := TileGrid(src, size)
	if err != nil {
		return err
	}
	if i < 0 || i >= rows*cols {
		return fmt.Errorf("tiling: tile %d of %d", i, rows*cols)
	}
	dst.W, dst.H = size, size
	return Crop(dst, src, (i%cols)*size, (i/cols)*size)
}
