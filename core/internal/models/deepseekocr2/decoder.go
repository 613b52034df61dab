package deepseekocr2

import (
	"fmt"
	"math"

	"github.com/iris-vlm/iris/core/internal/ml"
)

// TextConfig is DeepseekOcr2TextConfig: DeepSeek-V2's decoder with plain multi-head attention
// (use_mla false: q/k/v/o projections without biases, 1-D RoPE), RMSNorm, and a gated MLP in
// each layer that mlp_layer_types calls dense, a mixture of experts in the others.
type TextConfig struct {
	Hidden, Layers, Heads, KVHeads, HeadDim, Intermediate, Vocab int
	Eps, Theta                                                   float64
	MoE                                                          MoEConfig
}

// MoEConfig is the experts of the sparse layers: n_routed_experts, num_experts_per_tok,
// moe_intermediate_size, n_shared_experts (one gated MLP of Inter·Shared), n_group and
// topk_group with topk_method group_limited_greedy (Groups 0: greedy), routed_scaling_factor;
// Sparse[l] says layer l is a mixture (mlp_layer_types[l] == "sparse").
type MoEConfig struct {
	Experts, TopK, Inter, Shared, Groups, TopGroups int
	Scale                                           float64
	Sparse                                          []bool
}

// textPrefixes and lmPrefixes: transformers 5's module paths, then save_pretrained's (layout.go
// has the original release's).
var (
	textPrefixes = []string{"model.language_model.", "language_model."}
	lmPrefixes   = []string{"", "model."}
)

// decoderLayer is DeepseekOcr2TextDecoderLayer: its MLP a gated MLP (dense) or, with moe set,
// the router and experts (ml.MoE) beside a shared gated MLP (absent with no shared experts).
type decoderLayer struct {
	attnNorm, mlpNorm ml.Tensor
	q, k, v, o        ml.Tensor
	gate, up, down    ml.Tensor // the dense MLP, or the shared experts of a sparse layer
	moe               *ml.MoE
}

// Decoder is the text model's weights: the embedding, the layers, the final norm and lm_head.
type Decoder struct {
	cfg                 TextConfig
	layout              layout
	embed, norm, lmHead ml.Tensor
	layers              []decoderLayer
	invFreq             []float32
}

// BindDecoder binds the text model's layers by transformers 5.17's names (BindHead binds the
// embedding, the final norm and lm_head, which a kit family gets from kit.BindHead instead).
func BindDecoder(ld *ml.Loader, cfg TextConfig) (*Decoder, error) {
	if len(cfg.MoE.Sparse) != cfg.Layers {
		return nil, fmt.Errorf("deepseekocr2: %d mlp_layer_types for %d layers", len(cfg.MoE.Sparse), cfg.Layers)
	}
	d := &Decoder{cfg: cfg, layout: detectLayout(ld)}
	textPrefixes := d.layout.text
	H, hd := cfg.Hidden, cfg.HeadDim
	qd, kvd := cfg.Heads*hd, cfg.KVHeads*hd
	d.layers = make([]decoderLayer, cfg.Layers)
	m := cfg.MoE
	for l := range d.layers {
		L := &d.layers[l]
		p := fmt.Sprintf("layers.%d.", l)
		L.attnNorm = ld.Vector(textPrefixes, p+"input_layernorm.weight", H)
		L.q = ld.Matrix(textPrefixes, p+"self_attn.q_proj.weight", qd, H)
		L.k = ld.Matrix(textPrefixes, p+"self_attn.k_proj.weight", kvd, H)
		L.v = ld.Matrix(textPrefixes, p+"self_attn.v_proj.weight", kvd, H)
		L.o = ld.Matrix(textPrefixes, p+"self_attn.o_proj.weight", H, qd)
		L.mlpNorm = ld.Vector(textPrefixes, p+"post_attention_layernorm.weight", H)
		mlp, inter := p+"mlp.", cfg.Intermediate
		if m.Sparse[l] {
			mlp, inter = p+"mlp.shared_experts.", m.Inter*m.Shared
			e := &ml.MoE{Experts: m.Experts, TopK: m.TopK, Inter: m.Inter, Groups: m.Groups, TopGroups: m.TopGroups, Scale: float32(m.Scale)}
			// the router's logits are F32 whatever the activations (F.linear of hidden_states.float())
			e.Router = ld.MatrixF32(textPrefixes, p+"mlp.gate.weight", m.Experts, H)
			e.GateUp, e.Down = d.layout.experts(ld, p, m.Experts, m.Inter, H)
			L.moe = e
		}
		if inter > 0 {
			gu := ld.Matrices(textPrefixes, []string{mlp + "gate_proj.weight", mlp + "up_proj.weight"}, inter, H)
			L.gate, L.up = gu[0], gu[1]
			L.down = ld.Matrix(textPrefixes, mlp+"down_proj.weight", H, inter)
		}
	}
	half := hd / 2
	d.invFreq = make([]float32, half)
	for i := range d.invFreq {
		d.invFreq[i] = 1 / float32(math.Pow(cfg.Theta, float64(float32(2*i)/float32(hd))))
	}
	return d, nil
}

