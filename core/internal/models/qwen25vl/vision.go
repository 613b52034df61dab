package qwen25vl

import (
	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
)

// VisionOps implements kit.Family: the Qwen2.5-VL tower (kit.Qwen25Tower).
func (m *Model) VisionOps(b ml.Backend, imgs []model.Image, res ml.Tensor) {
	m.w.tower.Ops(b, &m.Config().Vision, imgs, res)
}
