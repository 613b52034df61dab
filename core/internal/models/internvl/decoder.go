package internvl

import (
	"math"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/models/internal/kit"
)

// LayerOps implements kit.Family: Qwen2Model's decoder layers over the pass's rows. The rotary
// angles kit lays out follow the token index (the config's 1-D RoPE: every frequency on the
// position row PromptPositions fills with it).
func (m *Model) LayerOps(p *kit.Pass) (int, ml.Tensor) {
	b := m.Backend()
	t := &m.Config().Text
	hd := t.HeadDim
	qd, kvd := t.Heads*hd, t.KVHeads*hd
	eps := float32(t.RMSNormEps)

	q, k, v := p.QKV.ColsAt(0, qd), p.QKV.ColsAt(qd, kvd), p.QKV.ColsAt(qd+kvd, kvd)
	a := ml.Attn{Heads: t.Heads, KVHeads: t.KVHeads, HeadDim: hd, Causal: true, Scale: float32(1 / math.Sqrt(float64(hd)))}
	x, xn, tt := p.X, p.XN, p.T
	r := 0 // x[r] holds the residual, x[r] + delta the hidden states
	delta := ml.Tensor{}
	for l := range m.w.layers {
		L := &m.w.layers[l]
		// q/k/v = self.{q,k,v}_proj(self.input_layernorm(residual + previous MLP output))
		ml.NormLinears(b, xn, x[1-r], x[r], delta, L.attnNorm, eps,
			ml.Out{Y: q, W: L.q, B: L.qBias}, ml.Out{Y: k, W: L.k, B: L.kBias}, ml.Out{Y: v, W: L.v, B: L.vBias})
		r ^= 1
		// apply_rotary_pos_emb, the keys and values into each sequence's cache, and causal
		// attention over it
		ml.RopeCachedAttention(b, p.Att, q, k, v, p.Rot, p.KV.K(l), p.KV.V(l), p.Slots, p.Spans, a)
		b.Linears(p.Att, ml.Out{Y: tt, W: L.o})
		// hidden_states = residual + self.mlp(self.post_attention_layernorm(hidden_states))
		ml.NormSwiGLU(b, p.Act, p.GU, xn, x[1-r], x[r], tt, L.mlpNorm, eps, ml.MLP{Gate: L.gate, Up: L.up})
		r ^= 1
		b.Linears(p.Act, ml.Out{Y: tt, W: L.down})
		delta = tt
	}
	return r, delta
}
