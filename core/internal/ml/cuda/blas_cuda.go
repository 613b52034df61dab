//go:build cuda

package cuda

import "github.com/iris-vlm/iris/core/internal/ml/cuda/gpu"

// The matrix products go through cuBLAS and cuBLASLt (gpu.BLAS, where their cgo lives: this
// package has none). This file keeps the engine's own names for them: the storage type of its
// weights and activations, and the product shapes run_cuda.go asks for.

// dtype is a storage type of matrices.
type dtype int

const (
	f32 dtype = iota
	bf16
)

func (d dtype) gpu() gpu.DataType {
	if d == bf16 {
		return gpu.BF16
	}
	return gpu.F32
}

// size is the bytes of one element.
func (d dtype) size() int64 {
	if d == bf16 {
		return 2
	}
	return 4
}

// blas is the model's cuBLAS and cuBLASLt handles, bound to its stream (gpu.BLAS: a fixed
// workspace so that products can be captured in a CUDA graph, one cuBLASLt plan per shape).
type blas struct{ b *gpu.BLAS }

func newBlas(s *gpu.Stream) (*blas, error) {
	b, err := gpu.NewBLAS(s)
	if err != nil {
		return nil, err
	}
	return &blas{b: b}, nil
}

func (b *blas) destroy() { b.b.Destroy() }

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

func (g gemm) gpu() gpu.Gemm {
	return gpu.Gemm{TransA: g.transA, TransB: g.transB, M: g.m, N: g.n, K: g.k, Alpha: g.alpha, Beta: g.beta,
		A: g.a, AType: g.at.gpu(), LDA: g.lda, StrideA: g.strideA,
		B: g.b, BType: g.bt.gpu(), LDB: g.ldb, StrideB: g.strideB,
		C: g.c, CType: g.ct.gpu(), LDC: g.ldc, StrideC: g.strideC, Batch: g.batch}
}

func (b *blas) run(g gemm) error { return b.b.Gemm(g.gpu()) }

// runBatched is run with the matrices given by device arrays of batch pointers (a, b and c of
// g are those arrays; the strides are unused).
func (b *blas) runBatched(g gemm) error { return b.b.GemmBatched(g.gpu()) }

// ltLinear is y[M, N] = x[M, K] W[N, K]^T + bias[N] (bias 0: none) through a cuBLASLt plan,
// every matrix row-major in storage type t with the given row strides (gpu.BLAS.LtLinear).
func (b *blas) ltLinear(t dtype, y gpu.DevPtr, ldy int, x gpu.DevPtr, ldx int, w, bias gpu.DevPtr, M, N, K int) error {
	return b.b.LtLinear(t.gpu(), y, ldy, x, ldx, w, bias, M, N, K)
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