// BindHead binds the token embedding, the final norm and lm_head.
func (d *Decoder) BindHead(ld *ml.Loader) {
	d.embed = ld.Rows(d.layout.text, "embed_tokens.weight", d.cfg.Vocab, d.cfg.Hidden)
	d.norm = ld.Vector(d.layout.text, "norm.weight", d.cfg.Hidden)
	d.lmHead = ld.Matrix(d.layout.lm, "lm_head.weight", d.cfg.Vocab, d.cfg.Hidden)
}

// Attend runs layer l's attention over the pass's rows: out from q, k and v (as projected, not
// yet rotated: the caller applies the rotary embedding, with or without a KV cache).
type Attend func(l int, out, q, k, v ml.Tensor)

// Angles returns the rotary angles of positions [start, start+n) (n rows of head dim / 2 values
// each: freqs = position · inv_freq in F32, DeepseekOcr2TextRotaryEmbedding's default RoPE).
func (d *Decoder) Angles(start, n int) (cos, sin []float32) {
	half := len(d.invFreq)
	cos, sin = make([]float32, n*half), make([]float32, n*half)
	for p := range n {
		for f := range half {
			a := float64(float32(start+p) * d.invFreq[f])
			cos[p*half+f], sin[p*half+f] = float32(math.Cos(a)), float32(math.Sin(a))
		}
	}
	return cos, sin
}

// LayerOps issues the decoder layers over x's rows (the input embeddings, which hold the
// residual stream from then on) and returns the last layer's MLP output, which the final norm
// adds: DeepseekOcr2TextDecoderLayer, self-attention through attend, then the dense gated MLP or
// the mixture of experts plus the shared experts.
func (d *Decoder) LayerOps(b ml.Backend, x ml.Tensor, attend Attend) ml.Tensor {
	c := &d.cfg
	rows, H, hd := x.Rows, c.Hidden, c.HeadDim
	qd, kvd := c.Heads*hd, c.KVHeads*hd
	eps := float32(c.Eps)
	inter := max(c.Intermediate, c.MoE.Inter*c.MoE.Shared)
	xn := b.Scratch("dec.xn", rows, H)
	// q, k and v side by side: the backend may run the three products as one (kit's layout)
	qkv := b.Scratch("dec.qkv", rows, qd+2*kvd)
	q, k, v := qkv.ColsAt(0, qd), qkv.ColsAt(qd, kvd), qkv.ColsAt(qd+kvd, kvd)
	att := b.Scratch("dec.att", rows, qd)
	t := b.Scratch("dec.t", rows, H)
	mo := b.Scratch("dec.moe", rows, H)
	gu := b.Scratch("dec.gu", rows, 2*max(inter, 1))
	act := b.Scratch("dec.act", rows, max(inter, 1))
	delta := ml.Tensor{}
	for l := range d.layers {
		L := &d.layers[l]
		// residual + the previous MLP's output, then self.input_layernorm
		b.RMSNorm(xn, x, x, delta, L.attnNorm, eps)
		b.Linears(xn, ml.Out{Y: q, W: L.q}, ml.Out{Y: k, W: L.k}, ml.Out{Y: v, W: L.v})
		attend(l, att, q, k, v)
		b.Linears(att, ml.Out{Y: t, W: L.o})
		b.RMSNorm(xn, x, x, t, L.mlpNorm, eps)
		shared := ml.Tensor{}
		if L.gate.Valid() {
			// self.mlp (dense) or self.shared_experts(residuals): down(act_fn(gate(x)) * up(x))
			n := L.gate.Rows // the dense width or the shared experts'
			gv := gu.Reshape(rows*2*max(inter, 1), 1).RowsAt(0, rows*2*n).Reshape(rows, 2*n)
			g, u := gv.ColsAt(0, n), gv.ColsAt(n, n)
			a := act.Reshape(rows*max(inter, 1), 1).RowsAt(0, rows*n).Reshape(rows, n)
			b.Linears(xn, ml.Out{Y: g, W: L.gate}, ml.Out{Y: u, W: L.up})
			b.SiluMul(a, g, u)
			b.Linears(a, ml.Out{Y: t, W: L.down})
			shared = t
		}
		if L.moe != nil {
			// experts(...) + shared_experts(residuals), then the residual add in the next norm
			b.MoE(mo, xn, shared, *L.moe)
			delta = mo
		} else {
			delta = t
		}
	}
	return delta
}

// Head issues the final norm (adding the last layer's output delta to the residual x) and
// lm_head over x's rows into logits (F32, rows x vocab).
func (d *Decoder) Head(b ml.Backend, x, delta, logits ml.Tensor) {
	xn := b.Scratch("dec.xn", x.Rows, d.cfg.Hidden)
	b.RMSNorm(xn, x, x, delta, d.norm, float32(d.cfg.Eps))
	b.Linears(xn, ml.Out{Y: logits, W: d.lmHead})
}
