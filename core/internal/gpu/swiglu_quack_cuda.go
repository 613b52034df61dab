//go:build cuda && quack

package gpu

/*
#cgo CFLAGS: -I${SRCDIR}/../../../.build/swiglu-gemm
#cgo LDFLAGS: ${SRCDIR}/../../../.build/swiglu-gemm/swiglu_gemm.o ${SRCDIR}/../../../.build/swiglu-gemm/libcuda_dialect_runtime_static.a -l:libcudart.so.13 -lstdc++ -ldl -lpthread
#include "swiglu_gemm.h"

// iris_swiglu_load is swiglu_gemm_Kernel_Module_Load with its errors returned, not printed.
static cudaError_t iris_swiglu_load(swiglu_gemm_Kernel_Module_t *m) {
	cudaLibrary_t *lib = &m->module;
	cudaError_t ret = cudaSuccess;
	struct { cudaLibrary_t **lib; cudaError_t *ret; } init = {&lib, &ret};
	_mlir_swiglu_gemm_cuda_init((void **)&init);
	if (ret != cudaSuccess) return ret;
	int dev = 0;
	if ((ret = cudaGetDevice(&dev)) != cudaSuccess) return ret;
	struct { cudaLibrary_t **lib; int32_t *dev; cudaError_t *ret; } load = {&lib, &dev, &ret};
	_mlir_swiglu_gemm_cuda_load_to_device((void **)&load);
	return ret;
}

// iris_swiglu_run launches act[M, I] = swiglu(x[M, K] w[2I, K]^T) (w: the gate rows, then the up
// rows) on stream. Device addresses arrive as integers: they are not Go pointers.
static int iris_swiglu_run(swiglu_gemm_Kernel_Module_t *m, unsigned long long x, int M, int K, long long ldx,
                           unsigned long long w, int I, unsigned long long act, long long ldo, int clusters,
                           void *stream) {
	swiglu_gemm_Tensor_mA_t a = {(void *)x, {M, K}, {ldx}};
	swiglu_gemm_Tensor_mB_t b = {(void *)w, {2 * I, K}, {K}};
	swiglu_gemm_Tensor_mAct_t c = {(void *)act, {M, I}, {ldo}};
	return cute_dsl_swiglu_gemm_wrapper(m, &a, &b, &c, clusters, (cudaStream_t)stream);
}
*/
import "C"

import "fmt"

// SwiGLUGemm is the gate/up product with SwiGLU in its epilogue (scripts/gpu/swiglu-gemm:
// quack's gated GEMM, compiled ahead of time for sm_90a, launched through the CUDA runtime on
// the context current on Device.Do's thread). An experiment for issue 14, in builds with the
// quack tag only.
type SwiGLUGemm struct {
	m   C.swiglu_gemm_Kernel_Module_t
	sms int
}

// SwiGLUAvailable reports whether this build carries SwiGLUGemm.
const SwiGLUAvailable = true

// LoadSwiGLUGemm loads the kernel onto the current device (inside Device.Do), whose sms SMs
// the persistent scheduler fills.
func LoadSwiGLUGemm(sms int) (*SwiGLUGemm, error) {
	g := &SwiGLUGemm{sms: sms}
	if r := C.iris_swiglu_load(&g.m); r != C.cudaSuccess {
		return nil, fmt.Errorf("load the SwiGLU product: %s", C.GoString(C.cudaGetErrorString(r)))
	}
	return g, nil
}

// Run sets act[M, I] (row stride ldo) = bf16(bf16(silu(bf16(x Wg^T))) * bf16(x Wu^T)) for bf16
// x[M, K] (row stride ldx) and w[2I, K] (the gate's I rows, then the up's), on s. Strides are
// in elements and must keep rows 16-byte aligned; I must be a multiple of 8.
func (g *SwiGLUGemm) Run(s *Stream, x DevPtr, M, K, ldx int, w DevPtr, I int, act DevPtr, ldo int) error {
	if I%8 != 0 || ldx%8 != 0 || ldo%8 != 0 || K%8 != 0 {
		return fmt.Errorf("SwiGLU product: I %d, K %d, ldx %d, ldo %d: want multiples of 8", I, K, ldx, ldo)
	}
	if r := C.iris_swiglu_run(&g.m, C.ulonglong(x), C.int(M), C.int(K), C.longlong(ldx), C.ulonglong(w), C.int(I),
		C.ulonglong(act), C.longlong(ldo), C.int(g.sms), s.Handle()); r != 0 {
		return fmt.Errorf("SwiGLU product %dx%dx%d: launch status %d", M, 2*I, K, int(r))
	}
	return nil
}
