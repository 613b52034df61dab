package locateanything

import (
	"math"
	"sync"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models/internal/kit"
)

// posTaps is the number of table rows one patch's position sums: 4 x 4 bicubic taps.
const posTaps = 16

// VisionOps implements kit.Family: MoonVitPretrainedModel and mlp1 on the images as one packed
// sequence (cu_seqlens: an image attends within itself). An image's pixel rows are its Grid.H x
// Grid.W patches in raster order (C x 14 x 14 values a row); row u of res is mlp1's output for
// token u: the image's (H/2) x (W/2) tokens in raster order, each the 2x2 patches (2r, 2c),
// (2r, 2c+1), (2r+1, 2c), (2r+1, 2c+1) concatenated (patch_merger).
func (m *Model) VisionOps(b ml.Backend, imgs []model.Image, res ml.Tensor) {
	v := &m.Config().Vision
	w := &m.w
	p := m.plans.pass(v, kit.Grids(imgs))
	rows := p.patches
	VH, VI, OH, heads := v.Hidden, v.Intermediate, v.OutHidden, v.Heads
	vhd, unit := VH/heads, v.MergeSize*v.MergeSize
	tokens := rows / unit
	eps := float32(v.NormEps)

	pix := b.Scratch("v.pix", rows, v.PatchDim())
	x := [2]ml.Tensor{b.Scratch("v.x0", rows, VH), b.Scratch("v.x1", rows, VH)} // the residual, alternating
	xn := b.Scratch("v.xn", rows, VH)
	qkv := b.Scratch("v.qkv", rows, 3*VH)
	att := b.Scratch("v.att", rows, VH)
	t := b.Scratch("v.t", rows, VH)
	act := b.Scratch("v.act", rows, VI)
	merged := b.Scratch("v.merged", rows, VH)
	un := b.Scratch("v.un", tokens, unit*VH)
	h1 := b.Scratch("v.h1", tokens, OH)
	posW := b.Input(p.posWeights, rows, posTaps)
	rope := b.Input(p.rope, 2*rows, vhd/2)
	if b.Err() != nil {
		return
	}
	rot := ml.Rotary{Cos: rope.RowsAt(0, rows), Sin: rope.RowsAt(rows, rows), RoundOnce: true}

	// MoonVisionPatchEmbed: the patches (Conv2d with kernel = stride, one product), then +
	// the position table resampled to the grid (Learnable2DInterpPosEmb: bicubic, align_corners
	// false, no antialias; the table itself when the grid is its size)
	kit.WritePixels(b, pix, imgs)
	b.Linears(pix, ml.Out{Y: x[0], W: w.patch, B: w.patchB})
	b.AddEmbedBag(x[0], w.pos, b.Ints(p.posIDs), posW)
	ml.Mark(b, "vision.embed")

	a := ml.Attn{Heads: heads, KVHeads: heads, HeadDim: vhd, Scale: float32(1 / math.Sqrt(float64(vhd)))}
	q, k, val := qkv.ColsAt(0, VH), qkv.ColsAt(VH, VH), qkv.ColsAt(2*VH, VH)
	r := 0 // x[r] holds the residual, x[r] + delta the hidden states
	delta := ml.Tensor{}
	for l := range w.blocks {
		B := &w.blocks[l]
		// attention_qkvpacked(norm0(hidden_states)): the previous block's MLP output is added
		// inside the norm
		b.LayerNorm(xn, x[1-r], x[r], delta, B.norm0, B.norm0B, eps)
		r ^= 1
		b.Linears(xn, ml.Out{Y: qkv, W: B.qkv, B: B.qkvB})
		// apply_rope on (column, row) pairs, then attention within each image (cu_seqlens)
		b.Rope(q, heads, vhd, rot)
		b.Rope(k, heads, vhd, rot)
		b.SegmentAttention(att, q, k, val, p.bounds, a)
		b.Linears(att, ml.Out{Y: t, W: B.wo, B: B.woB})
		// hidden_states = residual + attn_out, then mlp(norm1(hidden_states))
		b.LayerNorm(xn, x[1-r], x[r], t, B.norm1, B.norm1B, eps)
		r ^= 1
		b.Linears(xn, ml.Out{Y: act, W: B.fc0, B: B.fc0B})
		b.GELU(act, ml.GELUTanh)
		b.Linears(act, ml.Out{Y: t, W: B.fc1, B: B.fc1B})
		delta = t
	}
	// final_layernorm over the last residual add
	b.LayerNorm(xn, x[1-r], x[r], delta, w.final, w.finalB, eps)
	ml.Mark(b, "vision.blocks")

	// patch_merger: each token's 2x2 patches gathered next to one another, unit rows one row;
	// mlp1: LayerNorm (eps 1e-5), Linear, GELU (erf), Linear
	b.Gather(merged, xn, b.Ints(p.merge))
	mu := merged.Reshape(tokens, unit*VH)
	b.LayerNorm(un, mu, mu, ml.Tensor{}, w.projNorm, w.projNormB, normEps)
	b.Linears(un, ml.Out{Y: h1, W: w.fc1, B: w.fc1B})
	b.GELU(h1, ml.GELUErf)
	b.Linears(h1, ml.Out{Y: res, W: w.fc2, B: w.fc2B})
	ml.Mark(b, "vision.projector")
}

