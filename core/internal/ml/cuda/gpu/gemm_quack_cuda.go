//go:build cuda && quack

package gpu

/*
#cgo CFLAGS: -I${SRCDIR}/../../../../../.build/swiglu-gemm
#cgo LDFLAGS: ${SRCDIR}/../../../../../.build/swiglu-gemm/libswiglu_gemm.a ${SRCDIR}/../../../../../.build/swiglu-gemm/libcuda_dialect_runtime_static.a -L${SRCDIR}/../../../../../.build/swiglu-gemm -l:libcudart.so.13 -lstdc++ -ldl -lpthread
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

// iris_linear_run launches plain variant v: y[M, N] = x[M, K] w[N, K]^T + bias (f32, or 0).
static int iris_linear_run(int v, unsigned long long x, int M, int K, long long ldx, unsigned long long w, int N,
                           unsigned long long y, long long ldy, unsigned long long bias, int clusters, void *stream) {
	iris_swiglu_tensor a = {(void *)x, {M, K}, {ldx}};
	iris_swiglu_tensor b = {(void *)w, {N, K}, {K}};
	iris_swiglu_tensor c = {(void *)y, {M, N}, {ldy}};
	iris_swiglu_tensor d = {(void *)bias, {1, N}, {N}};
	return iris_swiglu_launch(v, &a, &b, &c, &d, clusters, (cudaStream_t)stream);
}

static const char *iris_swiglu_spec(int v) { return iris_swiglu_specs[v]; }
static int iris_swiglu_plain(int v) { return iris_swiglu_linear[v]; }
static int iris_swiglu_ctas(int v) { return iris_swiglu_cluster_ctas[v]; }
static int iris_swiglu_biased(int v) { return iris_swiglu_bias[v]; }
*/
import "C"

import "fmt"

// QuackGemm is a product compiled from quack's CuTe DSL GEMM (scripts/gpu/swiglu-gemm: wgmma,
// TMA, a persistent tile scheduler; ahead of time for sm_90a, in several tile configurations):
// the gate/up product with SwiGLU in its epilogue, or a plain product, with biases or without,
// launched through the CUDA runtime on the context current on Device.Do's thread. An
// experiment for issue 14, in builds with the quack tag only.
type QuackGemm struct {
	variant  int
	v        QuackVariant
	clusters int // the persistent scheduler's: the SMs over the variant's cluster
}

// QuackAvailable reports whether this build carries QuackGemm.
const QuackAvailable = true

// QuackVariants lists the products this build carries, by index (the export's order: SwiGLU
// without and with biases, then plain without and with, the default of each first).
func QuackVariants() []QuackVariant {
	out := make([]QuackVariant, C.IRIS_SWIGLU_VARIANTS)
	for i := range out {
		c := C.int(i)
		out[i] = QuackVariant{Spec: C.GoString(C.iris_swiglu_spec(c)), Linear: C.iris_swiglu_plain(c) != 0, Bias: C.iris_swiglu_biased(c) != 0}
	}
	return out
}

// LoadQuack loads variant (an index of QuackVariants) onto the current device (inside
// Device.Do), whose sms SMs the persistent scheduler fills.
func LoadQuack(sms, variant int) (*QuackGemm, error) {
	vs := QuackVariants()
	if variant < 0 || variant >= len(vs) {
		return nil, fmt.Errorf("quack product variant %d: this build has %d (%v)", variant, len(vs), vs)
	}
	var lib C.cudaLibrary_t
	if r := C.iris_swiglu_load(C.int(variant), &lib); r != C.cudaSuccess {
		return nil, fmt.Errorf("load the quack product %v: %s", vs[variant], C.GoString(C.cudaGetErrorString(r)))
	}
	return &QuackGemm{variant: variant, v: vs[variant], clusters: sms / int(C.iris_swiglu_ctas(C.int(variant)))}, nil
}

func (g *QuackGemm) check(linear bool, bias DevPtr) error {
	if g.v.Linear != linear || (bias != 0) != g.v.Bias {
		return fmt.Errorf("quack product %v run as linear %t, biases given %t", g.v, linear, bias != 0)
	}
	return nil
}

// SwiGLU sets act[M, cols] (row stride ldo) = bf16(bf16(silu(bf16(x Wg^T + bg))) * bf16(x Wu^T
// + bu)) for bf16 x[M, K] (row stride ldx) and w[2I, K] (the gate's I rows, then the up's); bias
// is [bg; bu] in f32 for a variant with biases (0 without), readable over 2*cols values (those
// past 2I zero). cols is I rounded up to whole 16-byte chunks (8): the columns past I are
// written zero. Strides are in elements and must keep rows 16-byte aligned.
func (g *QuackGemm) SwiGLU(s *Stream, x DevPtr, M, K, ldx int, w DevPtr, I int, act DevPtr, cols, ldo int, bias DevPtr) error {
	if cols != (I+7)&^7 || ldx%8 != 0 || ldo%8 != 0 || K%8 != 0 || ldo < cols {
		return fmt.Errorf("SwiGLU product: I %d, %d columns, K %d, ldx %d, ldo %d: want I's 16-byte chunks and strides of them", I, cols, K, ldx, ldo)
	}
	if err := g.check(false, bias); err != nil {
		return err
	}
	if r := C.iris_swiglu_run(C.int(g.variant), C.ulonglong(x), C.int(M), C.int(K), C.longlong(ldx), C.ulonglong(w), C.int(I),
		C.ulonglong(act), C.int(cols), C.longlong(ldo), C.ulonglong(bias), C.int(g.clusters), s.Handle()); r != 0 {
		return fmt.Errorf("SwiGLU product %dx%dx%d: launch status %d", M, 2*I, K, int(r))
	}
	return nil
}

// Linear sets y[M, N] (row stride ldy) = bf16(x W^T + bias) for bf16 x[M, K] (row stride ldx)
// and w[N, K]; bias is f32 [N] for a variant with biases (0 without). Strides are in elements
// and must keep rows 16-byte aligned.
func (g *QuackGemm) Linear(s *Stream, x DevPtr, M, K, ldx int, w DevPtr, N int, y DevPtr, ldy int, bias DevPtr) error {
	if ldx%8 != 0 || ldy%8 != 0 || K%8 != 0 || ldy < N {
		return fmt.Errorf("quack product: N %d, K %d, ldx %d, ldy %d: want strides of 16-byte chunks", N, K, ldx, ldy)
	}
	if err := g.check(true, bias); err != nil {
		return err
	}
	if r := C.iris_linear_run(C.int(g.variant), C.ulonglong(x), C.int(M), C.int(K), C.longlong(ldx), C.ulonglong(w), C.int(N),
		C.ulonglong(y), C.longlong(ldy), C.ulonglong(bias), C.int(g.clusters), s.Handle()); r != 0 {
		return fmt.Errorf("quack product %dx%dx%d: launch status %d", M, N, K, int(r))
	}
	return nil
}
