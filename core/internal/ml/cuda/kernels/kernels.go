// Package kernels holds the CUDA C++ sources of the GPU engine's kernels (iris.cu) and, in a
// build with the cuda tag, their compiled image.
//
// `just kernels` compiles iris.cu with nvcc 13.0 into build/iris.fatbin: SASS for sm_90 (H100,
// H200) plus compute_90 PTX that the driver JIT-compiles on newer GPUs. The fatbin is a build
// output (git-ignored) and is embedded into the binary, so a cuda build needs `just kernels`
// first; nothing else needs nvcc.
package kernels

// Source is the file the image is built from, for messages.
const Source = "core/internal/ml/cuda/kernels/iris.cu"
