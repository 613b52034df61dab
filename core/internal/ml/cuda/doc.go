// Package cuda is Iris's GPU backend: the ops of core/internal/ml on one NVIDIA GPU. It knows no
// model family; a family's forward pass (core/internal/models/...) runs on it through ml.Backend.
//
// Weights stay resident on the device in bf16 (or f32 for exact-parity runs); products run in
// cuBLAS(Lt) (bf16 or f32 storage, f32 accumulation), everything between them is a kernel of
// core/internal/ml/cuda/kernels, launched through core/internal/ml/cuda/gpu (gorgonia.org/cu). The fused forms
// of ml are implemented: a one-row product streams its weights through the gemv kernel with the
// RMSNorm (and SwiGLU) fused in, and a decode step's attention is one kernel that rotates q and
// k, writes the KV pool and attends (flash-decoding over key splits). A family's decode step is
// recorded as a CUDA graph per batch size (ml.Graph) and replayed: only the pinned inputs (token
// ids, rotary tables, pool rows) change between steps. Kernels are programmatic dependent
// launches: each starts while the one before it ends.
//
// The backend is built only with the cuda tag (it needs the CUDA 13 headers and link stubs of
// scripts/gpu/setup-cuda.sh); without it, NewBackend returns gpu.ErrNoCUDA.
//
// # Notes
//
//   - Ops run on the device thread: a family issues them inside Backend.Do (ml.Do).
//   - Precision "fp32" reproduces transformers run in float32 (greedy tokens identical on the
//     parity cases); "bf16" rounds where a bf16 transformers model rounds (kernels/iris.cu).
package cuda

// Options tune a backend.
type Options struct {
	// Device is the CUDA device ordinal.
	Device int
	// Precision is "bf16" (the default) or "fp32": the storage type of weights and activations.
	Precision string
	// NoGraph runs every op plainly instead of recording decode steps as CUDA graphs.
	NoGraph bool
	// Profile records GPU time per stage (see Backend.Profile); it adds events to every call.
	Profile bool
	// FlashOnly runs every attention through the flash kernel on CUDA cores, never through
	// cuBLAS (long segments are faster through cuBLAS; the two agree to rounding).
	FlashOnly bool
	// NoMMA runs bf16 attention through cuBLAS and the CUDA-core flash kernel instead of the
	// tensor-core flash kernel (iris_attn_mma); for comparison.
	NoMMA bool
	// NoMMAMask runs bf16 attention with key flags, a prefix, a relative-position bias or
	// per-row key counts (a bidirectional block) through cuBLAS with the scores materialised
	// (or one segment a key count) instead of the tensor-core kernel's masked variant
	// (iris_attn_mma_mask); for comparison.
	NoMMAMask bool
	// NoGroupDecode runs bf16 decode attention with a block a query head (iris_attn_pool)
	// instead of a block a KV group (iris_attn_pool_gqa); for comparison.
	NoGroupDecode bool
	// NoWholeDecode runs bf16 decode attention over caches of at most 256 keys in 64-key
	// splits merged by the last to finish (iris_attn_pool_gqa) instead of a block over all of
	// a row's keys (iris_attn_pool_gqa_whole); for comparison.
	NoWholeDecode bool
	// QuackSwiGLU runs a bf16 pass's gate/up product and SwiGLU (of at least quackMinRows
	// rows: prefill and tower passes) as one kernel with the activation and any biases in its
	// epilogue (gpu.QuackGemm: scripts/gpu/swiglu-gemm, in builds with the quack tag; others
	// refuse the option). An experiment for issue 14.
	QuackSwiGLU bool
	// QuackVariant and QuackBiasVariant pick QuackSwiGLU's tile configurations without and
	// with biases: the n-th of gpu.QuackVariants of each kind (0: the export's default).
	QuackVariant, QuackBiasVariant int
	// QuackLinear runs a bf16 pass's other products of at least quackMinRows rows through
	// quack's plain product (gpu.QuackGemm, biases in its epilogue) instead of cuBLASLt; the
	// same builds only. An experiment for issue 14.
	QuackLinear bool
	// QuackLinearVariant and QuackLinearBiasVariant pick its tile configurations, as
	// QuackVariant.
	QuackLinearVariant, QuackLinearBiasVariant int
	// EqualPriority gives the backend's stream the default priority, as a lane's, instead of
	// the greatest; for comparison.
	EqualPriority bool
	// DecodeCuBLAS runs one-row products through cuBLAS (with separate RMSNorm and SwiGLU
	// kernels) instead of the gemv kernel with those fused in; for comparison.
	DecodeCuBLAS bool
	// NoPDL launches kernels plainly instead of as programmatic dependent launches; for
	// comparison.
	NoPDL bool
	// GemmEx runs products through cublasGemmEx (the bias broadcast into the output by a kernel
	// first) instead of cuBLASLt plans with the bias in the epilogue; for comparison.
	GemmEx bool
}
