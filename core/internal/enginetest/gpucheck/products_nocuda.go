//go:build !cuda

package main

import "github.com/iris-vlm/iris/core/internal/ml/cuda/gpu"

// timeProducts: this build has no GPU backend.
func timeProducts([][3]int, int, int) error { return gpu.ErrNoCUDA }
