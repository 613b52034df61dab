package imageio

// This file ports libjpeg-turbo's output side for decompression to RGB with the library
// defaults Pillow uses (do_fancy_upsampling on, no DCT scaling): jdsample.c's per-component
// upsampling — the "fancy" triangle filters for 2h1v, 1h2v and 2h2v ratios, box replication
// otherwise — with jdmainct.c's edge rules (the first sample row repeats above the image and
// the last real row below it), then jdcolor.c's fixed-point YCbCr->RGB conversion.

// ycc holds jdcolor.c's build_ycc_rgb_table, indexed by the chroma sample.
var ycc = func() (t struct {
	crR, cbB [256]int32
	crG, cbG [256]int32
}) {
	const (
		scaleBits = 16
		oneHalf   = 1 << (scaleBits - 1)
	)
	fix := func(x float64) int32 { return int32(x*(1<<scaleBits) + 0.5) }
	for i := range 256 {
		x := int32(i - 128)
		t.crR[i] = (fix(1.40200)*x + oneHalf) >> scaleBits
		t.cbB[i] = (fix(1.77200)*x + oneHalf) >> scaleBits
		t.crG[i] = -fix(0.71414) * x
		t.cbG[i] = -fix(0.34414)*x + oneHalf
	}
	return t
}()

func clampByte(v int32) byte {
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return byte(v)
}

// upsampler produces full-resolution rows of one component.
type upsampler struct {
	c      *jcomp
	hr, vr int // expansion factors
	dw, dh int // libjpeg's downsampled_width and downsampled_height
	fancy  bool
	stride int
	buf    []byte
	colsum []int32
}

func newUpsampler(d *jpegDecoder, c *jcomp) *upsampler {
	u := &upsampler{
		c: c, hr: d.hmax / c.h, vr: d.vmax / c.v,
		dw: ceilDiv(d.width*c.h, d.hmax), dh: ceilDiv(d.height*c.v, d.vmax),
		stride: c.aw * 8,
	}
	switch {
	case u.hr == 2 && u.vr == 1, u.hr == 2 && u.vr == 2:
		u.fancy = u.dw > 2
	case u.hr == 1 && u.vr == 2:
		u.fancy = true
	}
	u.buf = make([]byte, 2*u.dw*u.hr+16)
	if u.fancy && u.hr == 2 && u.vr == 2 {
		u.colsum = make([]int32, u.dw)
	}
	return u
}

// planeRow returns the component's sample row r, clamped to the real rows.
func (u *upsampler) planeRow(r int) []byte {
	r = min(max(r, 0), u.dh-1)
	return u.c.plane[r*u.stride : r*u.stride+u.dw]
}

// row returns output row y of the component at full resolution (at least width samples).
func (u *upsampler) row(y int) []byte {
	switch {
	case u.hr == 1 && u.vr == 1:
		return u.planeRow(y)
	case !u.fancy:
		in := u.planeRow(y / u.vr)
		out := u.buf[:len(in)*u.hr]
		for x, v := range in {
			for k := range u.hr {
				out[x*u.hr+k] = v
			}
		}
		return out
	case u.hr == 2 && u.vr == 1:
		return u.h2v1(u.planeRow(y))
	case u.hr == 1 && u.vr == 2:
		near, far, bias := u.vertical(y)
		out := u.buf[:u.dw]
		for x := range out {
			out[x] = byte((3*int32(near[x]) + int32(far[x]) + bias) >> 2)
		}
		return out
	default: // h2v2
		near, far, _ := u.vertical(y)
		cs := u.colsum
		for x := range cs {
			cs[x] = 3*int32(near[x]) + int32(far[x])
		}
		return u.h2v2(cs)
	}
}

// vertical returns the nearest and next-nearest input rows of output row y for a 2:1 vertical
// ratio, and h1v2_fancy_upsample's rounding bias.
func (u *upsampler) vertical(y int) (near, far []byte, bias int32) {
	i := y / 2
	if y%2 == 0 {
		return u.planeRow(i), u.planeRow(i - 1), 1
	}
	return u.planeRow(i), u.planeRow(i + 1), 2
}

// h2v1 is h2v1_fancy_upsample: 3/4 nearer + 1/4 further sample, alternating rounding.
func (u *upsampler) h2v1(in []byte) []byte {
	n := len(in)
	out := u.buf[:2*n]
	v := int32(in[0])
	out[0] = in[0]
	out[1] = byte((v*3 + int32(in[1]) + 2) >> 2)
	for x := 1; x < n-1; x++ {
		v := int32(in[x]) * 3
		out[2*x] = byte((v + int32(in[x-1]) + 1) >> 2)
		out[2*x+1] = byte((v + int32(in[x+1]) + 2) >> 2)
	}
	v = int32(in[n-1])
	out[2*n-2] = byte((v*3 + int32(in[n-2]) + 1) >> 2)
	out[2*n-1] = in[n-1]
	return out
}

// h2v2 is the horizontal half of h2v2_fancy_upsample over column sums 3*near+far.
func (u *upsampler) h2v2(cs []int32) []byte {
	n := len(cs)
	out := u.buf[:2*n]
	out[0] = byte((cs[0]*4 + 8) >> 4)
	out[1] = byte((cs[0]*3 + cs[1] + 7) >> 4)
	for x := 1; x < n-1; x++ {
		out[2*x] = byte((cs[x]*3 + cs[x-1] + 8) >> 4)
		out[2*x+1] = byte((cs[x]*3 + cs[x+1] + 7) >> 4)
	}
	out[2*n-2] = byte((cs[n-1]*3 + cs[n-2] + 8) >> 4)
	out[2*n-1] = byte((cs[n-1]*4 + 7) >> 4)
	return out
}

// toRGB converts the decoded planes to interleaved RGB rows [lo, hi) of dst (width d.width).
func (d *jpegDecoder) toRGB(dst []byte, rgb bool, lo, hi int) {
	w := d.width
	if d.nComp == 1 {
		u := newUpsampler(d, &d.comp[0])
		for y := lo; y < hi; y++ {
			in := u.row(y)[:w]
			out := dst[3*w*y : 3*w*(y+1)]
			for x, v := range in {
				out[3*x], out[3*x+1], out[3*x+2] = v, v, v
			}
		}
		return
	}
	us := [3]*upsampler{newUpsampler(d, &d.comp[0]), newUpsampler(d, &d.comp[1]), newUpsampler(d, &d.comp[2])}
	for y := lo; y < hi; y++ {
		c0, c1, c2 := us[0].row(y)[:w], us[1].row(y)[:w], us[2].row(y)[:w]
		out := dst[3*w*y : 3*w*(y+1)]
		if rgb {
			for x := range c0 {
				out[3*x], out[3*x+1], out[3*x+2] = c0[x], c1[x], c2[x]
			}
			continue
		}
		for x := range c0 {
			yy, cb, cr := int32(c0[x]), c1[x], c2[x]
			out[3*x] = clampByte(yy + ycc.crR[cr])
			out[3*x+1] = clampByte(yy + (ycc.cbG[cb]+ycc.crG[cr])>>16)
			out[3*x+2] = clampByte(yy + ycc.cbB[cb])
		}
	}
}
