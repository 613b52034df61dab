//go:build !cuda

package core

import (
	"context"
	"errors"

	"github.com/iris-vlm/iris/bundles"
	"github.com/iris-vlm/iris/core/internal/model"
)

func loadCUDA(context.Context, *bundles.Bundle, *model.Config, model.Limits, *TaskEnv) (model.Model, error) {
	return nil, errors.New("load engine: this iris was built without CUDA; rebuild with IRIS_TAGS=cuda (see docs/gpu.md)")
}
