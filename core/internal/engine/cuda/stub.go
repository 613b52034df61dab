//go:build !cuda

package cuda

import (
	"context"

	"github.com/iris-vlm/iris/core/internal/engine"
	"github.com/iris-vlm/iris/core/internal/gpu"
)

// Load reports gpu.ErrNoCUDA: this binary was built without the cuda tag.
func Load(ctx context.Context, dir string, cfg *engine.Config, opts Options) (engine.Model, error) {
	return nil, gpu.ErrNoCUDA
}
