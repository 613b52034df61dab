//go:build cuda

package gpu

/*
#cgo LDFLAGS: -lcublasLt -lcublas
#include <stdlib.h>
#include <cublas_v2.h>
#include <cublasLt.h>

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

// iris_gemm_batched is iris_gemm over batch products whose matrices are anywhere: a, b and c
// are device arrays of batch device pointers each.
static cublasStatus_t iris_gemm_batched(cublasHandle_t h, int ta, int tb, int m, int n, int k, float alpha,
                                        unsigned long long a, cudaDataType at, int lda, unsigned long long b,
                                        cudaDataType bt, int ldb, float beta, unsigned long long c, cudaDataType ct,
                                        int ldc, int batch) {
	cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
	return cublasGemmBatchedEx(h, oa, ob, m, n, k, &alpha, (const void *const *)a, at, lda, (const void *const *)b, bt,
	                           ldb, &beta, (void *const *)c, ct, ldc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

static cublasStatus_t iris_set_workspace(cublasHandle_t h, unsigned long long ws, size_t n) {
	return cublasSetWorkspace(h, (void *)ws, n);
}

// An iris_lt_plan is one cuBLASLt product shape, y[M, N] = x[M, K] W[N, K]^T (+ bias[N]) with
// row-major y, x and W: column-major D (N x M) = op_T(W as K x N) * (x^T as K x M), the bias on
// D's rows, and the heuristic's algorithm for it.
typedef struct {
	cublasLtMatmulDesc_t op;
	cublasLtMatrixLayout_t a, b, c;
	cublasLtMatmulPreference_t pref;
	cublasLtMatmulHeuristicResult_t res;
} iris_lt_plan;

static void iris_lt_plan_free(iris_lt_plan *p) {
	if (!p) return;
	if (p->pref) cublasLtMatmulPreferenceDestroy(p->pref);
	if (p->op) cublasLtMatmulDescDestroy(p->op);
	if (p->a) cublasLtMatrixLayoutDestroy(p->a);
	if (p->b) cublasLtMatrixLayoutDestroy(p->b);
	if (p->c) cublasLtMatrixLayoutDestroy(p->c);
	free(p);
}

// iris_lt_plan_new asks the heuristic for an algorithm. The alignments (bytes) are those of the
// operands' addresses: the heuristic leaves out algorithms that need more.
// The bias is added in F32 before D is rounded, once (as addmm does).
static cublasStatus_t iris_lt_plan_new(cublasLtHandle_t lt, cudaDataType t, int M, int N, int K, int ldx, int ldy,
                                       unsigned long long bias, unsigned alignW, unsigned alignX, unsigned alignY,
                                       unsigned long long ws, iris_lt_plan **out) {
	cublasStatus_t st;
	iris_lt_plan *p = calloc(1, sizeof *p);
	if (!p) return CUBLAS_STATUS_ALLOC_FAILED;
#define TRY(x) if ((st = (x)) != CUBLAS_STATUS_SUCCESS) goto fail
	TRY(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
	cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
	TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
	TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
	if (bias) {
		cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
		const void *bp = (const void *)bias;
		TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
		TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp));
	}
	TRY(cublasLtMatrixLayoutCreate(&p->a, t, K, N, K));
	TRY(cublasLtMatrixLayoutCreate(&p->b, t, K, M, ldx));
	TRY(cublasLtMatrixLayoutCreate(&p->c, t, N, M, ldy));
	TRY(cublasLtMatmulPreferenceCreate(&p->pref));
	cublasLtMatmulPreference_t pref = p->pref;
	uint64_t wsb = ws;
	TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
	uint32_t al[4] = {alignW, alignX, alignY, alignY};
	TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al[0], sizeof al[0]));
	TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al[1], sizeof al[1]));
	TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al[2], sizeof al[2]));
	TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al[3], sizeof al[3]));
	int n = 0;
	TRY(cublasLtMatmulAlgoGetHeuristic(lt, p->op, p->a, p->b, p->c, p->c, pref, 1, &p->res, &n));
#undef TRY
	if (n <= 0) {
		iris_lt_plan_free(p);
		return CUBLAS_STATUS_NOT_SUPPORTED;
	}
	*out = p;
	return CUBLAS_STATUS_SUCCESS;
fail:
	iris_lt_plan_free(p);
	return st;
}

// iris_lt_plan_algos asks the heuristic for up to want algorithms for the plan's shape, best
// first (the first is the plan's own).
static cublasStatus_t iris_lt_plan_algos(cublasLtHandle_t lt, iris_lt_plan *p, cublasLtMatmulHeuristicResult_t *res,
                                         int want, int *n) {
	return cublasLtMatmulAlgoGetHeuristic(lt, p->op, p->a, p->b, p->c, p->c, p->pref, want, res, n);
}

// iris_lt_algo_describe reads an algorithm's configuration: its id, tile, stages, split-k and
// cluster shape.
static void iris_lt_algo_describe(const cublasLtMatmulAlgo_t *a, int out[5]) {
	size_t w;
	int v[5] = {0, 0, 0, 0, 0};
	cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_ID, &v[0], sizeof v[0], &w);
	cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_TILE_ID, &v[1], sizeof v[1], &w);
	cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &v[2], sizeof v[2], &w);
	cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &v[3], sizeof v[3], &w);
	cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &v[4], sizeof v[4], &w);
	for (int i = 0; i < 5; i++) out[i] = v[i];
}

// iris_lt_run runs the plan; bias (0: the plan has none) replaces the pointer the plan was made
// with (same alignment).
static cublasStatus_t iris_lt_run(cublasLtHandle_t lt, iris_lt_plan *p, unsigned long long w, unsigned long long x,
                                  unsigned long long y, unsigned long long bias, unsigned long long ws, size_t wsSize,
                                  cudaStream_t s) {
	if (bias) {
		const void *bp = (const void *)bias;
		cublasStatus_t st = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp);
		if (st != CUBLAS_STATUS_SUCCESS) return st;
	}
	const float alpha = 1, beta = 0;
	return cublasLtMatmul(lt, p->op, &alpha, (const void *)w, p->a, (const void *)x, p->b, &beta, (void *)y, p->c,
	                      (void *)y, p->c, &p->res.algo, (void *)ws, wsSize, s);
}
*/
import "C"

