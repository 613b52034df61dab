//go:build !cuda

package main

import (
	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/ml/cuda"
	"github.com/iris-vlm/iris/core/internal/ml/cuda/gpu"
)

// openCUDA: this build has no GPU backend (-backend cpu still runs).
func openCUDA(cuda.Options) (ml.Backend, *device, error) { return nil, nil, gpu.ErrNoCUDA }
