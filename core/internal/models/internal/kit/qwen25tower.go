package kit

import (
	"fmt"
	"math"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
)

// Qwen25Tower is the Qwen2.5-VL vision tower with its merger
// (Qwen2_5_VisionTransformerPretrainedModel: Conv3d patches, RMSNorm blocks with 2-D RoPE and
// window attention, a 2x2 merger), shared by the families that run it: Qwen2.5-VL and Lance,
// whose understanding expert takes the same tower (vit_type qwen_2_5_vl_original).
type Qwen25Tower struct {
	patch      ml.Tensor
	blocks     []qwen25Block
	mergerNorm ml.Tensor
	fc1, fc1B  ml.Tensor
	fc2, fc2B  ml.Tensor
}

type qwen25Block struct {
	norm1, norm2              ml.Tensor
	qkv, qkvBias, proj, projB ml.Tensor
	gate, gateB, up, upB      ml.Tensor
	down, downB               ml.Tensor
}

// BindQwen25Tower binds the tower's tensors by their transformers names (patch_embed.proj.weight,
// blocks.N..., merger...) under the prefixes.
func BindQwen25Tower(ld *ml.Loader, v *model.VisionConfig, prefixes []string) Qwen25Tower {
	var w Qwen25Tower
	VH, VI, unit := v.Hidden, v.Intermediate, v.MergeSize*v.MergeSize
	w.patch = ld.Matrix(prefixes, "patch_embed.proj.weight", VH, v.PatchDim())
	w.blocks = make([]qwen25Block, v.Depth)
	for l := range w.blocks {
		B := &w.blocks[l]
		p := fmt.Sprintf("blocks.%d.", l)
		B.norm1 = ld.Vector(prefixes, p+"norm1.weight", VH)
		B.norm2 = ld.Vector(prefixes, p+"norm2.weight", VH)
		B.qkv = ld.Matrix(prefixes, p+"attn.qkv.weight", 3*VH, VH)
		B.qkvBias = ld.Vector(prefixes, p+"attn.qkv.bias", 3*VH)
		B.proj = ld.Matrix(prefixes, p+"attn.proj.weight", VH, VH)
		B.projB = ld.Vector(prefixes, p+"attn.proj.bias", VH)
		// gate and up as one tensor, their biases after: each pair runs as one product (bound
		// apart, a pair split by a device chunk's end ran as two, the up product's output at
		// 3,420 columns, not 16-byte aligned: 3x slower)
		gu := ld.Matrices(prefixes, []string{p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"}, VI, VH)
		B.gate, B.up = gu[0], gu[1]
		B.gateB = ld.Vector(prefixes, p+"mlp.gate_proj.bias", VI)
		B.upB = ld.Vector(prefixes, p+"mlp.up_proj.bias", VI)
		B.down = ld.Matrix(prefixes, p+"mlp.down_proj.weight", VH, VI)
		B.downB = ld.Vector(prefixes, p+"mlp.down_proj.bias", VH)
	}
	w.mergerNorm = ld.Vector(prefixes, "merger.ln_q.weight", VH)
	w.fc1 = ld.Matrix(prefixes, "merger.mlp.0.weight", unit*VH, unit*VH)
	w.fc1B = ld.Vector(prefixes, "merger.mlp.0.bias", unit*VH)
	w.fc2 = ld.Matrix(prefixes, "merger.mlp.2.weight", v.OutHidden, unit*VH)
	w.fc2B = ld.Vector(prefixes, "merger.mlp.2.bias", v.OutHidden)
	return w
}

// Ops issues Qwen2_5_VisionTransformerPretrainedModel.forward on images one after the other (as
// the reference's batch of several images: windows and cu_seqlens of each image), their output
// rows (one per placeholder token, in prompt order) going to res (Family.VisionOps).
func (w *Qwen25Tower) Ops(b ml.Backend, v *model.VisionConfig, imgs []model.Image, res ml.Tensor) {
	p := PlanVision(v, Grids(imgs))
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
	WritePixels(b, pix, imgs)
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
