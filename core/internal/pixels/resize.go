package pixels

import (
	"errors"
	"fmt"
	"sync"
)

// Flavor names whose arithmetic a resize reproduces bit for bit.
type Flavor uint8

// Flavors.
const (
	// Torch is torch's CPU uint8 antialiased interpolate (aten UpSampleKernel, the path
	// torchvision's resize takes for a uint8 tensor with antialias=True, bilinear or bicubic):
	// float taps rounded to int16 at a precision chosen per axis, width pass then height pass,
	// a uint8 image in between. It is the transformers 5.x default (torchvision backend).
	Torch Flavor = iota + 1
	// PIL is Pillow's Image.resize for 8-bit images (ImagingResample): float taps rounded to
	// 22-bit fixed point, width pass then height pass (height first for images over 100 times
	// taller than wide), a uint8 image in between.
	PIL
)

// String returns the flavour's plan name.
func (f Flavor) String() string {
	switch f {
	case Torch:
		return "torchvision"
	case PIL:
		return "pil"
	}
	return "invalid"
}

// ParseFlavor maps a plan's flavour name ("torchvision" or "pil") to a Flavor.
func ParseFlavor(name string) (Flavor, error) {
	switch name {
	case "torchvision":
		return Torch, nil
	case "pil":
		return PIL, nil
	}
	return 0, fmt.Errorf("flavour %q: %w", name, ErrUnsupported)
}

// ParseFilter maps a plan's filter name ("bicubic" or "bilinear") to a Filter.
func ParseFilter(name string) (Filter, error) {
	switch name {
	case "bicubic":
		return Bicubic, nil
	case "bilinear":
		return Bilinear, nil
	}
	return 0, fmt.Errorf("filter %q: %w", name, ErrUnsupported)
}

// ErrUnsupported reports a filter or flavour this package does not implement.
var ErrUnsupported = errors.New("unsupported resize")

// Resize scales src to dst's size (dst.W×dst.H, which the caller sets; dst.Pix is reused when
// its capacity suffices) with an antialiased filter, exactly as flavor does it. Equal sizes
// copy. dst must not share memory with src.
func Resize(dst, src *RGB, flavor Flavor, filter Filter) error {
	if err := src.check("source"); err != nil {
		return fmt.Errorf("resizing: %w", err)
	}
	if dst == nil || dst.W <= 0 || dst.H <= 0 {
		return fmt.Errorf("resizing: destination size must be positive")
	}
	if filter != Bilinear && filter != Bicubic {
		return fmt.Errorf("resizing with filter %d: %w", filter, ErrUnsupported)
	}
	if flavor != Torch && flavor != PIL {
		return fmt.Errorf("resizing with flavour %d: %w", flavor, ErrUnsupported)
	}
	coeffsFor := func(in, out int, f Filter) *coeffs { return cachedCoeffs(flavor, in, out, f) }
	dst.Reset(dst.W, dst.H)
	needH, needV := dst.W != src.W, dst.H != src.H
	switch {
	case !needH && !needV:
		copy(dst.Pix, src.Pix)
	case needH && !needV:
		horizontal(dst, src, coeffsFor(src.W, dst.W, filter))
	case !needH && needV:
		vertical(dst, src, coeffsFor(src.H, dst.H, filter))
	case flavor == PIL && src.H > 100*src.W && dst.H < src.H:
		// Image.resize shrinks very tall images' height first (PIL/Image.py).
		kh, kv := coeffsFor(src.W, dst.W, filter), coeffsFor(src.H, dst.H, filter)
		buf := scratch.get(3 * src.W * dst.H)
		tmp := &RGB{W: src.W, H: dst.H, Pix: *buf}
		vertical(tmp, src, kv)
		horizontal(dst, tmp, kh)
		scratch.put(buf)
	default:
		kh, kv := coeffsFor(src.W, dst.W, filter), coeffsFor(src.H, dst.H, filter)
		buf := scratch.get(3 * dst.W * src.H)
		tmp := &RGB{W: dst.W, H: src.H, Pix: *buf}
		horizontal(tmp, src, kh)
		vertical(dst, tmp, kv)
		scratch.put(buf)
	}
	return nil
}

// coeffKey identifies a filter table: they depend on nothing else.
type coeffKey struct {
	flavor  Flavor
	filter  Filter
	in, out int
}

