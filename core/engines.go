package core

import (
	"context"
	"fmt"

	"github.com/iris-vlm/iris/bundles"
	"github.com/iris-vlm/iris/core/internal/ml/cpu"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models"
)

// loadEngine loads the bundle's model on the backend its manifest names.
func loadEngine(ctx context.Context, b *bundles.Bundle, env *TaskEnv) (model.Model, error) {
	m := b.Manifest
	cfg, err := model.LoadConfig(b.Dir)
	if err != nil {
		return nil, fmt.Errorf("load engine: %w", err)
	}
	lim := model.DefaultLimits(cfg)
	lim.ContextLength = min(lim.ContextLength, m.Engine.ContextLength)
	switch m.Engine.Backend {
	case "cpu":
		if m.Engine.Precision != "fp32" {
			return nil, fmt.Errorf("load engine: the cpu backend computes in fp32, the bundle asks for %s", m.Engine.Precision)
		}
		be, err := cpu.New(cpu.Options{})
		if err != nil {
			return nil, fmt.Errorf("load engine: %w", err)
		}
		name := be.Name()
		model, err := models.Load(b.Dir, be, models.Options{Limits: &lim, KVTokens: env.KVCacheTokens, Heads: env.PromptHeads})
		if err != nil {
			return nil, fmt.Errorf("load engine: %w", err)
		}
		env.Logger.Info("engine loaded", "backend", name, "context", lim.ContextLength)
		return model, nil
	case "cuda":
		return loadCUDA(ctx, b, cfg, lim, env)
	}
	return nil, fmt.Errorf("load engine: unknown backend %q", m.Engine.Backend)
}

// TrimNativeHeap hands the free pages of the C heap (the engine's and the pixel primitives'
// freed buffers, kept in glibc's per-thread malloc arenas) back to the OS; an idle server calls
// it beside the Go heap's release. It reports whether any memory was released.
func TrimNativeHeap() bool { return cpu.TrimHeap() }
