package deepseekocr2

import (
	"fmt"
	"math"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models/internal/kit"
)

// Options tune a model.
type Options = kit.Options

// Model is a DeepSeek-OCR-2 checkpoint on a backend: the shared model machinery (kit.Base) running
// this family's graph: the vision tower (Vision), the decoder's layers (Decoder) over kit's
// embedding, KV pool and head.
type Model struct {
	*kit.Base
	vision *Vision
	dec    *Decoder
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

// Bind implements kit.Family.
func (m *Model) Bind(ld *ml.Loader, cfg *model.Config) (kit.Head, error) {
	s, err := settings(cfg)
	if err != nil {
		return kit.Head{}, err
	}
	t := &cfg.Text
	if t.QKVBias || t.QKNorm || t.RotaryDims != 0 || t.RopeFactors != nil {
		return kit.Head{}, fmt.Errorf("a decoder the DeepSeek-OCR-2 graph does not have (q/k/v bias %v, q/k norm %v, partial rotary %d): %w",
			t.QKVBias, t.QKNorm, t.RotaryDims, model.ErrUnsupported)
	}
	l := detectLayout(ld)
	head := kit.BindHead(ld, cfg, l.text, l.lm)
	m.dec, err = BindDecoder(ld, TextConfig{Hidden: t.Hidden, Layers: t.Layers, Heads: t.Heads, KVHeads: t.KVHeads, HeadDim: t.HeadDim,
		Intermediate: t.Intermediate, Vocab: t.Vocab, Eps: t.RMSNormEps, Theta: t.RopeTheta, MoE: s.MoE})
	if err != nil {
		return kit.Head{}, err
	}
	m.vision = BindVision(ld, s.Vision)
	return head, nil
}

// VisionOps implements kit.Family: each image's rows (its views' queries and the separator) in
// turn. The engine has checked the images against model.ImageTokens, so each fits its rows.
func (m *Model) VisionOps(b ml.Backend, imgs []model.Image, res ml.Tensor) {
	row := 0
	for _, img := range imgs {
		n, err := m.vision.ImageRows(img)
		if err != nil || row+n > res.Rows {
			return // unreachable after the engine's check: the rows stay as they are
		}
		_ = m.vision.Ops(b, img, res.RowsAt(row, n))
		row += n
	}
}

// LayerOps implements kit.Family: the decoder's layers over the pass's rows, each attention the
// rotary embedding, the write of k and v into each sequence's cache, and causal attention over
// it (ml.RopeCachedAttention).
func (m *Model) LayerOps(p *kit.Pass) (int, ml.Tensor) {
	t := &m.Config().Text
	b := m.Backend()
	a := ml.Attn{Heads: t.Heads, KVHeads: t.KVHeads, HeadDim: t.HeadDim, Mask: ml.Mask{Causal: true},
		Scale: float32(1 / math.Sqrt(float64(t.HeadDim)))}
	delta := m.dec.LayerOps(b, p.X[0], func(l int, out, q, k, v ml.Tensor) {
		ml.RopeCachedAttention(b, out, q, k, v, p.Rot, p.KV.K(l), p.KV.V(l), p.Slots, p.Spans, a)
	})
	return 0, delta
}