// coeffCache keeps the tables of recent resizes. Requests come in a few common sizes, and
// building the two tables of a resize is serial work of tens of microseconds on the request's
// critical path, before any band can start.
var coeffCache struct {
	sync.Mutex
	m map[coeffKey]*coeffs
}

// maxCachedCoeffs bounds coeffCache (a table is up to a few hundred KB for large shrinks);
// a full cache is emptied and starts over.
const maxCachedCoeffs = 64

// cachedCoeffs returns the table of resampling in samples to out, from the cache or built.
// A cached table is shared by concurrent resizes, so its lazily built horizontal layout is
// built before it is published, and never written afterwards.
func cachedCoeffs(flavor Flavor, in, out int, filter Filter) *coeffs {
	key := coeffKey{flavor, filter, in, out}
	coeffCache.Lock()
	c, ok := coeffCache.m[key]
	coeffCache.Unlock()
	if ok {
		return c
	}
	if flavor == Torch {
		c = torchCoeffs(in, out, filter)
	} else {
		c = pilCoeffs(in, out, filter)
	}
	c.layout()
	coeffCache.Lock()
	if coeffCache.m == nil || len(coeffCache.m) >= maxCachedCoeffs {
		coeffCache.m = map[coeffKey]*coeffs{}
	}
	coeffCache.m[key] = c
	coeffCache.Unlock()
	return c
}

// clamp8 converts a fixed-point sum to a byte: an arithmetic shift, then saturation.
func clamp8(s int32, prec uint) byte {
	s >>= prec
	if s < 0 {
		return 0
	}
	if s > 255 {
		return 255
	}
	return byte(s)
}

// horizontal resamples every row of src to dst.W pixels.
func horizontal(dst, src *RGB, c *coeffs) {
	vec := haveAVX2 && c.layout() != nil
	bands(src.H, 3*dst.W, func(lo, hi int) {
		y := lo
		if vec && c.int16 {
			// Two rows per call while both rows' loads stay inside the buffer.
			for ; y+1 < hi && (y+1)*3*src.W+c.hl.maxNeed <= len(src.Pix); y += 2 {
				h := c.hl
				horiz2AVX2(&dst.Row(y)[0], 3*dst.W, &src.Pix[y*3*src.W], 3*src.W, len(h.cnt),
					&h.off[0], &h.cnt[0], &h.w[0], h.stride, int32(1)<<(c.prec-1), uint64(c.prec))
			}
		}
		for ; y < hi; y++ {
			x0 := 0
			if vec {
				x0 = c.horizontalAVX2(dst.Row(y), src.Pix, y*3*src.W)
			}
			horizontalRow(dst.Row(y)[3*x0:], src.Row(y), c, x0)
		}
	})
}

// horizontalRow computes the outputs from x0 on of one row.
func horizontalRow(out, in []byte, c *coeffs, x0 int) {
	init := int32(1) << (c.prec - 1)
	for x := x0; x < len(c.n); x++ {
		s := int(c.start[x]) * 3
		k := c.k[x*c.ksize : x*c.ksize+int(c.n[x])]
		px := in[s : s+3*len(k)]
		r, g, b := init, init, init
		for j, w := range k {
			p := px[3*j : 3*j+3]
			r += int32(p[0]) * w
			g += int32(p[1]) * w
			b += int32(p[2]) * w
		}
		o := out[3*(x-x0) : 3*(x-x0)+3]
		o[0], o[1], o[2] = clamp8(r, c.prec), clamp8(g, c.prec), clamp8(b, c.prec)
	}
}

// vertChunk is how many bytes of a row the scalar vertical pass accumulates at a time; the
// accumulators stay in L1.
const vertChunk = 2048

