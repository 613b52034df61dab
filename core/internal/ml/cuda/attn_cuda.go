//go:build cuda

package cuda

import "github.com/iris-vlm/iris/core/internal/ml/cuda/gpu"

// attnArgs describes one attention segment: nq queries from row q0 of q (and out) over nk keys
// from row k0 of k and v, every head; rows at the given strides (elements), head h at column
// h*hd, GQA kv head h/(heads/kvh). causal masks key j for query i when j > i + nk - nq.
type attnArgs struct {
	out, q, k, v           gpu.DevPtr
	q0, k0                 int
	ldo, ldq, ldk, ldv     int
	nq, nk, heads, kvh, hd int
	causal                 bool
	scale                  float32
	// keys, when not 0, flags each of the nk keys from k0 (ml.Mask.Keys; int32 on the device):
	// only attnGemm's softmax reads it, as it alone reads prefix (ml.Mask.Prefix) and rel.
	keys   gpu.DevPtr
	prefix int
	// rel is a decomposed relative-position bias (ml.Mask.RelPos), its rows those of the
	// segment's queries from q0; h 0 when none.
	rel relArgs
	// ptrs, when not 0, holds the pointer arrays of attnGemm's batched path (gqaPointers).
	ptrs gpu.DevPtr
}

// masked reports whether a has a mask form beyond the causal rule (key flags, a prefix, a
// bias): iris_attn_mma_mask or the cuBLAS path's softmax reads them, not iris_attn_mma.
func (a attnArgs) masked() bool { return a.keys != 0 || a.prefix != 0 || a.rel.h != 0 }

// relArgs is an ml.RelPos on the device.
type relArgs struct {
	h, w                    gpu.DevPtr
	ldh, ldw, height, width int
	size                    int64 // bytes of an element (the storage type)
}

// softmaxArgs are the softmax kernel's arguments for the heads from head0 of segment a, its
// probabilities into p from the scores s.
func softmaxArgs(a attnArgs, p, s gpu.DevPtr, head0 int) []gpu.Arg {
	causal := 0
	if a.causal {
		causal = 1
	}
	rh, rw := a.rel.h, a.rel.w
	if rh != 0 { // the bias in the storage type
		rh = rh.Add(int64(a.q0) * int64(a.rel.ldh) * a.rel.size)
		rw = rw.Add(int64(a.q0) * int64(a.rel.ldw) * a.rel.size)
	}
	return []gpu.Arg{gpu.P(p), gpu.P(s), gpu.I(a.nq), gpu.I(a.nk), gpu.I(causal), gpu.P(a.keys), gpu.I(a.prefix), gpu.P(rh), gpu.P(rw),
		gpu.I(a.rel.ldh), gpu.I(a.rel.ldw), gpu.I(a.rel.height), gpu.I(max(a.rel.width, 1)), gpu.I(head0)}
}

// gqaPointers lays out, for attnGemm's batched path, the per-head matrices of the segment a (q0
// and k0 0) with every head in one chunk of scores s and probabilities p: six arrays of heads
// device pointers, those of Q K^T (K, Q, S) then of P V (V, P, out).
func gqaPointers(dt dtype, a attnArgs, s, p gpu.DevPtr) []uint64 {
	return groupPointers(dt, []attnArgs{a}, s, p)
}

// groupPointers lays out gqaPointers' six arrays for several segments of one shape in one
// batch: each array holds segment 0's heads, then segment 1's, and so on, their scores and
// probabilities one chunk after another in s and p.
func groupPointers(dt dtype, segs []attnArgs, s, p gpu.DevPtr) []uint64 {
	a := segs[0]
	e := dt.size()
	h, r, area := a.heads, a.heads/a.kvh, int64(a.nq)*int64(a.nk)
	n := h * len(segs)
	out := make([]uint64, 6*n)
	for m, g := range segs {
		for i := range h {
			j := m*h + i
			kv := int64(i/r) * int64(g.hd) * e
			out[j] = uint64(g.k.Add(kv))
			out[n+j] = uint64(g.q.Add(int64(i*g.hd) * e))
			out[2*n+j] = uint64(s.Add(int64(j) * area * 4))
			out[3*n+j] = uint64(g.v.Add(kv))
			out[4*n+j] = uint64(p.Add(int64(j) * area * e))
			out[5*n+j] = uint64(g.out.Add(int64(i*g.hd) * e))
		}
	}
	return out
}

// gemmAttnMin is the segment size (queries x keys) from which attention goes through cuBLAS
// (tensor cores, scores materialised) instead of the flash kernel on CUDA cores.
const gemmAttnMin = 128 * 128

