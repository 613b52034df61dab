// Package internvl is the InternVL family (InternVL3 2B and 8B, the -hf checkpoints), written
// once over the op set of core/internal/ml: its checkpoint's tensor names, the InternViT tower
// over an image's tiles as one batch (Conv2d patches, a CLS token and learned absolute positions a
// tile, LayerNorm blocks with LayerScale, q/k/v biases and GELU-erf MLPs, full attention within
// each tile), the pixel shuffle of each tile's 32x32 patches into 256 tokens, the LayerNorm + MLP
// projector, and the Qwen2 decoder with plain 1-D RoPE. transformers 5.17 models/internvl is the
// reference.
package internvl

import (
	"fmt"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models/internal/kit"
)

// ModelType is config.json's model_type of the family.
const ModelType = "internvl"

// Tensor name prefixes: transformers 5's module paths first, then the layout save_pretrained
// writes (language_model.model., vision_tower., ...), which the hub's -hf files use.
var (
	textPrefixes      = []string{"model.language_model.", "language_model.model."}
	rootPrefixes      = []string{"", "language_model."}
	visionPrefixes    = []string{"model.vision_tower.", "vision_tower."}
	projectorPrefixes = []string{"model.multi_modal_projector.", "multi_modal_projector."}
)

// visionBlock is InternVLVisionLayer: LayerNorms before attention and MLP, their outputs scaled
// by lambda_1 and lambda_2 (LayerScale) before each residual add.
type visionBlock struct {
	norm1, norm1B, norm2, norm2B ml.Tensor
	q, k, v, qB, kB, vB          ml.Tensor
	proj, projB                  ml.Tensor
	fc1, fc1B, fc2, fc2B         ml.Tensor
	lambda1, lambda2             ml.Tensor
}

type weights struct {
	layers []kit.DecoderLayer

	patch, patchB ml.Tensor // Conv2d(3, hidden, 14, stride 14) as a product on pixel rows
	cls, pos      ml.Tensor // the CLS token (1 row), the position table (1 + grid rows)
	blocks        []visionBlock
	// multi_modal_projector: LayerNorm over a shuffled token (4 patches), Linear, GELU, Linear
	projNorm, projNormB ml.Tensor
	fc1, fc1B           ml.Tensor
	fc2, fc2B           ml.Tensor
}

// Options tune a model.
type Options = kit.Options

// Model is an InternVL checkpoint on a backend: the shared model machinery (kit.Base, which
// implements model.Model, model.Batcher and the rest) running this family's graph.
type Model struct {
	*kit.Base
	w     weights
	plans planCache
}

// New binds the checkpoint's weights on b. The model owns b and ck from here on (Close closes
// them), also when New fails.
func New(b ml.Backend, ck *ml.Checkpoint, cfg *model.Config, lim model.Limits, opts Options) (*Model, error) {
	// Past max_position_embeddings the reference's dynamic NTK RoPE (InternVL3's text configs)
	// would rescale its frequencies: the context stays below it.
	if lim.ContextLength > cfg.Text.MaxPositions {
		b.Close()
		if ck != nil {
			ck.Close()
		}
		return nil, fmt.Errorf("context of %d tokens past max_position_embeddings %d: %w", lim.ContextLength, cfg.Text.MaxPositions, model.ErrUnsupported)
	}
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
	if !t.QKVBias || !t.Rope1D || v.FixedGrid <= 0 || v.MergeSize != 2 || v.TemporalPatchSize != 1 {
		return kit.Head{}, fmt.Errorf("a config the InternVL graph does not have (q/k/v bias %v, 1-D RoPE %v, grid %d, merge %d, temporal patch %d): %w",
			t.QKVBias, t.Rope1D, v.FixedGrid, v.MergeSize, v.TemporalPatchSize, model.ErrUnsupported)
	}
	w := &m.w
	head := kit.BindHead(ld, cfg, textPrefixes, rootPrefixes)
	w.layers = kit.BindDecoder(ld, cfg, textPrefixes)

	VH, VI := v.Hidden, v.Intermediate
	w.patch = ld.Matrix(visionPrefixes, "embeddings.patch_embeddings.projection.weight", VH, v.PatchDim())
	w.patchB = ld.Vector(visionPrefixes, "embeddings.patch_embeddings.projection.bias", VH)
	w.cls = ld.Rows(visionPrefixes, "embeddings.cls_token", 1, VH) // gathered: the activation type
	w.pos = ld.Matrix(visionPrefixes, "embeddings.position_embeddings", 1+v.PosEmbeddings, VH)
	w.blocks = make([]visionBlock, v.Depth)
	for l := range w.blocks {
		B := &w.blocks[l]
		p := fmt.Sprintf("encoder.layer.%d.", l)
		B.norm1 = ld.Vector(visionPrefixes, p+"layernorm_before.weight", VH)
		B.norm1B = ld.Vector(visionPrefixes, p+"layernorm_before.bias", VH)
		B.q = ld.Matrix(visionPrefixes, p+"attention.q_proj.weight", VH, VH)
		B.k = ld.Matrix(visionPrefixes, p+"attention.k_proj.weight", VH, VH)
		B.v = ld.Matrix(visionPrefixes, p+"attention.v_proj.weight", VH, VH)
		B.qB = ld.Vector(visionPrefixes, p+"attention.q_proj.bias", VH)
		B.kB = ld.Vector(visionPrefixes, p+"attention.k_proj.bias", VH)
		B.vB = ld.Vector(visionPrefixes, p+"attention.v_proj.bias", VH)
		B.proj = ld.Matrix(visionPrefixes, p+"attention.projection_layer.weight", VH, VH)
		B.projB = ld.Vector(visionPrefixes, p+"attention.projection_layer.bias", VH)
		B.lambda1 = ld.Vector(visionPrefixes, p+"lambda_1", VH)
		B.norm2 = ld.Vector(visionPrefixes, p+"layernorm_after.weight", VH)
		B.norm2B = ld.Vector(visionPrefixes, p+"layernorm_after.bias", VH)
		B.fc1 = ld.Matrix(visionPrefixes, p+"mlp.fc1.weight", VI, VH)
		B.fc1B = ld.Vector(visionPrefixes, p+"mlp.fc1.bias", VI)
		B.fc2 = ld.Matrix(visionPrefixes, p+"mlp.fc2.weight", VH, VI)
		B.fc2B = ld.Vector(visionPrefixes, p+"mlp.fc2.bias", VH)
		B.lambda2 = ld.Vector(visionPrefixes, p+"lambda_2", VH)
	}
	unit := v.MergeSize * v.MergeSize * VH
	w.projNorm = ld.Vector(projectorPrefixes, "layer_norm.weight", unit)
	w.projNormB = ld.Vector(projectorPrefixes, "layer_norm.bias", unit)
	w.fc1 = ld.Matrix(projectorPrefixes, "linear_1.weight", v.OutHidden, unit)
	w.fc1B = ld.Vector(projectorPrefixes, "linear_1.bias", v.OutHidden)
	w.fc2 = ld.Matrix(projectorPrefixes, "linear_2.weight", v.OutHidden, v.OutHidden)
	w.fc2B = ld.Vector(projectorPrefixes, "linear_2.bias", v.OutHidden)
	return head, nil
}
