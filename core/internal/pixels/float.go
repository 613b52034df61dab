package pixels

import (
	"fmt"
	"math"
	"math/big"
	"slices"
)

// ResizeFloatBicubic normalises src with t and resizes the normalised image, in float32, to
// w×h exactly as torch's CPU interpolate does a float32 tensor with mode="bicubic",
// align_corners=False, antialias=False (transformers' torchvision backend resizing an already
// normalised image, e.g. Phi-4-multimodal's global view). It writes the [3, h, w]
// channels-first result into dst (reused when large enough) and returns it.
//
// The normalised image is never materialised: torch reads each tap of the normalised tensor,
// which is t's value for the tap's byte, so the table is read instead.
//
// # Notes
//
//   - The arithmetic is torch 2.11's AVX2/AVX512 CPU kernel (upsample_bicubic2d through
//     upsample_generic_Nd_kernel_impl), whose compiler contracted some products into fused
//     multiply-adds: the source coordinate scale·(i+0.5)−0.5, the first step of both cubic
//     coefficient polynomials and the second of the outer one, and the four-tap sums (the first
//     two taps as fma(t0, w0, t1·w1), then each further tap fused). Measured against torch
//     2.11.0 on an AVX512 CPU (scripts/reference/golden_float_resize.py). x86-64 CPUs whose
//     torch falls back to its DEFAULT kernels round differently; the goldens record the
//     capability they were made with.
//   - Rows are computed in bands over the available cores; the result does not depend on the
//     split.
func ResizeFloatBicubic(dst []float32, src *RGB, t *Table, w, h int) ([]float32, error) {
	if err := src.check("source"); err != nil {
		return dst, fmt.Errorf("resizing in float: %w", err)
	}
	if w <= 0 || h <= 0 {
		return dst, fmt.Errorf("resizing in float: destination size %dx%d must be positive", w, h)
	}
	if t == nil {
		return dst, fmt.Errorf("resizing in float: no normalisation table")
	}
	kx, ky := cubicTaps(src.W, w), cubicTaps(src.H, h)
	// A tap set (0, 1, 0, 0) gives its middle value as torch's sum does, for any finite taps
	// but a zero middle one; the table's values decide whether every tap is finite.
	finite := true
	for c := range 3 {
		for _, v := range t[c] {
			finite = finite && !math.IsInf(float64(v), 0) && !math.IsNaN(float64(v))
		}
	}
	plane := w * h
	dst = growFloats(dst, 3*plane)
	bands(h, 3*4*4*w, func(lo, hi int) {
		// The horizontal sums of the source rows the band reads, per channel, in slots reused
		// least recently used first: consecutive output rows read overlapping rows.
		const slots = 8
		buf := floatScratch.get(slots * 3 * w)
		defer floatScratch.put(buf)
		ring := *buf
		var ids, used [slots]int
		for i := range ids {
			ids[i], used[i] = -1, -1
		}
		// rows fills rs with the horizontal sums of the source rows want[j] for the output row y,
		// computing those no slot holds into the least recently used slots (never one that holds
		// another row y reads).
		rows := func(y int, want []int, rs [][]float32) {
			for j, r := range want {
				rs[j] = nil
				for i, id := range ids {
					if id == r {
						rs[j], used[i] = ring[3*i*w:3*(i+1)*w], y
						break
					}
				}
			}
			for j, r := range want {
				if rs[j] != nil {
					continue
				}
				lru := -1
				for i := range ids {
					if used[i] < y && (lru < 0 || used[i] < used[lru]) {
						lru = i
					}
				}
				ids[lru], used[lru] = r, y
				rs[j] = ring[3*lru*w : 3*(lru+1)*w]
				horizontalTaps(rs[j], src.Row(r), kx, t, w, finite)
				for k := j + 1; k < len(want); k++ { // a clamped tap may name the same row again
					if want[k] == r && rs[k] == nil {
						rs[k] = rs[j]
					}
				}
			}
		}
		var rs [4][]float32
		for y := lo; y < hi; y++ {
			taps := ky.idx[4*y : 4*y+4 : 4*y+4]
			wy := ky.w[4*y : 4*y+4 : 4*y+4]
			// Taps (0, 1, 0, 0) read only the middle row, unless it holds a zero.
			ident := finite && ky.ident[y]
			if ident {
				rows(y, taps[1:2], rs[1:2])
				ident = !slices.Contains(rs[1], 0)
			}
			if ident {
				for c := range 3 {
					copy(dst[c*plane+y*w:c*plane+(y+1)*w], rs[1][c*w:(c+1)*w])
				}
				continue
			}
			rows(y, taps, rs[:])
			for c := range 3 {
				out := dst[c*plane+y*w : c*plane+(y+1)*w]
				r0, r1, r2, r3 := rs[0][c*w:(c+1)*w], rs[1][c*w:(c+1)*w], rs[2][c*w:(c+1)*w], rs[3][c*w:(c+1)*w]
				for x := range out {
					out[x] = sum4(r0[x], r1[x], r2[x], r3[x], wy)
				}
			}
		}
	})
	return dst, nil
}

