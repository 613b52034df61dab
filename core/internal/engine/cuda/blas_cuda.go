//go:build cuda

package cuda

/*
#cgo LDFLAGS: -lcublas
#include <cublas_v2.h>

// iris_gemm: C[m, n] = alpha * op(A) op(B) + beta * C, column-major, F32 accumulation. The data
// types name the storage (CUDA_R_16BF or CUDA_R_32F); CUBLAS_COMPUTE_32F never uses TF32 (the
// handle keeps the default math mode).
// Device addresses arrive as integers: they are not Go pointers.
static cublasStatus_t iris_gemm(cublasHandle_t h, int ta, int tb, int m, int n, int k, float alpha,
                                unsigned long long a, cudaDataType at, int lda, long long sa,
                                unsigned long long b, cudaDataType bt, int ldb, long long sb, float beta,
                                unsigned long long c, cudaDataType ct, int ldc, long long sc, int batch) {
	const void *A = (const void *)a, *B = (const void *)b;
	void *C = (void *)c;
	cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
	if (batch <= 1)
		return cublasGemmEx(h, oa, ob, m, n, k, &alpha, A, at, lda, B, bt, ldb, &beta, C, ct, ldc,
		                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
	return cublasGemmStridedBatchedEx(h, oa, ob, m, n, k, &alpha, A, at, lda, sa, B, bt, ldb, sb, &beta, C, ct,
	                                  ldc, sc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

static cublasStatus_t iris_set_workspace(cublasHandle_t h, unsigned long long ws, size_t n) {
	return cublasSetWorkspace(h, (void *)ws, n);
}
*/
import "C"

import (
	"fmt"

	"github.com/iris-vlm/iris/core/internal/gpu"
)

// This file is the package's only C: cuBLAS (libcublas.so.13) for the matrix products, bf16 or
// f32 storage with f32 accumulation. It makes engine/cuda the fourth package with cgo (after
// engine/native, gpu and tokenize); the kernels and everything else go through gorgonia.org/cu.

// dtype is a storage type of matrices.
type dtype int

const (
	f32 dtype = iota
	bf16
)

func (d dtype) c() C.cudaDataType {
	if d == bf16 {
		return C.CUDA_R_16BF
	}
	return C.CUDA_R_32F
}

// size is the bytes of one element.
func (d dtype) size() int64 {
	if d == bf16 {
		return 2
	}
	return 4
}

// blas is a cuBLAS handle bound to the model's stream, with a fixed workspace so that products
// can be captured in a CUDA graph.
type blas struct {
	h  C.cublasHandle_t
	ws gpu.Buffer
}

const blasWorkspace = 32 << 20

func newBlas(s *gpu.Stream) (*blas, error) {
	b := &blas{}
	if st := C.cublasCreate(&b.h); st != C.CUBLAS_STATUS_SUCCESS {
		return nil, fmt.Errorf("cublasCreate: %s", blasStatus(st))
	}
	var err error
	if b.ws, err = gpu.Alloc(blasWorkspace); err != nil {
		b.destroy()
		return nil, err
	}
	if st := C.cublasSetStream(b.h, C.cudaStream_t(s.Handle())); st != C.CUBLAS_STATUS_SUCCESS {
		b.destroy()
		return nil, fmt.Errorf("cublasSetStream: %s", blasStatus(st))
	}
	if st := C.iris_set_workspace(b.h, C.ulonglong(b.ws.Ptr), C.size_t(b.ws.Size)); st != C.CUBLAS_STATUS_SUCCESS {
		b.destroy()
		return nil, fmt.Errorf("cublasSetWorkspace: %s", blasStatus(st))
	}
	return b, nil
}

func (b *blas) destroy() {
	if b.h != nil {
		C.cublasDestroy(b.h)
		b.h = nil
	}
	_ = b.ws.Free()
}

// gemm is one (optionally strided-batched) cuBLAS product in column-major terms.
type gemm struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	a              gpu.DevPtr
	at             dtype
	lda            int
	strideA        int64 // elements
	b              gpu.DevPtr
	bt             dtype
	ldb            int
	strideB        int64
	c              gpu.DevPtr
	ct             dtype
	ldc            int
	strideC        int64
	batch          int
}

func (b *blas) run(g gemm) error {
	st := C.iris_gemm(b.h, cbool(g.transA), cbool(g.transB), C.int(g.m), C.int(g.n), C.int(g.k), C.float(g.alpha),
		C.ulonglong(g.a), g.at.c(), C.int(g.lda), C.longlong(g.strideA),
		C.ulonglong(g.b), g.bt.c(), C.int(g.ldb), C.longlong(g.strideB), C.float(g.beta),
		C.ulonglong(g.c), g.ct.c(), C.int(g.ldc), C.longlong(g.strideC), C.int(g.batch))
	if st != C.CUBLAS_STATUS_SUCCESS {
		return fmt.Errorf("cublas gemm m=%d n=%d k=%d batch=%d: %s", g.m, g.n, g.k, g.batch, blasStatus(st))
	}
	return nil
}

// linear is y[M, N] = x[M, K] W[N, K]^T (+ y when accumulate: a bias already in y), every matrix
// row-major in storage type t with the given row strides (nn.Linear's weight layout).
func (b *blas) linear(t dtype, y gpu.DevPtr, ldy int, x gpu.DevPtr, ldx int, w gpu.DevPtr, M, N, K int, accumulate bool) error {
	beta := float32(0)
	if accumulate {
		beta = 1
	}
	// row-major y^T = W x^T: column-major C (N x M) = op_T(W as K x N) * (x^T as K x M)
	return b.run(gemm{transA: true, m: N, n: M, k: K, alpha: 1, beta: beta,
		a: w, at: t, lda: K, b: x, bt: t, ldb: ldx, c: y, ct: t, ldc: ldy, batch: 1})
}

func cbool(v bool) C.int {
	if v {
		return 1
	}
	return 0
}

func blasStatus(st C.cublasStatus_t) string {
	return fmt.Sprintf("%s (%d)", C.GoString(C.cublasGetStatusString(st)), int(st))
}
