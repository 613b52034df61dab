// Package lance is the Lance family (ByteDance Lance-3B's understanding expert,
// github.com/bytedance/Lance at 4baeee08, the x2t path of lance.py's validation_und_KVcache),
// written once over the op set of core/internal/ml: the Qwen2.5-VL vision tower and merger
// (kit.Qwen25Tower, vit_type qwen_2_5_vl_original: no connector), and qwen2_navit's decoder in
// its understanding mode: Qwen2 layers with q/k/v biases and per-head q/k RMSNorms before the
// multimodal RoPE, the image's <|vision_start|> ... <|vision_end|> block prefilled
// bidirectionally, and the logits of the embedding rows past the tokenizer's vocabulary masked.
// The generation expert's tensors (*_moe_gen, the VAE bridges) are not read: x2t never runs them.
package lance

import (
	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models/internal/kit"
)

// ModelType is the model_type of a Lance checkpoint's config.json as Iris reads it: Lance_3B's
// llm_config.json (the decoder's keys at the top level) with the tower's config as vision_config
// (bundles/build.go writes it from the release layout).
const ModelType = "lance"

// Tensor name prefixes: Lance's module paths (Lance.language_model is qwen2_navit's
// Qwen2ForCausalLM, Lance.vit_model the tower), and the release's separate vit.safetensors,
// whose names have no prefix.
var (
	textPrefixes   = []string{"language_model.model."}
	rootPrefixes   = []string{"language_model."}
	visionPrefixes = []string{"vit_model.", ""}
)

type weights struct {
	layers []kit.DecoderLayer
	tower  kit.Qwen25Tower
}

// Options tune a model.
type Options = kit.Options

// Model is a Lance checkpoint on a backend: kit.Base running this family's graph.
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

// Bind implements kit.Family: every tensor the understanding path needs, by its checkpoint name.
func (m *Model) Bind(ld *ml.Loader, cfg *model.Config) (kit.Head, error) {
	w := &m.w
	head := kit.BindHead(ld, cfg, textPrefixes, rootPrefixes)
	w.layers = kit.BindDecoder(ld, cfg, textPrefixes)
	w.tower = kit.BindQwen25Tower(ld, &cfg.Vision, visionPrefixes)
	return head, nil
}

// VisionOps implements kit.Family: the Qwen2.5-VL tower and merger.
func (m *Model) VisionOps(b ml.Backend, imgs []model.Image, res ml.Tensor) {
	m.w.tower.Ops(b, &m.Config().Vision, imgs, res)
}

// LayerOps implements kit.Family: PackedAttentionMoT / Qwen2MoTDecoderLayer in "und" mode over
// the pass's rows: kit's decoder with the q/k norms (cfg.Text.QKNorm); the attention's rows
// reach past themselves only inside an image's block (cfg.Text.BidirectionalImage, laid out by
// kit in the pass's spans).
func (m *Model) LayerOps(p *kit.Pass) (int, ml.Tensor) {
	return kit.DecoderOps(m.Backend(), m.Config(), p, m.w.layers)
}
