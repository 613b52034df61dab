package deepseekocr2

// The vision tower's row orders, computed on the host once per grid size: a feature map is rows
// in raster order (one row a position, its channels the row), and the tower's windows and
// convolutions are Gathers of those rows. Padding reads one extra row past the map, which the
// family keeps at zero (its index is the map's rows: Zero below).

// ConvPlan is an im2col of a convolution of a kernel of Kernel x Kernel taps, stride Stride and
// zero padding Pad (nn.Conv2d's), over an H x W map: for each output position in raster order,
// Kernel² input rows, tap after tap in raster order ((ky, kx)), the padding's taps reading row
// H·W (a zero row). Gathering them gives OutH·OutW rows of Kernel²·channels values, the input of
// one product with ml.Loader.ConvTaps' matrix.
type ConvPlan struct {
	H, W, Kernel, Stride, Pad int
	OutH, OutW                int
	Rows                      []int32
}

// NewConvPlan computes the im2col rows of a conv over an h x w map (out = (in + 2·pad −
// kernel) / stride + 1 per side, nn.Conv2d's floor).
func NewConvPlan(h, w, kernel, stride, pad int) ConvPlan {
	p := ConvPlan{H: h, W: w, Kernel: kernel, Stride: stride, Pad: pad,
		OutH: (h+2*pad-kernel)/stride + 1, OutW: (w+2*pad-kernel)/stride + 1}
	zero := int32(h * w)
	p.Rows = make([]int32, 0, p.OutH*p.OutW*kernel*kernel)
	for oy := range p.OutH {
		for ox := range p.OutW {
			for ky := range kernel {
				for kx := range kernel {
					y, x := oy*stride-pad+ky, ox*stride-pad+kx
					if y < 0 || y >= h || x < 0 || x >= w {
						p.Rows = append(p.Rows, zero)
					} else {
						p.Rows = append(p.Rows, int32(y*w+x))
					}
				}
			}
		}
	}
	return p
}

// WindowPlan is SAM's window_partition of an H x W map into windows of Side x Side, the map
// padded with zeros right and below to whole windows: Rows lists, window after window (raster
// over the padded map's windows), each window's positions in raster order as map rows, the
// padding's as row H·W (a zero row: F.pad of the normed map, so the padded positions take part
// in the window's attention as keys whose input is zero); Back lists for each map position its
// row among the windows (window_unpartition, the padding dropped); Bounds the windows' segments.
type WindowPlan struct {
	H, W, Side    int
	Windows       int
	Rows, Back    []int32
	Bounds        []int32
	PaddedH, PadW int
}

// NewWindowPlan partitions an h x w map into side x side windows.
func NewWindowPlan(h, w, side int) WindowPlan {
	ph, pw := (h+side-1)/side*side, (w+side-1)/side*side
	p := WindowPlan{H: h, W: w, Side: side, Windows: (ph / side) * (pw / side), PaddedH: ph, PadW: pw}
	zero := int32(h * w)
	p.Back = make([]int32, h*w)
	for wy := 0; wy < ph; wy += side {
		for wx := 0; wx < pw; wx += side {
			p.Bounds = append(p.Bounds, int32(len(p.Rows)))
			for y := wy; y < wy+side; y++ {
				for x := wx; x < wx+side; x++ {
					if y < h && x < w {
						p.Back[y*w+x] = int32(len(p.Rows))
						p.Rows = append(p.Rows, int32(y*w+x))
					} else {
						p.Rows = append(p.Rows, zero)
					}
				}
			}
		}
	}
	p.Bounds = append(p.Bounds, int32(len(p.Rows)))
	return p
}
