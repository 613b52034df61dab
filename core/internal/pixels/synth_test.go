package pixels

// synth is the synthetic test image scripts/reference/golden_resize.py generates from the same
// seed: a smooth ramp plus noise, with some saturated pixels so that bicubic overshoots clamp.
func synth(w, h int, seed uint64) *RGB {
	m := NewRGB(w, h)
	for y := range h {
		for x := range w {
			for c := range 3 {
				v := (uint64(y)*65536+uint64(x))*3 + uint64(c) + seed*0x9E3779B1
				v &= 0xFFFFFFFF
				v ^= v >> 16
				v = (v * 0x7FEB352D) & 0xFFFFFFFF
				v ^= v >> 15
				v = (v * 0x846CA68B) & 0xFFFFFFFF
				v ^= v >> 16
				smooth := (uint64(x)*255/uint64(max(w, 1)) + uint64(y)*191/uint64(max(h, 1)) + uint64(c)*60) % 256
				out := (smooth + v&31) % 256
				switch top := v >> 24; {
				case top < 8:
					out = 0
				case top > 247:
					out = 255
				}
				m.Pix[(y*w+x)*3+c] = byte(out)
			}
		}
	}
	return m
}