// gemmAttnBudget bounds the scores and probabilities of one cuBLAS attention pass (bytes).
const gemmAttnBudget = 1 << 30

// attnGemm runs a segment as S = q k^T * scale (F32, strided-batched over heads), a masked row
// softmax into P (storage type), and out = P v, chunk heads at a time; s and p hold chunk*nq*nk
// values each.
//
// With grouped kv heads the heads of a chunk sharing a kv head run as one strided batch, a
// launch per group and product; with a.ptrs (every head in one chunk, a.q0 = a.k0 = 0) the whole
// segment runs as one batch of pointers per product instead (three launches, not six, for
// 16 heads in 2 groups).
func attnGemm(dt dtype, k *kernelSet, b *blas, st *gpu.Stream, a attnArgs, s, p gpu.DevPtr, chunk int) error {
	e := dt.size()
	if a.ptrs != 0 {
		h := int64(a.heads) * 8
		if err := b.runBatched(gemm{transA: true, m: a.nk, n: a.nq, k: a.hd, alpha: a.scale,
			a: a.ptrs, at: dt, lda: a.ldk, b: a.ptrs.Add(h), bt: dt, ldb: a.ldq, c: a.ptrs.Add(2 * h), ct: f32, ldc: a.nk,
			batch: a.heads}); err != nil {
			return err
		}
		if err := k.softmax.Launch(gpu.Dim3{X: a.heads * a.nq}, gpu.Dim3{X: 256}, 0, st, softmaxArgs(a, p, s, 0)...); err != nil {
			return err
		}
		return b.runBatched(gemm{m: a.hd, n: a.nq, k: a.nk, alpha: 1,
			a: a.ptrs.Add(3 * h), at: dt, lda: a.ldv, b: a.ptrs.Add(4 * h), bt: dt, ldb: a.nk, c: a.ptrs.Add(5 * h), ct: dt,
			ldc: a.ldo, batch: a.heads})
	}
	a.q = a.q.Add(int64(a.q0) * int64(a.ldq) * e)
	a.out = a.out.Add(int64(a.q0) * int64(a.ldo) * e)
	a.k = a.k.Add(int64(a.k0) * int64(a.ldk) * e)
	a.v = a.v.Add(int64(a.k0) * int64(a.ldv) * e)
	r := a.heads / a.kvh
	groups, per, kStride := a.kvh, r, int64(0) // heads of a group share k and v: stride 0
	if r == 1 {
		groups, per, kStride = 1, a.heads, int64(a.hd) // one head per kv head: batch them all
	}
	area := int64(a.nq) * int64(a.nk)
	for g := range groups {
		for h0 := 0; h0 < per; h0 += chunk {
			hc := min(chunk, per-h0)
			head := g*per + h0 // first query head of the chunk
			kv := g
			if r == 1 {
				kv = head
			}
			kp, vp := a.k.Add(int64(kv*a.hd)*e), a.v.Add(int64(kv*a.hd)*e)
			// S^T (col-major nk x nq) = K (nk x hd) Q^T: op_T on K's col-major (hd x nk) view
			if err := b.run(gemm{transA: true, m: a.nk, n: a.nq, k: a.hd, alpha: a.scale,
				a: kp, at: dt, lda: a.ldk, strideA: kStride,
				b: a.q.Add(int64(head*a.hd) * e), bt: dt, ldb: a.ldq, strideB: int64(a.hd),
				c: s, ct: f32, ldc: a.nk, strideC: area, batch: hc}); err != nil {
				return err
			}
			if err := k.softmax.Launch(gpu.Dim3{X: hc * a.nq}, gpu.Dim3{X: 256}, 0, st, softmaxArgs(a, p, s, head)...); err != nil {
				return err
			}
			// out^T (col-major hd x nq) = V^T (hd x nk) P^T (nk x nq)
			if err := b.run(gemm{m: a.hd, n: a.nq, k: a.nk, alpha: 1,
				a: vp, at: dt, lda: a.ldv, strideA: kStride,
				b: p, bt: dt, ldb: a.nk, strideB: area,
				c: a.out.Add(int64(head*a.hd) * e), ct: dt, ldc: a.ldo, strideC: int64(a.hd), batch: hc}); err != nil {
				return err
			}
		}
	}
	return nil
}

// attnChunk is the heads of one cuBLAS attention pass: at most per, and within gemmAttnBudget.
func attnChunk(per int, area int64, dt dtype) int {
	return int(max(1, min(int64(per), gemmAttnBudget/(area*(4+dt.size())))))
}
