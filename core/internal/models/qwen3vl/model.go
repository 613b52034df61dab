// Package qwen3vl is the Qwen3-VL family, written once over the op set of core/internal/ml: its
// checkpoint's tensor names, the vision tower (Conv3d patches with a learned position table
// resampled to the grid, LayerNorm blocks with 2-D RoPE and GELU-tanh MLPs, a 2x2 merger and the
// deepstack mergers), and the Qwen3 decoder (per-head q/k RMSNorm, interleaved multimodal RoPE,
// the deepstack features added after the first layers). transformers 5.17 models/qwen3_vl is the
// reference.
package qwen3vl

import (
	"fmt"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models/internal/kit"
)

// ModelType is config.json's model_type of the family.
const ModelType = "qwen3_vl"

// Tensor name prefixes: transformers 5's module paths first, then the older flat layout.
var (
	textPrefixes   = []string{"model.language_model.", "model."}
	visionPrefixes = []string{"model.visual.", "visual."}
	rootPrefixes   = []string{"", "model."}
)

type textLayer struct {
	attnNorm, mlpNorm ml.Tensor
	q, k, v, o        ml.Tensor
	qNorm, kNorm      ml.Tensor
	gate, up, down    ml.Tensor
}

type visionBlock struct {
	norm1, norm1B, norm2, norm2B ml.Tensor
	qkv, qkvB, proj, projB       ml.Tensor
	fc1, fc1B, fc2, fc2B         ml.Tensor
}

// merger is Qwen3VLVisionPatchMerger: a LayerNorm (over one patch, or over the 2x2 unit after
// the shuffle), Linear, GELU, Linear.
type merger struct {
	norm, normB ml.Tensor
	fc1, fc1B   ml.Tensor
	fc2, fc2B   ml.Tensor
}

type weights struct {
	layers []textLayer

	patch, patchB ml.Tensor
	posEmbed      ml.Tensor
	blocks        []visionBlock
	merger        merger
	deepstack     []merger
}

// Options tune a model.
type Options = kit.Options

// Model is a Qwen3-VL checkpoint on a backend: the shared model machinery (kit.Base, which
// implements model.Model, model.Batcher and the rest) running this family's graph.
type Model struct {
	*kit.Base
	w   weights
	pos posCache
}

// New binds the checkpoint's weights on b. The model owns b and ck from here on (Close closes
// them), also when New fails.
func New(b ml.Backend, ck *ml.Checkpoint, cfg *model.Config, lim model.Limits, opts Options) (*Model, error) {
	m := &Model{}
	base, err := kit.New(ModelType, b, ck, cfg, lim, opts, m)
	if err != nil {
		return nil, err
	}
	m.Base = base
	return m, nil
}

