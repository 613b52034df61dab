package pixels

import (
	"fmt"
	"math"
)

// Norm is a plan's rescale + normalise step: x·Rescale, then (x − Mean) / Std per channel.
type Norm struct {
	// Rescale is the rescale factor, typically 1/255.
	Rescale   float64
	Mean, Std [3]float64
	// Flavor picks whose float32 arithmetic to reproduce:
	//   - Torch (transformers' torchvision backend, rescale_and_normalize): the rescale is fused
	//     into the statistics, m' = f32(Mean)·f32(1/Rescale) and s' = f32(Std)·f32(1/Rescale) in
	//     float32, then out = (f32(x) − m') / s', a subtraction and a division in float32;
	//   - PIL (transformers' PIL backend): x' = f32(f64(x)·Rescale), then (x' − f32(Mean)) / f32(Std)
	//     in float32.
	Flavor Flavor
}

// Table maps each channel's 256 byte values to their normalised float32. Since the input is
// 8-bit, a table reproduces the reference's per-element arithmetic exactly and turns the
// division into a lookup.
type Table [3][256]float32

// Table builds the lookup table of n.
func (n Norm) Table() (*Table, error) {
	if !(n.Rescale > 0) || math.IsInf(n.Rescale, 0) {
		return nil, fmt.Errorf("normalising: rescale factor %v is not a positive number", n.Rescale)
	}
	var t Table
	for c := range 3 {
		if !(n.Std[c] != 0) || math.IsNaN(n.Mean[c]) {
			return nil, fmt.Errorf("normalising: channel %d has mean %v, std %v", c, n.Mean[c], n.Std[c])
		}
		switch n.Flavor {
		case Torch:
			inv := float32(1 / n.Rescale) // the Python scalar becomes float32 in the tensor op
			m := float32(float32(n.Mean[c]) * inv)
			s := float32(float32(n.Std[c]) * inv)
			for x := range 256 {
				t[c][x] = float32(float32(x)-m) / s
			}
		case PIL:
			m, s := float32(n.Mean[c]), float32(n.Std[c])
			for x := range 256 {
				v := float32(float64(x) * n.Rescale)
				t[c][x] = float32(v-m) / s
			}
		default:
			return nil, fmt.Errorf("normalising with flavour %d: %w", n.Flavor, ErrUnsupported)
		}
	}
	return &t, nil
}

// growFloats returns dst resized to n, reallocating only when its capacity is short.
func growFloats(dst []float32, n int) []float32 {
	if cap(dst) < n {
		return make([]float32, n)
	}
	return dst[:n]
}

// NormalizeCHW normalises src into a [3, H, W] float32 tensor (channels first, the layout of a
// tile's pixel_values), reusing dst's storage when it is large enough.
func NormalizeCHW(dst []float32, src *RGB, t *Table) ([]float32, error) {
	if err := src.check("source"); err != nil {
		return dst, fmt.Errorf("normalising: %w", err)
	}
	plane := src.W * src.H
	dst = growFloats(dst, 3*plane)
	bands(src.H, 12*src.W, func(lo, hi int) {
		for y := lo; y < hi; y++ {
			row := src.Row(y)
			r := dst[y*src.W : (y+1)*src.W]
			g := dst[plane+y*src.W : plane+(y+1)*src.W]
			b := dst[2*plane+y*src.W : 2*plane+(y+1)*src.W]
			for x := range r {
				p := row[3*x : 3*x+3]
				r[x], g[x], b[x] = t[0][p[0]], t[1][p[1]], t[2][p[2]]
			}
		}
	})
	return dst, nil
}

// Patches is the Qwen2-VL family patch layout (LayoutMergeBlocks in the plugin ABI): square
// patches of Size pixels, each repeated Temporal times along a time axis, emitted in
// merge-block order.
type Patches struct {
	Size, Temporal, Merge int
}

// Grid returns the patch grid of a w×h image, or an error when the image does not divide into
// whole merge blocks.
func (p Patches) Grid(w, h int) (gh, gw int, err error) {
	if p.Size <= 0 || p.Temporal <= 0 || p.Merge <= 0 {
		return 0, 0, fmt.Errorf("patch layout %+v must be positive", p)
	}
	block := p.Size * p.Merge
	if w%block != 0 || h%block != 0 {
		return 0, 0, fmt.Errorf("%dx%d image does not divide into %dx%d merge blocks", w, h, block, block)
	}
	return h / p.Size, w / p.Size, nil
}

// RowLen returns the floats per patch row: 3 · Temporal · Size².
func (p Patches) RowLen() int { return 3 * p.Temporal * p.Size * p.Size }

