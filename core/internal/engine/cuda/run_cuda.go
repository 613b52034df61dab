//go:build cuda

package cuda

import (
	"context"
	"fmt"
	"math"
	"unsafe"

	"github.com/iris-vlm/iris/core/internal/engine"
	"github.com/iris-vlm/iris/core/internal/gpu"
)

// enq enqueues work on the model's stream and keeps the first error (later calls do nothing),
// so that a forward pass reads as the list of its steps.
type enq struct {
	m   *Model
	err error
	// dep launches the engine's kernels (each begins with pdl_wait in iris.cu) as programmatic
	// dependent launches: each then starts while the kernel before it ends (a decode step's
	// kernels prefetch their weights meanwhile), and waits for it before touching memory.
	dep bool
	// afterKernel is set while the last operation enqueued is a kernel: only then does a launch
	// go dependent (griddepcontrol.wait orders a kernel after a kernel, not after a copy).
	afterKernel bool
}

func (q *enq) launch(f *gpu.Function, grid, block gpu.Dim3, shmem int, args ...gpu.Arg) {
	if q.err == nil {
		q.err = f.Launch(grid, block, shmem, q.m.stream, args...)
		q.afterKernel = true
	}
}

// launchDep is launch, as a programmatic dependent launch when q.dep is set and a kernel comes
// just before; f must wait (pdl_wait) before it touches the previous kernel's data.
func (q *enq) launchDep(f *gpu.Function, grid, block gpu.Dim3, shmem int, args ...gpu.Arg) {
	if q.err == nil && q.dep && q.afterKernel {
		q.err = f.LaunchDependent(grid, block, shmem, q.m.stream, args...)
		return
	}
	q.launch(f, grid, block, shmem, args...)
}

// copied records that a copy (not a kernel) was enqueued last.
func (q *enq) copied() { q.afterKernel = false }

// rows launches f with one 256-thread block per row.
func (q *enq) rows(f *gpu.Function, rows int, args ...gpu.Arg) {
	q.launchDep(f, gpu.Dim3{X: rows}, gpu.Dim3{X: 256}, 0, args...)
}

// elems launches f over n elements with a strided 1-D grid.
func (q *enq) elems(f *gpu.Function, n int64, args ...gpu.Arg) {
	q.launchDep(f, grid1(n), gpu.Dim3{X: 256}, 0, args...)
}

// grid2 is the 2-D grid of the ROWS kernels (iris.cu): rows on y, n columns on x and 256-thread
// blocks.
func grid2(rows, n int) gpu.Dim3 {
	return gpu.Dim3{X: max(1, min((n+255)/256, 1024)), Y: max(1, min(rows, 65535))}
}

// matrix launches a ROWS kernel over rows x n.
func (q *enq) matrix(f *gpu.Function, rows, n int, args ...gpu.Arg) {
	q.launchDep(f, grid2(rows, n), gpu.Dim3{X: 256}, 0, args...)
}

// siluCols is the columns silu_mul's threads cover for an unpadded output of I values: 16-byte
// chunks when they divide I (iris.cu), else single values.
func (q *enq) siluCols(I int) int {
	if per := int(16 / q.m.dt.size()); I%per == 0 {
		return I / per
	}
	return I
}

// linear is y = x W^T, plus a bias b (0: none) added to the F32 product before it is rounded,
// once, as addmm does: in cuBLASLt's epilogue, or (Options.GemmEx) broadcast over the rows first
// and accumulated into.
func (q *enq) linear(y gpu.DevPtr, ldy int, x gpu.DevPtr, ldx int, w, b gpu.DevPtr, M, N, K int) {
	if q.err != nil {
		return
	}
	defer func() { q.afterKernel = true }() // cuBLAS ends with its kernel
	if !q.m.opts.GemmEx {
		q.err = q.m.blas.ltLinear(q.m.dt, y, ldy, x, ldx, w, b, M, N, K)
		return
	}
	if b != 0 {
		q.matrix(q.m.k.bias, M, N, gpu.P(y), gpu.P(b), gpu.I(M), gpu.I(N), gpu.I(ldy))
		if q.err != nil {
			return
		}
	}
	q.err = q.m.blas.linear(q.m.dt, y, ldy, x, ldx, w, M, N, K, b != 0)
}

// fusedRow reports whether a decode product over K inputs runs through the engine's gemv
// kernel (its input row must fit the 48 KiB of shared memory) rather than cuBLAS.
func (q *enq) fusedRow(K int) bool {
	return !q.m.opts.DecodeCuBLAS && int64(K)*q.m.dt.size() <= gemvMaxShared
}

// gemvLaunch launches iris_gemv(_glu) over N outputs: a warp a row, at most gemvBlocksPerSM
// blocks an SM (the warps then stride over the rows).
func (q *enq) gemvLaunch(f *gpu.Function, N, K int, args ...gpu.Arg) {
	blocks := min((N+gemvWarps-1)/gemvWarps, gemvBlocksPerSM*max(1, q.m.dev.Info().SMs))
	q.launchDep(f, gpu.Dim3{X: blocks}, gpu.Dim3{X: 32 * gemvWarps}, int((int64(K)*q.m.dt.size()+15)&^15), args...)
}

// gemv is linear for one row (a decode step): y[N] = W x + b.
func (q *enq) gemv(y, x, w, b gpu.DevPtr, N, K int) {
	if !q.fusedRow(K) {
		q.linear(y, N, x, K, w, b, 1, N, K)
		return
	}
	q.gemvLaunch(q.m.k.gemv, N, K, gpu.P(y), gpu.P(0), gpu.P(w), gpu.P(x), gpu.P(b), gpu.I(N), gpu.I(K),
		gpu.I(0), gpu.P(0), gpu.P(0), gpu.P(0), gpu.F(0))
}

