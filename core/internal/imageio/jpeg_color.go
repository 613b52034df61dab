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

// upsampler produces full-resolution rows of one component.
type upsampler struct {
	c      *jcomp
	hr, vr int // expansion factors
	dw, dh int // libjpeg's downsampled_width and downsampled_height
	fancy  bool
	stride int
	buf    []byte
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
		return h2v1(u.buf[:2*u.dw], u.planeRow(y))
	case u.hr == 1 && u.vr == 2:
		near, far, bias := u.vertical(y)
		out := u.buf[:u.dw]
		far = far[:len(out)]
		near = near[:len(out)]
		for x := range out {
			out[x] = byte((3*int32(near[x]) + int32(far[x]) + bias) >> 2)
		}
		return out
	default: // h2v2
		near, far, _ := u.vertical(y)
		return h2v2(u.buf[:2*u.dw], near, far)
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

// h2v1 is h2v1_fancy_upsample: 3/4 nearer + 1/4 further sample, alternating rounding. It
// needs len(in) >= 2 and len(out) == 2*len(in).
func h2v1(out, in []byte) []byte {
	n := len(in)
	out = out[:2*n]
	v := int32(in[0])
	out[0] = in[0]
	out[1] = byte((v*3 + int32(in[1]) + 2) >> 2)
	for x := 1; x < n-1; x++ {
		v := int32(in[x]) * 3
		o := out[2*x : 2*x+2 : 2*x+2]
		o[0] = byte((v + int32(in[x-1]) + 1) >> 2)
		o[1] = byte((v + int32(in[x+1]) + 2) >> 2)
	}
	v = int32(in[n-1])
	out[2*n-2] = byte((v*3 + int32(in[n-2]) + 1) >> 2)
	out[2*n-1] = in[n-1]
	return out
}

// h2v2 is h2v2_fancy_upsample for one output row: column sums 3*near+far, then the same
// 3:1 triangle filter across. It needs len(near) >= 2, len(far) == len(near) and
// len(out) == 2*len(near).
func h2v2(out, near, far []byte) []byte {
	n := len(near)
	out = out[:2*n]
	far = far[:n]
	// prev, cur and next are the column sums at x-1, x and x+1.
	cur := 3*int32(near[0]) + int32(far[0])
	next := 3*int32(near[1]) + int32(far[1])
	out[0] = byte((cur*4 + 8) >> 4)
	out[1] = byte((cur*3 + next + 7) >> 4)
	for x := 1; x < n-1; x++ {
		prev := cur
		cur = next
		next = 3*int32(near[x+1]) + int32(far[x+1])
		o := out[2*x : 2*x+2 : 2*x+2]
		o[0] = byte((cur*3 + prev + 8) >> 4)
		o[1] = byte((cur*3 + next + 7) >> 4)
	}
	out[2*n-2] = byte((next*3 + cur + 8) >> 4)
	out[2*n-1] = byte((next*4 + 7) >> 4)
	return out
}

// yccToRGB is jdcolor.c's ycc_rgb_convert of one row into interleaved RGB. Out-of-range values
// saturate, as libjpeg's range_limit table makes them.
func yccToRGB(out, y, cb, cr []byte) {
	n := len(y)
	cb, cr, out = cb[:n], cr[:n], out[:3*n]
	for x := range n {
		yy, b, r := int32(y[x]), cb[x], cr[x]
		o := out[3*x : 3*x+3 : 3*x+3]
		o[0] = byte(min(max(yy+ycc.crR[r], 0), 255))
		o[1] = byte(min(max(yy+(ycc.cbG[b]+ycc.crG[r])>>16, 0), 255))
		o[2] = byte(min(max(yy+ycc.cbB[b], 0), 255))
	}
}

// toRGB converts the decoded planes to interleaved RGB rows [lo, hi) of dst (width d.width).
func (d *jpegDecoder) toRGB(dst []byte, rgb bool, lo, hi int) {
	d.newRGBWriter(dst, rgb).rows(lo, hi)
}

// rgbWriter converts the decoded planes to interleaved RGB rows of dst (width d.width), with
// its own upsamplers: one per goroutine.
type rgbWriter struct {
	d   *jpegDecoder
	dst []byte
	rgb bool // the planes hold R, G and B, not YCbCr
	us  [jMaxComponents]*upsampler
}

func (d *jpegDecoder) newRGBWriter(dst []byte, rgb bool) *rgbWriter {
	w := &rgbWriter{d: d, dst: dst, rgb: rgb}
	for i := range d.nComp {
		w.us[i] = newUpsampler(d, &d.comp[i])
	}
	return w
}

// rows converts output rows [lo, hi).
func (wr *rgbWriter) rows(lo, hi int) {
	w, dst, us := wr.d.width, wr.dst, &wr.us
	if wr.d.nComp == 1 {
		for y := lo; y < hi; y++ {
			in := us[0].row(y)[:w]
			out := dst[3*w*y : 3*w*(y+1)]
			for x, v := range in {
				o := out[3*x : 3*x+3 : 3*x+3]
				o[0], o[1], o[2] = v, v, v
			}
		}
		return
	}
	for y := lo; y < hi; y++ {
		c0, c1, c2 := us[0].row(y)[:w], us[1].row(y)[:w], us[2].row(y)[:w]
		out := dst[3*w*y : 3*w*(y+1)]
		if wr.rgb {
			for x := range c0 {
				o := out[3*x : 3*x+3 : 3*x+3]
				o[0], o[1], o[2] = c0[x], c1[x], c2[x]
			}
			continue
		}
		yccToRGB(out, c0, c1, c2)
	}
}