// vertical resamples every column of src to dst.H pixels. Each output row is a weighted sum of
// whole input rows.
func vertical(dst, src *RGB, c *coeffs) {
	stride := 3 * src.W
	vec := haveAVX2 && stride >= 16
	bands(dst.H, stride, func(lo, hi int) {
		var acc [vertChunk]int32
		var offs []int
		var wp []int32
		init := int32(1) << (c.prec - 1)
		for y := lo; y < hi; y++ {
			out := dst.Row(y)
			s := int(c.start[y])
			k := c.k[y*c.ksize : y*c.ksize+int(c.n[y])]
			done := 0
			if vec && len(k) > 0 {
				done = stride &^ 15
				if c.int16 {
					offs, wp = packRows(offs[:0], wp[:0], k, s, stride)
					vertAVX2(&out[0], &src.Pix[0], done, &offs[0], &wp[0], len(wp), init, uint64(c.prec))
				} else {
					offs = offs[:0]
					for j := range k {
						offs = append(offs, (s+j)*stride)
					}
					vert32AVX2(&out[0], &src.Pix[0], done, &offs[0], &k[0], len(k), init, uint64(c.prec))
				}
			}
			for x0 := done; x0 < stride; x0 += vertChunk {
				m := min(vertChunk, stride-x0)
				a := acc[:m]
				for i := range a {
					a[i] = init
				}
				for j, w := range k {
					row := src.Pix[(s+j)*stride+x0 : (s+j)*stride+x0+m]
					for i, p := range row {
						a[i] += int32(p) * w
					}
				}
				o := out[x0 : x0+m]
				for i, v := range a {
					o[i] = clamp8(v, c.prec)
				}
			}
		}
	})
}

// packRows lays out the taps of one vertical output for vertAVX2: the byte offsets of the input
// rows in pairs (an odd last tap pairs with its own row and a zero tap) and the taps of each pair
// packed into one int32.
func packRows(offs []int, wp []int32, k []int32, start, stride int) ([]int, []int32) {
	for j := 0; j < len(k); j += 2 {
		r0, r1, w1 := (start+j)*stride, (start+j)*stride, int32(0)
		if j+1 < len(k) {
			r1, w1 = r0+stride, k[j+1]
		}
		offs = append(offs, r0, r1)
		wp = append(wp, int32(uint32(uint16(k[j]))|uint32(uint16(w1))<<16))
	}
	return offs, wp
}

// hlayout is a horizontal coeffs table laid out for the vector kernels: 16-bit taps in packed
// pairs for horizAVX2, or the 32-bit taps as they are for horiz32AVX2.
type hlayout struct {
	off, cnt, w []int32 // byte offset of each output's first tap; pairs or taps; weights
	stride      int     // weights per output in w
	need        []int   // bytes each output's loads reach from its row's start
	maxNeed     int
}

// layout returns the table for the vector kernels, or nil when an output has no taps.
func (c *coeffs) layout() *hlayout {
	if c.hl != nil {
		return c.hl
	}
	out := len(c.n)
	h := &hlayout{off: make([]int32, out), cnt: make([]int32, out), need: make([]int, out), w: c.k, stride: c.ksize}
	if c.int16 {
		h.stride = (c.ksize + 1) / 2
		h.w = make([]int32, out*h.stride)
	}
	for x := range out {
		n := int(c.n[x])
		if n == 0 {
			return nil
		}
		h.off[x] = c.start[x] * 3
		if c.int16 {
			h.cnt[x] = int32((n + 1) / 2)
			k := c.k[x*c.ksize : x*c.ksize+n]
			for p := 0; p < n; p += 2 {
				w1 := int32(0)
				if p+1 < n {
					w1 = k[p+1]
				}
				h.w[x*h.stride+p/2] = int32(uint32(uint16(k[p])) | uint32(uint16(w1))<<16)
			}
			h.need[x] = int(h.off[x]) + 6*(int(h.cnt[x])-1) + 8
		} else {
			h.cnt[x] = int32(n)
			h.need[x] = int(h.off[x]) + 3*(n-1) + 4
		}
		h.maxNeed = max(h.maxNeed, h.need[x])
	}
	c.hl = h
	return h
}

// horizontalAVX2 computes the outputs of the row starting at byte rowStart of pix whose vector
// loads stay inside pix, and returns how many it did: all of them except near the buffer's end.
func (c *coeffs) horizontalAVX2(out, pix []byte, rowStart int) int {
	h := c.hl
	n := len(h.cnt)
	if rowStart+h.maxNeed > len(pix) {
		n = 0
		for n < len(h.cnt) && rowStart+h.need[n] <= len(pix) {
			n++
		}
	}
	if n == 0 {
		return 0
	}
	init, prec := int32(1)<<(c.prec-1), uint64(c.prec)
	if c.int16 {
		horizAVX2(&out[0], &pix[rowStart], n, &h.off[0], &h.cnt[0], &h.w[0], h.stride, init, prec)
	} else {
		horiz32AVX2(&out[0], &pix[rowStart], n, &h.off[0], &h.cnt[0], &h.w[0], h.stride, init, prec)
	}
	return n
}