// gemvNorm is y = W rmsnorm(x + delta) + b for one row, the residual x + delta going to xOut
// (never x itself: every block of the product reads x). delta may be 0. yf, if not 0, gets y
// widened to F32 (the logits); y may then be 0.
func (q *enq) gemvNorm(y, yf, x, delta, norm, xOut, w, b gpu.DevPtr, N, K int, eps float32) {
	if !q.fusedRow(K) {
		q.rows(q.m.k.rmsnorm, 1, gpu.P(q.m.dec.xn), gpu.P(x), gpu.P(delta), gpu.P(norm), gpu.I(K), gpu.F(eps))
		if q.err == nil {
			q.err = q.m.stream.CopyDtoD(xOut, x, int64(K)*q.m.dt.size())
			q.copied()
		}
		if y == 0 {
			y = q.m.dec.logits
		}
		q.linear(y, N, q.m.dec.xn, K, w, b, 1, N, K)
		if yf != 0 && q.m.dt == bf16 {
			q.elems(q.m.k.bf16ToF32, int64(N), gpu.P(yf), gpu.P(y), gpu.L(int64(N)))
		} else if yf != 0 && q.err == nil {
			q.err = q.m.stream.CopyDtoD(yf, y, int64(N)*4)
			q.copied()
		}
		return
	}
	q.gemvLaunch(q.m.k.gemv, N, K, gpu.P(y), gpu.P(yf), gpu.P(w), gpu.P(x), gpu.P(b), gpu.I(N), gpu.I(K),
		gpu.I(1), gpu.P(delta), gpu.P(norm), gpu.P(xOut), gpu.F(eps))
}

// gemvGLU is act = silu(gate) * up with gate|up = W rmsnorm(x + delta) for one row: W stacks
// the I gate rows over the I up rows; the residual x + delta goes to xOut.
func (q *enq) gemvGLU(act, x, delta, norm, xOut, w gpu.DevPtr, I, K int, eps float32) {
	if !q.fusedRow(K) {
		q.gemvNorm(q.m.dec.gu, 0, x, delta, norm, xOut, w, 0, 2*I, K, eps)
		q.matrix(q.m.k.siluMul, 1, q.siluCols(I), gpu.P(act), gpu.P(q.m.dec.gu), gpu.I(1), gpu.I(I), gpu.I(I))
		return
	}
	q.gemvLaunch(q.m.k.gemvGLU, I, K, gpu.P(act), gpu.P(0), gpu.P(w), gpu.P(x), gpu.P(0), gpu.I(I), gpu.I(K),
		gpu.I(1), gpu.P(delta), gpu.P(norm), gpu.P(xOut), gpu.F(eps))
}

func (q *enq) stage(dst gpu.DevPtr, src unsafe.Pointer, n int64) {
	if q.err == nil {
		q.err = q.m.stage(dst, src, n)
		q.copied()
	}
}

// mark records a profiling event (which also ends a run of dependent launches).
func (q *enq) mark(name string) {
	if q.err == nil {
		q.err = q.m.mark(name)
		q.copied()
	}
}

// scratch is Model.buf keeping the first error.
func (q *enq) scratch(name string, n int64) gpu.DevPtr {
	if q.err != nil {
		return 0
	}
	p, err := q.m.buf(name, n)
	q.err = err
	return p
}

func i32bytes(v []int32) unsafe.Pointer { return unsafe.Pointer(&v[0]) }

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
	// ptrs, when not 0, holds the pointer arrays of attnGemm's batched path (gqaPointers).
	ptrs gpu.DevPtr
}

