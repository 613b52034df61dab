package internvl

import (
	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/models/internal/kit"
)

// LayerOps implements kit.Family: Qwen2Model's decoder layers over the pass's rows (kit's
// decoder). The rotary angles kit lays out follow the token index (the config's 1-D RoPE: every
// frequency on the position row PromptPositions fills with it).
func (m *Model) LayerOps(p *kit.Pass) (int, ml.Tensor) {
	return kit.DecoderOps(m.Backend(), m.Config(), p, m.w.layers)
}
