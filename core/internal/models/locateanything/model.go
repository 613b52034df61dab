// Package locateanything is the LocateAnything-3B family (NVIDIA's grounding model, remote code),
// written once over the op set of core/internal/ml: its checkpoint's tensor names, the MoonViT
// tower over an image's raster patches (Conv2d patches, a learned position table resampled bicubic
// to each grid, LayerNorm blocks with q/k/v biases, 2-D RoPE on (column, row) pairs, GELU-tanh
// MLPs, full attention within each image, a final LayerNorm), the 2x2 patch merger, the mlp1
// projector (LayerNorm, Linear, GELU-erf, Linear), and the Qwen2.5 decoder with plain 1-D RoPE and
// an untied head. The remote-code export in NVlabs/Eagle at 783f656d (modeling_vit.py,
// modeling_locateanything.py, modeling_qwen2.py) is the reference, in its slow (autoregressive)
// mode.
package locateanything

import (
	"fmt"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models/internal/kit"
)

// ModelType is config.json's model_type of the family.
const ModelType = "locateanything"

// Tensor name prefixes: LocateAnythingForConditionalGeneration's module paths.
var (
	textPrefixes      = []string{"language_model.model."}
	rootPrefixes      = []string{"language_model."}
	visionPrefixes    = []string{"vision_model."}
	projectorPrefixes = []string{"mlp1."}
)

// visionBlock is MoonVitEncoderLayer: LayerNorms before attention (norm0) and MLP (norm1), one
// q/k/v product with biases (its q and k rows reordered, see Bind), wo with a bias, fc0, GELU-tanh,
// fc1.
type visionBlock struct {
	norm0, norm0B, norm1, norm1B ml.Tensor
	qkv, qkvB, wo, woB           ml.Tensor
	fc0, fc0B, fc1, fc1B         ml.Tensor
}

type weights struct {
	layers []kit.DecoderLayer

	patch, patchB ml.Tensor // Conv2d(3, hidden, 14, stride 14) as a product on pixel rows
	pos           ml.Tensor // the learned position table, PosGrid[0] x PosGrid[1] rows
	blocks        []visionBlock
	final, finalB ml.Tensor // final_layernorm
	// mlp1: LayerNorm over a merged token (4 patches), Linear, GELU (erf), Linear
	projNorm, projNormB ml.Tensor
	fc1, fc1B           ml.Tensor
	fc2, fc2B           ml.Tensor
}

// Options tune a model.
type Options = kit.Options

