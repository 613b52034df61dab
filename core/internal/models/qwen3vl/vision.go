package qwen3vl

import (
	"math"
	"sync"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models/internal/kit"
)

// VisionOps implements kit.Family: Qwen3VLVisionModel.forward on images one after the other
// (attention within each image: cu_seqlens). Row u of res is merge unit u (the images' in turn,
// each in prompt order): the merger's output, then each deepstack merger's.
func (m *Model) VisionOps(b ml.Backend, imgs []model.Image, res ml.Tensor) {
	cfg := m.Config()
	v := &cfg.Vision
	w := &m.w
	p := kit.PlanVision(v, kit.Grids(imgs)) // no windows: merge units stay in prompt order
	taps := m.pos.taps(v, imgs)
	N, units := p.Patches, p.Units
	VH, VI, OH, heads := v.Hidden, v.Intermediate, v.OutHidden, v.Heads
	vhd, unit := VH/heads, v.MergeSize*v.MergeSize
	eps := float32(v.NormEps)

	pix := b.Scratch("v.pix", N, v.PatchDim())
	x := [2]ml.Tensor{b.Scratch("v.x0", N, VH), b.Scratch("v.x1", N, VH)} // the residual, alternating
	xn := b.Scratch("v.xn", N, VH)
	qkv := b.Scratch("v.qkv", N, 3*VH)
	att := b.Scratch("v.att", N, VH)
	t := b.Scratch("v.t", N, VH)
	act := b.Scratch("v.act", N, VI)
	rope := b.Input(p.Rope, 2*N, vhd/2) // cos rows, then sin rows
	rot := ml.Rotary{Cos: rope.RowsAt(0, N), Sin: rope.RowsAt(N, N), RoundOnce: true}
	tapW := b.Input(taps.weights, N, 4)
	un := b.Scratch("v.un", units, unit*VH)
	h1 := b.Scratch("v.h1", units, unit*VH)
	if b.Err() != nil {
		return
	}

	// hidden_states = self.patch_embed(hidden_states): Conv3d with kernel = stride, one product;
	// then + the position table resampled to the grid (bilinear, align_corners)
	kit.WritePixels(b, pix, imgs)
	b.Linears(pix, ml.Out{Y: x[0], W: w.patch, B: w.patchB})
	b.AddEmbedBag(x[0], w.posEmbed, b.Ints(taps.ids), tapW)
	ml.Mark(b, "vision.embed")

	a := ml.Attn{Heads: heads, KVHeads: heads, HeadDim: vhd, Scale: float32(1 / math.Sqrt(float64(vhd)))}
	q, k, val := qkv.ColsAt(0, VH), qkv.ColsAt(VH, VH), qkv.ColsAt(2*VH, VH)
	r := 0 // x[r] holds the residual, x[r] + delta the hidden states
	delta := ml.Tensor{}
	next := 0 // the next deepstack merger
	for l := range w.blocks {
		B := &w.blocks[l]
		// hidden_states + self.attn(self.norm1(hidden_states)): the previous block's MLP output
		// is added inside the norm
		b.LayerNorm(xn, x[1-r], x[r], delta, B.norm1, B.norm1B, eps)
		r ^= 1
		b.Linears(xn, ml.Out{Y: qkv, W: B.qkv, B: B.qkvB})
		// apply_rotary_pos_emb_vision, then attention within each image (cu_seqlens)
		ml.RopeSegmentAttention(b, att, q, k, val, rot, p.Frames, a)
		b.Linears(att, ml.Out{Y: t, W: B.proj, B: B.projB})
		// hidden_states + self.mlp(self.norm2(hidden_states)): fc1, gelu_pytorch_tanh, fc2
		b.LayerNorm(xn, x[1-r], x[r], t, B.norm2, B.norm2B, eps)
		r ^= 1
		b.Linears(xn, ml.Out{Y: act, W: B.fc1, B: B.fc1B})
		b.GELU(act, ml.GELUTanh)
		b.Linears(act, ml.Out{Y: t, W: B.fc2, B: B.fc2B})
		delta = t
		if next < len(v.Deepstack) && v.Deepstack[next] == l {
			// deepstack_merger_list[i](hidden_states): the norm after the shuffle, over a unit's
			// four patches as one row; the residual add it needs is kept for the next block
			M := &w.deepstack[next]
			b.LayerNorm(un, x[1-r].Reshape(units, unit*VH), x[r].Reshape(units, unit*VH), t.Reshape(units, unit*VH), M.norm, M.normB, eps)
			r ^= 1
			delta = ml.Tensor{}
			next++
			mergerMLP(b, M, un, h1, res.ColsAt(next*OH, OH))
		}
	}
	ml.Mark(b, "vision.blocks")

	// self.merger(hidden_states): the norm over each patch, then the unit's four patches (adjacent
	// rows) as one row
	b.LayerNorm(xn, x[1-r], x[r], delta, w.merger.norm, w.merger.normB, eps)
	mergerMLP(b, &w.merger, xn.Reshape(units, unit*VH), h1, res.ColsAt(0, OH))
	ml.Mark(b, "vision.merger")
}

