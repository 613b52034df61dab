//go:build !cuda

package main

import (
	"github.com/iris-vlm/iris/core/internal/engine/cuda"
	"github.com/iris-vlm/iris/core/internal/gpu"
	"github.com/iris-vlm/iris/core/internal/ml"
)

// openCUDA: this build has no GPU backend (-backend cpu still runs).
func openCUDA(cuda.Options) (ml.Backend, *device, error) { return nil, nil, gpu.ErrNoCUDA }