import (
	"fmt"
	"time"
)

// This file is cuBLAS and cuBLASLt (libcublas.so.13, libcublasLt.so.13) for the engine's matrix
// products: bf16 or f32 storage with f32 accumulation. It lives here, beside the driver's cgo,
// so that ml/cuda needs no C of its own.

// DataType is the storage type of a product's matrices.
type DataType int

// The storage types cuBLAS is asked for.
const (
	F32 DataType = iota
	BF16
)

func (d DataType) c() C.cudaDataType {
	if d == BF16 {
		return C.CUDA_R_16BF
	}
	return C.CUDA_R_32F
}

// BLAS is a cuBLAS handle and a cuBLASLt handle bound to one stream, with a fixed workspace so
// that products can be captured in a CUDA graph. Linear layers go through cuBLASLt plans, one
// per shape (LtLinear); other products through cuBLAS (Gemm, GemmBatched). Like every method of
// this package, its methods run inside Device.Do.
type BLAS struct {
	h  C.cublasHandle_t
	lt C.cublasLtHandle_t
	s  *Stream
	ws Buffer
	// plans are the cuBLASLt shapes seen so far; at most maxPlans (then they start again).
	plans map[ltKey]*C.iris_lt_plan
}

const (
	blasWorkspace = 32 << 20
	maxPlans      = 1024
)

// NewBLAS creates the handles on stream s and allocates their workspace.
func NewBLAS(s *Stream) (*BLAS, error) {
	b := &BLAS{s: s, plans: map[ltKey]*C.iris_lt_plan{}}
	if st := C.cublasCreate(&b.h); st != C.CUBLAS_STATUS_SUCCESS {
		return nil, fmt.Errorf("cublasCreate: %s", blasStatus(st))
	}
	if st := C.cublasLtCreate(&b.lt); st != C.CUBLAS_STATUS_SUCCESS {
		b.Destroy()
		return nil, fmt.Errorf("cublasLtCreate: %s", blasStatus(st))
	}
	var err error
	if b.ws, err = Alloc(blasWorkspace); err != nil {
		b.Destroy()
		return nil, err
	}
	if st := C.cublasSetStream(b.h, C.cudaStream_t(s.Handle())); st != C.CUBLAS_STATUS_SUCCESS {
		b.Destroy()
		return nil, fmt.Errorf("cublasSetStream: %s", blasStatus(st))
	}
	if st := C.iris_set_workspace(b.h, C.ulonglong(b.ws.Ptr), C.size_t(b.ws.Size)); st != C.CUBLAS_STATUS_SUCCESS {
		b.Destroy()
		return nil, fmt.Errorf("cublasSetWorkspace: %s", blasStatus(st))
	}
	return b, nil
}

