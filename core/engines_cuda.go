//go:build cuda

package core

import (
	"context"
	"fmt"

	"github.com/iris-vlm/iris/bundles"
	"github.com/iris-vlm/iris/core/internal/engine"
	"github.com/iris-vlm/iris/core/internal/engine/cuda"
)

// loadCUDA loads the bundle's model on the GPU (device 0) in the bundle's precision.
func loadCUDA(ctx context.Context, b *bundles.Bundle, cfg *engine.Config, lim engine.Limits, env *TaskEnv) (engine.Model, error) {
	model, err := cuda.Load(ctx, b.Dir, cfg, cuda.Options{Precision: b.Manifest.Engine.Precision, Limits: &lim})
	if err != nil {
		return nil, fmt.Errorf("load engine: %w", err)
	}
	env.Logger.Info("engine loaded", "backend", "cuda", "precision", b.Manifest.Engine.Precision, "context", lim.ContextLength)
	return model, nil
}
