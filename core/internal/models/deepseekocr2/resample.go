// Package deepseekocr2 is the DeepSeek-OCR-2 family's model code (transformers 5.17
// models/deepseek_ocr2 is the reference). This file holds the host-side resampling its vision
// tower needs when a view's grid is not the one its tables were trained at (a 768 tile's 48x48
// patches against the 64x64 of a 1024 view): the absolute position table, resampled bicubic with
// antialiasing, and the global layers' relative-position tables, resampled linearly. Both are
// fixed per grid size, so they are computed once and applied as taps (ml.Backend.AddEmbedBag, or
// a product over the table).
package deepseekocr2

import "math"

// aaCubic is torch's antialiased bicubic filter (HelperInterpCubic::aa_filter, Keys' a = -0.5,
// not the -0.75 of the plain bicubic kernel), in float32 as the kernel's scalar_t.
func aaCubic(x float32) float32 {
	const a = float32(-0.5)
	if x < 0 {
		x = -x
	}
	switch {
	case x < 1:
		return ((a+2)*x-(a+3))*x*x + 1
	case x < 2:
		return ((a*x-5*a)*x+8*a)*x - 4*a
	}
	return 0
}

// aaAxis returns, for each of dst outputs resampled from src inputs, the first input and the
// weights of torch's antialiased bicubic interpolation along one axis (align_corners False):
// _compute_weights_aa with interp_size 4, each output's weights normalised by their sum, all in
// float32.
func aaAxis(src, dst int) (first []int, weights [][]float32) {
	scale := float32(src) / float32(dst)
	support := float32(2) // interp_size / 2
	invscale := float32(1)
	if scale >= 1 {
		support *= scale
		invscale = 1 / scale
	}
	first, weights = make([]int, dst), make([][]float32, dst)
	for i := range dst {
		center := scale * (float32(i) + 0.5)
		xmin := max(int(center-support+0.5), 0)
		xsize := min(int(center+support+0.5), src) - xmin
		w := make([]float32, xsize)
		var total float32
		for j := range xsize {
			w[j] = aaCubic((float32(j+xmin) - center + 0.5) * invscale)
			total += w[j]
		}
		if total != 0 {
			for j := range w {
				w[j] /= total
			}
		}
		first[i], weights[i] = xmin, w
	}
	return first, weights
}

// PosTaps are the taps of F.interpolate(table, size=(dst, dst), mode="bicubic",
// align_corners=False, antialias=True) over a src x src table (rows in raster order): for each of
// the dst² outputs in raster order, K table rows and their weights (the row weight times the
// column weight; unused taps weight 0 on row 0). torch resamples the columns, rounds to float32,
// then the rows; the taps sum the product in one pass, which differs from it in the last bits.
type PosTaps struct {
	K       int
	IDs     []int32
	Weights []float32
}

// NewPosTaps computes the taps resampling a src x src table to dst x dst; dst == src is the
// identity (one tap a row: interpolate_pos_encoding returns the table itself).
func NewPosTaps(src, dst int) PosTaps {
	if src == dst {
		t := PosTaps{K: 1, IDs: make([]int32, dst*dst), Weights: make([]float32, dst*dst)}
		for i := range t.IDs {
			t.IDs[i], t.Weights[i] = int32(i), 1
		}
		return t
	}
	first, w := aaAxis(src, dst)
	n := 0
	for _, x := range w {
		n = max(n, len(x))
	}
	t := PosTaps{K: n * n, IDs: make([]int32, 0, dst*dst*n*n), Weights: make([]float32, 0, dst*dst*n*n)}
	for y := range dst {
		for x := range dst {
			for a := range n {
				for c := range n {
					if a < len(w[y]) && c < len(w[x]) {
						t.IDs = append(t.IDs, int32((first[y]+a)*src+first[x]+c))
						t.Weights = append(t.Weights, w[y][a]*w[x][c])
					} else {
						t.IDs = append(t.IDs, 0)
						t.Weights = append(t.Weights, 0)
					}
				}
			}
		}
	}
	return t
}

// LinearTaps are the two taps of each output of F.interpolate(x, size=dst, mode="linear",
// align_corners=False) along an axis of src inputs: out[i] = W0[i]·in[I0[i]] + W1[i]·in[I1[i]].
// The relative-position tables of SAM's global layers (2·64−1 = 127 rows) become 2·48−1 = 95 for
// a tile's grid this way (get_rel_pos).
type LinearTaps struct {
	I0, I1 []int32
	W0, W1 []float32
}

// NewLinearTaps computes torch's linear interpolation taps (area_pixel_compute_source_index:
// src = scale·(i + 0.5) − 0.5 clamped at 0, scale = src/dst; the lambdas in float32). torch 2.11's
// CPU kernel computes the source index as one fused multiply-add: with two roundings instead,
// 19 -> 23 rows differ in the weights' last bits (the golden's upscale case).
func NewLinearTaps(src, dst int) LinearTaps {
	t := LinearTaps{I0: make([]int32, dst), I1: make([]int32, dst), W0: make([]float32, dst), W1: make([]float32, dst)}
	scale := float32(src) / float32(dst)
	for i := range dst {
		// the product of two float32 values is exact in float64, so the float64 FMA rounds the
		// sum once there, then to float32
		s := float32(math.FMA(float64(scale), float64(float32(i)+0.5), -0.5))
		if s < 0 {
			s = 0
		}
		i0 := int(math.Floor(float64(s)))
		i1 := i0
		if i0 < src-1 {
			i1 = i0 + 1
		}
		l1 := s - float32(i0)
		t.I0[i], t.I1[i], t.W0[i], t.W1[i] = int32(i0), int32(i1), 1-l1, l1
	}
	return t
}