// Bind implements kit.Family: every tensor the graph needs, by its checkpoint name.
func (m *Model) Bind(ld *ml.Loader, cfg *model.Config) (kit.Head, error) {
	t, v := &cfg.Text, &cfg.Vision
	H, hd, I := t.Hidden, t.HeadDim, t.Intermediate
	qd, kvd := t.Heads*hd, t.KVHeads*hd
	w := &m.w
	head := kit.BindHead(ld, cfg, textPrefixes, rootPrefixes)
	w.layers = make([]textLayer, t.Layers)
	for l := range w.layers {
		L := &w.layers[l]
		p := fmt.Sprintf("layers.%d.", l)
		L.attnNorm = ld.Vector(textPrefixes, p+"input_layernorm.weight", H)
		L.q = ld.Matrix(textPrefixes, p+"self_attn.q_proj.weight", qd, H)
		L.k = ld.Matrix(textPrefixes, p+"self_attn.k_proj.weight", kvd, H)
		L.v = ld.Matrix(textPrefixes, p+"self_attn.v_proj.weight", kvd, H)
		L.o = ld.Matrix(textPrefixes, p+"self_attn.o_proj.weight", H, qd)
		L.qNorm = ld.Vector(textPrefixes, p+"self_attn.q_norm.weight", hd)
		L.kNorm = ld.Vector(textPrefixes, p+"self_attn.k_norm.weight", hd)
		L.mlpNorm = ld.Vector(textPrefixes, p+"post_attention_layernorm.weight", H)
		L.gate = ld.Matrix(textPrefixes, p+"mlp.gate_proj.weight", I, H)
		L.up = ld.Matrix(textPrefixes, p+"mlp.up_proj.weight", I, H)
		L.down = ld.Matrix(textPrefixes, p+"mlp.down_proj.weight", H, I)
	}
	if t.QKVBias {
		return kit.Head{}, fmt.Errorf("attention_bias: %w", model.ErrUnsupported)
	}

	VH, VI, unit := v.Hidden, v.Intermediate, v.MergeSize*v.MergeSize
	w.patch = ld.Matrix(visionPrefixes, "patch_embed.proj.weight", VH, v.PatchDim())
	w.patchB = ld.Vector(visionPrefixes, "patch_embed.proj.bias", VH)
	if v.PosEmbeddings <= 0 {
		return kit.Head{}, fmt.Errorf("num_position_embeddings %d: the tower needs its position table", v.PosEmbeddings)
	}
	w.posEmbed = ld.Matrix(visionPrefixes, "pos_embed.weight", v.PosEmbeddings, VH)
	w.blocks = make([]visionBlock, v.Depth)
	for l := range w.blocks {
		B := &w.blocks[l]
		p := fmt.Sprintf("blocks.%d.", l)
		B.norm1 = ld.Vector(visionPrefixes, p+"norm1.weight", VH)
		B.norm1B = ld.Vector(visionPrefixes, p+"norm1.bias", VH)
		B.qkv = ld.Matrix(visionPrefixes, p+"attn.qkv.weight", 3*VH, VH)
		B.qkvB = ld.Vector(visionPrefixes, p+"attn.qkv.bias", 3*VH)
		B.proj = ld.Matrix(visionPrefixes, p+"attn.proj.weight", VH, VH)
		B.projB = ld.Vector(visionPrefixes, p+"attn.proj.bias", VH)
		B.norm2 = ld.Vector(visionPrefixes, p+"norm2.weight", VH)
		B.norm2B = ld.Vector(visionPrefixes, p+"norm2.bias", VH)
		B.fc1 = ld.Matrix(visionPrefixes, p+"mlp.linear_fc1.weight", VI, VH)
		B.fc1B = ld.Vector(visionPrefixes, p+"mlp.linear_fc1.bias", VI)
		B.fc2 = ld.Matrix(visionPrefixes, p+"mlp.linear_fc2.weight", VH, VI)
		B.fc2B = ld.Vector(visionPrefixes, p+"mlp.linear_fc2.bias", VH)
	}
	bindMerger := func(prefix string, normDim int) merger {
		return merger{
			norm:  ld.Vector(visionPrefixes, prefix+"norm.weight", normDim),
			normB: ld.Vector(visionPrefixes, prefix+"norm.bias", normDim),
			fc1:   ld.Matrix(visionPrefixes, prefix+"linear_fc1.weight", unit*VH, unit*VH),
			fc1B:  ld.Vector(visionPrefixes, prefix+"linear_fc1.bias", unit*VH),
			fc2:   ld.Matrix(visionPrefixes, prefix+"linear_fc2.weight", v.OutHidden, unit*VH),
			fc2B:  ld.Vector(visionPrefixes, prefix+"linear_fc2.bias", v.OutHidden),
		}
	}
	w.merger = bindMerger("merger.", VH)
	w.deepstack = make([]merger, len(v.Deepstack))
	for i := range w.deepstack {
		w.deepstack[i] = bindMerger(fmt.Sprintf("deepstack_merger_list.%d.", i), unit*VH)
	}
	return head, nil
}