// Destroy frees the plans, the handles and the workspace.
func (b *BLAS) Destroy() {
	b.dropPlans()
	if b.lt != nil {
		C.cublasLtDestroy(b.lt)
		b.lt = nil
	}
	if b.h != nil {
		C.cublasDestroy(b.h)
		b.h = nil
	}
	_ = b.ws.Free()
}

func (b *BLAS) dropPlans() {
	for k, p := range b.plans {
		C.iris_lt_plan_free(p)
		delete(b.plans, k)
	}
}

// Gemm is one (optionally strided-batched) cuBLAS product in column-major terms:
// C = Alpha op(A) op(B) + Beta C.
type Gemm struct {
	TransA, TransB bool
	M, N, K        int
	Alpha, Beta    float32
	A              DevPtr
	AType          DataType
	LDA            int
	StrideA        int64 // elements
	B              DevPtr
	BType          DataType
	LDB            int
	StrideB        int64
	C              DevPtr
	CType          DataType
	LDC            int
	StrideC        int64
	Batch          int
}

// Gemm runs g: cublasGemmEx, or cublasGemmStridedBatchedEx when g.Batch > 1.
func (b *BLAS) Gemm(g Gemm) error {
	st := C.iris_gemm(b.h, cbool(g.TransA), cbool(g.TransB), C.int(g.M), C.int(g.N), C.int(g.K), C.float(g.Alpha),
		C.ulonglong(g.A), g.AType.c(), C.int(g.LDA), C.longlong(g.StrideA),
		C.ulonglong(g.B), g.BType.c(), C.int(g.LDB), C.longlong(g.StrideB), C.float(g.Beta),
		C.ulonglong(g.C), g.CType.c(), C.int(g.LDC), C.longlong(g.StrideC), C.int(g.Batch))
	if st != C.CUBLAS_STATUS_SUCCESS {
		return fmt.Errorf("cublas gemm m=%d n=%d k=%d batch=%d: %s", g.M, g.N, g.K, g.Batch, blasStatus(st))
	}
	return nil
}

// ltKey is a cuBLASLt product shape with the alignment of its operands' addresses.
type ltKey struct {
	t                 DataType
	m, n, k, ldx, ldy int
	bias              bool
	align             [4]uint16 // w, x, y, bias
}

// alignOf is the largest power of two up to 256 that divides p.
func alignOf(p DevPtr) uint16 {
	a := uint16(256)
	for a > 1 && uint64(p)%uint64(a) != 0 {
		a /= 2
	}
	return a
}

// LtLinear is y[M, N] = x[M, K] W[N, K]^T + bias[N] (bias 0: none), every matrix row-major in
// storage type t with the given row strides. cuBLASLt's heuristic picks the algorithm once per
// shape. (Timing its first 8 or 32 candidates instead gained nothing measurable at c=1, and
// 1.5% of the products' time at the shapes of c=64: `gpucheck products`, docs/gpu.md.)
func (b *BLAS) LtLinear(t DataType, y DevPtr, ldy int, x DevPtr, ldx int, w, bias DevPtr, M, N, K int) error {
	key := ltKey{t: t, m: M, n: N, k: K, ldx: ldx, ldy: ldy, bias: bias != 0,
		align: [4]uint16{alignOf(w), alignOf(x), alignOf(y), alignOf(bias)}}
	p, err := b.plan(key, bias)
	if err != nil {
		return err
	}
	return b.ltRun(p, key, y, x, w, bias)
}

// plan returns the shape's plan, made at its first use with the heuristic's algorithm.
func (b *BLAS) plan(key ltKey, bias DevPtr) (*C.iris_lt_plan, error) {
	if p := b.plans[key]; p != nil {
		return p, nil
	}
	if len(b.plans) >= maxPlans {
		b.dropPlans()
	}
	var p *C.iris_lt_plan
	st := C.iris_lt_plan_new(b.lt, key.t.c(), C.int(key.m), C.int(key.n), C.int(key.k), C.int(key.ldx), C.int(key.ldy),
		C.ulonglong(bias), C.uint(key.align[0]), C.uint(key.align[1]), C.uint(key.align[2]), C.ulonglong(b.ws.Size), &p)
	if st != C.CUBLAS_STATUS_SUCCESS {
		return nil, fmt.Errorf("cublasLt plan m=%d n=%d k=%d: %s", key.m, key.n, key.k, blasStatus(st))
	}
	b.plans[key] = p
	return p, nil
}

