package qwen3vl

import (
	"math"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/models/internal/kit"
)

// LayerOps implements kit.Family: Qwen3VLTextModel's decoder layers over the pass's rows, the
// deepstack features added at the image rows after the first layers.
func (m *Model) LayerOps(p *kit.Pass) (int, ml.Tensor) {
	b := m.Backend()
	cfg := m.Config()
	t := &cfg.Text
	H, hd := t.Hidden, t.HeadDim
	qd, kvd := t.Heads*hd, t.KVHeads*hd
	eps := float32(t.RMSNormEps)

	q, k, v := p.QKV.ColsAt(0, qd), p.QKV.ColsAt(qd, kvd), p.QKV.ColsAt(qd+kvd, kvd)
	a := ml.Attn{Heads: t.Heads, KVHeads: t.KVHeads, HeadDim: hd, Mask: ml.Mask{Causal: true}, Scale: float32(1 / math.Sqrt(float64(hd))), NormEps: eps}
	x, xn, tt := p.X, p.XN, p.T
	r := 0 // x[r] holds the residual, x[r] + delta the hidden states
	delta := ml.Tensor{}
	for l := range m.w.layers {
		L := &m.w.layers[l]
		// q/k/v = self.{q,k,v}_proj(self.input_layernorm(residual + previous MLP output))
		ml.NormLinears(b, xn, x[1-r], x[r], delta, L.attnNorm, eps, ml.Out{Y: q, W: L.q}, ml.Out{Y: k, W: L.k}, ml.Out{Y: v, W: L.v})
		r ^= 1
		// self.{q,k}_norm over each head, apply_rotary_pos_emb, the keys and values into each
		// sequence's cache, and causal attention over it
		a.QNorm, a.KNorm = L.qNorm, L.kNorm
		ml.RopeCachedAttention(b, p.Att, q, k, v, p.Rot, p.KV.K(l), p.KV.V(l), p.Slots, p.Spans, a)
		b.Linears(p.Att, ml.Out{Y: tt, W: L.o})
		// hidden_states = residual + self.mlp(self.post_attention_layernorm(hidden_states))
		ml.NormSwiGLU(b, p.Act, p.GU, xn, x[1-r], x[r], tt, L.mlpNorm, eps, ml.MLP{Gate: L.gate, Up: L.up})
		r ^= 1
		b.Linears(p.Act, ml.Out{Y: tt, W: L.down})
		delta = tt
		if l < len(cfg.Vision.Deepstack) && len(p.Images) > 0 {
			// _deepstack_process: hidden_states[visual_pos_masks] += deepstack_visual_embeds[l],
			// after the layer's residual add (made here: a norm whose output is not used)
			b.RMSNorm(xn, x[1-r], x[r], tt, L.mlpNorm, eps)
			r ^= 1
			delta = ml.Tensor{}
			for _, img := range p.Images {
				b.ScatterAdd(x[r], img.Rows.ColsAt((1+l)*H, H), img.Slots)
			}
		}
	}
	return r, delta
}
