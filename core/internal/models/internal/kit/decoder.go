package kit

import (
	"fmt"
	"math"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
)

// DecoderLayer is one layer of the pre-norm GQA decoder with a SwiGLU MLP that the Qwen2 text
// stack defines (Qwen2.5-VL's and InternVL3's language models): RMSNorm, q/k/v projections
// (with biases when the config says so), per-head q/k RMSNorms when the config says so (Lance's
// qwen2_navit: after the biases, before the rotary embedding), rotary attention over the cache,
// o_proj, RMSNorm, gate/up/down. Families whose layers add nothing to it bind and run it from
// here.
type DecoderLayer struct {
	AttnNorm, MLPNorm   ml.Tensor
	Q, K, V, O          ml.Tensor
	QBias, KBias, VBias ml.Tensor
	QNorm, KNorm        ml.Tensor
	Gate, Up, Down      ml.Tensor
}

// BindDecoder binds cfg.Text.Layers decoder layers by their transformers names
// (layers.N.self_attn.q_proj.weight, ...) under the text prefixes.
func BindDecoder(ld *ml.Loader, cfg *model.Config, prefixes []string) []DecoderLayer {
	t := &cfg.Text
	H, hd, I := t.Hidden, t.HeadDim, t.Intermediate
	qd, kvd := t.Heads*hd, t.KVHeads*hd
	layers := make([]DecoderLayer, t.Layers)
	for l := range layers {
		L := &layers[l]
		p := fmt.Sprintf("layers.%d.", l)
		L.AttnNorm = ld.Vector(prefixes, p+"input_layernorm.weight", H)
		// q, k and v, then their biases: a backend placing tensors in load order can run each
		// trio as one product
		L.Q = ld.Matrix(prefixes, p+"self_attn.q_proj.weight", qd, H)
		L.K = ld.Matrix(prefixes, p+"self_attn.k_proj.weight", kvd, H)
		L.V = ld.Matrix(prefixes, p+"self_attn.v_proj.weight", kvd, H)
		if t.QKVBias {
			L.QBias = ld.Vector(prefixes, p+"self_attn.q_proj.bias", qd)
			L.KBias = ld.Vector(prefixes, p+"self_attn.k_proj.bias", kvd)
			L.VBias = ld.Vector(prefixes, p+"self_attn.v_proj.bias", kvd)
		}
		if t.QKNorm {
			L.QNorm = ld.Vector(prefixes, p+"self_attn.q_norm.weight", hd)
			L.KNorm = ld.Vector(prefixes, p+"self_attn.k_norm.weight", hd)
		}
		L.O = ld.Matrix(prefixes, p+"self_attn.o_proj.weight", H, qd)
		L.MLPNorm = ld.Vector(prefixes, p+"post_attention_layernorm.weight", H)
		// gate and up as one tensor, so that each pair runs as one product wherever the backend
		// places tensors (bound apart, 7 of the 3B's 36 pairs straddled a 256 MB device chunk
		// and ran as two)
		gu := ld.Matrices(prefixes, []string{p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"}, I, H)
		L.Gate, L.Up = gu[0], gu[1]
		L.Down = ld.Matrix(prefixes, p+"mlp.down_proj.weight", H, I)
	}
	return layers
}

// DecoderOps issues the layers over p (Family.LayerOps): the rotary angles are the ones kit
// laid out for the pass (multimodal or 1-D, as the config says).
func DecoderOps(b ml.Backend, cfg *model.Config, p *Pass, layers []DecoderLayer) (int, ml.Tensor) {
	t := &cfg.Text
	hd := t.HeadDim
	qd, kvd := t.Heads*hd, t.KVHeads*hd
	eps := float32(t.RMSNormEps)

	q, k, v := p.QKV.ColsAt(0, qd), p.QKV.ColsAt(qd, kvd), p.QKV.ColsAt(qd+kvd, kvd)
	a := ml.Attn{Heads: t.Heads, KVHeads: t.KVHeads, HeadDim: hd, Mask: ml.Mask{Causal: true}, Scale: float32(1 / math.Sqrt(float64(hd))), NormEps: eps}
	x, xn, tt := p.X, p.XN, p.T
	r := 0 // x[r] holds the residual, x[r] + delta the hidden states
	delta := ml.Tensor{}
	for l := range layers {
		L := &layers[l]
		// q/k/v = self.{q,k,v}_proj(self.input_layernorm(residual + previous MLP output))
		ml.NormLinears(b, xn, x[1-r], x[r], delta, L.AttnNorm, eps,
			ml.Out{Y: q, W: L.Q, B: L.QBias}, ml.Out{Y: k, W: L.K, B: L.KBias}, ml.Out{Y: v, W: L.V, B: L.VBias})
		r ^= 1
		// the q/k norms when the layer has them, apply_rotary_pos_emb (or its multimodal form),
		// the keys and values into each sequence's cache, and attention over it (each row's keys
		// in p.Spans)
		a.QNorm, a.KNorm = L.QNorm, L.KNorm
		ml.RopeCachedAttention(b, p.Att, q, k, v, p.Rot, p.KV.K(l), p.KV.V(l), p.Slots, p.Spans, a)
		b.Linears(p.Att, ml.Out{Y: tt, W: L.O})
		// hidden_states = residual + self.mlp(self.post_attention_layernorm(hidden_states))
		ml.NormSwiGLU(b, p.Act, p.GU, xn, x[1-r], x[r], tt, L.MLPNorm, eps, ml.MLP{Gate: L.Gate, Up: L.Up})
		r ^= 1
		b.Linears(p.Act, ml.Out{Y: tt, W: L.Down})
		delta = tt
	}
	return r, delta
}