// mergerMLP is the rest of Qwen3VLVisionPatchMerger after its norm: linear_fc2(GELU(linear_fc1(x))).
func mergerMLP(b ml.Backend, M *merger, x, h1, out ml.Tensor) {
	b.Linears(x, ml.Out{Y: h1, W: M.fc1, B: M.fc1B})
	b.GELU(h1, ml.GELUErf)
	b.Linears(h1, ml.Out{Y: out, W: M.fc2, B: M.fc2B})
}

// posTaps are the four table rows each patch's position embedding mixes, and their weights.
type posTaps struct {
	ids     []int32   // [patches * 4]
	weights []float32 // [patches, 4]
}

// posCache keeps the taps of the grids seen (a handful in practice: they depend on the grid
// alone), at most posCacheSize of them.
type posCache struct {
	mu    sync.Mutex
	grids map[model.Grid]*posTaps
}

const posCacheSize = 64

// taps are the images' taps one after the other (each image's table resampled to its own grid).
func (c *posCache) taps(v *model.VisionConfig, imgs []model.Image) *posTaps {
	if len(imgs) == 1 {
		return c.get(v, imgs[0].Grid)
	}
	all := &posTaps{}
	for _, img := range imgs {
		t := c.get(v, img.Grid)
		all.ids = append(all.ids, t.ids...)
		all.weights = append(all.weights, t.weights...)
	}
	return all
}

func (c *posCache) get(v *model.VisionConfig, g model.Grid) *posTaps {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.grids[g]; ok {
		return t
	}
	t := interpolationTaps(v, g)
	if c.grids == nil || len(c.grids) >= posCacheSize {
		c.grids = map[model.Grid]*posTaps{}
	}
	c.grids[g] = t
	return t
}

// interpolationTaps mirrors vision_utils.get_vision_interpolation_indices_and_weights (bilinear,
// align_corners=True, border padding) for one grid, patches in merge-block order: the side x side
// table is resampled to the grid's h x w, each patch mixing the 2x2 nearest table rows.
func interpolationTaps(v *model.VisionConfig, g model.Grid) *posTaps {
	side := int(math.Sqrt(float64(v.PosEmbeddings)))
	merge := v.MergeSize
	frame := g.H * g.W
	t := &posTaps{ids: make([]int32, 0, 4*g.Patches()), weights: make([]float32, 0, 4*g.Patches())}
	// _interpolation_axis_taps_weights in F32: src = index * (side - 1) / max(size - 1, 1)
	axis := func(index, size int) (tap [2]int32, weight [2]float32) {
		src := float32(index) * float32(side-1) / float32(max(size-1, 1))
		floor := float32(math.Floor(float64(src)))
		for o := range 2 {
			tap[o] = int32(min(max(int(floor)+o, 0), side-1))
			weight[o] = max(1-float32(math.Abs(float64(src-floor-float32(o)))), 0)
		}
		return tap, weight
	}
	bw := g.W / merge
	for i := range g.Patches() {
		within := i % frame
		inCol, inRow := within%merge, (within/merge)%merge
		blockCol, blockRow := (within/(merge*merge))%bw, within/(merge*merge*bw)
		hTap, hW := axis(blockRow*merge+inRow, g.H)
		wTap, wW := axis(blockCol*merge+inCol, g.W)
		for a := range 2 {
			for c := range 2 {
				t.ids = append(t.ids, hTap[a]*int32(side)+wTap[c])
				t.weights = append(t.weights, hW[a]*wW[c])
			}
		}
	}
	return t
}
