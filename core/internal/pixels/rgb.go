package pixels

import "fmt"

// RGB is an 8-bit RGB image: W×H pixels, rows top to bottom, each pixel R, G, B (HWC layout,
// len(Pix) == 3*W*H). It is the layout of torchvision's pil_to_tensor output, transposed to
// channels-last.
type RGB struct {
	W, H int
	Pix  []byte
}

// NewRGB returns a zeroed w×h image.
func NewRGB(w, h int) *RGB {
	m := &RGB{}
	m.Reset(w, h)
	return m
}

// Reset gives m the size w×h, reusing Pix when its capacity suffices. The pixel values are
// unspecified afterwards.
func (m *RGB) Reset(w, h int) {
	n := 3 * w * h
	if cap(m.Pix) < n {
		m.Pix = make([]byte, n)
	}
	m.W, m.H, m.Pix = w, h, m.Pix[:n]
}

// Row returns row y's 3*W bytes.
func (m *RGB) Row(y int) []byte { return m.Pix[3*m.W*y : 3*m.W*(y+1)] }

// check reports whether m's buffer matches its size.
func (m *RGB) check(what string) error {
	if m == nil {
		return fmt.Errorf("%s image is nil", what)
	}
	if m.W <= 0 || m.H <= 0 {
		return fmt.Errorf("%s image is %dx%d", what, m.W, m.H)
	}
	if len(m.Pix) != 3*m.W*m.H {
		return fmt.Errorf("%s image is %dx%d but holds %d bytes", what, m.W, m.H, len(m.Pix))
	}
	return nil
}
