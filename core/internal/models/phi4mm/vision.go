package phi4mm

import (
	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models/internal/kit"
)

// VisionOps implements kit.Family: Phi4MultimodalImageEmbedding on the views of images as one
// batch (a view attends within itself, so the images' views simply follow one another). An
// image's pixel rows are Grid.T views of FixedGrid x FixedGrid patches in raster order, the
// global view first (C x 14 x 14 values a row); its rows of res are its tokens in the HD layout
// (layout.go), projected.
func (m *Model) VisionOps(b ml.Backend, imgs []model.Image, res ml.Tensor) {
	cfg := m.Config()
	v := &cfg.Vision
	w := &m.w
	ls := make([]layout, len(imgs))
	for i := range imgs {
		l, err := imageLayout(v, &imgs[i])
		if err != nil { // checked before the pass (model.CheckImage): a failure here is a bug
			panic("phi4mm: an image the checks let through: " + err.Error())
		}
		ls[i] = l
	}
	p := m.plans.get(v, imgs, ls)
	P, N := p.patches, p.tokens
	VH, VI, OH, heads := v.Hidden, v.Intermediate, v.OutHidden, v.Heads
	vhd := VH / heads
	eps := float32(v.NormEps)

	pix := b.Scratch("v.pix", P, v.PatchDim())
	// the residual, alternating; three rows past the patches hold sub_GN, glb_GN and zeros for
	// the pooling's table
	x := [2]ml.Tensor{b.Scratch("v.x0", P+3, VH), b.Scratch("v.x1", P+3, VH)}
	xn := b.Scratch("v.xn", P, VH)
	qkv := b.Scratch("v.qkv", P, 3*VH)
	att := b.Scratch("v.att", P, VH)
	t := b.Scratch("v.t", P, VH)
	act := b.Scratch("v.act", P, VI)
	st := b.Scratch("v.st", N, VH)
	h1 := b.Scratch("v.h1", N, OH)
	ones := b.Input(p.ones, P, 1)
	weights := b.Input(p.weights, N, 4)
	if b.Err() != nil {
		return
	}
	xs := [2]ml.Tensor{x[0].RowsAt(0, P), x[1].RowsAt(0, P)}

	// Phi4MultimodalVisionEmbeddings: the patches (Conv2d with kernel = stride, one product),
	// then + position_embedding(position_ids), the ids bucketised from each view's mask
	kit.WritePixels(b, pix, imgs)
	b.Linears(pix, ml.Out{Y: xs[0], W: w.patch, B: w.patchB})
	b.AddEmbedBag(xs[0], w.pos, b.Ints(p.posIDs), ones)
	ml.Mark(b, "vision.embed")

	// create_bidirectional_mask over each view's patch mask: no query sees a padding patch
	a := ml.Attn{Heads: heads, KVHeads: heads, HeadDim: vhd, Scale: scaleOf(vhd), Mask: ml.Mask{Keys: b.Ints(p.keys)}}
	q, k, val := qkv.ColsAt(0, VH), qkv.ColsAt(VH, VH), qkv.ColsAt(2*VH, VH)
	r := 0 // xs[r] holds the residual, xs[r] + delta the hidden states
	delta := ml.Tensor{}
	for l := range w.blocks {
		B := &w.blocks[l]
		// self_attn(layer_norm1(hidden_states)): the previous block's MLP output is added inside
		// the norm
		b.LayerNorm(xn, xs[1-r], xs[r], delta, B.norm1, B.norm1B, eps)
		r ^= 1
		b.Linears(xn, ml.Out{Y: q, W: B.q, B: B.qB}, ml.Out{Y: k, W: B.k, B: B.kB}, ml.Out{Y: val, W: B.v, B: B.vB})
		// bidirectional attention within each view (the views are a batch)
		b.SegmentAttention(att, q, k, val, p.bounds, a)
		b.Linears(att, ml.Out{Y: t, W: B.out, B: B.outB})
		b.LayerNorm(xn, xs[1-r], xs[r], t, B.norm2, B.norm2B, eps)
		r ^= 1
		// mlp: fc1, GELU (tanh), fc2, added by the next norm (or below)
		b.Linears(xn, ml.Out{Y: act, W: B.fc1, B: B.fc1B})
		b.GELU(act, ml.GELUTanh)
		b.Linears(act, ml.Out{Y: t, W: B.fc2, B: B.fc2B})
		delta = t
	}
	// hidden_states[feature_layer]: the residual plus the last run block's MLP output
	if delta.Valid() {
		b.ScatterAdd(xs[r], delta, b.Ints(p.rows))
	}
	ml.Mark(b, "vision.blocks")

	// the pooling's table: the patches' features, then sub_GN, glb_GN and a zero row
	table := x[r]
	b.Gather(table.RowsAt(P, 1), w.sub, b.Ints([]int32{0}))
	b.Gather(table.RowsAt(P+1, 1), w.glb, b.Ints([]int32{0}))
	b.Write(table.RowsAt(P+2, 1), make([]float32, VH))
	// AvgPool2d(2, 2) of each view and the HD layout in one: every token row starts at zero and
	// adds its four taps (a cell's patches times 0.25, summed in AvgPool2d's order: the same
	// bits as the sum then / 4; a separator's row times 1)
	b.Gather(st, table, b.Ints(p.zeros))
	b.AddEmbedBag(st, table, b.Ints(p.taps), weights)
	ml.Mark(b, "vision.layout")

	// img_projection_up, GELU (erf), img_projection_down
	b.Linears(st, ml.Out{Y: h1, W: w.up, B: w.upB})
	b.GELU(h1, ml.GELUErf)
	b.Linears(h1, ml.Out{Y: res, W: w.down, B: w.downB})
	ml.Mark(b, "vision.projector")
}
