package qwen25vl

import (
	"math"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models/internal/kit"
)

// VisionOps implements kit.Family: Qwen2_5_VisionTransformerPretrainedModel.forward on images
// one after the other (as the reference's batch of several images: windows and cu_seqlens of
// each image), their output rows (one per placeholder token, in prompt order) going to res.
func (m *Model) VisionOps(b ml.Backend, imgs []model.Image, res ml.Tensor) {
	v := &m.Config().Vision
	w := &m.w
	p := kit.PlanVision(v, kit.Grids(imgs))
	N, units := p.Patches, p.Units
	VH, VI, OH, heads := v.Hidden, v.Intermediate, v.OutHidden, v.Heads
	vhd, unit := VH/heads, v.MergeSize*v.MergeSize
	eps := float32(v.NormEps)

	pix := b.Scratch("v.pix", N, v.PatchDim())
	xe := b.Scratch("v.xe", N, VH)
	x := [2]ml.Tensor{b.Scratch("v.x0", N, VH), b.Scratch("v.x1", N, VH)} // the residual, alternating
	xn := b.Scratch("v.xn", N, VH)
	qkv := b.Scratch("v.qkv", N, 3*VH)
	att := b.Scratch("v.att", N, VH)
	t := b.Scratch("v.t", N, VH)
	gu := b.Scratch("v.gu", N, 2*VI)
	// the down product's input at the weight's row stride, its columns past VI zeroed by SiluMul:
	// a backend that pads the weight's rows (3,420 values are not whole 16-byte chunks) takes it
	// as it is, without a padded copy
	actStride := VI
	if len(w.blocks) > 0 {
		actStride = max(VI, w.blocks[0].down.Stride)
	}
	act := b.Scratch("v.act", N, actStride).ColsAt(0, VI)
	rope := b.Input(p.Rope, 2*N, vhd/2) // cos rows, then sin rows
	rot := ml.Rotary{Cos: rope.RowsAt(0, N), Sin: rope.RowsAt(N, N), RoundOnce: true}
	h1 := b.Scratch("v.h1", units, unit*VH)
	h2 := b.Scratch("v.h2", units, OH)
	if b.Err() != nil {
		return
	}

	// hidden_states = self.patch_embed(hidden_states): Conv3d with kernel = stride, one product
	kit.WritePixels(b, pix, imgs)
	b.Linears(pix, ml.Out{Y: xe, W: w.patch})
	// permute_input_for_window_attn: merge units (adjacent rows) into window order
	index := b.Ints(p.Index)
	b.Gather(x[0].Reshape(units, unit*VH), xe.Reshape(units, unit*VH), index)
	ml.Mark(b, "vision.embed")

	full := map[int]bool{}
	for _, l := range v.FullAttBlocks {
		full[l] = true
	}
	a := ml.Attn{Heads: heads, KVHeads: heads, HeadDim: vhd, Scale: float32(1 / math.Sqrt(float64(vhd)))}
	q, k, val := qkv.ColsAt(0, VH), qkv.ColsAt(VH, VH), qkv.ColsAt(2*VH, VH)
	r := 0 // x[r] holds the residual
	for l := range w.blocks {
		B := &w.blocks[l]
		// hidden_states + self.attn(self.norm1(hidden_states), ...): the previous block's MLP
		// output is added inside the norm
		delta := ml.Tensor{}
		if l > 0 {
			delta = t
		}
		ml.NormLinears(b, xn, x[1-r], x[r], delta, B.norm1, eps, ml.Out{Y: qkv, W: B.qkv, B: B.qkvBias})
		r ^= 1
		// apply_rotary_pos_emb_vision, then attention within each window (windowed blocks) or
		// frame (full blocks: cu_seqlens)
		bounds := p.Windows
		if v.WindowSize <= 0 || full[l] {
			bounds = p.Frames
		}
		ml.RopeSegmentAttention(b, att, q, k, val, rot, bounds, a)
		b.Linears(att, ml.Out{Y: t, W: B.proj, B: B.projB})
		// hidden_states + self.mlp(self.norm2(hidden_states)): SwiGLU with biases
		ml.NormSwiGLU(b, act, gu, xn, x[1-r], x[r], t, B.norm2, eps, ml.MLP{Gate: B.gate, Up: B.up, GateB: B.gateB, UpB: B.upB})
		r ^= 1
		b.Linears(act, ml.Out{Y: t, W: B.down, B: B.downB})
	}
	ml.Mark(b, "vision.blocks")

	// Qwen2_5_VLPatchMerger: self.mlp(self.ln_q(x).view(-1, self.hidden_size)), mlp = Linear,
	// GELU, Linear; the unit's patches are adjacent rows, so the view is free.
	b.RMSNorm(xn, x[1-r], x[r], t, w.mergerNorm, eps)
	b.Linears(xn.Reshape(units, unit*VH), ml.Out{Y: h1, W: w.fc1, B: w.fc1B})
	b.GELU(h1, ml.GELUErf)
	b.Linears(h1, ml.Out{Y: h2, W: w.fc2, B: w.fc2B})
	// merged_hidden_states[reverse_indices, :]: unit u of the window order is token index[u]
	// (each image's tokens after the images' before it)
	b.Scatter(res, h2, index)
	ml.Mark(b, "vision.merger")
}
