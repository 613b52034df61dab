// Package qwen25vl is the Qwen2.5-VL family, written once over the op set of core/internal/ml:
// its checkpoint's tensor names, the vision tower (Conv3d patches, RMSNorm blocks with 2-D RoPE and
// window attention, a 2x2 merger), and the Qwen2 decoder with multimodal RoPE, batch-first. Every
// backend runs it; none of them knows it (transformers 5.17 models/qwen2_5_vl is the reference).
package qwen25vl

import (
	"fmt"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models/internal/kit"
)

// ModelType is config.json's model_type of the family.
const ModelType = "qwen2_5_vl"

// Tensor name prefixes: the hub's layout first, then transformers 5's module paths.
var (
	textPrefixes   = []string{"model.", "model.language_model."}
	visionPrefixes = []string{"visual.", "model.visual."}
	rootPrefixes   = []string{"", "model."}
)

type visionBlock struct {
	norm1, norm2              ml.Tensor
	qkv, qkvBias, proj, projB ml.Tensor
	gate, gateB, up, upB      ml.Tensor
	down, downB               ml.Tensor
}

type weights struct {
	layers []kit.DecoderLayer

	patch      ml.Tensor
	blocks     []visionBlock
	mergerNorm ml.Tensor
	fc1, fc1B  ml.Tensor
	fc2, fc2B  ml.Tensor
}

// Options tune a model.
type Options = kit.Options

// Model is a Qwen2.5-VL checkpoint on a backend: the shared model machinery (kit.Base, which
// implements model.Model, model.Batcher and the rest) running this family's graph.
type Model struct {
	*kit.Base
	w weights
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
	v := &cfg.Vision
	w := &m.w
	head := kit.BindHead(ld, cfg, textPrefixes, rootPrefixes)
	w.layers = kit.BindDecoder(ld, cfg, textPrefixes)

	VH, VI, unit := v.Hidden, v.Intermediate, v.MergeSize*v.MergeSize
	w.patch = ld.Matrix(visionPrefixes, "patch_embed.proj.weight", VH, v.PatchDim())
	w.blocks = make([]visionBlock, v.Depth)
	for l := range w.blocks {
		B := &w.blocks[l]
		p := fmt.Sprintf("blocks.%d.", l)
		B.norm1 = ld.Vector(visionPrefixes, p+"norm1.weight", VH)
		B.norm2 = ld.Vector(visionPrefixes, p+"norm2.weight", VH)
		B.qkv = ld.Matrix(visionPrefixes, p+"attn.qkv.weight", 3*VH, VH)
		B.qkvBias = ld.Vector(visionPrefixes, p+"attn.qkv.bias", 3*VH)
		B.proj = ld.Matrix(visionPrefixes, p+"attn.proj.weight", VH, VH)
		B.projB = ld.Vector(visionPrefixes, p+"attn.proj.bias", VH)
		// gate and up as one tensor, their biases after: each pair runs as one product (bound
		// apart, a pair split by a device chunk's end ran as two, the up product's output at
		// 3,420 columns, not 16-byte aligned: 3x slower)
		gu := ld.Matrices(visionPrefixes, []string{p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"}, VI, VH)
		B.gate, B.up = gu[0], gu[1]
		B.gateB = ld.Vector(visionPrefixes, p+"mlp.gate_proj.bias", VI)
		B.upB = ld.Vector(visionPrefixes, p+"mlp.up_proj.bias", VI)
		B.down = ld.Matrix(visionPrefixes, p+"mlp.down_proj.weight", VH, VI)
		B.downB = ld.Vector(visionPrefixes, p+"mlp.down_proj.bias", VH)
	}
	w.mergerNorm = ld.Vector(visionPrefixes, "merger.ln_q.weight", VH)
	w.fc1 = ld.Matrix(visionPrefixes, "merger.mlp.0.weight", unit*VH, unit*VH)
	w.fc1B = ld.Vector(visionPrefixes, "merger.mlp.0.bias", unit*VH)
	w.fc2 = ld.Matrix(visionPrefixes, "merger.mlp.2.weight", v.OutHidden, unit*VH)
	w.fc2B = ld.Vector(visionPrefixes, "merger.mlp.2.bias", v.OutHidden)
	return head, nil
}
