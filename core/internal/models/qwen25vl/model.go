// Package qwen25vl is the Qwen2.5-VL family, written once over the op set of core/internal/ml:
// its checkpoint's tensor names, the vision tower (Conv3d patches, RMSNorm blocks with 2-D RoPE and
// window attention, a 2x2 merger), and the Qwen2 decoder with multimodal RoPE, batch-first. Every
// backend runs it; none of them knows it (transformers 5.17 models/qwen2_5_vl is the reference).
package qwen25vl

import (
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

type weights struct {
	layers []kit.DecoderLayer
	tower  kit.Qwen25Tower
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
	w := &m.w
	head := kit.BindHead(ld, cfg, textPrefixes, rootPrefixes)
	w.layers = kit.BindDecoder(ld, cfg, textPrefixes)
	w.tower = kit.BindQwen25Tower(ld, &cfg.Vision, visionPrefixes)
	return head, nil
}
