//go:build !cuda

package cuda

import "github.com/iris-vlm/iris/core/internal/ml/cuda/gpu"

// Backend is the GPU backend; without the cuda tag there is none.
type Backend struct{}

// NewBackend reports gpu.ErrNoCUDA: this binary was built without the cuda tag.
func NewBackend(Options) (*Backend, error) { return nil, gpu.ErrNoCUDA }
