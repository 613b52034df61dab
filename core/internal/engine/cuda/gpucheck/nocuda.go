//go:build !cuda

package main

import "github.com/iris-vlm/iris/core/internal/gpu"

func run(args []string) error { return gpu.ErrNoCUDA }
