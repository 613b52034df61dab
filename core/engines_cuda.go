//go:build cuda

package core

import (
	"context"
	"fmt"

	"github.com/iris-vlm/iris/bundles"
	"github.com/iris-vlm/iris/core/internal/ml/cuda"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models"
)

// loadCUDA loads the bundle's model on the GPU (device 0) in the bundle's precision, its vision
// tower on a stream of its own unless env.VisionSerial.
func loadCUDA(_ context.Context, b *bundles.Bundle, _ *model.Config, lim model.Limits, env *TaskEnv) (model.Model, error) {
	be, err := cuda.NewBackend(cuda.Options{Precision: b.Manifest.Engine.Precision, QuackSwiGLU: env.FusedSwiGLU})
	if err != nil {
		return nil, fmt.Errorf("load engine: %w", err)
	}
	name := be.Name()
	model, err := models.Load(b.Dir, be, models.Options{Limits: &lim, KVTokens: env.KVCacheTokens, VisionLane: !env.VisionSerial, VisionLanes: env.VisionLanes, Heads: env.PromptHeads})
	if err != nil {
		return nil, fmt.Errorf("load engine: %w", err)
	}
	env.Logger.Info("engine loaded", "backend", name, "precision", b.Manifest.Engine.Precision, "context", lim.ContextLength)
	return model, nil
}
