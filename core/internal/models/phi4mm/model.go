// Package phi4mm is the Phi-4-multimodal family (Phi4MultimodalForCausalLM, the transformers-format
// checkpoint), written once over the op set of core/internal/ml: its checkpoint's tensor names,
// the SigLIP tower over an image's views as one batch (Conv2d patches, a learned position table
// read at ids bucketised from each view's patch mask, LayerNorm blocks with biased attention
// within each view that never sees a padding patch as a key, GELU-tanh MLPs, stopped at the
// feature layer), the 2x2 average pooling, the HD layout (the crops' cells stitched into one map
// and cut to its valid region, the sub-image and global separators), the projector (Linear,
// GELU erf, Linear), and the Phi-3 decoder (fused qkv_proj and gate_up_proj bound as row slices,
// partial rotary, LongRoPE's short and long factors and attention factor). transformers 5.17
// models/phi4_multimodal is the reference; the audio tower is not bound (the family serves
// images).
package phi4mm

import (
	"fmt"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models/internal/kit"
)

// ModelType is config.json's model_type of the family.
const ModelType = "phi4_multimodal"

// Tensor name prefixes of a transformers 5 checkpoint (Phi4MultimodalForCausalLM).
var (
	textPrefixes  = []string{"model."}
	rootPrefixes  = []string{""}
	imagePrefixes = []string{"model.embed_tokens_extend.image_embed."}
	towerPrefixes = []string{"model.embed_tokens_extend.image_embed.img_processor."}
)

// visionBlock is Phi4MultimodalVisionEncoderLayer: LayerNorm, biased q/k/v attention and
// out_proj, LayerNorm, fc1, GELU-tanh, fc2, each half with its residual add.
type visionBlock struct {
	norm1, norm1B, norm2, norm2B ml.Tensor
	q, k, v, qB, kB, vB          ml.Tensor
	out, outB                    ml.Tensor
	fc1, fc1B, fc2, fc2B         ml.Tensor
}

type weights struct {
	layers []kit.DecoderLayer

	patch, patchB ml.Tensor // Conv2d(3, hidden, 14, stride 14) as a product on pixel rows
	pos           ml.Tensor // the position table: FixedGrid^2 rows
	blocks        []visionBlock
	sub, glb      ml.Tensor // sub_img_feature_extensor, global_img_feature_extensor (1 row each)
	up, upB       ml.Tensor // img_projection_up
	down, downB   ml.Tensor // img_projection_down
}

// Options tune a model.
type Options = kit.Options

// Model is a Phi-4-multimodal checkpoint on a backend: the shared model machinery (kit.Base,
// which implements model.Model, model.Batcher and the rest) running this family's graph.
type Model struct {
	*kit.Base
	w     weights
	plans towerCache
}

// New binds the checkpoint's weights on b. The model owns b and ck from here on (Close closes
// them), also when New fails.
func New(b ml.Backend, ck *ml.Checkpoint, cfg *model.Config, lim model.Limits, opts Options) (*Model, error) {
	refuse := func(err error) (*Model, error) {
		b.Close()
		if ck != nil {
			ck.Close()
		}
		return nil, err
	}
	if cfg.ModelType == ModelType {
		t := &cfg.Text
		// Past original_max_position_embeddings a sequence runs LongRoPE's long factors
		// (model.TextConfig.LongRoPE); without them the context stays within it.
		if o := t.RopeOriginalMax; len(t.RopeFactors) > 0 && len(t.RopeLongFactors) == 0 && lim.ContextLength > o {
			return refuse(fmt.Errorf("context of %d tokens past original_max_position_embeddings %d, and no long_factor: %w",
				lim.ContextLength, o, model.ErrUnsupported))
		}
		if lim.ContextLength > t.MaxPositions {
			return refuse(fmt.Errorf("context of %d tokens past max_position_embeddings %d: %w", lim.ContextLength, t.MaxPositions, model.ErrUnsupported))
		}
	}
	m := &Model{}
	base, err := kit.New(ModelType, b, ck, cfg, lim, opts, m)
	if err != nil {
		return nil, err
	}
	m.Base = base
	return m, nil
}