// gridPlan is the host-side layout of one image of gh x gw patches: each patch's 16 bicubic taps
// of the position table (rows and weights), its rotary angles, and the merger's row order.
type gridPlan struct {
	gh, gw     int
	posIDs     []int32
	posWeights []float32
	cos, sin   []float32 // gh*gw rows of hd/2
	merge      []int32   // patch rows in patch_merger's order, relative to the image
}

// passPlan is the plans of a pass's images one after the other.
type passPlan struct {
	patches    int
	posIDs     []int32
	posWeights []float32
	rope       []float32 // cos rows then sin rows
	bounds     []int32   // the images' segments (cu_seqlens)
	merge      []int32
}

// planCache keeps the plan of each grid seen.
type planCache struct {
	mu    sync.Mutex
	grids map[[2]int]*gridPlan
}

func (c *planCache) grid(v *model.VisionConfig, gh, gw int) *gridPlan {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := [2]int{gh, gw}
	if p, ok := c.grids[key]; ok {
		return p
	}
	if c.grids == nil {
		c.grids = map[[2]int]*gridPlan{}
	}
	p := newGridPlan(v, gh, gw)
	c.grids[key] = p
	return p
}

// pass lays the images' plans out one after the other.
func (c *planCache) pass(v *model.VisionConfig, grids []model.Grid) *passPlan {
	out := &passPlan{bounds: []int32{0}}
	var cos, sin []float32
	for _, g := range grids {
		// a frame is one image (the processor makes T = 1); frames would attend apart
		for range g.T {
			gp := c.grid(v, g.H, g.W)
			base := int32(out.patches)
			out.posIDs = append(out.posIDs, gp.posIDs...)
			out.posWeights = append(out.posWeights, gp.posWeights...)
			cos, sin = append(cos, gp.cos...), append(sin, gp.sin...)
			for _, r := range gp.merge {
				out.merge = append(out.merge, base+r)
			}
			out.patches += g.H * g.W
			out.bounds = append(out.bounds, int32(out.patches))
		}
	}
	out.rope = append(cos, sin...)
	return out
}

// newGridPlan builds the layout of a gh x gw grid.
func newGridPlan(v *model.VisionConfig, gh, gw int) *gridPlan {
	p := &gridPlan{gh: gh, gw: gw}
	th, tw := v.PosGrid[0], v.PosGrid[1]
	ry, rx := cubicTaps(th, gh), cubicTaps(tw, gw)
	for y := range gh {
		for x := range gw {
			for i := range 4 {
				for j := range 4 {
					p.posIDs = append(p.posIDs, int32(ry[y].idx[i]*tw+rx[x].idx[j]))
					p.posWeights = append(p.posWeights, ry[y].w[i]*rx[x].w[j])
				}
			}
		}
	}

	// Rope2DPosEmb: freqs_cis[h, w, 2i] = cis(w * f_i) (the column), [2i+1] = cis(h * f_i) (the
	// row), f_i = 1 / theta^(4i / hd), in float32; pair j of a head rotates by angle j.
	hd := v.Hidden / v.Heads
	half := hd / 2
	freq := make([]float32, hd/4)
	for i := range freq {
		e := float32(4*i) / float32(hd)
		freq[i] = 1 / float32(math.Pow(v.RopeTheta, float64(e)))
	}
	p.cos = make([]float32, gh*gw*half)
	p.sin = make([]float32, gh*gw*half)
	for y := range gh {
		for x := range gw {
			row := (y*gw + x) * half
			for j := range half {
				pos := x
				if j%2 == 1 {
					pos = y
				}
				a := float64(float32(pos) * freq[j/2])
				p.cos[row+j], p.sin[row+j] = float32(math.Cos(a)), float32(math.Sin(a))
			}
		}
	}

	// patch_merger: (gh/2, 2, gw/2, 2) -> (gh/2, gw/2, 2, 2)
	for r := 0; r < gh; r += 2 {
		for c := 0; c < gw; c += 2 {
			for dr := range 2 {
				for dc := range 2 {
					p.merge = append(p.merge, int32((r+dr)*gw+c+dc))
				}
			}
		}
	}
	return p
}

// taps are the 4 source rows and weights of one output of a bicubic resize.
type taps struct {
	idx [4]int
	w   [4]float32
}

// cubicTaps is torch's upsample_bicubic2d along one axis of in -> out samples (align_corners
// false, no antialias, in float32): source x = in/out * (d + 0.5) - 0.5, the Keys kernel with
// A = -0.75 on its fraction, the four indices around floor(x) clamped to the edges.
func cubicTaps(in, out int) []taps {
	const A = float32(-0.75)
	cc1 := func(x float32) float32 { return ((A+2)*x-(A+3))*x*x + 1 }
	cc2 := func(x float32) float32 { return ((A*x-5*A)*x+8*A)*x - 4*A }
	scale := float32(in) / float32(out)
	res := make([]taps, out)
	for d := range out {
		real := scale*(float32(d)+0.5) - 0.5
		i0 := float32(math.Floor(float64(real)))
		t := real - i0
		res[d].w = [4]float32{cc2(t + 1), cc1(t), cc1(1 - t), cc2(2 - t)}
		for k := range 4 {
			res[d].idx[k] = min(max(int(i0)-1+k, 0), in-1)
		}
	}
	return res
}