// horizontalTaps writes, for each channel c and output column x, the four-tap sum of the
// normalised bytes of row (interleaved RGB) into out[c·w+x].
func horizontalTaps(out []float32, row []byte, kx *cubic, t *Table, w int, finite bool) {
	for x := range w {
		i := kx.idx[4*x : 4*x+4 : 4*x+4]
		wx := kx.w[4*x : 4*x+4 : 4*x+4]
		ident := finite && kx.ident[x]
		for c := range 3 {
			tc := &t[c]
			if v1 := tc[row[3*i[1]+c]]; ident && v1 != 0 {
				out[c*w+x] = v1
				continue
			}
			out[c*w+x] = sum4(tc[row[3*i[0]+c]], tc[row[3*i[1]+c]], tc[row[3*i[2]+c]], tc[row[3*i[3]+c]], wx)
		}
	}
}

// sum4 is torch's four-tap sum as its compiler built it: fma(v0, w0, v1·w1), then v2 and v3
// fused in turn.
func sum4(v0, v1, v2, v3 float32, w []float32) float32 {
	p := float32(v1 * w[1])
	acc := fma32(v0, w[0], p)
	acc = fma32(v2, w[2], acc)
	return fma32(v3, w[3], acc)
}

// cubic holds one axis' taps: for output i, the source indexes idx[4i:4i+4] (clamped to the
// image), their weights w[4i:4i+4], and whether those are (0, 1, 0, 0).
type cubic struct {
	idx   []int
	w     []float32
	ident []bool
}

// cubicA is the Keys kernel's a for torch's non-antialiased bicubic (OpenCV's value).
const cubicA = float32(-0.75)

// cubicTaps computes torch's bicubic taps for resizing an axis of in samples to out:
// HelperInterpCubic::compute_indices_weights with align_corners false and no scale given.
func cubicTaps(in, out int) *cubic {
	k := &cubic{idx: make([]int, 4*out), w: make([]float32, 4*out), ident: make([]bool, out)}
	scale := float32(in) / float32(out)
	for i := range out {
		real := fma32(scale, float32(i)+0.5, -0.5) // area_pixel_compute_source_index, cubic
		idx := min(int(math.Floor(float64(real))), in-1)
		lambda := min(max(real-float32(idx), 0), 1)
		x2 := float32(1.0 - float64(lambda))
		w := [4]float32{
			cubicFar(float32(float64(lambda) + 1.0)),
			cubicNear(lambda),
			cubicNear(x2),
			cubicFar(float32(float64(x2) + 1.0)),
		}
		for j := range 4 {
			k.idx[4*i+j] = max(min(idx-1+j, in-1), 0)
			k.w[4*i+j] = w[j]
		}
		k.ident[i] = w == [4]float32{0, 1, 0, 0}
	}
	return k
}

// cubicNear is cubic_convolution1 for |x| ≤ 1: ((a+2)·x − (a+3))·x·x + 1, its first step
// fused as torch's compiler did, the others rounded one by one (the explicit float32
// conversions keep the Go compiler from fusing them).
func cubicNear(x float32) float32 {
	v := fma32(cubicA+2, x, -(cubicA + 3))
	v = float32(v * x)
	v = float32(v * x)
	return v + 1
}

// cubicFar is cubic_convolution2 for 1 ≤ |x| ≤ 2: ((a·x − 5a)·x + 8a)·x − 4a, its first two
// steps fused as torch's compiler did, the last not.
func cubicFar(x float32) float32 {
	v := fma32(cubicA, x, -5*cubicA)
	v = fma32(v, x, 8*cubicA)
	return float32(v*x) - 4*cubicA
}

// fma32 returns x·y + z rounded once to float32, as a single-precision fused multiply-add
// does. The product is exact in float64, so the float64 sum s is p+z rounded once; rounding s
// to float32 then rounds p+z correctly unless s lies exactly halfway between two float32
// values while the float64 rounding dropped part of p+z: the dropped part (TwoSum's error)
// then says which way. Results below float32's normal range are settled exactly.
func fma32(x, y, z float32) float32 {
	p := float64(x) * float64(y)
	s := p + float64(z)
	r := float32(s)
	if float64(r) == s {
		return r
	}
	a := math.Abs(s)
	if a < 0x1p-125 || a >= math.MaxFloat32 || s != s {
		return fma32Exact(p, z, r)
	}
	if math.Float64bits(s)&(1<<29-1) != 1<<28 { // not halfway between two float32 values
		return r
	}
	bb := s - p
	e := (p - (s - bb)) + (float64(z) - bb)
	if e == 0 { // a true tie: to even, as the conversion rounded it
		return r
	}
	hi, lo := r, r
	if float64(r) > s {
		lo = math.Nextafter32(r, float32(math.Inf(-1)))
	} else {
		hi = math.Nextafter32(r, float32(math.Inf(1)))
	}
	if e > 0 {
		return hi
	}
	return lo
}

// fma32Exact rounds p + z (p exact in float64) to float32 in exact arithmetic; r is returned
// for a NaN or infinite sum.
func fma32Exact(p float64, z, r float32) float32 {
	if math.IsNaN(p) || math.IsInf(p, 0) || math.IsNaN(float64(z)) || math.IsInf(float64(z), 0) {
		return r
	}
	var e big.Float
	e.SetPrec(256).SetFloat64(p).Add(&e, new(big.Float).SetFloat64(float64(z)))
	f, _ := e.Float32()
	return f
}
