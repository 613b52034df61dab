package kit

import (
	"math"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
)

// VisionPlan is the host-side bookkeeping of the images of one vision-tower pass: the window
// order of their merge units, the attention segments, and the 2-D rotary tables in window order.
// The images follow one another (patches, units and rows alike) and their segments never cross
// from one image into the next (cu_seqlens), so each image's rows are the ones it gets alone.
type VisionPlan struct {
	Patches, Units int
	// Index[u] is the original merge unit at window-order position u (get_vision_window_index);
	// an image's units are offset by those of the images before it.
	Index []int32
	// Windows and Frames are attention segment boundaries in patches, starting with 0: windowed
	// blocks attend within windows, full blocks within frames (cu_seqlens).
	Windows, Frames []int32
	// Rope is cos [patches, hd/2] then sin [patches, hd/2], rows in window order.
	Rope []float32
}

// PlanVision is the plan of images of these grids in one pass: each grid's (planGrid) one after
// the other.
func PlanVision(v *model.VisionConfig, grids []model.Grid) *VisionPlan {
	if len(grids) == 1 {
		return planGrid(v, grids[0])
	}
	all := &VisionPlan{Windows: []int32{0}, Frames: []int32{0}}
	var cos, sin []float32
	for _, g := range grids {
		p := planGrid(v, g)
		for _, u := range p.Index {
			all.Index = append(all.Index, int32(all.Units)+u)
		}
		for _, b := range p.Windows[1:] {
			all.Windows = append(all.Windows, int32(all.Patches)+b)
		}
		for _, b := range p.Frames[1:] {
			all.Frames = append(all.Frames, int32(all.Patches)+b)
		}
		cos, sin = append(cos, p.Cos()...), append(sin, p.Sin()...)
		all.Patches += p.Patches
		all.Units += p.Units
	}
	all.Rope = append(cos, sin...)
	return all
}

// Grids are the images' grids, in order.
func Grids(imgs []model.Image) []model.Grid {
	gs := make([]model.Grid, len(imgs))
	for i, img := range imgs {
		gs[i] = img.Grid
	}
	return gs
}

// WritePixels copies the images' pixel rows into pix one after the other (rows of Patches()
// each), the tower's input of a pass over them all.
func WritePixels(b ml.Backend, pix ml.Tensor, imgs []model.Image) {
	row := 0
	for _, img := range imgs {
		n := img.Grid.Patches()
		b.Write(pix.RowsAt(row, n), img.Pixels)
		row += n
	}
}

// planGrid mirrors vision_utils.get_vision_window_index and get_vision_position_ids
// (transformers 5.17) for one (t, h, w) grid. Empty windows (the
// reference pads a whole window when a side divides evenly) add no boundary, as
// torch.unique_consecutive drops them.
func planGrid(v *model.VisionConfig, g model.Grid) *VisionPlan {
	merge := v.MergeSize
	unit := merge * merge
	mh, mw := g.H/merge, g.W/merge
	p := &VisionPlan{Patches: g.Patches(), Units: g.Patches() / unit}
	p.Index = make([]int32, 0, p.Units)
	p.Windows = []int32{0}
	p.Frames = []int32{0}
	ws := 0
	if v.WindowSize > 0 {
		ws = v.WindowSize / merge / v.PatchSize
	}
	for t := range g.T {
		if ws <= 0 {
			for u := range mh * mw {
				p.Index = append(p.Index, int32(t*mh*mw+u))
			}
			p.Windows = append(p.Windows, int32(len(p.Index)*unit))
		} else {
			nwh, nww := (mh+ws-mh%ws)/ws, (mw+ws-mw%ws)/ws
			for wh := range nwh {
				for ww := range nww {
					before := len(p.Index)
					for r := range ws {
						for c := range ws {
							row, col := wh*ws+r, ww*ws+c
							if row < mh && col < mw {
								p.Index = append(p.Index, int32(t*mh*mw+row*mw+col))
							}
						}
					}
					if len(p.Index) > before {
						p.Windows = append(p.Windows, int32(len(p.Index)*unit))
					}
				}
			}
		}
		p.Frames = append(p.Frames, int32((t+1)*g.H*g.W))
	}

	// Qwen2_5_VLVisionRotaryEmbedding: inv_freq = 1/theta^(arange(0, dim, 2)/dim) with dim =
	// head_dim/2; angles [h*f | w*f], F32. Patches come merge-block major: (block row, block col,
	// row in block, col in block).
	hd := v.Hidden / v.Heads
	half, quarter := hd/2, hd/4
	inv := make([]float32, quarter)
	for i := range inv {
		e := float32(2*i) / float32(half)
		inv[i] = 1 / float32(math.Pow(v.RopeTheta, float64(e)))
	}
	n := p.Patches
	p.Rope = make([]float32, 2*n*half)
	cos, sin := p.Cos(), p.Sin()
	// the angles of one position, once: a grid has max(H, W) positions, not one per patch
	side := max(g.H, g.W)
	cs := make([]float32, 2*side*quarter)
	for pos := range side {
		for f := range quarter {
			a := float64(float32(pos) * inv[f])
			cs[pos*quarter+f], cs[(side+pos)*quarter+f] = float32(math.Cos(a)), float32(math.Sin(a))
		}
	}
	frame := g.H * g.W
	bw := g.W / merge
	for u, src := range p.Index {
		for k := range unit {
			dst := u*unit + k
			q := (int(src)*unit + k) % frame
			block, within := q/unit, q%unit
			hpos := (block/bw)*merge + within/merge
			wpos := (block%bw)*merge + within%merge
			row := dst * half
			copy(cos[row:row+quarter], cs[hpos*quarter:])
			copy(sin[row:row+quarter], cs[(side+hpos)*quarter:])
			copy(cos[row+quarter:row+half], cs[wpos*quarter:])
			copy(sin[row+quarter:row+half], cs[(side+wpos)*quarter:])
		}
	}
	return p
}

// Cos and Sin are the halves of Rope: [patches, hd/2] each.
func (p *VisionPlan) Cos() []float32 { return p.Rope[:len(p.Rope)/2] }
func (p *VisionPlan) Sin() []float32 { return p.Rope[len(p.Rope)/2:] }