// NormalizePatchify normalises src with t and lays it out as the Qwen2-VL image processor's
// patchify does: pixel_values of shape [gh·gw, 3·Temporal·Size·Size], rows in merge-block order
// (merge blocks in raster order, the Merge×Merge patches of a block in raster order), each row
// channel-major, then time, then the patch's pixels in raster order, every time step a copy of
// the image. It returns the tensor (reusing dst's storage when large enough) and the grid.
func NormalizePatchify(dst []float32, src *RGB, t *Table, p Patches) (out []float32, gh, gw int, err error) {
	if err := src.check("source"); err != nil {
		return dst, 0, 0, fmt.Errorf("patchifying: %w", err)
	}
	gh, gw, err = p.Grid(src.W, src.H)
	if err != nil {
		return dst, 0, 0, fmt.Errorf("patchifying: %w", err)
	}
	rowLen := p.RowLen()
	dst = growFloats(dst, gh*gw*rowLen)
	ps, m, tt := p.Size, p.Merge, p.Temporal
	pp := ps * ps
	w := src.W
	// A row of merge blocks covers rows·gw patch rows of pixel_values, contiguous in dst. Its
	// pixels are looked up once into channel planes (one table lookup and one store per value),
	// then every patch row is assembled from runs of ps floats copied out of the planes, once
	// per time step: far fewer stores than a lookup per output float.
	rows := m * ps
	planeLen := rows * w
	perBlockRow := gw * m * rowLen
	// The vector copy moves runs in 8-float pieces, the last one overlapping the one before.
	vec := haveAVX2 && ps >= 8
	bands(gh/m, 4*perBlockRow, func(lo, hi int) {
		buf := floatScratch.get(3 * planeLen)
		defer floatScratch.put(buf)
		planes := *buf
		pr, pg, pb := planes[:planeLen], planes[planeLen:2*planeLen], planes[2*planeLen:]
		for br := lo; br < hi; br++ {
			in := src.Pix[3*br*planeLen : 3*(br+1)*planeLen]
			for i := range planeLen {
				px := in[3*i : 3*i+3 : 3*i+3]
				pr[i], pg[i], pb[i] = t[0][px[0]], t[1][px[1]], t[2][px[2]]
			}
			out := dst[br*perBlockRow : (br+1)*perBlockRow]
			for i := range gw * m {
				bw, mh, mw := i/(m*m), (i/m)%m, i%m
				first := mh*ps*w + (bw*m+mw)*ps // the patch's top-left value in a plane
				row := out[i*rowLen : (i+1)*rowLen]
				for c := range 3 {
					plane := planes[c*planeLen+first:]
					o := row[c*tt*pp : (c+1)*tt*pp]
					if vec {
						_, _ = o[tt*pp-1], plane[(ps-1)*w+ps-1] // the kernel's reach, checked
						patchRunsAVX2(&o[0], &plane[0], ps, w, tt)
						continue
					}
					for py := range ps {
						seg := plane[py*w : py*w+ps]
						for k := range tt {
							copy(o[k*pp+py*ps:k*pp+py*ps+ps], seg)
						}
					}
				}
			}
		}
	})
	return dst, gh, gw, nil
}

// PatchifyCHW lays out an already normalised [3, h, w] channels-first float32 image (planes)
// as NormalizePatchify lays out a normalised 8-bit one: rows of 3·Temporal·Size² values in
// merge-block order, every time step a copy of the image. It returns the tensor (reusing dst's
// storage when large enough) and the grid.
func PatchifyCHW(dst, planes []float32, w, h int, p Patches) (out []float32, gh, gw int, err error) {
	if w <= 0 || h <= 0 || len(planes) != 3*w*h {
		return dst, 0, 0, fmt.Errorf("patchifying: %d values for a 3x%dx%d image", len(planes), h, w)
	}
	gh, gw, err = p.Grid(w, h)
	if err != nil {
		return dst, 0, 0, fmt.Errorf("patchifying: %w", err)
	}
	rowLen := p.RowLen()
	dst = growFloats(dst, gh*gw*rowLen)
	ps, m, tt := p.Size, p.Merge, p.Temporal
	pp := ps * ps
	plane := w * h
	perBlockRow := gw * m * rowLen
	bands(gh/m, 4*perBlockRow, func(lo, hi int) {
		for br := lo; br < hi; br++ {
			out := dst[br*perBlockRow : (br+1)*perBlockRow]
			for i := range gw * m {
				bw, mh, mw := i/(m*m), (i/m)%m, i%m
				y0, x0 := (br*m+mh)*ps, (bw*m+mw)*ps
				row := out[i*rowLen : (i+1)*rowLen]
				for c := range 3 {
					src := planes[c*plane:]
					for py := range ps {
						seg := src[(y0+py)*w+x0 : (y0+py)*w+x0+ps]
						for k := range tt {
							o := (c*tt+k)*pp + py*ps
							copy(row[o:o+ps], seg)
						}
					}
				}
			}
		}
	})
	return dst, gh, gw, nil
}
