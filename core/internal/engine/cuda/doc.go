// Package cuda is Iris's GPU engine: the Qwen2.5-VL graph of engine/native (vision tower with
// window attention and 2-D RoPE, patch merger, GQA decoder with M-RoPE) on one NVIDIA GPU,
// implementing engine.Model.
//
// Weights stay resident on the device in bf16 (or f32 for exact-parity runs); the vision tower's
// and the prefill's matrix products run in cuBLAS (bf16 or f32 storage, f32 accumulation),
// everything between them is a kernel of core/internal/kernels, launched through
// core/internal/gpu (gorgonia.org/cu). A decode step is one CUDA graph of five memory-bound
// kernels a layer (norm-fused gemv products and a fused RoPE/cache/attention kernel, launched
// as programmatic dependent launches): the host writes the step's token, position and cache
// pointers to pinned memory and launches it, and the step copies its logits back without any
// host synchronisation inside.
//
// The engine is built only with the cuda tag (it needs the CUDA 13 headers and link stubs of
// scripts/gpu/setup-cuda.sh); without it, Load returns gpu.ErrNoCUDA.
//
// # Notes
//
//   - A Model is safe for concurrent use; its calls are serialised on one CUDA stream.
//   - A Sequence (one KV cache, taken from a pool sized by the request's capacity) belongs to
//     one request at a time; Close returns its cache to the pool.
//   - Precision "fp32" reproduces transformers run in float32 (greedy tokens identical on the
//     parity cases); "bf16" rounds where a bf16 transformers model rounds (kernels/iris.cu).
package cuda

import "github.com/iris-vlm/iris/core/internal/engine"

// Options tune a load.
type Options struct {
	// Device is the CUDA device ordinal.
	Device int
	// Precision is "bf16" (the default) or "fp32": the storage type of weights and activations.
	Precision string
	// Limits bound requests; nil means engine.DefaultLimits of the config.
	Limits *engine.Limits
	// NoGraph runs decode steps as plain launches instead of a captured CUDA graph.
	NoGraph bool
	// Profile records GPU time per stage (see Model.Profile); it adds events to every call.
	Profile bool
	// FlashOnly runs every attention through the flash kernel on CUDA cores, never through
	// cuBLAS (long segments are faster through cuBLAS; the two agree to rounding).
	FlashOnly bool
	// DecodeCuBLAS runs the one-row products of a decode step through cuBLAS (with separate
	// RMSNorm and SwiGLU kernels) instead of the engine's gemv kernel with those fused in; for
	// comparison (docs/gpu.md).
	DecodeCuBLAS bool
	// NoPDL launches the engine's kernels plainly instead of as programmatic dependent launches
	// (each kernel starting while the one before it ends, a decode step's kernels prefetching
	// their weights meanwhile); for comparison.
	NoPDL bool
	// GemmEx runs the linear layers through cublasGemmEx (the bias broadcast into the output
	// by a kernel first) instead of cuBLASLt plans with the bias in the epilogue; for
	// comparison.
	GemmEx bool
}