// gqaPointers lays out, for attnGemm's batched path, the per-head matrices of the segment a (q0
// and k0 0) with every head in one chunk of scores s and probabilities p: six arrays of heads
// device pointers, those of Q K^T (K, Q, S) then of P V (V, P, out).
func gqaPointers(dt dtype, a attnArgs, s, p gpu.DevPtr) []uint64 {
	e := dt.size()
	h, r, area := a.heads, a.heads/a.kvh, int64(a.nq)*int64(a.nk)
	out := make([]uint64, 6*h)
	for i := range h {
		kv := int64(i/r) * int64(a.hd) * e
		out[i] = uint64(a.k.Add(kv))
		out[h+i] = uint64(a.q.Add(int64(i*a.hd) * e))
		out[2*h+i] = uint64(s.Add(int64(i) * area * 4))
		out[3*h+i] = uint64(a.v.Add(kv))
		out[4*h+i] = uint64(p.Add(int64(i) * area * e))
		out[5*h+i] = uint64(a.out.Add(int64(i*a.hd) * e))
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
// Qwen's 16 heads in 2 groups).
func attnGemm(dt dtype, k *kernelSet, b *blas, st *gpu.Stream, a attnArgs, s, p gpu.DevPtr, chunk int) error {
	e := dt.size()
	causal := 0
	if a.causal {
		causal = 1
	}
	if a.ptrs != 0 {
		h := int64(a.heads) * 8
		if err := b.runBatched(gemm{transA: true, m: a.nk, n: a.nq, k: a.hd, alpha: a.scale,
			a: a.ptrs, at: dt, lda: a.ldk, b: a.ptrs.Add(h), bt: dt, ldb: a.ldq, c: a.ptrs.Add(2 * h), ct: f32, ldc: a.nk,
			batch: a.heads}); err != nil {
			return err
		}
		if err := k.softmax.Launch(gpu.Dim3{X: a.heads * a.nq}, gpu.Dim3{X: 256}, 0, st,
			gpu.P(p), gpu.P(s), gpu.I(a.nq), gpu.I(a.nk), gpu.I(causal)); err != nil {
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
			if err := k.softmax.Launch(gpu.Dim3{X: hc * a.nq}, gpu.Dim3{X: 256}, 0, st,
				gpu.P(p), gpu.P(s), gpu.I(a.nq), gpu.I(a.nk), gpu.I(causal)); err != nil {
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

// attention enqueues one segment through cuBLAS when it is large, else through the flash kernel
// (qseg/kseg: the segment's bounds [q0, q0+nq) and [k0, k0+nk) on the device, as the flash
// kernel reads them).
func (q *enq) attention(a attnArgs, qseg, kseg gpu.DevPtr) {
	if q.err != nil {
		return
	}
	m := q.m
	area := int64(a.nq) * int64(a.nk)
	causal := 0
	if a.causal {
		causal = 1
	}
	if area >= gemmAttnMin && !m.opts.FlashOnly {
		per := a.heads / a.kvh
		if per == 1 {
			per = a.heads
		}
		if a.ptrs != 0 {
			if attnChunk(a.heads, area, m.dt) < a.heads {
				a.ptrs = 0 // not every head at once: per group
			} else {
				per = a.heads
			}
		}
		chunk := attnChunk(per, area, m.dt)
		s := q.scratch("a.s", int64(chunk)*area*4)
		p := q.scratch("a.p", int64(chunk)*area*m.dt.size())
		if q.err == nil {
			q.err = attnGemm(m.dt, m.k, m.blas, m.stream, a, s, p, chunk)
			q.afterKernel = true
		}
		return
	}
	q.launchDep(m.k.flash[a.hd], gpu.Dim3{X: (a.nq + attBQ - 1) / attBQ, Y: a.heads, Z: 1}, gpu.Dim3{X: 4 * attBQ}, 0,
		gpu.P(a.out), gpu.P(a.q), gpu.P(a.k), gpu.P(a.v), gpu.I(a.ldq), gpu.I(a.ldk), gpu.I(a.ldv), gpu.I(a.ldo),
		gpu.P(qseg), gpu.P(kseg), gpu.I(a.heads), gpu.I(a.kvh), gpu.I(causal), gpu.F(a.scale))
}

// ----------------------------------------------------------------------------------------------
// vision tower

// EncodeVision implements engine.Model.
func (m *Model) EncodeVision(ctx context.Context, img engine.Image) (*engine.Embeddings, error) {
	return m.encode(ctx, img, false)
}

// EncodeVisionDevice implements engine.DeviceEncoder: the rows stay on the device, in the
// model's storage type, for this model's Prefill.
func (m *Model) EncodeVisionDevice(ctx context.Context, img engine.Image) (*engine.Embeddings, error) {
	return m.encode(ctx, img, true)
}

// encode runs the vision tower on img, its rows going to host memory or (onDevice) to a pooled
// device buffer.
func (m *Model) encode(ctx context.Context, img engine.Image, onDevice bool) (*engine.Embeddings, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := engine.CheckImage(m.cfg, m.lim, img); err != nil {
		return nil, err
	}
	v := &m.cfg.Vision
	plan := planVision(v, img.Grid)
	e := &engine.Embeddings{Tokens: img.Grid.Tokens(v.MergeSize), Dim: v.OutHidden}
	if !onDevice {
		e.Data = make([]float32, e.Tokens*e.Dim)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, engine.ErrClosed
	}
	err := m.dev.Do(func() error {
		if !onDevice {
			return m.vision(img.Pixels, plan, e.Data, 0)
		}
		r, err := m.takeRows(int64(e.Tokens)*int64(e.Dim)*m.dt.size(), e.Tokens)
		if err != nil {
			return err
		}
		if err := m.vision(img.Pixels, plan, nil, r.buf.Ptr); err != nil {
			r.Release()
			return err
		}
		e.Device = r
		return nil
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// vision runs the tower (Qwen2_5_VisionTransformerPretrainedModel.forward) on the device thread,
// its output rows going to out (F32, host) or, when dst is not 0, to dst (storage type, device).
func (m *Model) vision(pixels []float32, p *visionPlan, out []float32, dst gpu.DevPtr) error {
	defer m.resetStage()
	v := &m.cfg.Vision
	w := &m.w
	k := m.k
	e := m.dt.size()
	N, units := p.patches, p.units
	VH, VI, OH, heads := v.Hidden, v.Intermediate, v.OutHidden, v.Heads
	vhd := VH / heads
	unit := v.MergeSize * v.MergeSize
	MH := unit * VH
	cols := v.PatchDim()
	n64 := int64(N)
	q := &enq{m: m, dep: !m.opts.NoPDL}

	pixF := q.scratch("v.pixf", n64*int64(cols)*4)
	pix := pixF
	if m.dt == bf16 {
		pix = q.scratch("v.pix", n64*int64(cols)*e)
	}
	xe := q.scratch("v.xe", n64*int64(VH)*e)
	x := q.scratch("v.x", n64*int64(VH)*e)
	xn := q.scratch("v.xn", n64*int64(VH)*e)
	qkv := q.scratch("v.qkv", 3*n64*int64(VH)*e)
	att := q.scratch("v.att", n64*int64(VH)*e)
	tt := q.scratch("v.t", n64*int64(VH)*e)
	gu := q.scratch("v.gu", 2*n64*int64(VI)*e)
	VIp := m.visionInnerPadded()
	act := q.scratch("v.act", n64*int64(VIp)*e)
	rope := q.scratch("v.rope", int64(len(p.rope))*4)
	index := q.scratch("v.index", int64(units)*4)
	segW := q.scratch("v.segw", int64(len(p.windows))*4)
	segF := q.scratch("v.segf", int64(len(p.frames))*4)
	h1 := q.scratch("v.h1", int64(units)*int64(MH)*e)
	h2 := q.scratch("v.h2", int64(units)*int64(OH)*e)
	outT, outF := dst, gpu.DevPtr(0)
	if dst == 0 {
		outT = q.scratch("v.out", int64(units)*int64(OH)*e)
		outF = outT
		if m.dt == bf16 {
			outF = q.scratch("v.outf", int64(units)*int64(OH)*4)
		}
	}
	if q.err != nil {
		return q.err
	}

	q.mark("vision")
	// hidden_states = self.patch_embed(hidden_states): the pixels cast to the weight dtype, then
	// the Conv3d (kernel = stride) as one product. (Rounding them to bf16 on the host while they
	// are staged, to halve the upload, made this stage 0.55 ms slower: docs/gpu.md.)
	q.stage(pixF, unsafe.Pointer(&pixels[0]), int64(len(pixels))*4)
	if m.dt == bf16 {
		q.elems(k.f32ToBF16, int64(len(pixels)), gpu.P(pix), gpu.P(pixF), gpu.L(int64(len(pixels))))
	}
	q.linear(xe, VH, pix, cols, w.patch, 0, N, VH, cols)
	// permute_input_for_window_attn: merge units into window order
	q.stage(index, i32bytes(p.index), int64(units)*4)
	q.rows(k.gather, units, gpu.P(x), gpu.P(xe), gpu.P(index), gpu.I(unit*VH))
	q.stage(rope, unsafe.Pointer(&p.rope[0]), int64(len(p.rope))*4)
	q.stage(segW, i32bytes(p.windows), int64(len(p.windows))*4)
	q.stage(segF, i32bytes(p.frames), int64(len(p.frames))*4)
	maxWin := maxSegment(p.windows)
	q.mark("vision.embed")

	full := map[int]bool{}
	for _, b := range v.FullAttBlocks {
		full[b] = true
	}
	scale := float32(1 / math.Sqrt(float64(vhd)))
	flash := k.flash[vhd]
	// windows on tensor cores when they fit the kernel (bf16, at most winMax patches)
	win := k.window[vhd]
	if maxWin > winMax || m.opts.FlashOnly {
		win = nil
	}
	for l := range w.blocks {
		B := &w.blocks[l]
		// hidden_states + self.attn(self.norm1(hidden_states), ...): the previous block's MLP
		// output is added inside the norm
		delta := gpu.DevPtr(0)
		if l > 0 {
			delta = tt
		}
		q.rows(k.rmsnorm, N, gpu.P(xn), gpu.P(x), gpu.P(delta), gpu.P(B.norm1), gpu.I(VH), gpu.F(float32(v.NormEps)))
		q.mark("vision.b.norm")
		q.linear(qkv, 3*VH, xn, VH, B.qkv, B.qkvBias, N, 3*VH, VH)
		q.mark("vision.b.qkv")
		// full blocks attend within each frame (cu_seqlens), the others within each window; the
		// window kernel applies the 2-D RoPE itself
		windowed := v.WindowSize > 0 && !full[l]
		if !windowed || win == nil {
			q.launchDep(k.ropeVision, gpu.Dim3{X: N}, gpu.Dim3{X: 128}, 0, gpu.P(qkv), gpu.P(rope), gpu.I(N), gpu.I(heads), gpu.I(vhd))
			q.mark("vision.b.rope")
		}
		if !windowed {
			for f := 0; f+1 < len(p.frames); f++ {
				r0, n := int(p.frames[f]), int(p.frames[f+1]-p.frames[f])
				q.attention(attnArgs{out: att, q: qkv, k: qkv.Add(int64(VH) * e), v: qkv.Add(2 * int64(VH) * e), q0: r0, k0: r0,
					ldo: VH, ldq: 3 * VH, ldk: 3 * VH, ldv: 3 * VH, nq: n, nk: n, heads: heads, kvh: heads, hd: vhd, scale: scale},
					segF.Add(int64(f)*4), segF.Add(int64(f)*4))
			}
		} else if win != nil {
			q.launchDep(win, gpu.Dim3{X: len(p.windows) - 1, Y: heads}, gpu.Dim3{X: winThreads}, 0,
				gpu.P(att), gpu.P(qkv), gpu.P(qkv.Add(int64(VH)*e)), gpu.P(qkv.Add(2*int64(VH)*e)),
				gpu.I(3*VH), gpu.I(3*VH), gpu.I(3*VH), gpu.I(VH), gpu.P(segW), gpu.F(scale), gpu.P(rope), gpu.I(N))
		} else {
			q.launchDep(flash, gpu.Dim3{X: (maxWin + attBQ - 1) / attBQ, Y: heads, Z: len(p.windows) - 1}, gpu.Dim3{X: 4 * attBQ}, 0,
				gpu.P(att), gpu.P(qkv), gpu.P(qkv.Add(int64(VH)*e)), gpu.P(qkv.Add(2*int64(VH)*e)),
				gpu.I(3*VH), gpu.I(3*VH), gpu.I(3*VH), gpu.I(VH), gpu.P(segW), gpu.P(segW), gpu.I(heads), gpu.I(heads), gpu.I(0), gpu.F(scale))
		}
		if !windowed {
			q.mark("vision.b.attn.full")
		} else {
			q.mark("vision.b.attn.window")
		}
		q.linear(tt, VH, att, VH, B.proj, B.projBias, N, VH, VH)
		q.mark("vision.b.proj")
		// hidden_states + self.mlp(self.norm2(hidden_states)), SwiGLU with biases
		q.rows(k.rmsnorm, N, gpu.P(xn), gpu.P(x), gpu.P(tt), gpu.P(B.norm2), gpu.I(VH), gpu.F(float32(v.NormEps)))
		q.mark("vision.b.norm")
		q.linear(gu, 2*VI, xn, VH, B.gateUp, B.gateUpBias, N, 2*VI, VH)
		q.mark("vision.b.gateup")
		q.matrix(k.siluMul, N, VIp, gpu.P(act), gpu.P(gu), gpu.I(N), gpu.I(VI), gpu.I(VIp))
		q.mark("vision.b.silu")
		q.linear(tt, VH, act, VIp, B.down, B.downBias, N, VH, VIp)
		q.mark("vision.b.down")
	}

	// Qwen2_5_VLPatchMerger: self.mlp(self.ln_q(x).view(-1, self.hidden_size)); the unit's patches
	// are adjacent rows, so the view is free. The last block's MLP output is added first.
	q.rows(k.rmsnorm, N, gpu.P(xn), gpu.P(x), gpu.P(tt), gpu.P(w.mergerNorm), gpu.I(VH), gpu.F(float32(v.NormEps)))
	q.linear(h1, MH, xn, MH, w.fc1, w.fc1Bias, units, MH, MH)
	q.elems(k.gelu, int64(units)*int64(MH), gpu.P(h1), gpu.L(int64(units)*int64(MH)))
	q.linear(h2, OH, h1, MH, w.fc2, w.fc2Bias, units, OH, MH)
	// merged_hidden_states[reverse_indices, :]: unit u of the window order is token index[u]
	q.rows(k.scatter, units, gpu.P(outT), gpu.P(h2), gpu.P(index), gpu.I(OH))
	if m.dt == bf16 && dst == 0 {
		q.elems(k.bf16ToF32, int64(units)*int64(OH), gpu.P(outF), gpu.P(outT), gpu.L(int64(units)*int64(OH)))
	}
	q.mark("vision.merger")
	if q.err != nil {
		return q.err
	}
	if err := m.stream.Sync(); err != nil {
		return fmt.Errorf("vision: %w", err)
	}
	m.collect()
	if dst != 0 {
		return nil
	}
	return gpu.CopyDtoH(unsafe.Pointer(&out[0]), outF, int64(len(out))*4)
}

func maxSegment(bounds []int32) int {
	longest := 0
	for i := 1; i < len(bounds); i++ {
		longest = max(longest, int(bounds[i]-bounds[i-1]))
	}
	return longest
}

// ----------------------------------------------------------------------------------------------
// decoder

// Prefill implements engine.Model.
func (m *Model) Prefill(ctx context.Context, seq engine.Sequence, p engine.Prompt) ([]float32, error) {
	s, _, err := m.runPrefill(ctx, seq, p, true)
	if err != nil {
		return nil, err
	}
	return s.logits, nil
}

// PrefillGreedy implements engine.GreedyModel.
func (m *Model) PrefillGreedy(ctx context.Context, seq engine.Sequence, p engine.Prompt) (int32, error) {
	_, tok, err := m.runPrefill(ctx, seq, p, false)
	return tok, err
}

// runPrefill runs a prefill and returns the argmax of the last token's logits; with logits, the
// logits themselves are left in s.logits.
func (m *Model) runPrefill(ctx context.Context, seq engine.Sequence, p engine.Prompt, logits bool) (*Sequence, int32, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	s, err := m.sequence(seq)
	if err != nil {
		return nil, 0, err
	}
	in, err := p.Flatten(m.cfg)
	if err != nil {
		return nil, 0, err
	}
	n := len(p.IDs)
	pos, slots, embeds := in.Pos, in.Slots, in.Embeds
	var rows []*rowsBuf
	for _, e := range in.Device {
		r, ok := e.Device.(*rowsBuf)
		if !ok || r.m != m {
			return nil, 0, fmt.Errorf("image embeddings on another model's device: %w", engine.ErrInvalidInput)
		}
		rows = append(rows, r)
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || s.kv == nil {
		return nil, 0, engine.ErrClosed
	}
	if s.len+n > s.cap {
		return nil, 0, &engine.BoundsError{Err: engine.ErrContextExceeded, What: "sequence length", Got: s.len + n, Limit: s.cap}
	}
	if err := m.dev.Do(func() error { return m.prefill(s, p.IDs, pos, embeds, slots, rows, logits) }); err != nil {
		return nil, 0, fmt.Errorf("prefill: %w", err)
	}
	if logits {
		copy(s.logits, m.logits.Float32s())
	}
	return s, m.picked(), nil
}

// prefill runs the decoder over n prompt tokens on the device thread. The image rows come from
// embeds (host) or, when rows is not empty, from the images' device rows, in order. The logits
// are copied to the host when asked for; their argmax always is.
func (m *Model) prefill(s *Sequence, ids, pos []int32, embeds []float32, slots []int32, rows []*rowsBuf, logits bool) error {
	defer m.resetStage()
	t := &m.cfg.Text
	w := &m.w
	k := m.k
	e := m.dt.size()
	n := len(ids)
	n64 := int64(n)
	H, hd, I := t.Hidden, t.HeadDim, t.Intermediate
	qd, kvd := t.Heads*hd, t.KVHeads*hd
	q := &enq{m: m, dep: !m.opts.NoPDL}

	x := q.scratch("p.x", n64*int64(H)*e)
	xn := q.scratch("p.xn", n64*int64(H)*e)
	qkv := q.scratch("p.qkv", n64*int64(qd+2*kvd)*e)
	qb := q.scratch("p.q", n64*int64(qd)*e)
	att := q.scratch("p.att", n64*int64(qd)*e)
	tt := q.scratch("p.t", n64*int64(H)*e)
	gu := q.scratch("p.gu", 2*n64*int64(I)*e)
	act := q.scratch("p.act", n64*int64(I)*e)
	idsD := q.scratch("p.ids", n64*4)
	posD := q.scratch("p.pos", 3*n64*4)
	segD := q.scratch("p.seg", 16)
	var slotsD, embD gpu.DevPtr
	if len(slots) > 0 {
		slotsD = q.scratch("p.slots", int64(len(slots))*4)
	}
	if len(embeds) > 0 {
		embD = q.scratch("p.emb", int64(len(embeds))*4)
	}
	if q.err != nil {
		return q.err
	}

	q.mark("prefill")
	m.setStep(s, 0, 0)
	if q.err == nil {
		q.err = m.stream.CopyHtoD(m.stepDev.Ptr, m.stepHost.Ptr(), int64(unsafe.Sizeof(stepArgs{})))
		q.copied()
	}
	q.stage(idsD, i32bytes(ids), n64*4)
	q.stage(posD, i32bytes(pos), 3*n64*4)
	seg := []int32{0, int32(n), 0, int32(s.len + n)}
	q.stage(segD, i32bytes(seg), 16)
	// inputs_embeds = embed_tokens(input_ids).masked_scatter(image_mask, image_embeds)
	q.rows(k.embed, n, gpu.P(x), gpu.P(w.embed), gpu.P(idsD), gpu.I(H))
	if len(slots) > 0 {
		q.stage(slotsD, i32bytes(slots), int64(len(slots))*4)
	}
	if len(rows) > 0 {
		r0 := 0
		for _, r := range rows {
			q.rows(k.scatter, r.tokens, gpu.P(x), gpu.P(r.buf.Ptr), gpu.P(slotsD.Add(int64(r0)*4)), gpu.I(H))
			r0 += r.tokens
		}
	} else if len(slots) > 0 {
		q.stage(embD, unsafe.Pointer(&embeds[0]), int64(len(embeds))*4)
		q.rows(k.scatterF32, len(slots), gpu.P(x), gpu.P(embD), gpu.P(slotsD), gpu.I(H))
	}
	q.mark("prefill.embed")

	eps := gpu.F(float32(t.RMSNormEps))
	scale := float32(1 / math.Sqrt(float64(hd)))
	layerElems := int64(s.kv.cap) * int64(kvd)
	kc, vc := s.kv.k(), s.kv.v(m.kvHalf(s.kv.cap))
	attn := func(l int) attnArgs {
		off := int64(l) * layerElems * e
		return attnArgs{out: att, q: qb, k: kc.Add(off), v: vc.Add(off), ldo: qd, ldq: qd, ldk: kvd, ldv: kvd,
			nq: n, nk: s.len + n, heads: t.Heads, kvh: t.KVHeads, hd: hd, causal: true, scale: scale}
	}
	// grouped kv heads through cuBLAS with every head in one pass: the pointer arrays of every
	// layer, uploaded at once
	var ptrs gpu.DevPtr
	area := n64 * int64(s.len+n)
	perLayer := int64(6*t.Heads) * 8
	if t.KVHeads < t.Heads && area >= gemmAttnMin && !m.opts.FlashOnly && attnChunk(t.Heads, area, m.dt) == t.Heads {
		sD, pD := q.scratch("a.s", int64(t.Heads)*area*4), q.scratch("a.p", int64(t.Heads)*area*e)
		ptrs = q.scratch("p.attptrs", int64(len(w.layers))*perLayer)
		all := make([]uint64, 0, len(w.layers)*6*t.Heads)
		for l := range w.layers {
			all = append(all, gqaPointers(m.dt, attn(l), sD, pD)...)
		}
		if q.err == nil {
			q.stage(ptrs, unsafe.Pointer(&all[0]), int64(len(all))*8)
		}
	}
	for l := range w.layers {
		L := &w.layers[l]
		delta := gpu.DevPtr(0)
		if l > 0 {
			delta = tt
		}
		// hidden_states = self.input_layernorm(residual + previous MLP output)
		q.rows(k.rmsnorm, n, gpu.P(xn), gpu.P(x), gpu.P(delta), gpu.P(L.attnNorm), gpu.I(H), eps)
		q.mark("prefill.l.norm")
		q.linear(qkv, qd+2*kvd, xn, H, L.qkv, L.qkvBias, n, qd+2*kvd, H)
		q.mark("prefill.l.qkv")
		q.launchDep(k.ropeText, gpu.Dim3{X: n}, gpu.Dim3{X: 128}, hd*4, gpu.P(qb), gpu.P(qkv), gpu.P(m.stepDev.Ptr), gpu.P(posD),
			gpu.P(w.invFreq), gpu.I(n), gpu.I(t.Heads), gpu.I(t.KVHeads), gpu.I(hd), gpu.I(t.MRopeSection[0]), gpu.I(t.MRopeSection[1]), gpu.I(l))
		a := attn(l)
		if ptrs != 0 {
			a.ptrs = ptrs.Add(int64(l) * perLayer)
		}
		q.attention(a, segD, segD.Add(8))
		q.mark("prefill.l.rope+attn")
		q.linear(tt, H, att, qd, L.o, 0, n, H, qd)
		q.mark("prefill.l.o")
		q.rows(k.rmsnorm, n, gpu.P(xn), gpu.P(x), gpu.P(tt), gpu.P(L.mlpNorm), gpu.I(H), eps)
		q.mark("prefill.l.norm")
		q.linear(gu, 2*I, xn, H, L.gateUp, 0, n, 2*I, H)
		q.mark("prefill.l.gateup")
		q.matrix(k.siluMul, n, q.siluCols(I), gpu.P(act), gpu.P(gu), gpu.I(n), gpu.I(I), gpu.I(I))
		q.mark("prefill.l.silu")
		q.linear(tt, H, act, I, L.down, 0, n, H, I)
		q.mark("prefill.l.down")
	}
	// hidden_states = self.norm(hidden_states); logits = self.lm_head(hidden_states[:, -1:, :])
	last := (n64 - 1) * int64(H) * e
	m.lmHead(q, x.Add(last), tt.Add(last), xn.Add(last))
	if logits {
		m.copyLogits(q)
	}
	q.mark("prefill.head")
	if q.err != nil {
		return q.err
	}
	if err := m.stream.Sync(); err != nil {
		return err
	}
	m.collect()
	s.len += n
	return nil
}

// lmHead enqueues logits = lm_head(norm(x + delta)) for one row (the residual goes to xOut), their
// argmax and runner-up, and the copy of those to the pinned pick buffer. The bf16 model's logits
// are bf16 (ties and all), widened to F32; copyLogits brings them to the host.
func (m *Model) lmHead(q *enq, x, delta, xOut gpu.DevPtr) {
	t := &m.cfg.Text
	V := t.Vocab
	q.gemvNorm(0, m.dec.logitsF32, x, delta, m.w.finalNorm, xOut, m.w.lmHead, 0, V, t.Hidden, float32(t.RMSNormEps))
	pv, pi := m.dec.pickPart, m.dec.pickPart.Add(2*argmaxParts*4)
	q.launchDep(m.k.argmaxPart, gpu.Dim3{X: argmaxParts}, gpu.Dim3{X: argmaxThreads}, 0, gpu.P(pv), gpu.P(pi), gpu.P(m.dec.logitsF32), gpu.I(V))
	q.launchDep(m.k.argmax, gpu.Dim3{X: 1}, gpu.Dim3{X: argmaxThreads}, 0, gpu.P(m.dec.pick), gpu.P(m.dec.pick.Add(8)), gpu.P(pv), gpu.P(pi), gpu.I(2*argmaxParts))
	if q.err == nil {
		q.err = m.stream.CopyDtoH(m.pick.Ptr(), m.dec.pick, 16)
		q.copied()
	}
}

// copyLogits enqueues the copy of the last lm_head's logits to the pinned logits buffer.
func (m *Model) copyLogits(q *enq) {
	if q.err == nil {
		q.err = m.stream.CopyDtoH(m.logits.Ptr(), m.dec.logitsF32, int64(m.cfg.Text.Vocab)*4)
		q.copied()
	}
}

// picked is the argmax the last lm_head left in the pick buffer (after a synchronisation), as
// engine.Argmax: the kernel skips NaNs, and with nothing else leaves an index past the
// vocabulary, which becomes 0.
func (m *Model) picked() int32 {
	tok := m.pick.Int32s()[0]
	if tok < 0 || int(tok) >= m.cfg.Text.Vocab {
		return 0
	}
	return tok
}

// DecodeStep implements engine.Model.
func (m *Model) DecodeStep(ctx context.Context, seq engine.Sequence, token int32, pos int32) ([]float32, error) {
	s, _, err := m.runDecode(ctx, seq, token, pos, true)
	if err != nil {
		return nil, err
	}
	return s.logits, nil
}

// DecodeStepGreedy implements engine.GreedyModel.
func (m *Model) DecodeStepGreedy(ctx context.Context, seq engine.Sequence, token int32, pos int32) (int32, error) {
	_, tok, err := m.runDecode(ctx, seq, token, pos, false)
	return tok, err
}

// runDecode runs a decode step and returns the argmax of its logits; with logits, the logits
// themselves are left in s.logits.
func (m *Model) runDecode(ctx context.Context, seq engine.Sequence, token int32, pos int32, logits bool) (*Sequence, int32, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	s, err := m.sequence(seq)
	if err != nil {
		return nil, 0, err
	}
	if token < 0 || int(token) >= m.cfg.Text.Vocab {
		return nil, 0, fmt.Errorf("token id %d outside the vocabulary: %w", token, engine.ErrInvalidInput)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || s.kv == nil {
		return nil, 0, engine.ErrClosed
	}
	if s.len >= s.cap {
		return nil, 0, &engine.BoundsError{Err: engine.ErrContextExceeded, What: "sequence length", Got: s.len + 1, Limit: s.cap}
	}
	if err := m.dev.Do(func() error { return m.decode(s, token, pos, logits) }); err != nil {
		return nil, 0, fmt.Errorf("decode: %w", err)
	}
	if logits {
		copy(s.logits, m.logits.Float32s())
	}
	return s, m.picked(), nil
}

// GraphError reports why decode steps run without a CUDA graph, if they do.
func (m *Model) GraphError() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.graphErr
}

// decode appends one token on the device thread: through the captured graph when the cache fits
// it, with plain launches otherwise; the logits are copied to the host when asked for.
func (m *Model) decode(s *Sequence, token, pos int32, logits bool) error {
	m.setStep(s, token, pos)
	L := s.len + 1
	if !m.opts.NoGraph && m.graphErr == nil && L <= m.dec.splits*decSK {
		if m.graph == nil {
			if err := m.capture(); err != nil {
				m.graphErr = err
			}
		}
		if m.graph != nil {
			if err := m.mark("decode"); err != nil {
				return err
			}
			if err := m.graph.Launch(m.stream); err != nil {
				return err
			}
			if logits {
				q := &enq{m: m}
				if m.copyLogits(q); q.err != nil {
					return q.err
				}
			}
			if err := m.mark("decode.graph"); err != nil {
				return err
			}
			if err := m.stream.Sync(); err != nil {
				return err
			}
			m.collect()
			s.len++
			return nil
		}
	}
	splits := (L + decSK - 1) / decSK
	part := m.dec.part
	if splits > m.dec.splits {
		t := &m.cfg.Text
		var err error
		if part, err = m.buf("d.part", int64(t.Heads*splits*(t.HeadDim+2))*4); err != nil {
			return err
		}
	}
	q := &enq{m: m}
	q.mark("decode")
	m.decodeWork(q, part, splits, true)
	if logits {
		m.copyLogits(q)
	}
	if q.err != nil {
		return q.err
	}
	if err := m.stream.Sync(); err != nil {
		return err
	}
	m.collect()
	s.len++
	return nil
}

// capture records one decode step into m.graph. The step reads everything that changes between
// steps (token, position, cache length and pointers) from m.stepDev, copied from pinned memory
// by the graph's first node.
func (m *Model) capture() error {
	if err := m.stream.BeginCapture(); err != nil {
		return err
	}
	q := &enq{m: m}
	m.decodeWork(q, m.dec.part, m.dec.splits, false)
	g, err := m.stream.EndCapture() // always ends the capture, also after a failed enqueue
	if q.err != nil {
		if g != nil {
			_ = g.Destroy()
		}
		return fmt.Errorf("capturing the decode step: %w", q.err)
	}
	if err != nil {
		return fmt.Errorf("capturing the decode step: %w", err)
	}
	m.graph = g
	return nil
}

// decodeWork enqueues one decode step with the fixed buffers of m.dec. marks adds profiling
// marks between stages (not inside a capture).
func (m *Model) decodeWork(q *enq, part gpu.DevPtr, splits int, marks bool) {
	t := &m.cfg.Text
	w := &m.w
	k := m.k
	d := &m.dec
	H, hd, I := t.Hidden, t.HeadDim, t.Intermediate
	qd, kvd := t.Heads*hd, t.KVHeads*hd
	mark := func(name string) {
		if marks {
			q.mark(name)
		}
	}
	if q.err == nil {
		q.err = m.stream.CopyHtoD(m.stepDev.Ptr, m.stepHost.Ptr(), int64(unsafe.Sizeof(stepArgs{})))
		q.copied()
	}
	q.dep = !m.opts.NoPDL
	defer func() { q.dep = false }()
	step := gpu.P(m.stepDev.Ptr)
	// Step.token is at offset 4. The residual stream alternates between d.x[0] and d.x[1]: each
	// fused norm reads one and writes the other.
	p := 0
	q.rows(k.embed, 1, gpu.P(d.x[p]), gpu.P(w.embed), gpu.P(m.stepDev.Ptr.Add(4)), gpu.I(H))
	eps := float32(t.RMSNormEps)
	scale := gpu.F(float32(1 / math.Sqrt(float64(hd))))
	for l := range w.layers {
		L := &w.layers[l]
		delta := gpu.DevPtr(0)
		if l > 0 {
			delta = d.t
		}
		// qkv = q/k/v_proj(input_layernorm(residual + previous MLP output))
		q.gemvNorm(d.qkv, 0, d.x[p], delta, L.attnNorm, d.x[1-p], L.qkv, L.qkvBias, qd+2*kvd, H, eps)
		p ^= 1
		// M-RoPE, the cache write and attention over the cache in one kernel
		q.launchDep(k.attnDecode, gpu.Dim3{X: t.Heads, Y: splits}, gpu.Dim3{X: decThreads}, 0,
			gpu.P(d.att), gpu.P(part), gpu.P(d.ticket), gpu.P(d.qkv), step, gpu.P(w.invFreq),
			gpu.I(l), gpu.I(t.Heads), gpu.I(t.KVHeads), gpu.I(hd), scale)
		q.gemv(d.t, d.att, L.o, 0, H, qd)
		// act = SwiGLU(gate_up(post_attention_layernorm(residual + attention output)))
		q.gemvGLU(d.act, d.x[p], d.t, L.mlpNorm, d.x[1-p], L.gateUp, I, H, eps)
		p ^= 1
		q.gemv(d.t, d.act, L.down, 0, H, I)
	}
	mark("decode.layers")
	m.lmHead(q, d.x[p], d.t, d.x[1-p])
	mark("decode.head")
}