func (b *BLAS) ltRun(p *C.iris_lt_plan, key ltKey, y, x, w, bias DevPtr) error {
	st := C.iris_lt_run(b.lt, p, C.ulonglong(w), C.ulonglong(x), C.ulonglong(y), C.ulonglong(bias),
		C.ulonglong(b.ws.Ptr), C.size_t(b.ws.Size), C.cudaStream_t(b.s.Handle()))
	if st != C.CUBLAS_STATUS_SUCCESS {
		return fmt.Errorf("cublasLt matmul m=%d n=%d k=%d: %s", key.m, key.n, key.k, blasStatus(st))
	}
	return nil
}

// LtCandidate is one of cuBLASLt's algorithms for a product shape and its measured time.
type LtCandidate struct {
	// Config is the algorithm's id, tile, stages, split-k and cluster shape (cuBLASLt's enums).
	Config [5]int
	// Time is the mean of the timed runs.
	Time time.Duration
}

// LtCandidates times up to want of the heuristic's candidates for LtLinear's shape on the
// operands (runs times each after one untimed run, events on the stream), the heuristic's pick
// first; y is overwritten and the shape's plan keeps its algorithm.
func (b *BLAS) LtCandidates(t DataType, y DevPtr, ldy int, x DevPtr, ldx int, w, bias DevPtr, M, N, K, want, runs int) ([]LtCandidate, error) {
	key := ltKey{t: t, m: M, n: N, k: K, ldx: ldx, ldy: ldy, bias: bias != 0,
		align: [4]uint16{alignOf(w), alignOf(x), alignOf(y), alignOf(bias)}}
	p, err := b.plan(key, bias)
	if err != nil {
		return nil, err
	}
	res := make([]C.cublasLtMatmulHeuristicResult_t, want)
	var n C.int
	if st := C.iris_lt_plan_algos(b.lt, p, &res[0], C.int(want), &n); st != C.CUBLAS_STATUS_SUCCESS {
		return nil, fmt.Errorf("cublasLt candidates m=%d n=%d k=%d: %s", key.m, key.n, key.k, blasStatus(st))
	}
	res = res[:n]
	start, err := NewEvent()
	if err != nil {
		return nil, err
	}
	defer func() { _ = start.Destroy() }()
	end, err := NewEvent()
	if err != nil {
		return nil, err
	}
	defer func() { _ = end.Destroy() }()
	own := p.res
	defer func() { p.res = own }()
	var out []LtCandidate
	for i := range res {
		p.res = res[i]
		if err := b.ltRun(p, key, y, x, w, bias); err != nil {
			continue // a candidate that does not run is no candidate
		}
		if err := start.Record(b.s); err != nil {
			return nil, err
		}
		for range runs {
			if err := b.ltRun(p, key, y, x, w, bias); err != nil {
				return nil, err
			}
		}
		if err := end.Record(b.s); err != nil {
			return nil, err
		}
		if err := end.Sync(); err != nil {
			return nil, fmt.Errorf("timing cublasLt candidates m=%d n=%d k=%d: %w", key.m, key.n, key.k, err)
		}
		d, err := end.Since(start)
		if err != nil {
			return nil, err
		}
		var cfg [5]C.int
		C.iris_lt_algo_describe(&res[i].algo, &cfg[0])
		c := LtCandidate{Time: d / time.Duration(runs)}
		for j := range cfg {
			c.Config[j] = int(cfg[j])
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("cublasLt candidates m=%d n=%d k=%d: none ran", key.m, key.n, key.k)
	}
	return out, nil
}

// GemmBatched is Gemm with the matrices given by device arrays of g.Batch pointers (A, B and C
// of g are those arrays; the strides are unused): cublasGemmBatchedEx.
func (b *BLAS) GemmBatched(g Gemm) error {
	st := C.iris_gemm_batched(b.h, cbool(g.TransA), cbool(g.TransB), C.int(g.M), C.int(g.N), C.int(g.K), C.float(g.Alpha),
		C.ulonglong(g.A), g.AType.c(), C.int(g.LDA), C.ulonglong(g.B), g.BType.c(), C.int(g.LDB), C.float(g.Beta),
		C.ulonglong(g.C), g.CType.c(), C.int(g.LDC), C.int(g.Batch))
	if st != C.CUBLAS_STATUS_SUCCESS {
		return fmt.Errorf("cublas batched gemm m=%d n=%d k=%d batch=%d: %s", g.M, g.N, g.K, g.Batch, blasStatus(st))
	}
	return nil
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