// Model is a LocateAnything checkpoint on a backend: kit.Base running this family's graph.
type Model struct {
	*kit.Base
	w     weights
	plans planCache
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
//
// MoonViT rotates q and k by complex pairs of adjacent dimensions (2i, 2i+1) (apply_rope's
// view_as_complex); the op set's rotary pairs dimension j with j + hd/2. Each head's q and k rows
// of wqkv (and their biases) are bound with the even dimensions first, then the odd ones, so that
// pair i lands on (i, i + hd/2); the attention scores, sums over a head's dimensions of q times k,
// are unchanged by the one reordering applied to both, and v is left as it is.
func (m *Model) Bind(ld *ml.Loader, cfg *model.Config) (kit.Head, error) {
	t, v := &cfg.Text, &cfg.Vision
	if !t.QKVBias || !t.Rope1D || v.MergeSize != 2 || v.TemporalPatchSize != 1 || v.PosGrid[0] < 1 {
		return kit.Head{}, fmt.Errorf("a config the LocateAnything graph does not have (q/k/v bias %v, 1-D RoPE %v, merge %d, temporal patch %d, position table %v): %w",
			t.QKVBias, t.Rope1D, v.MergeSize, v.TemporalPatchSize, v.PosGrid, model.ErrUnsupported)
	}
	w := &m.w
	head := kit.BindHead(ld, cfg, textPrefixes, rootPrefixes)
	w.layers = kit.BindDecoder(ld, cfg, textPrefixes)

	VH, VI := v.Hidden, v.Intermediate
	perm := pairsToHalves(VH, v.Heads)
	w.patch = ld.Matrix(visionPrefixes, "patch_embed.proj.weight", VH, v.PatchDim())
	w.patchB = ld.Vector(visionPrefixes, "patch_embed.proj.bias", VH)
	w.pos = ld.Matrix(visionPrefixes, "patch_embed.pos_emb.weight", v.PosEmbeddings, VH)
	w.blocks = make([]visionBlock, v.Depth)
	for l := range w.blocks {
		B := &w.blocks[l]
		p := fmt.Sprintf("encoder.blocks.%d.", l)
		B.norm0 = ld.Vector(visionPrefixes, p+"norm0.weight", VH)
		B.norm0B = ld.Vector(visionPrefixes, p+"norm0.bias", VH)
		B.qkv = ld.PermutedMatrix(visionPrefixes, p+"wqkv.weight", 3*VH, VH, perm)
		B.qkvB = ld.PermutedVector(visionPrefixes, p+"wqkv.bias", 3*VH, perm)
		B.wo = ld.Matrix(visionPrefixes, p+"wo.weight", VH, VH)
		B.woB = ld.Vector(visionPrefixes, p+"wo.bias", VH)
		B.norm1 = ld.Vector(visionPrefixes, p+"norm1.weight", VH)
		B.norm1B = ld.Vector(visionPrefixes, p+"norm1.bias", VH)
		B.fc0 = ld.Matrix(visionPrefixes, p+"mlp.fc0.weight", VI, VH)
		B.fc0B = ld.Vector(visionPrefixes, p+"mlp.fc0.bias", VI)
		B.fc1 = ld.Matrix(visionPrefixes, p+"mlp.fc1.weight", VH, VI)
		B.fc1B = ld.Vector(visionPrefixes, p+"mlp.fc1.bias", VH)
	}
	w.final = ld.Vector(visionPrefixes, "encoder.final_layernorm.weight", VH)
	w.finalB = ld.Vector(visionPrefixes, "encoder.final_layernorm.bias", VH)
	unit := v.MergeSize * v.MergeSize * VH
	w.projNorm = ld.Vector(projectorPrefixes, "0.weight", unit)
	w.projNormB = ld.Vector(projectorPrefixes, "0.bias", unit)
	w.fc1 = ld.Matrix(projectorPrefixes, "1.weight", v.OutHidden, unit)
	w.fc1B = ld.Vector(projectorPrefixes, "1.bias", v.OutHidden)
	w.fc2 = ld.Matrix(projectorPrefixes, "3.weight", v.OutHidden, v.OutHidden)
	w.fc2B = ld.Vector(projectorPrefixes, "3.bias", v.OutHidden)
	return head, nil
}

// pairsToHalves is the row order of wqkv's outputs (q, k, v, each heads x hd) that turns each q
// and k head's adjacent pairs (2i, 2i+1) into (i, i + hd/2): row j of a head's new order is its
// stored row 2j for j < hd/2, 2(j - hd/2) + 1 after. v's rows keep their order.
func pairsToHalves(hidden, heads int) []int {
	hd := hidden / heads
	perm := make([]int, 3*hidden)
	for i := range perm {
		perm[i] = i
	}
	for part := range 2 { // q, k
		for h := range heads {
			base := part*hidden + h*hd
			for j := range hd {
				src := 2 * j
				if j >= hd/2 {
					src = 2*(j-hd/2) + 1
				}
				perm[base+j] = base + src
			}
		}
	}
	return perm
}

// LayerOps implements kit.Family: the remote code's Qwen2Model layers over the pass's rows (kit's
// decoder, 1-D RoPE on the token index: the slow mode's position_ids).
func (m *Model) LayerOps(p *kit.Pass) (int, ml.Tensor) {
	return kit.DecoderOps(m.Backend(), m.Config(), p, m.w.layers)
}
