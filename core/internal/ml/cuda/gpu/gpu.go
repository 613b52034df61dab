// Package gpu runs CUDA work on one device: a context owned by a dedicated goroutine locked to
// its OS thread, device and pinned host memory, modules loaded from cubin/PTX images, streams,
// events and CUDA graphs captured from a stream, and cuBLAS/cuBLASLt products on a stream (BLAS).
// It wraps gorgonia.org/cu (the driver API) and holds all of the GPU's cgo, under the `cuda` build
// tag; without the tag, Open returns ErrNoCUDA and nothing links against CUDA.
//
// # Notes
//
//   - CUDA contexts are bound to OS threads. Every method other than Open, Do and Close must run
//     inside a function passed to Device.Do, which executes it on the context's thread.
//   - A binary built with -tags cuda needs the NVIDIA driver's libcuda.so.1 at start-up (and
//     gorgonia.org/cu exits the process when cuInit fails); build without the tag for machines
//     without a GPU.
//   - The cuda build compiles against CUDA 13 headers through cudacompat/cuda.h (see there).
package gpu

import "errors"

// ErrNoCUDA is returned by Open in a build without the cuda tag.
var ErrNoCUDA = errors.New("built without CUDA support (rebuild with -tags cuda)")

// ErrClosed is returned by Do after Close.
var ErrClosed = errors.New("gpu device closed")

// Dim3 is a launch grid or block shape; zero components count as 1.
type Dim3 struct{ X, Y, Z int }

// Info describes an opened device.
type Info struct {
	Ordinal int
	Name    string
	// ComputeMajor and ComputeMinor are the compute capability (9, 0 on an H100/H200).
	ComputeMajor, ComputeMinor int
	SMs                        int
	TotalMem                   int64
	// Driver is the driver's CUDA version, e.g. 13000.
	Driver int
}