// Bind implements kit.Family: every tensor the graph needs, by its checkpoint name. The fused
// qkv_proj is bound as one matrix whose rows are q's, k's and v's, gate_up_proj as one whose
// rows are gate's then up's (Phi4MultimodalMLP.chunk): each trio and pair runs as one product
// wherever the backend places tensors.
func (m *Model) Bind(ld *ml.Loader, cfg *model.Config) (kit.Head, error) {
	t, v := &cfg.Text, &cfg.Vision
	if t.QKVBias || !t.Rope1D || v.FixedGrid <= 0 || v.MergeSize != 2 || v.TemporalPatchSize != 1 || v.FeatureBlocks < 1 {
		return kit.Head{}, fmt.Errorf("a config the Phi-4-multimodal graph does not have (q/k/v bias %v, 1-D RoPE %v, grid %d, merge %d, temporal patch %d, feature blocks %d): %w",
			t.QKVBias, t.Rope1D, v.FixedGrid, v.MergeSize, v.TemporalPatchSize, v.FeatureBlocks, model.ErrUnsupported)
	}
	w := &m.w
	head := kit.BindHead(ld, cfg, textPrefixes, rootPrefixes)
	H, hd, I := t.Hidden, t.HeadDim, t.Intermediate
	qd, kvd := t.Heads*hd, t.KVHeads*hd
	w.layers = make([]kit.DecoderLayer, t.Layers)
	for l := range w.layers {
		L := &w.layers[l]
		p := fmt.Sprintf("layers.%d.", l)
		L.AttnNorm = ld.Vector(textPrefixes, p+"input_layernorm.weight", H)
		qkv := ld.Matrix(textPrefixes, p+"self_attn.qkv_proj.weight", qd+2*kvd, H)
		if qkv.Valid() {
			L.Q, L.K, L.V = qkv.RowsAt(0, qd), qkv.RowsAt(qd, kvd), qkv.RowsAt(qd+kvd, kvd)
		}
		L.O = ld.Matrix(textPrefixes, p+"self_attn.o_proj.weight", H, qd)
		L.MLPNorm = ld.Vector(textPrefixes, p+"post_attention_layernorm.weight", H)
		gu := ld.Matrix(textPrefixes, p+"mlp.gate_up_proj.weight", 2*I, H)
		if gu.Valid() {
			L.Gate, L.Up = gu.RowsAt(0, I), gu.RowsAt(I, I)
		}
		L.Down = ld.Matrix(textPrefixes, p+"mlp.down_proj.weight", H, I)
	}

	VH, VI := v.Hidden, v.Intermediate
	w.patch = ld.Matrix(towerPrefixes, "embeddings.patch_embedding.weight", VH, v.PatchDim())
	w.patchB = ld.Vector(towerPrefixes, "embeddings.patch_embedding.bias", VH)
	w.pos = ld.Rows(towerPrefixes, "embeddings.position_embedding.weight", v.PosEmbeddings, VH)
	// only the blocks before the feature layer run (and are bound)
	w.blocks = make([]visionBlock, v.FeatureBlocks)
	for l := range w.blocks {
		B := &w.blocks[l]
		p := fmt.Sprintf("encoder.layers.%d.", l)
		B.norm1 = ld.Vector(towerPrefixes, p+"layer_norm1.weight", VH)
		B.norm1B = ld.Vector(towerPrefixes, p+"layer_norm1.bias", VH)
		B.q = ld.Matrix(towerPrefixes, p+"self_attn.q_proj.weight", VH, VH)
		B.k = ld.Matrix(towerPrefixes, p+"self_attn.k_proj.weight", VH, VH)
		B.v = ld.Matrix(towerPrefixes, p+"self_attn.v_proj.weight", VH, VH)
		B.qB = ld.Vector(towerPrefixes, p+"self_attn.q_proj.bias", VH)
		B.kB = ld.Vector(towerPrefixes, p+"self_attn.k_proj.bias", VH)
		B.vB = ld.Vector(towerPrefixes, p+"self_attn.v_proj.bias", VH)
		B.out = ld.Matrix(towerPrefixes, p+"self_attn.out_proj.weight", VH, VH)
		B.outB = ld.Vector(towerPrefixes, p+"self_attn.out_proj.bias", VH)
		B.norm2 = ld.Vector(towerPrefixes, p+"layer_norm2.weight", VH)
		B.norm2B = ld.Vector(towerPrefixes, p+"layer_norm2.bias", VH)
		B.fc1 = ld.Matrix(towerPrefixes, p+"mlp.fc1.weight", VI, VH)
		B.fc1B = ld.Vector(towerPrefixes, p+"mlp.fc1.bias", VI)
		B.fc2 = ld.Matrix(towerPrefixes, p+"mlp.fc2.weight", VH, VI)
		B.fc2B = ld.Vector(towerPrefixes, p+"mlp.fc2.bias", VH)
	}
	w.sub = ld.Rows(imagePrefixes, "sub_img_feature_extensor", 1, VH) // gathered: the activation type
	w.glb = ld.Rows(imagePrefixes, "global_img_feature_extensor", 1, VH)
	w.up = ld.Matrix(imagePrefixes, "img_projection_up.weight", v.OutHidden, VH)
	w.upB = ld.Vector(imagePrefixes, "img_projection_up.bias", v.OutHidden)
	w.down = ld.Matrix(imagePrefixes, "img_projection_down.weight", v.OutHidden, v.OutHidden)
	w.downB = ld.Vector(imagePrefixes, "img_projection_down.bias", v.OutHidden)
	return head, nil
}

// LayerOps implements kit.Family: Phi4MultimodalModel's decoder layers over the pass's rows
// (kit's decoder: RMSNorm, the q/k/v rows of qkv_proj, partial rotary attention over the cache,
// o_proj, RMSNorm, silu(gate) * up, down_proj). The rotary angles kit lays out follow the token
// index, with LongRoPE's short factors (a sequence past original_max_position_embeddings: its
// long ones, model.TextConfig.LongRoPE) dividing the frequencies and its attention factor
// multiplying cos and sin.
func (m *Model) LayerOps(p *kit.Pass) (int, ml.Tensor) {
	return kit.DecoderOps(m.Backend(), m.Config(), p, m.w.layers)
}
