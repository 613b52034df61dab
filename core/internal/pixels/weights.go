package pixels

import "math"

// coeffs holds a separable resampling filter for one axis: output i reads n[i] consecutive
// input samples from start[i], weighted by k[i*ksize : i*ksize+n[i]] in fixed point with prec
// fractional bits.
type coeffs struct {
	start, n []int32
	k        []int32
	ksize    int
	prec     uint
	// int16 is true when every tap fits 16 bits (the torch flavour), so the pairwise vector
	// kernels apply; hl caches the horizontal layout of the vector kernels.
	int16 bool
	hl    *hlayout
}

// Filter selects a resampling filter.
type Filter uint8

// Filters.
const (
	// Bilinear is the triangle filter (support 1).
	Bilinear Filter = iota + 1
	// Bicubic is the Keys cubic with a = -0.5 (support 2), as Pillow and torch's antialiased
	// path use it.
	Bicubic
)

// String returns the filter's plan name.
func (f Filter) String() string {
	switch f {
	case Bilinear:
		return "bilinear"
	case Bicubic:
		return "bicubic"
	}
	return "invalid"
}

// The filter functions keep every product rounded on its own (float64(...)) so that the
// compiler cannot fuse them into FMAs: the weights must round exactly as the reference's do.

// torchCubic is aten's HelperInterpCubic::aa_filter with a = -0.5 (cubic_convolution1/2).
func torchCubic(x float64) float64 {
	const a = -0.5
	x = math.Abs(x)
	if x < 1 {
		t := float64((a+2)*x) - (a + 3)
		return float64(float64(t*x)*x) + 1
	}
	if x < 2 {
		t := float64(a*x) - 5*a
		t = float64(t*x) + 8*a
		return float64(t*x) - 4*a
	}
	return 0
}

// pilCubic is Pillow's bicubic_filter (Resample.c), whose far branch is ordered differently.
func pilCubic(x float64) float64 {
	const a = -0.5
	if x < 0 {
		x = -x
	}
	if x < 1 {
		t := float64((a+2)*x) - (a + 3)
		return float64(float64(t*x)*x) + 1
	}
	if x < 2 {
		t := float64((x-5)*x) + 8
		t = float64(t*x) - 4
		return float64(t * a)
	}
	return 0
}

// triangle is the bilinear filter of both references.
func triangle(x float64) float64 {
	if x < 0 {
		x = -x
	}
	if x < 1 {
		return 1 - x
	}
	return 0
}

// floatWeights computes the normalised float64 taps both references share (PIL's
// precompute_coeffs; aten's _compute_indices_min_size_weights_aa) for resampling in samples to
// out. It returns the per-output start and count, the taps (ksize per output) and the largest
// tap.
func floatWeights(in, out int, support float64, filter func(float64) float64) (start, n []int32, w []float64, ksize int, wmax float64) {
	scale := float64(in) / float64(out)
	filterscale := max(scale, 1)
	support *= filterscale
	ksize = int(math.Ceil(support))*2 + 1
	inv := 1 / filterscale
	start, n = make([]int32, out), make([]int32, out)
	w = make([]float64, out*ksize)
	for i := range out {
		center := float64(scale * (float64(i) + 0.5))
		lo := max(int(center-support+0.5), 0) // C casts truncate toward zero
		hi := min(int(center+support+0.5), in)
		size := min(max(hi-lo, 0), ksize)
		k := w[i*ksize : i*ksize+size]
		total := 0.0
		for j := range k {
			k[j] = filter(float64(float64(j+lo)-center+0.5) * inv)
			total += k[j]
		}
		if total != 0 {
			for j := range k {
				k[j] /= total
				wmax = max(wmax, k[j])
			}
		}
		start[i], n[i] = int32(lo), int32(size)
	}
	return start, n, w, ksize, wmax
}

// roundHalfAway is C's (int)(v < 0 ? v - 0.5 : v + 0.5).
func roundHalfAway(v float64) int32 {
	if v < 0 {
		return int32(-0.5 + v)
	}
	return int32(0.5 + v)
}

// torchCoeffs ports aten's _compute_index_ranges_int16_weights with antialias=True,
// align_corners=False and no explicit scale: float taps, a precision chosen so the largest tap
// fits int16, then taps rounded half away from zero to int16.
func torchCoeffs(in, out int, f Filter) *coeffs {
	support, fn := 1.0, triangle
	if f == Bicubic {
		support, fn = 2.0, torchCubic
	}
	start, n, w, ksize, wmax := floatWeights(in, out, support, fn)
	var prec uint
	for prec = 0; prec < 22; prec++ { //nolint:intrange // prec is used after the loop
		if int(0.5+wmax*float64(int(1)<<(prec+1))) >= 1<<15 {
			break
		}
	}
	c := &coeffs{start: start, n: n, k: make([]int32, len(w)), ksize: ksize, prec: prec, int16: true}
	one := float64(int(1) << prec)
	for i, v := range w {
		c.k[i] = int32(int16(roundHalfAway(v * one)))
	}
	return c
}

// pilPrecision is Pillow's PRECISION_BITS for 8-bit images (32 - 8 - 2).
const pilPrecision = 22

// pilCoeffs ports Pillow's precompute_coeffs + normalize_coeffs_8bpc for a full-image box.
func pilCoeffs(in, out int, f Filter) *coeffs {
	support, fn := 1.0, triangle
	if f == Bicubic {
		support, fn = 2.0, pilCubic
	}
	start, n, w, ksize, _ := floatWeights(in, out, support, fn)
	c := &coeffs{start: start, n: n, k: make([]int32, len(w)), ksize: ksize, prec: pilPrecision}
	for i, v := range w {
		c.k[i] = roundHalfAway(v * (1 << pilPrecision))
	}
	return c
}
