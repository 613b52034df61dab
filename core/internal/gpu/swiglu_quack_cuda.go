//go:build cuda && quack

package gpu

/*
#cgo CFLAGS: -I${SRCDIR}/../../../.build/swiglu-gemm
#cgo LDFLAGS: ${SRCDIR}/../../../.build/swiglu-gemm/libswiglu_gemm.a ${SRCDIR}/../../../.build/swiglu-gemm/libcuda_dialect_runtime_static.a -l:libcudart.so.13 -lstdc++ -ldl -lpthread
#include "swiglu_variants.h"

// iris_swiglu_run launches variant v: act[M, cols] = swiglu(x[M, K] w[2I, K]^T + bias) (w: the
// gate rows, then the up rows; bias, f32, the same, or 0 for a variant without) on stream.
// Device addresses arrive as integers: they are not Go pointers.
static int iris_swiglu_run(int v, unsigned long long x, int M, int K, long long ldx, unsigned long long w, int I,
                           unsigned long long act, int cols, long long ldo, unsigned long long bias, int clusters,
                           void *stream) {
	iris_swiglu_tensor a = {(void *)x, {M, K}, {ldx}};
	iris_swiglu_tensor b = {(void *)w, {2 * I, K}, {K}};
	iris_swiglu_tensor c = {(void *)act, {M, cols}, {ldo}};
	iris_swiglu_tensor d = {(void *)bias, {1, 2 * I}, {2 * I}};
	return iris_swiglu_launch(v, &a, &b, &c, &d, clusters, (cudaStream_t)stream);
}

static const char *iris_swiglu_spec(int v) { return iris_swiglu_specs[v]; }
static int iris_swiglu_ctas(int v) { return iris_swiglu_cluster_ctas[v]; }
static int iris_swiglu_biased(int v) { return iris_swiglu_bias[v]; }
*/
import "C"

import "fmt"

// SwiGLUGemm is the gate/up product with SwiGLU in its epilogue (scripts/gpu/swiglu-gemm:
// quack's gated GEMM in several tile configurations, with and without biases, compiled ahead of
// time for sm_90a, launched through the CUDA runtime on the context current on Device.Do's
// thread). An experiment for issue 14, in builds with the quack tag only.
type SwiGLUGemm struct {
	variant  int
	bias     bool
	clusters int // the persistent scheduler's: the SMs over the variant's cluster
}

// SwiGLUAvailable reports whether this build carries SwiGLUGemm.
const SwiGLUAvailable = true

// SwiGLUVariants lists the tile configurations this build carries, by index (the export's
// order: those without biases, then those with, the default of each first).
func SwiGLUVariants() []SwiGLUVariant {
	out := make([]SwiGLUVariant, C.IRIS_SWIGLU_VARIANTS)
	for i := range out {
		out[i] = SwiGLUVariant{Spec: C.GoString(C.iris_swiglu_spec(C.int(i))), Bias: C.iris_swiglu_biased(C.int(i)) != 0}
	}
	return out
}

// LoadSwiGLUGemm loads variant (an index of SwiGLUVariants) onto the current device (inside
// Device.Do), whose sms SMs the persistent scheduler fills.
func LoadSwiGLUGemm(sms, variant int) (*SwiGLUGemm, error) {
	vs := SwiGLUVariants()
	if variant < 0 || variant >= len(vs) {
		return nil, fmt.Errorf("SwiGLU product variant %d: this build has %d (%v)", variant, len(vs), vs)
	}
	var lib C.cudaLibrary_t
	if r := C.iris_swiglu_load(C.int(variant), &lib); r != C.cudaSuccess {
		return nil, fmt.Errorf("load the SwiGLU product %v: %s", vs[variant], C.GoString(C.cudaGetErrorString(r)))
	}
	return &SwiGLUGemm{variant: variant, bias: vs[variant].Bias, clusters: sms / int(C.iris_swiglu_ctas(C.int(variant)))}, nil
}

// Run sets act[M, cols] (row stride ldo) = bf16(bf16(silu(bf16(x Wg^T + bg))) * bf16(x Wu^T +
// bu)) for bf16 x[M, K] (row stride ldx) and w[2I, K] (the gate's I rows, then the up's); bias
// is [bg; bu] in f32 for a variant with biases (0 without), readable over 2*cols values (those
// past 2I zero). cols is I rounded up to whole 16-byte chunks (8): the columns past I are
// written zero. Strides are in elements and must keep rows 16-byte aligned.
func (g *SwiGLUGemm) Run(s *Stream, x DevPtr, M, K, ldx int, w DevPtr, I int, act DevPtr, cols, ldo int, bias DevPtr) error {
	if cols != (I+7)&^7 || ldx%8 != 0 || ldo%8 != 0 || K%8 != 0 || ldo < cols {
		return fmt.Errorf("SwiGLU product: I %d, %d columns, K %d, ldx %d, ldo %d: want I's 16-byte chunks and strides of them", I, cols, K, ldx, ldo)
	}
	if (bias != 0) != g.bias {
		return fmt.Errorf("SwiGLU product %v: biases given %t", SwiGLUVariants()[g.variant], bias != 0)
	}
	if r := C.iris_swiglu_run(C.int(g.variant), C.ulonglong(x), C.int(M), C.int(K), C.longlong(ldx), C.ulonglong(w), C.int(I),
		C.ulonglong(act), C.int(cols), C.longlong(ldo), C.ulonglong(bias), C.int(g.clusters), s.Handle()); r != 0 {
		return fmt.Errorf("SwiGLU product %dx%dx%d: launch status %d", M, 2*I, K, int(r))
	}
	return nil
}
