package qwen25vl

import (
	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/models/internal/kit"
)

// LayerOps implements kit.Family: Qwen2_5_VLTextModel's decoder layers over the pass's rows
// (kit's decoder, with the multimodal rotary angles kit lays out).
func (m *Model) LayerOps(p *kit.Pass) (int, ml.Tensor) {
	return kit.DecoderOps(m.Backend(), m.Config(), p, m.w.layers)
}
