package qwen25vl

import (
	"math"

	"github.com/iris-vlm/iris/core/internal/engine"
)

// visionPlan is the host-side bookkeeping of one image through the vision tower: the window
// order of its merge units, the attention segments, and the 2-D rotary tables in window order.
type visionPlan struct {
	patches, units int
	// index[u] is the original merge unit at window-order position u (get_vision_window_index).
	index []int32
	// windows and frames are attention segment boundaries in patches, starting with 0: windowed
	// blocks attend within windows, full blocks within frames (cu_seqlens).
	windows, frames []int32
	// rope is cos [patches, hd/2] then sin [patches, hd/2], rows in window order.
	rope []float32
}

// planVision mirrors vision_utils.get_vision_window_index and get_vision_position_ids
// (transformers 5.17) for one (t, h, w) grid. Empty windows (the
// reference pads a whole window when a side divides evenly) add no boundary, as
// torch.unique_consecutive drops them.
func planVision(v *engine.VisionConfig, g engine.Grid) *visionPlan {
	merge := v.MergeSize
	unit := merge * merge
	mh, mw := g.H/merge, g.W/merge
	p := &visionPlan{patches: g.Patches(), units: g.Patches() / unit}
	p.index = make([]int32, 0, p.units)
	p.windows = []int32{0}
	p.frames = []int32{0}
	ws := 0
	if v.WindowSize > 0 {
		ws = v.WindowSize / merge / v.PatchSize
	}
	for t := range g.T {
		if ws <= 0 {
			for u := range mh * mw {
				p.index = append(p.index, int32(t*mh*mw+u))
			}
			p.windows = append(p.windows, int32(len(p.index)*unit))
		} else {
			nwh, nww := (mh+ws-mh%ws)/ws, (mw+ws-mw%ws)/ws
			for wh := range nwh {
				for ww := range nww {
					before := len(p.index)
					for r := range ws {
						for c := range ws {
							row, col := wh*ws+r, ww*ws+c
							if row < mh && col < mw {
								p.index = append(p.index, int32(t*mh*mw+row*mw+col))
							}
						}
					}
					if len(p.index) > before {
						p.windows = append(p.windows, int32(len(p.index)*unit))
					}
				}
			}
		}
		p.frames = append(p.frames, int32((t+1)*g.H*g.W))
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
	n := p.patches
	p.rope = make([]float32, 2*n*half)
	cos, sin := p.cos(), p.sin()
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
	for u, src := range p.index {
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

// cos and sin are the halves of rope: [patches, hd/2] each.
func (p *visionPlan) cos() []float32 { return p.rope[:len(p.rope)/2] }
func (p *visionPlan) sin() []float32 { return p.rope[len(p.rope)/2:] }
