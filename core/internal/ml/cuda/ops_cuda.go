//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"sort"
	"unsafe"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/ml/cuda/gpu"
)

// ----------------------------------------------------------------------------------------------
// launches

func (b *Backend) launch(f *gpu.Function, grid, block gpu.Dim3, shmem int, args ...gpu.Arg) {
	b.flush()
	if !b.live() {
		return
	}
	b.opStart()
	b.fail(f.Launch(grid, block, shmem, b.stream, args...))
	b.opEnd(f.Name())
	b.afterKernel = true
}

// launchDep is launch, as a programmatic dependent launch when a kernel comes just before (the
// kernels of iris.cu wait, pdl_wait, before they touch the previous kernel's data): each then
// starts while the one before it ends, a decode step's kernels prefetching their weights.
func (b *Backend) launchDep(f *gpu.Function, grid, block gpu.Dim3, shmem int, args ...gpu.Arg) {
	b.flush()
	if !b.live() {
		return
	}
	if !b.opts.NoPDL && b.afterKernel && !b.opsProfiled() {
		b.fail(f.LaunchDependent(grid, block, shmem, b.stream, args...))
		return
	}
	b.launch(f, grid, block, shmem, args...)
}

// rows launches f with one 256-thread block per row.
func (b *Backend) rows(f *gpu.Function, rows int, args ...gpu.Arg) {
	b.launchDep(f, gpu.Dim3{X: rows}, gpu.Dim3{X: 256}, 0, args...)
}

// elems launches f over n elements with a strided 1-D grid.
func (b *Backend) elems(f *gpu.Function, n int64, args ...gpu.Arg) {
	b.launchDep(f, grid1(n), gpu.Dim3{X: 256}, 0, args...)
}

// grid1 is a 1-D grid for n elements of 256-thread blocks, capped (the kernels stride).
func grid1(n int64) gpu.Dim3 {
	return gpu.Dim3{X: int(max(1, min((n+255)/256, 65535*4)))}
}

// grid2 is the 2-D grid of the ROWS kernels (iris.cu): rows on y, n columns on x and 256-thread
// blocks.
func grid2(rows, n int) gpu.Dim3 {
	return gpu.Dim3{X: max(1, min((n+255)/256, 1024)), Y: max(1, min(rows, 65535))}
}

// bad fails the pass with an invalid-argument error (a family asking for what no kernel does).
func (b *Backend) bad(format string, args ...any) {
	b.fail(fmt.Errorf("cuda "+format+": %w", append(args, ml.ErrInvalidInput)...))
}

// same checks that tensors have the backend's storage type.
func (b *Backend) same(op string, ts ...ml.Tensor) bool {
	for _, t := range ts {
		if t.Valid() && t.DType != b.dt.ml() {
			b.bad("%s: a %s operand in a %s backend", op, t.DType, b.dt.ml())
			return false
		}
	}
	return b.err == nil
}

func packed(ts ...ml.Tensor) bool {
	for _, t := range ts {
		if t.Valid() && !t.Contiguous() {
			return false
		}
	}
	return true
}

// ----------------------------------------------------------------------------------------------
// products

// adjacent reports whether the outputs' weights and outputs follow each other in memory, so that
// one product computes them all (their biases too when they are adjacent, see mergeOuts).
func adjacent(outs []ml.Out) bool {
	for i := 1; i < len(outs); i++ {
		p, o := outs[i-1], outs[i]
		if !p.W.Contiguous() || p.W.Stride != o.W.Stride ||
			o.W.Addr != p.W.Addr+uintptr(int64(p.W.Rows)*int64(p.W.Stride)*p.W.DType.Size()) ||
			o.Y.Addr != p.Y.Addr+uintptr(int64(p.Y.Cols)*p.Y.DType.Size()) || o.Y.Stride != p.Y.Stride ||
			p.B.Valid() != o.B.Valid() {
			return false
		}
	}
	return true
}

func biasesAdjacent(outs []ml.Out) bool {
	for i := 1; i < len(outs); i++ {
		p, o := outs[i-1], outs[i]
		if p.B.Valid() && o.B.Addr != p.B.Addr+uintptr(int64(p.B.Cols)*p.B.DType.Size()) {
			return false
		}
	}
	return true
}

// mergeOuts is the one product of adjacent outputs, or outs itself when they are not. Biases
// that are not adjacent (each vector is placed on its own alignment) are copied once, side by
// side, into memory the backend keeps.
func (b *Backend) mergeOuts(outs []ml.Out) []ml.Out {
	if len(outs) < 2 || !adjacent(outs) {
		return outs
	}
	o := outs[0]
	for _, x := range outs[1:] {
		o.W.Rows += x.W.Rows
		o.Y.Cols += x.Y.Cols
		if o.B.Valid() {
			o.B.Cols += x.B.Cols
		}
	}
	if o.B.Valid() && !biasesAdjacent(outs) {
		key := joinKey{outs[0].B.Addr, outs[1].B.Addr, len(outs)}
		joined, ok := b.joined[key]
		if !ok {
			if b.mode != plain {
				return outs // made by a plain run first
			}
			p, err := b.take(int64(o.B.Cols) * o.B.DType.Size())
			if err != nil {
				return outs
			}
			b.flush()
			at := p
			for _, x := range outs {
				n := int64(x.B.Cols) * x.B.DType.Size()
				if err := b.stream.CopyDtoD(at, dp(x.B), n); err != nil {
					b.fail(err)
					return outs
				}
				at = at.Add(n)
			}
			b.afterKernel = false
			joined = ml.Tensor{Addr: uintptr(p), Rows: 1, Cols: o.B.Cols, Stride: o.B.Cols, DType: o.B.DType}
			b.joined[key] = joined
		}
		o.B = joined
	}
	return []ml.Out{o}
}

// joinKey names the biases of a merged product.
type joinKey struct {
	first, second uintptr
	n             int
}

// Linears implements ml.Backend: adjacent outputs are one product; each through cuBLASLt (or
// cublasGemmEx), with an F32 output of a bf16 backend widened after.
func (b *Backend) Linears(x ml.Tensor, outs ...ml.Out) {
	if !b.same("linear", x) {
		return
	}
	for _, o := range b.mergeOuts(outs) {
		b.linear(x, o)
	}
}

func (b *Backend) linear(x ml.Tensor, o ml.Out) {
	if !b.same("linear", o.W, o.B) {
		return
	}
	M, N, K := x.Rows, o.W.Rows, x.Cols
	if o.W.Cols != K || o.Y.Rows != M || o.Y.Cols != N {
		b.bad("linear: x %dx%d, w %dx%d, y %dx%d", x.Rows, x.Cols, o.W.Rows, o.W.Cols, o.Y.Rows, o.Y.Cols)
		return
	}
	if !b.live() {
		return
	}
	y := o.Y
	if y.DType != b.dt.ml() { // an F32 output (logits) of a bf16 backend
		y = b.scratchT("linear.y", M, N, b.dt.ml())
	}
	xp, ldx := dp(x), x.Stride
	switch {
	case o.W.Stride != o.W.Cols && x.Stride == o.W.Stride && x.Addr%16 == 0:
		// a padded weight (rows of whole 16-byte chunks for the tensor cores) over an input the
		// family allocated at the weight's stride, whose columns past K its producer zeroed
		// (SiluMul does): the product over the padded K, as it is. (K itself, 3,420 for the
		// vision MLP, took cuBLASLt to a kernel 3x slower: 135 against 42 us.)
		K = o.W.Stride
	case o.W.Stride != o.W.Cols:
		// over any other input: the input padded to match (zero columns)
		if !x.Contiguous() {
			b.bad("linear: a padded weight over a strided input")
			return
		}
		pad := b.Scratch("linear.xpad", M, o.W.Stride)
		b.launchDep(b.k.padRows, grid2(M, o.W.Stride), gpu.Dim3{X: 256}, 0, gpu.P(dp(pad)), gpu.P(dp(x)), gpu.I(M), gpu.I(K), gpu.I(o.W.Stride))
		xp, ldx, K = dp(pad), o.W.Stride, o.W.Stride
	}
	if b.err != nil {
		return
	}
	b.flush()
	if b.gemvOK(x, o.W) && y.DType == o.W.DType && xp == dp(x) { // one row: stream the weights
		b.gemvLaunch(b.k.gemv, N, K, gpu.P(dp(y)), gpu.P(0), gpu.P(dp(o.W)), gpu.P(xp), gpu.P(dp(o.B)), gpu.I(N), gpu.I(K),
			gpu.I(0), gpu.P(0), gpu.P(0), gpu.P(0), gpu.F(0))
		return
	}
	if y == o.Y && b.quackLinear(y, xp, ldx, o, M, N, K) {
		return
	}
	if b.opts.GemmEx {
		if o.B.Valid() {
			b.launchDep(b.k.bias, grid2(M, N), gpu.Dim3{X: 256}, 0, gpu.P(dp(y)), gpu.P(dp(o.B)), gpu.I(M), gpu.I(N), gpu.I(y.Stride))
		}
		if b.err == nil {
			b.opStart()
			b.fail(b.blas.linear(b.dt, dp(y), y.Stride, xp, ldx, dp(o.W), M, N, K, o.B.Valid()))
		}
	} else {
		b.opStart()
		b.fail(b.blas.ltLinear(b.dt, dp(y), y.Stride, xp, ldx, dp(o.W), dp(o.B), M, N, K))
	}
	if b.opsProfiled() {
		b.opEnd(fmt.Sprintf("linear %dx%dx%d", M, N, K))
	}
	b.afterKernel = true // cuBLAS ends with its kernel
	if y != o.Y {
		b.widen(o.Y, y)
	}
}

// widen copies a bf16 matrix into an F32 one (contiguous, or row by row).
func (b *Backend) widen(dst, src ml.Tensor) {
	if packed(dst, src) {
		n := int64(src.Rows) * int64(src.Cols)
		b.elems(b.k.bf16ToF32, n, gpu.P(dp(dst)), gpu.P(dp(src)), gpu.L(n))
		return
	}
	for r := range src.Rows {
		n := int64(src.Cols)
		b.elems(b.k.bf16ToF32, n, gpu.P(dp(dst.RowsAt(r, 1))), gpu.P(dp(src.RowsAt(r, 1))), gpu.L(n))
	}
}

// gemvOK reports whether a product of one row x over the weight w runs through the gemv kernel
// rather than cuBLAS: the input row must fit the 48 KiB of shared memory, and both must be whole
// 16-byte chunks (the kernel's loads).
func (b *Backend) gemvOK(x, w ml.Tensor) bool {
	K := int64(x.Cols) * b.dt.size()
	return !b.opts.DecodeCuBLAS && K <= gemvMaxShared && K%16 == 0 && x.Addr%16 == 0 && w.Addr%16 == 0 &&
		w.Stride == w.Cols && x.Rows == 1
}

// gemvLaunch launches iris_gemv(_glu) over N outputs: a warp a row, at most gemvBlocksPerSM
// blocks an SM (the warps then stride over the rows).
func (b *Backend) gemvLaunch(f *gpu.Function, N, K int, args ...gpu.Arg) {
	blocks := min((N+gemvWarps-1)/gemvWarps, gemvBlocksPerSM*max(1, b.dev.Info().SMs))
	b.launchDep(f, gpu.Dim3{X: blocks}, gpu.Dim3{X: 32 * gemvWarps}, int((int64(K)*b.dt.size()+15)&^15), args...)
}

// NormLinears implements ml.NormLinearer: for one row (a decode step), the norm rides in the
// gemv kernel that streams the weights (y widened to F32 inside it when asked for); otherwise
// RMSNorm then the products.
func (b *Backend) NormLinears(xn, xOut, x, delta, w ml.Tensor, eps float32, outs ...ml.Out) {
	outs = b.mergeOuts(outs)
	o := outs[0]
	if len(outs) != 1 || !b.gemvOK(x, o.W) || xOut.Addr == x.Addr {
		b.RMSNorm(xn, xOut, x, delta, w, eps)
		b.Linears(xn, outs...)
		return
	}
	if !b.same("linear", x, xOut, delta, w, o.W, o.B) {
		return
	}
	y, yf := dp(o.Y), gpu.DevPtr(0)
	if o.Y.DType != b.dt.ml() {
		y, yf = 0, dp(o.Y)
	}
	b.gemvLaunch(b.k.gemv, o.W.Rows, x.Cols, gpu.P(y), gpu.P(yf), gpu.P(dp(o.W)), gpu.P(dp(x)), gpu.P(dp(o.B)), gpu.I(o.W.Rows), gpu.I(x.Cols),
		gpu.I(1), gpu.P(dp(delta)), gpu.P(dp(w)), gpu.P(dp(xOut)), gpu.F(eps))
}

// NormSwiGLU implements ml.NormSwiGLUer: for one row with adjacent gate and up weights and no
// biases, one gemv kernel computes the norm, both products and the activation.
func (b *Backend) NormSwiGLU(act, gu, xn, xOut, x, delta, w ml.Tensor, eps float32, mlp ml.MLP) {
	I := act.Cols
	gate, up := ml.Out{Y: gu.ColsAt(0, I), W: mlp.Gate, B: mlp.GateB}, ml.Out{Y: gu.ColsAt(I, I), W: mlp.Up, B: mlp.UpB}
	if b.gemvOK(x, mlp.Gate) && !mlp.GateB.Valid() && !mlp.UpB.Valid() && adjacent([]ml.Out{gate, up}) && xOut.Addr != x.Addr {
		if !b.same("swiglu", act, x, xOut, delta, w, mlp.Gate) {
			return
		}
		b.gemvLaunch(b.k.gemvGLU, I, x.Cols, gpu.P(dp(act)), gpu.P(0), gpu.P(dp(mlp.Gate)), gpu.P(dp(x)), gpu.P(0), gpu.I(I), gpu.I(x.Cols),
			gpu.I(1), gpu.P(dp(delta)), gpu.P(dp(w)), gpu.P(dp(xOut)), gpu.F(eps))
		return
	}
	b.RMSNorm(xn, xOut, x, delta, w, eps)
	if b.swigluProduct(act, xn, gate, up) {
		return
	}
	b.Linears(xn, gate, up)
	b.SiluMul(act, gu.ColsAt(0, I), gu.ColsAt(I, I))
}

// quackMinRows are the fewest rows quack's products take (a tile's): a decode step's products
// read the weights, and its SwiGLU pass is small.
const quackMinRows = 128

// loadQuack loads the quack products the options ask for: of each kind (SwiGLU or plain,
// without or with biases) the n-th of gpu.QuackVariants.
func (b *Backend) loadQuack() error {
	type kind struct{ linear, bias bool }
	idx := map[kind][]int{}
	for i, v := range gpu.QuackVariants() {
		k := kind{v.Linear, v.Bias}
		idx[k] = append(idx[k], i)
	}
	sms := b.dev.Info().SMs
	for _, x := range []struct {
		on   bool
		k    kind
		n    int
		dest **gpu.QuackGemm
	}{
		{b.opts.QuackSwiGLU, kind{false, false}, b.opts.QuackVariant, &b.swiglu},
		{b.opts.QuackSwiGLU, kind{false, true}, b.opts.QuackBiasVariant, &b.swigluBias},
		{b.opts.QuackLinear, kind{true, false}, b.opts.QuackLinearVariant, &b.linQ},
		{b.opts.QuackLinear, kind{true, true}, b.opts.QuackLinearBiasVariant, &b.linQBias},
	} {
		if !x.on {
			continue
		}
		if x.n < 0 || x.n >= len(idx[x.k]) {
			return fmt.Errorf("quack product variant %d (linear %t, biases %t): this build has %d (%v)", x.n, x.k.linear, x.k.bias,
				len(idx[x.k]), gpu.QuackVariants())
		}
		g, err := gpu.LoadQuack(sms, idx[x.k][x.n])
		if err != nil {
			return err
		}
		*x.dest = g
	}
	return nil
}

// swigluProduct runs act = SwiGLU of xn's gate and up products as one kernel (gpu.QuackGemm,
// Options.QuackSwiGLU) when it takes them: bf16, both biases or neither, the up weight right
// after the gate weight, whole 16-byte rows, act's stride room for its columns rounded up to a
// 16-byte chunk (the kernel writes those past I zero, as SiluMul does for a padded down
// weight). It reports whether it ran.
func (b *Backend) swigluProduct(act, xn ml.Tensor, gate, up ml.Out) bool {
	I, K := act.Cols, xn.Cols
	cols := (I + 7) &^ 7
	g := b.swiglu
	if gate.B.Valid() {
		g = b.swigluBias
	}
	// adjacent also says the weights' rows are unpadded (stride = K)
	if g == nil || gate.B.Valid() != up.B.Valid() || xn.Rows < quackMinRows || !adjacent([]ml.Out{gate, up}) ||
		gate.W.Cols != K || K%8 != 0 || xn.Stride%8 != 0 || act.Stride%8 != 0 || act.Stride < cols ||
		xn.Addr%16 != 0 || act.Addr%16 != 0 || gate.W.Addr%16 != 0 {
		return false
	}
	var bias gpu.DevPtr
	if gate.B.Valid() {
		if bias = b.f32Biases(2*cols, gate.B, up.B); bias == 0 {
			return false
		}
	}
	if !b.live() {
		return true
	}
	b.flush()
	b.opStart()
	b.fail(g.SwiGLU(b.stream, dp(xn), xn.Rows, K, xn.Stride, dp(gate.W), I, dp(act), cols, act.Stride, bias))
	if b.opsProfiled() {
		b.opEnd(fmt.Sprintf("swiglu product %dx%dx%d", xn.Rows, 2*I, K))
	}
	b.afterKernel = true // the product ends with its kernel
	return true
}

// quackLinear runs y = x W^T + B (K columns of x at row stride ldx, from xp) through
// Options.QuackLinear's product when it takes it: bf16 rows of at least quackMinRows, whole
// 16-byte rows, the weight's stride K. It reports whether it ran.
func (b *Backend) quackLinear(y ml.Tensor, xp gpu.DevPtr, ldx int, o ml.Out, M, N, K int) bool {
	g := b.linQ
	if o.B.Valid() {
		g = b.linQBias
	}
	if g == nil || M < quackMinRows || y.DType != ml.BF16 || o.W.DType != ml.BF16 || o.W.Stride != K || K%8 != 0 || ldx%8 != 0 ||
		y.Stride%8 != 0 || xp%16 != 0 || y.Addr%16 != 0 || o.W.Addr%16 != 0 {
		return false
	}
	var bias gpu.DevPtr
	if o.B.Valid() {
		if bias = b.f32Biases(N, o.B); bias == 0 {
			return false
		}
	}
	b.opStart()
	b.fail(g.Linear(b.stream, xp, M, K, ldx, dp(o.W), N, dp(y), y.Stride, bias))
	if b.opsProfiled() {
		b.opEnd(fmt.Sprintf("quack linear %dx%dx%d", M, N, K))
	}
	b.afterKernel = true // the product ends with its kernel
	return true
}

// f32Biases is the bf16 vectors parts side by side in f32, n values (zeros past theirs): a
// row vector of quack's products. It is made by a plain run the first time and kept with the
// backend; 0 when it cannot be (the caller takes the cuBLASLt path).
func (b *Backend) f32Biases(n int, parts ...ml.Tensor) gpu.DevPtr {
	key := joinKey{parts[0].Addr, parts[len(parts)-1].Addr, len(parts)}
	if p, ok := b.joinedF32[key]; ok {
		return p
	}
	total := 0
	for _, v := range parts {
		if v.DType != ml.BF16 || v.Rows != 1 {
			return 0
		}
		total += v.Cols
	}
	if b.mode != plain || total > n {
		return 0
	}
	buf, err := gpu.Alloc(4 * int64(n))
	if err != nil {
		return 0
	}
	b.chunks = append(b.chunks, buf)
	b.flush()
	b.fail(b.stream.Memset32(buf.Ptr, 0, int64(n)))
	b.afterKernel = false
	at := buf.Ptr
	for _, v := range parts {
		c := int64(v.Cols)
		b.elems(b.k.bf16ToF32, c, gpu.P(at), gpu.P(dp(v)), gpu.L(c))
		at = at.Add(4 * c)
	}
	if b.err != nil {
		return 0
	}
	b.joinedF32[key] = buf.Ptr
	return buf.Ptr
}

// ----------------------------------------------------------------------------------------------
// row ops

// RMSNorm implements ml.Backend.
func (b *Backend) RMSNorm(y, xOut, x, delta, w ml.Tensor, eps float32) {
	if !b.same("rmsnorm", y, xOut, x, delta, w) {
		return
	}
	if !packed(y, xOut, x, delta) {
		b.bad("rmsnorm: strided rows")
		return
	}
	b.launchDep(b.k.rmsnorm, gpu.Dim3{X: x.Rows}, gpu.Dim3{X: normThreads(x.Cols, b.dt)}, 0,
		gpu.P(dp(y)), gpu.P(dp(xOut)), gpu.P(dp(x)), gpu.P(dp(delta)), gpu.P(dp(w)), gpu.I(x.Cols), gpu.F(eps))
}

// normThreads is rmsnorm's block for rows of cols values: for rows of whole 16-byte chunks (its
// register path, a chunk a thread) whole warps for the chunks, at most 256; else 256. At the
// tower's 1,280 bf16 columns, 160: of 256, 96 were idle and the blocks resident an SM were
// four of 256 threads, not six (Nsight Compute: 12.5-14 us a norm of 3,300 rows, latency-bound).
// The sums are the same: the idle threads added zeros.
func normThreads(cols int, dt dtype) int {
	bytes := int64(cols) * dt.size()
	if bytes%16 != 0 {
		return 256
	}
	return int(min(256, max(32, (bytes/16+31)/32*32)))
}

// LayerNorm implements ml.Backend: one block a row, as RMSNorm.
func (b *Backend) LayerNorm(y, xOut, x, delta, w, bias ml.Tensor, eps float32) {
	if !b.same("layernorm", y, xOut, x, delta, w, bias) || x.Rows == 0 {
		return
	}
	if !packed(y, xOut, x, delta) {
		b.bad("layernorm: strided rows")
		return
	}
	if w.Rows*w.Cols != x.Cols || bias.Valid() && bias.Rows*bias.Cols != x.Cols {
		b.bad("layernorm: rows of %d, a weight of %d and a bias of %d", x.Cols, w.Rows*w.Cols, bias.Rows*bias.Cols)
		return
	}
	b.rows(b.k.layernorm, x.Rows, gpu.P(dp(y)), gpu.P(dp(xOut)), gpu.P(dp(x)), gpu.P(dp(delta)), gpu.P(dp(w)), gpu.P(dp(bias)),
		gpu.I(x.Cols), gpu.F(eps))
}

// HeadNorm implements ml.Backend in one launch for every row: a warp a head (decode steps run it
// on q and k in every layer, so a block a row of few heads would leave the GPU idle).
func (b *Backend) HeadNorm(x ml.Tensor, heads, hd int, w ml.Tensor, eps float32) {
	if !b.same("headnorm", x, w) || x.Rows == 0 {
		return
	}
	if heads < 1 || hd < 1 || heads*hd > x.Cols || w.Rows*w.Cols != hd {
		b.bad("headnorm: %d heads of %d in %d columns, a weight of %d", heads, hd, x.Cols, w.Rows*w.Cols)
		return
	}
	grid := gpu.Dim3{X: (heads + headNormWarps - 1) / headNormWarps, Y: min(x.Rows, 65535)}
	b.launchDep(b.k.headNorm, grid, gpu.Dim3{X: 32 * headNormWarps}, 0, gpu.P(dp(x)), gpu.I(x.Stride), gpu.I(x.Rows), gpu.I(heads), gpu.I(hd),
		gpu.P(dp(w)), gpu.F(eps))
}

// SiluMul implements ml.Backend for gate and up side by side in one matrix (gate's columns,
// then up's), as the products leave them.
func (b *Backend) SiluMul(y, gate, up ml.Tensor) {
	if !b.same("silu", y, gate, up) {
		return
	}
	I := y.Cols
	if gate.Stride != 2*I || up.Addr != gate.Addr+uintptr(int64(I)*gate.DType.Size()) || up.Stride != gate.Stride {
		b.bad("silu: gate and up are not the halves of one matrix")
		return
	}
	cols := y.Stride // the kernel's paths (iris.cu): columns, padding included
	switch per := int(16 / b.dt.size()); {
	case I%(per/2) == 0 && y.Stride%per == 0:
		cols = y.Stride / per // 16-byte vectors
	case I%2 == 0 && y.Stride%2 == 0:
		cols = y.Stride / 2 // pairs
	}
	b.launchDep(b.k.siluMul, grid2(y.Rows, cols), gpu.Dim3{X: 256}, 0, gpu.P(dp(y)), gpu.P(dp(gate)), gpu.I(y.Rows), gpu.I(I), gpu.I(y.Stride))
}

// GELU implements ml.Backend.
func (b *Backend) GELU(x ml.Tensor, approx ml.GELUApprox) {
	if !b.same("gelu", x) {
		return
	}
	f := b.k.gelu
	switch approx {
	case ml.GELUErf:
	case ml.GELUTanh:
		f = b.k.geluTanh
	default:
		b.bad("gelu: form %d", approx)
		return
	}
	if !x.Contiguous() {
		b.bad("gelu: strided rows")
		return
	}
	n := int64(x.Rows) * int64(x.Cols)
	b.elems(f, n, gpu.P(dp(x)), gpu.L(n))
}

// ScaleCols implements ml.Backend: a ROWS kernel, so x may be a strided view.
func (b *Backend) ScaleCols(x, w ml.Tensor) {
	if !b.same("scale-cols", x, w) || x.Rows == 0 {
		return
	}
	if w.Rows*w.Cols != x.Cols || (w.Rows > 1 && !w.Contiguous()) {
		b.bad("scale-cols: a weight of %dx%d for %d columns", w.Rows, w.Cols, x.Cols)
		return
	}
	b.launchDep(b.k.scaleCols, grid2(x.Rows, x.Cols), gpu.Dim3{X: 256}, 0, gpu.P(dp(x)), gpu.P(dp(w)), gpu.I(x.Rows), gpu.I(x.Cols),
		gpu.I(x.Stride))
}

// Embed implements ml.Backend.
func (b *Backend) Embed(dst, table ml.Tensor, ids ml.Ints) {
	if !b.same("embed", dst, table) {
		return
	}
	if !packed(dst) || dst.Cols != table.Cols {
		b.bad("embed: rows of %d into %d (strided)", table.Cols, dst.Cols)
		return
	}
	b.rows(b.k.embed, ids.Len, gpu.P(dp(dst)), gpu.P(dp(table)), gpu.I(table.Stride), gpu.P(gpu.DevPtr(ids.Addr)), gpu.I(dst.Cols))
}

// Gather implements ml.Backend.
func (b *Backend) Gather(dst, src ml.Tensor, idx ml.Ints) {
	if !b.same("gather", dst, src) || idx.Len == 0 {
		return
	}
	b.rows(b.k.gather, idx.Len, gpu.P(dp(dst)), gpu.I(dst.Stride), gpu.P(dp(src)), gpu.I(src.Stride), gpu.P(gpu.DevPtr(idx.Addr)), gpu.I(dst.Cols))
}

// Scatter implements ml.Backend.
func (b *Backend) Scatter(dst, src ml.Tensor, idx ml.Ints) {
	if !b.same("scatter", dst, src) || idx.Len == 0 {
		return
	}
	b.rows(b.k.scatter, idx.Len, gpu.P(dp(dst)), gpu.I(dst.Stride), gpu.P(dp(src)), gpu.I(src.Stride), gpu.P(gpu.DevPtr(idx.Addr)), gpu.I(src.Cols))
}

// ScatterAdd implements ml.Backend: a block a row, so the rows idx names must be distinct (they
// are positions of a sequence); a repeated one is refused rather than raced.
func (b *Backend) ScatterAdd(dst, src ml.Tensor, idx ml.Ints) {
	if !b.same("scatter-add", dst, src) || idx.Len == 0 {
		return
	}
	if src.Cols != dst.Cols || idx.Len > src.Rows {
		b.bad("scatter-add: %d rows of %d into rows of %d", idx.Len, src.Cols, dst.Cols)
		return
	}
	if !distinct(idx.Host, dst.Rows) {
		b.bad("scatter-add: a row index repeated or outside [0, %d)", dst.Rows)
		return
	}
	b.rows(b.k.scatterAdd, idx.Len, gpu.P(dp(dst)), gpu.I(dst.Stride), gpu.P(dp(src)), gpu.I(src.Stride), gpu.P(gpu.DevPtr(idx.Addr)),
		gpu.I(src.Cols))
}

// distinct reports whether the row indexes are in [0, rows) and all different.
func distinct(idx []int32, rows int) bool {
	seen := make([]bool, rows)
	for _, i := range idx {
		if i < 0 || int(i) >= rows || seen[i] {
			return false
		}
		seen[i] = true
	}
	return true
}

// AddEmbedBag implements ml.Backend: a block a row of dst, its taps summed in F32.
func (b *Backend) AddEmbedBag(dst, table ml.Tensor, ids ml.Ints, weights ml.Tensor) {
	if !b.same("embed-bag", dst, table) || dst.Rows == 0 {
		return
	}
	K := weights.Cols
	if weights.DType != ml.F32 || weights.Rows != dst.Rows || ids.Len != dst.Rows*K || table.Cols != dst.Cols {
		b.bad("embed-bag: %d ids, %s weights %dx%d, table %dx%d, dst %dx%d", ids.Len, weights.DType, weights.Rows, weights.Cols,
			table.Rows, table.Cols, dst.Rows, dst.Cols)
		return
	}
	if !inRange(ids.Host, table.Rows) {
		b.bad("embed-bag: an id outside the table's %d rows", table.Rows)
		return
	}
	b.rows(b.k.embedBag, dst.Rows, gpu.P(dp(dst)), gpu.I(dst.Stride), gpu.P(dp(table)), gpu.I(table.Stride), gpu.P(gpu.DevPtr(ids.Addr)),
		gpu.P(dp(weights)), gpu.I(weights.Stride), gpu.I(K), gpu.I(dst.Cols))
}

// inRange reports whether every id names one of n rows (a wrong one would fault the context).
func inRange(ids []int32, n int) bool {
	for _, i := range ids {
		if i < 0 || int(i) >= n {
			return false
		}
	}
	return true
}

// MoE implements ml.Backend: the router (a block a row), the grouping of the (row, slot) pairs
// by expert and the tile plan (one block), the gate/up product of every expert over its rows as
// one grouped GEMM (the rows gathered from x as the tiles load them), SiLU·up, the down product
// as another grouped GEMM, and the weighted sum of each row's slots. Every launch's size comes
// from the shapes alone (the grid covers the most tiles any routing can make), so a graph can
// capture it.
func (b *Backend) MoE(y, x, add ml.Tensor, m ml.MoE) {
	if !b.same("moe", y, x, add, m.GateUp, m.Down) || x.Rows == 0 {
		return
	}
	if err := ml.CheckMoE(m, x.Cols); err != nil {
		b.fail(fmt.Errorf("cuda %w", err))
		return
	}
	H, E, K, I := x.Cols, m.Experts, m.TopK, m.Inter
	if E > moeMaxExperts || K > moeMaxTopK || y.Rows != x.Rows || y.Cols != H || (add.Valid() && (add.Rows != x.Rows || add.Cols != H)) {
		b.bad("moe: %d of %d experts (at most %d of %d), x %dx%d, y %dx%d, add %dx%d", K, E, moeMaxTopK, moeMaxExperts,
			x.Rows, H, y.Rows, y.Cols, add.Rows, add.Cols)
		return
	}
	pairs := x.Rows * K
	tiles := pairs/moeBM + min(E, pairs) + 1
	// int32 buffers in F32 scratch (the same 4 bytes an element)
	ids := b.ScratchF32("moe.ids", pairs, 1)
	w := b.ScratchF32("moe.w", pairs, 1)
	perm := b.ScratchF32("moe.perm", pairs, 1)
	inv := b.ScratchF32("moe.inv", pairs, 1)
	start := b.ScratchF32("moe.start", E+1, 1)
	plan := b.ScratchF32("moe.tiles", 1+2*tiles, 1)
	gu := b.Scratch("moe.gu", pairs, 2*I)
	act := b.Scratch("moe.act", pairs, I)
	out := b.Scratch("moe.out", pairs, H)
	if b.err != nil {
		return
	}
	groups := m.Groups
	if groups < 2 {
		groups = 1
	}
	b.launchDep(b.k.moeRoute, gpu.Dim3{X: x.Rows}, gpu.Dim3{X: 128}, 0, gpu.P(dp(x)), gpu.I(x.Stride), gpu.P(dp(m.Router)), gpu.I(H),
		gpu.I(E), gpu.I(K), gpu.I(groups), gpu.I(m.TopGroups), gpu.F(m.Scale), gpu.P(dp(ids)), gpu.P(dp(w)))
	b.launchDep(b.k.moePlan, gpu.Dim3{X: 1}, gpu.Dim3{X: 256}, 0, gpu.P(dp(ids)), gpu.I(pairs), gpu.I(E), gpu.P(dp(perm)),
		gpu.P(dp(inv)), gpu.P(dp(start)), gpu.P(dp(plan)))
	b.launchDep(b.k.moeGemm, gpu.Dim3{X: tiles, Y: (2*I + moeBN - 1) / moeBN}, gpu.Dim3{X: 256}, 0, gpu.P(dp(x)), gpu.I(x.Stride),
		gpu.P(dp(perm)), gpu.I(K), gpu.P(dp(m.GateUp)), gpu.I(2*I), gpu.I(H), gpu.P(dp(gu)), gpu.I(gu.Stride), gpu.P(dp(start)), gpu.P(dp(plan)))
	b.SiluMul(act, gu.ColsAt(0, I), gu.ColsAt(I, I))
	b.launchDep(b.k.moeGemm, gpu.Dim3{X: tiles, Y: (H + moeBN - 1) / moeBN}, gpu.Dim3{X: 256}, 0, gpu.P(dp(act)), gpu.I(act.Stride),
		gpu.P(0), gpu.I(K), gpu.P(dp(m.Down)), gpu.I(H), gpu.I(I), gpu.P(dp(out)), gpu.I(out.Stride), gpu.P(dp(start)), gpu.P(dp(plan)))
	var addPtr gpu.DevPtr
	if add.Valid() {
		addPtr = dp(add)
	}
	b.rows(b.k.moeCombine, x.Rows, gpu.P(dp(y)), gpu.I(y.Stride), gpu.P(dp(out)), gpu.I(H), gpu.P(dp(inv)), gpu.P(dp(w)),
		gpu.I(K), gpu.P(addPtr), gpu.I(add.Stride))
}

// Rope implements ml.Backend.
func (b *Backend) Rope(x ml.Tensor, heads, hd int, rot ml.Rotary) {
	if !b.same("rope", x) || x.Rows == 0 {
		return
	}
	if rot.Cos.Stride != rot.Sin.Stride {
		b.bad("rope: cos and sin of other strides")
		return
	}
	if err := ml.CheckRotary(rot, hd); err != nil {
		b.fail(fmt.Errorf("cuda rope: %w", err))
		return
	}
	b.rows(b.k.ropeRows, x.Rows, gpu.P(dp(x)), gpu.I(x.Stride), gpu.I(heads), gpu.I(hd), gpu.I(rot.Rotated(hd)), gpu.P(dp(rot.Cos)),
		gpu.P(dp(rot.Sin)), gpu.I(rot.Cos.Stride), gpu.I(roundOnce(rot)))
}

// ----------------------------------------------------------------------------------------------
// attention

// Attention implements ml.Backend: through cuBLAS for large segments, else the flash kernel.
func (b *Backend) Attention(out, q, k, v ml.Tensor, a ml.Attn) {
	if !b.same("attention", out, q, k, v) || !b.keyFlags(a, k.Rows) || !b.maskForms(a, q.Rows, k.Rows) {
		return
	}
	b.attend(b.attnArgs(out, q, k, v, a))
}

// maskForms checks a's prefix and relative-position bias (ml.Mask.Prefix, ml.Mask.RelPos) for
// rows queries over keys keys.
func (b *Backend) maskForms(a ml.Attn, rows, keys int) bool {
	if a.Prefix < 0 {
		b.bad("attention: prefix %d", a.Prefix)
		return false
	}
	if err := ml.CheckRelPos(a.RelPos, rows, a.Heads, keys); err != nil {
		b.fail(fmt.Errorf("cuda attention: %w", err))
		return false
	}
	return b.same("attention bias", a.RelPos.H, a.RelPos.W)
}

// keyFlags checks a's key flags (ml.Mask.Keys) against n keys: none, or one a key.
func (b *Backend) keyFlags(a ml.Attn, n int) bool {
	if a.Keys.Len > 0 && a.Keys.Len != n {
		b.fail(fmt.Errorf("cuda attention: %d key flags for %d keys: %w", a.Keys.Len, n, ml.ErrInvalidInput))
		return false
	}
	return true
}

// attend runs one segment (the flash kernels read its bounds from the device).
func (b *Backend) attend(a attnArgs) {
	if !b.live() || a.nq == 0 {
		return
	}
	if b.mmaOK(a) {
		if !a.masked() {
			b.attendMMA(a, b.Ints([]int32{0, int32(a.nq), 0, int32(a.nk)}), a.nq, 0, 0)
			return
		}
		if b.mmaMaskOK(a) {
			b.attendMMAMask(a, b.Ints([]int32{0, int32(a.nq), 0, int32(a.nk)}), a.nq, mmaMaskArgs{keys: a.keys, rel: a.rel})
			return
		}
	}
	area := int64(a.nq) * int64(a.nk)
	if b.viaCuBLAS(a) {
		per := a.heads / a.kvh
		if per == 1 {
			per = a.heads
		}
		if a.kvh < a.heads && attnChunk(a.heads, area, b.dt) == a.heads {
			// grouped kv heads: every head in one batch of pointers a product
			s, p := b.attnScores(a.heads, area)
			a.ptrs = b.pointers(a, dp(s), dp(p))
			if b.err == nil {
				b.runAttnGemm(a, s, p, a.heads)
			}
			return
		}
		chunk := attnChunk(per, area, b.dt)
		if s, p := b.attnScores(chunk, area); b.err == nil {
			b.runAttnGemm(a, s, p, chunk)
		}
		return
	}
	f := b.k.flash[a.hd]
	if f == nil {
		b.bad("attention: head dim %d has no flash kernel", a.hd)
		return
	}
	causal := 0
	if a.causal {
		causal = 1
	}
	seg := b.Ints([]int32{0, int32(a.nq), 0, int32(a.nk)})
	b.launchDep(f, gpu.Dim3{X: (a.nq + attBQ - 1) / attBQ, Y: a.heads, Z: 1}, gpu.Dim3{X: 4 * attBQ}, 0,
		gpu.P(a.out), gpu.P(a.q), gpu.P(a.k), gpu.P(a.v), gpu.I(a.ldq), gpu.I(a.ldk), gpu.I(a.ldv), gpu.I(a.ldo),
		gpu.P(gpu.DevPtr(seg.Addr)), gpu.P(gpu.DevPtr(seg.Addr).Add(8)), gpu.I(a.heads), gpu.I(a.kvh), gpu.I(causal), gpu.F(a.scale))
}

// mmaOK reports whether iris_attn_mma serves attention over a's tensors: bf16, a head dim it is
// built for, whole GQA groups, every pointer and row 16-byte aligned (its cp.async loads).
func (b *Backend) mmaOK(a attnArgs) bool {
	if b.opts.NoMMA || b.opts.FlashOnly || b.k.mma[a.hd] == nil || a.kvh <= 0 || a.heads%a.kvh != 0 {
		return false
	}
	for _, t := range [...]struct {
		at gpu.DevPtr
		ld int
	}{{a.out, a.ldo}, {a.q, a.ldq}, {a.k, a.ldk}, {a.v, a.ldv}} {
		if uintptr(t.at)%16 != 0 || (int64(t.ld)*b.dt.size())%16 != 0 {
			return false
		}
	}
	return true
}

// mmaMaskOK reports whether iris_attn_mma_mask serves a's mask forms: mmaOK (bf16, a head dim
// it is built for, aligned rows), the kernel not turned off, and a bias with a grid.
func (b *Backend) mmaMaskOK(a attnArgs) bool {
	if b.opts.NoMMAMask || b.k.mmaMask[a.hd] == nil || !b.mmaOK(a) {
		return false
	}
	return a.rel.h == 0 || (a.rel.height > 0 && a.rel.width > 0)
}

// mmaMaskArgs are what iris_attn_mma_mask reads beyond iris_attn_mma's arguments: key flags
// (a segment's keys at their k rows), a relative-position bias (rows those of the op's
// queries), and per-row key counts (lim[r*lims] for query row r; 0: causal as attnArgs says,
// with its prefix).
type mmaMaskArgs struct {
	keys gpu.DevPtr
	rel  relArgs
	lim  gpu.DevPtr
	lims int
}

// attendMMAMask is attendMMA with iris_attn_mma_mask: a's prefix and causal rule, or m's
// per-row key counts, and m's key flags and bias.
func (b *Backend) attendMMAMask(a attnArgs, segs ml.Ints, longest int, m mmaMaskArgs) {
	if segs.Len == 0 || longest == 0 {
		return
	}
	causal := 0
	if a.causal || m.lim != 0 {
		causal = 1 // with per-row counts it orders the tiles longest first, as causal ones
	}
	b.launchDep(b.k.mmaMask[a.hd], mmaGrid(longest, a.heads, segs.Len/4), gpu.Dim3{X: mmaThreads}, 0,
		gpu.P(a.out), gpu.P(a.q), gpu.P(a.k), gpu.P(a.v), gpu.I(a.ldq), gpu.I(a.ldk), gpu.I(a.ldv), gpu.I(a.ldo),
		gpu.P(gpu.DevPtr(segs.Addr)), gpu.I(a.heads), gpu.I(a.kvh), gpu.I(causal), gpu.F(a.scale),
		gpu.I(a.prefix), gpu.P(m.lim), gpu.I(m.lims), gpu.P(m.keys),
		gpu.P(m.rel.h), gpu.P(m.rel.w), gpu.I(m.rel.ldh), gpu.I(m.rel.ldw), gpu.I(m.rel.height), gpu.I(max(m.rel.width, 1)))
}

// attendMMA runs attention over segments of a's tensors (segs: q0, nq, k0, nk each, on the
// device; the longest has at most longest queries; a.nq and a.nk are not read) in one launch
// of iris_attn_mma, causal as a says; with a rope table cs of n rows (cos, then sin) the kernel
// rotates q and k first.
func (b *Backend) attendMMA(a attnArgs, segs ml.Ints, longest int, cs gpu.DevPtr, n int) {
	if segs.Len == 0 || longest == 0 {
		return
	}
	causal := 0
	if a.causal {
		causal = 1
	}
	b.launchDep(b.k.mma[a.hd], mmaGrid(longest, a.heads, segs.Len/4), gpu.Dim3{X: mmaThreads}, 0,
		gpu.P(a.out), gpu.P(a.q), gpu.P(a.k), gpu.P(a.v), gpu.I(a.ldq), gpu.I(a.ldk), gpu.I(a.ldv), gpu.I(a.ldo),
		gpu.P(gpu.DevPtr(segs.Addr)), gpu.I(a.heads), gpu.I(a.kvh), gpu.I(causal), gpu.F(a.scale), gpu.P(cs), gpu.I(n))
}

// viaCuBLAS reports whether attend runs segment a through cuBLAS (attnGemm, the scores
// materialised) rather than the flash kernel: large segments, or a head dim without one.
func (b *Backend) viaCuBLAS(a attnArgs) bool {
	if a.masked() {
		return true // key flags, a prefix, a bias: the cuBLAS path's softmax is the kernel that reads them
	}
	return (int64(a.nq)*int64(a.nk) >= gemmAttnMin || b.k.flash[a.hd] == nil) && !b.opts.FlashOnly
}

// attnScores is the scratch of n heads' scores (F32) and probabilities of area values each.
func (b *Backend) attnScores(n int, area int64) (s, p ml.Tensor) {
	return b.scratchT("attn.s", n, int(area), ml.F32), b.scratchT("attn.p", n, int(area), b.dt.ml())
}

// runAttnGemm issues attnGemm over a, chunk heads a product, its scores in s and p: one op.
func (b *Backend) runAttnGemm(a attnArgs, s, p ml.Tensor, chunk int) {
	b.flush()
	b.opStart()
	b.fail(attnGemm(b.dt, b.k, b.blas, b.stream, a, dp(s), dp(p), chunk))
	b.opEndAttn(a)
	b.afterKernel = true
}

// attendAll runs segments of attention, those of one shape (queries, keys, causal) that go
// through cuBLAS as one batch of pointers a product (every segment's heads in one launch, not a
// launch each: the prompts of a prefill pass, the frames of a vision pass). segs must have q0 =
// k0 = 0 (their pointers at their first rows).
func (b *Backend) attendAll(segs []attnArgs) {
	type shape struct {
		nq, nk int
		causal bool
	}
	groups := map[shape][]attnArgs{}
	var order []shape
	for _, a := range segs {
		k := shape{a.nq, a.nk, a.causal}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], a)
	}
	for _, k := range order {
		g := groups[k]
		a := g[0]
		area := int64(a.nq) * int64(a.nk)
		if len(g) == 1 || !b.viaCuBLAS(a) || a.heads%a.kvh != 0 {
			for _, a := range g {
				b.attend(a)
			}
			continue
		}
		// as many segments a batch as the scores' budget holds
		per := int(max(1, gemmAttnBudget/(area*int64(a.heads)*(4+b.dt.size()))))
		for i := 0; i < len(g); i += per {
			b.attendGroup(g[i:min(len(g), i+per)])
		}
	}
}

// attendGroup runs segments of one shape as one batch of pointers a product (attnGemm).
func (b *Backend) attendGroup(segs []attnArgs) {
	if len(segs) == 1 {
		b.attend(segs[0])
		return
	}
	if !b.live() {
		return
	}
	a := segs[0]
	n := len(segs) * a.heads
	s, p := b.attnScores(n, int64(a.nq)*int64(a.nk))
	if b.err != nil {
		return
	}
	v := groupPointers(b.dt, segs, dp(s), dp(p))
	a.ptrs = b.input(unsafe.Pointer(&v[0]), int64(len(v))*8)
	a.heads = n // attnGemm's pointer path: one batch of n matrices a product
	if b.err == nil {
		b.runAttnGemm(a, s, p, n)
	}
}

// ptrKey is what an attention's pointer arrays are computed from.
type ptrKey struct {
	a    attnArgs
	s, p gpu.DevPtr
}

// pointers returns a device copy of an attention's pointer arrays (gqaPointers), uploaded the
// first time those pointers are seen (a prefill of a given shape asks for the same ones every
// request) and kept; past maxPtrArrays distinct arrays they go up with the pass's inputs.
func (b *Backend) pointers(a attnArgs, s, p gpu.DevPtr) gpu.DevPtr {
	key := ptrKey{a, s, p}
	if at, ok := b.ptrs[key]; ok {
		return at
	}
	v := gqaPointers(b.dt, a, s, p)
	n := int64(len(v)) * 8
	if len(b.ptrs) >= maxPtrArrays || b.mode != plain {
		return b.input(unsafe.Pointer(&v[0]), n)
	}
	at, err := b.take(n)
	if err != nil {
		b.fail(err)
		return 0
	}
	b.fail(b.stage(at, unsafe.Pointer(&v[0]), n))
	b.ptrs[key] = at
	return at
}

// maxPtrArrays bounds the cached attention pointer arrays (each 48 bytes a head).
const maxPtrArrays = 1 << 14

// tableKey names a table of ints uploaded once a pass: the host slice it comes from (its start
// and length) and which table is made from it.
type tableKey struct {
	at   *int32
	n    int
	kind tableKind
}

// tableKind is what passTable makes of a host slice.
type tableKind uint8

const (
	asIs     tableKind = iota // the slice itself
	runTable                  // iris_attn_mma's segments: SegmentAttention's bounds, or spans' causal runs
	seqTable                  // iris_attn_mma_mask's segments of spans: a sequence each (sequenceSegments)
)

// passTable uploads the table build makes from a host slice once a pass: a pass's segment
// bounds or spans are the same for each of its layers (every block of a vision tower attends
// within the same windows).
func (b *Backend) passTable(from []int32, kind tableKind, build func() []int32) ml.Ints {
	key := tableKey{unsafe.SliceData(from), len(from), kind}
	if in, ok := b.tables[key]; ok {
		return in
	}
	in := b.Ints(build())
	if b.err == nil {
		b.tables[key] = in
	}
	return in
}

// boundsInts uploads segment bounds once a pass.
func (b *Backend) boundsInts(bounds []int32) ml.Ints {
	return b.passTable(bounds, asIs, func() []int32 { return bounds })
}

// SegmentAttention implements ml.Backend: windows within the flash kernel's tile on tensor cores
// (bf16) or in one flash launch; frames one at a time.
func (b *Backend) SegmentAttention(out, q, k, v ml.Tensor, bounds []int32, a ml.Attn) {
	b.segmentAttention(out, q, k, v, ml.Rotary{}, bounds, a)
}

// RopeSegmentAttention implements ml.RopeSegmentAttentioner: bf16 windows on tensor cores rotate
// q and k inside the window kernel (after a's per-head norms, ml.HeadNorms).
func (b *Backend) RopeSegmentAttention(out, q, k, v ml.Tensor, rot ml.Rotary, bounds []int32, a ml.Attn) {
	ml.HeadNorms(b, q, k, a)
	b.segmentAttention(out, q, k, v, rot, bounds, a)
}

func (b *Backend) segmentAttention(out, q, k, v ml.Tensor, rot ml.Rotary, bounds []int32, a ml.Attn) {
	if !b.same("attention", out, q, k, v) || len(bounds) < 2 {
		return
	}
	if b.mode != plain { // host bounds become launch shapes
		b.fail(errNoGraph)
		return
	}
	longest := maxSegment(bounds)
	segs := len(bounds) - 1
	if a.Keys.Len > 0 || a.RelPos.H.Valid() {
		// key flags or a relative-position bias: each segment through cuBLAS, its softmax
		// reading the segment's flags and bias
		if !b.keyFlags(a, k.Rows) {
			return
		}
		if a.RelPos.H.Valid() && (a.RelPos.H.Rows != q.Rows || a.RelPos.W.Rows != q.Rows) {
			b.bad("attention: a relative-position bias of %d and %d rows for %d", a.RelPos.H.Rows, a.RelPos.W.Rows, q.Rows)
			return
		}
		if rot.Cos.Valid() {
			b.Rope(q, a.Heads, a.HeadDim, rot)
			b.Rope(k, a.KVHeads, a.HeadDim, rot)
		}
		all := make([]attnArgs, 0, segs)
		for i := range segs {
			r0, n := int(bounds[i]), int(bounds[i+1]-bounds[i])
			if n <= 0 || r0+n > q.Rows {
				b.bad("attention: segment [%d, %d) of %d rows", r0, r0+n, q.Rows)
				return
			}
			sa := a
			sa.Causal, sa.Keys = false, ml.Ints{}
			if a.RelPos.H.Valid() {
				sa.RelPos = a.RelPos.RowsAt(r0, n)
			}
			if !b.maskForms(sa, n, n) {
				return
			}
			seg := b.attnArgs(out.RowsAt(r0, n), q.RowsAt(r0, n), k.RowsAt(r0, n), v.RowsAt(r0, n), sa)
			if a.Keys.Len > 0 {
				seg.keys = gpu.DevPtr(a.Keys.Addr).Add(int64(r0) * 4)
			}
			all = append(all, seg)
		}
		if base := b.attnArgs(out, q, k, v, a); b.mmaMaskOK(base) {
			// every segment in one launch of the masked tensor-core kernel: the flags at the
			// op's k rows, the bias at its q rows (the segment table's rows index both)
			base.causal, base.prefix = false, 0
			b.attendMMAMask(base, b.segTable(bounds), longest, mmaMaskArgs{keys: base.keys, rel: base.rel})
			return
		}
		for _, seg := range all {
			b.attend(seg)
		}
		return
	}
	win := b.k.window[a.HeadDim]
	ropeInKernel := rot.Cos.Valid() && rot.RoundOnce && !rot.Partial(a.HeadDim) && a.HeadDim%16 == 0 && rot.Cos.Stride == a.HeadDim/2 &&
		rot.Sin.Addr == rot.Cos.Addr+uintptr(int64(rot.Cos.Rows)*int64(rot.Cos.Stride)*4) && rot.Cos.Rows == q.Rows
	if base := b.attnArgs(out, q, k, v, a); b.mmaOK(base) {
		// every segment in one tensor-core launch, queries and keys the same rows; windows of
		// one key tile rotated inside it (5 images' 32 layers, 4 of them frames, 37 us a layer
		// on the H200; iris_attn_window took 60 for windows), longer frames before it (each
		// block would rotate every key tile again: 267 us a full-frame layer against 106 + 2 x
		// 14 for the rope apart)
		cs := gpu.DevPtr(0)
		if ropeInKernel && longest <= mmaBK {
			cs = dp(rot.Cos)
		} else if rot.Cos.Valid() {
			b.Rope(q, a.Heads, a.HeadDim, rot)
			b.Rope(k, a.KVHeads, a.HeadDim, rot)
		}
		base.causal = false
		b.attendMMA(base, b.segTable(bounds), longest, cs, q.Rows)
		return
	}
	aligned := (int64(q.Stride)*b.dt.size())%16 == 0 && (int64(out.Stride)*b.dt.size())%16 == 0 && q.Addr%16 == 0 && out.Addr%16 == 0
	if win != nil && longest <= winMax && segs > 1 && !b.opts.FlashOnly && ropeInKernel && a.KVHeads == a.Heads && aligned {
		bd := b.boundsInts(bounds)
		b.launchDep(win, gpu.Dim3{X: segs, Y: a.Heads}, gpu.Dim3{X: winThreads}, 0,
			gpu.P(dp(out)), gpu.P(dp(q)), gpu.P(dp(k)), gpu.P(dp(v)),
			gpu.I(q.Stride), gpu.I(k.Stride), gpu.I(v.Stride), gpu.I(out.Stride), gpu.P(gpu.DevPtr(bd.Addr)), gpu.F(a.Scale),
			gpu.P(dp(rot.Cos)), gpu.I(q.Rows))
		return
	}
	if rot.Cos.Valid() {
		b.Rope(q, a.Heads, a.HeadDim, rot)
		b.Rope(k, a.KVHeads, a.HeadDim, rot)
	}
	if f := b.k.flash[a.HeadDim]; f != nil && (int64(longest)*int64(longest) < gemmAttnMin || b.opts.FlashOnly) {
		// every segment in one flash launch
		bd := b.boundsInts(bounds)
		b.launchDep(f, gpu.Dim3{X: (longest + attBQ - 1) / attBQ, Y: a.Heads, Z: segs}, gpu.Dim3{X: 4 * attBQ}, 0,
			gpu.P(dp(out)), gpu.P(dp(q)), gpu.P(dp(k)), gpu.P(dp(v)), gpu.I(q.Stride), gpu.I(k.Stride), gpu.I(v.Stride), gpu.I(out.Stride),
			gpu.P(gpu.DevPtr(bd.Addr)), gpu.P(gpu.DevPtr(bd.Addr)), gpu.I(a.Heads), gpu.I(a.KVHeads), gpu.I(0), gpu.F(a.Scale))
		return
	}
	all := make([]attnArgs, segs)
	for i := range segs {
		r0, n := int(bounds[i]), int(bounds[i+1]-bounds[i])
		all[i] = b.attnArgs(out.RowsAt(r0, n), q.RowsAt(r0, n), k.RowsAt(r0, n), v.RowsAt(r0, n), a)
		all[i].causal = false
	}
	b.attendAll(all)
}

// segTable is iris_attn_mma's segment table of SegmentAttention's bounds (queries and keys the
// same rows), uploaded once a pass.
func (b *Backend) segTable(bounds []int32) ml.Ints {
	return b.passTable(bounds, runTable, func() []int32 {
		segs := len(bounds) - 1
		t := make([]int32, 0, 4*segs)
		for i := range segs {
			t = append(t, bounds[i], bounds[i+1]-bounds[i], bounds[i], bounds[i+1]-bounds[i])
		}
		return t
	})
}

// attnArgs is the segment of Attention's arguments.
func (b *Backend) attnArgs(out, q, k, v ml.Tensor, a ml.Attn) attnArgs {
	r := a.RelPos
	prefix := 0
	if a.Causal {
		prefix = a.Prefix
	}
	return attnArgs{out: dp(out), q: dp(q), k: dp(k), v: dp(v), ldo: out.Stride, ldq: q.Stride, ldk: k.Stride, ldv: v.Stride,
		nq: q.Rows, nk: k.Rows, heads: a.Heads, kvh: a.KVHeads, hd: a.HeadDim, causal: a.Causal, scale: a.Scale,
		keys: gpu.DevPtr(a.Keys.Addr), prefix: prefix,
		rel: relArgs{h: dp(r.H), w: dp(r.W), ldh: r.H.Stride, ldw: r.W.Stride, height: r.Height, width: r.Width, size: r.H.DType.Size()}}
}

// maxSegment is the longest of the segments between bounds.
func maxSegment(bounds []int32) int {
	longest := 0
	for i := 1; i < len(bounds); i++ {
		longest = max(longest, int(bounds[i]-bounds[i-1]))
	}
	return longest
}

// CachedAttention implements ml.Backend: the rows of each sequence as one causal segment over
// its keys (decode rows reach the pool kernel through RopeCachedAttention, which has their new
// keys).
func (b *Backend) CachedAttention(out, q, k, v ml.Tensor, spans ml.Ints, a ml.Attn) {
	if a.Keys.Len > 0 || a.Prefix != 0 || a.RelPos.H.Valid() {
		b.fail(fmt.Errorf("cuda attention: key flags, a prefix or a relative-position bias over a KV pool: %w", ml.ErrInvalidInput))
		return
	}
	if b.same("attention", out, q, k, v) {
		b.sequenceAttention(out, q, k, v, spans, a)
	}
}

// RopeCachedAttention implements ml.RopeCachedAttentioner: when every sequence brings one row (a
// decode step), one kernel rotates q and k, writes k and v to the pool and attends; otherwise
// one kernel rotates and writes, then attention runs per sequence. a's per-head norms run inside
// the decode kernel, and before the others (ml.HeadNorms).
func (b *Backend) RopeCachedAttention(out, q, k, v ml.Tensor, rot ml.Rotary, kPool, vPool ml.Tensor, slots, spans ml.Ints, a ml.Attn) {
	if !b.same("attention", out, q, k, v, kPool, vPool, a.QNorm, a.KNorm) || q.Rows == 0 {
		return
	}
	if rot.Cos.Stride != rot.Sin.Stride || !kPool.Contiguous() || !vPool.Contiguous() {
		b.bad("rope: cos and sin of other strides, or a strided pool")
		return
	}
	if a.Keys.Len > 0 || a.Prefix != 0 || a.RelPos.H.Valid() {
		b.fail(fmt.Errorf("cuda attention: key flags, a prefix or a relative-position bias over a KV pool: %w", ml.ErrInvalidInput))
		return
	}
	if rot.Partial(a.HeadDim) {
		// a partial rotary embedding: the pool and prefill kernels rotate whole heads, so the op
		// is composed (ml.RopeCachedAttention's definition), the attention per sequence
		ml.HeadNorms(b, q, k, a)
		b.Rope(q, a.Heads, a.HeadDim, rot)
		b.Rope(k, a.KVHeads, a.HeadDim, rot)
		b.Scatter(kPool, k, slots)
		b.Scatter(vPool, v, slots)
		b.sequenceAttention(out, q, kPool, vPool, spans, a)
		return
	}
	if b.decodeRows(spans) && b.poolKernelOK(a, out, q, k, v, kPool, vPool) {
		b.poolAttention(out, q, k, v, rot, kPool, vPool, slots, spans, a) // the norms inside
		return
	}
	if d := ml.LeadingDecodeRows(spans.Host); d > 0 && b.mode == plain && b.poolKernelOK(a, out, q, k, v, kPool, vPool) {
		// a prefill pass that carries decode steps (engine.Scheduler puts them first): those
		// rows in the pool kernel, the prefill chunks after them per sequence
		all := q.Rows
		b.poolAttention(out.RowsAt(0, d), q.RowsAt(0, d), k.RowsAt(0, d), v.RowsAt(0, d), rot.RowsAt(0, d),
			kPool, vPool, slots.Slice(0, d), spans.Slice(0, 2*d), a)
		n := all - d
		out, q, k, v, rot = out.RowsAt(d, n), q.RowsAt(d, n), k.RowsAt(d, n), v.RowsAt(d, n), rot.RowsAt(d, n)
		slots, spans = slots.Slice(d, all), spans.Slice(2*d, 2*all)
	}
	ml.HeadNorms(b, q, k, a)
	b.rows(b.k.ropeKV, q.Rows, gpu.P(dp(q)), gpu.I(q.Stride), gpu.P(dp(k)), gpu.I(k.Stride), gpu.P(dp(v)), gpu.I(v.Stride),
		gpu.P(dp(rot.Cos)), gpu.P(dp(rot.Sin)), gpu.I(rot.Cos.Stride), gpu.I(roundOnce(rot)), gpu.P(dp(kPool)), gpu.P(dp(vPool)),
		gpu.P(gpu.DevPtr(slots.Addr)), gpu.I(a.Heads), gpu.I(a.KVHeads), gpu.I(a.HeadDim))
	b.sequenceAttention(out, q, kPool, vPool, spans, a)
}

// roundOnce is the rope kernels' flag for rot's rounding.
func roundOnce(rot ml.Rotary) int {
	if rot.RoundOnce {
		return 1
	}
	return 0
}

// decodeRows reports whether each row of spans is its own sequence. A sequence's rows are
// consecutive (ml.CachedAttention), so no two neighbours sharing a start says it.
func (b *Backend) decodeRows(spans ml.Ints) bool {
	sp := spans.Host
	for i := 2; i+1 < len(sp); i += 2 {
		if sp[i] == sp[i-2] {
			return false
		}
	}
	return true
}

// poolKernelOK reports whether iris_attn_pool serves these rows: head dims of whole 16-byte
// loads up to 256, rows 16-byte aligned.
func (b *Backend) poolKernelOK(a ml.Attn, ts ...ml.Tensor) bool {
	for _, t := range ts {
		if t.Valid() && ((int64(t.Stride)*b.dt.size())%16 != 0 || t.Addr%16 != 0) {
			return false
		}
	}
	return a.HeadDim <= 256 && a.HeadDim%8 == 0 && a.Heads%a.KVHeads == 0
}

// graphSplits is the decode attention's most key splits in a recorded graph: cache lengths up
// to graphSplits*decSK keys; a longer one runs plainly.
const graphSplits = 8192 / decSK

// gqaMinBlocks is the fewest rows x KV groups for which decode attention takes a block a KV
// group: fewer leave the GPU idle (a 1-row step of the 3B, 8 blocks: 2.88 ms against 2.39 with
// a block a head; 54 rows: 3.63 against 4.41).
const gqaMinBlocks = 32

// poolAttention is RopeCachedAttention for decode rows: iris_attn_pool (a block a query head),
// iris_attn_pool_gqa (a block a KV group and 64-key split) or, for caches of at most gqaWhole
// keys, iris_attn_pool_gqa_whole (a block a KV group over all of its keys: no merge of splits),
// its key spans and new slots read on the device, so that a recorded graph serves every step.
func (b *Backend) poolAttention(out, q, k, v ml.Tensor, rot ml.Rotary, kPool, vPool ml.Tensor, slots, spans ml.Ints, a ml.Attn) {
	sp := spans.Host
	if len(sp) != 2*q.Rows {
		b.bad("attention: %d span values for %d rows", len(sp), q.Rows)
		return
	}
	longest := ml.LongestSpan(sp)
	splits := (longest + decSK - 1) / decSK
	if b.mode != plain {
		// a graph serves every step of its key, whose caches reach at most ml.KeyBucket keys
		// (the decoder's key carries the bucket): splits for the bucket
		splits = (ml.KeyBucket(longest) + decSK - 1) / decSK
		if splits > graphSplits {
			b.fail(errNoGraph) // this bucket's steps run plainly
			return
		}
	}
	rows := q.Rows
	// sized for a graph's splits in any case, so that a plain run makes what a recording needs
	part := b.scratchT("attn.part", rows*a.Heads*max(splits, graphSplits), a.HeadDim+2, ml.F32)
	ticket := b.scratchT("attn.ticket", rows, a.Heads, ml.F32) // int32s, zero between launches
	if b.err != nil {
		return
	}
	f, x, shared := b.k.attnPool, a.Heads, 0
	// a block a KV group, its heads' keys read once; not yet with per-head q/k norms: the group
	// kernel's norms have not run on a GPU (TestKernelPoolAttention "with q/k norms")
	if g := b.k.poolGQA[a.HeadDim]; g != nil && !b.opts.NoGroupDecode && a.Heads/a.KVHeads <= gqaMax && rows*a.KVHeads >= gqaMinBlocks &&
		!a.QNorm.Valid() && !a.KNorm.Valid() {
		f, x = g, a.KVHeads
		// caches of at most gqaWhole keys (the bucket's, in a graph): a block over all of them
		if w := b.k.poolGQAWhole[a.HeadDim]; w != nil && !b.opts.NoWholeDecode && splits*decSK <= gqaWhole {
			f, splits, shared = w, 1, gqaWholeSmem(a.HeadDim)
		}
	}
	b.launchDep(f, gpu.Dim3{X: x, Y: splits, Z: rows}, gpu.Dim3{X: decThreads}, shared,
		gpu.P(dp(out)), gpu.I(out.Stride), gpu.P(dp(part)), gpu.P(dp(ticket)), gpu.P(dp(q)), gpu.I(q.Stride),
		gpu.P(dp(k)), gpu.I(k.Stride), gpu.P(dp(v)), gpu.I(v.Stride), gpu.P(dp(rot.Cos)), gpu.P(dp(rot.Sin)), gpu.I(rot.Cos.Stride),
		gpu.P(dp(kPool)), gpu.P(dp(vPool)), gpu.P(gpu.DevPtr(slots.Addr)), gpu.P(gpu.DevPtr(spans.Addr)),
		gpu.I(a.Heads), gpu.I(a.KVHeads), gpu.I(a.HeadDim), gpu.F(a.Scale), gpu.P(dp(a.QNorm)), gpu.P(dp(a.KNorm)), gpu.F(a.NormEps))
}

// sequenceAttention is attention over the pool one sequence at a time (ml.SpanRuns), each a
// causal segment through Attention.
func (b *Backend) sequenceAttention(out, q, kPool, vPool ml.Tensor, spans ml.Ints, a ml.Attn) {
	if b.mode != plain {
		// the sequences' key counts become launch shapes here: a graph would keep this step's
		b.fail(errNoGraph)
		return
	}
	runs, err := ml.SpanRuns(spans.Host, q.Rows, kPool.Rows)
	if err != nil {
		b.bad("attention: %v", err)
		return
	}
	if base := b.attnArgs(out, q, kPool, vPool, a); b.mmaMaskOK(base) {
		if seqs := sequenceSegments(spans.Host); len(seqs) < 4*len(runs) {
			// rows that do not continue the causal rule (a bidirectional block: rows with one
			// key count): each sequence one segment of the masked kernel, its rows' key counts
			// read from the spans
			base.causal = true
			longest := 0
			for i := 1; i < len(seqs); i += 4 {
				longest = max(longest, int(seqs[i]))
			}
			b.attendMMAMask(base, b.passTable(spans.Host, seqTable, func() []int32 { return seqs }), longest,
				mmaMaskArgs{lim: gpu.DevPtr(spans.Addr).Add(4), lims: 2})
			return
		}
	}
	if base := b.attnArgs(out, q, kPool, vPool, a); b.mmaOK(base) {
		// every sequence in one tensor-core launch: its chunk's rows over its keys in the pool
		base.causal = true
		longest := 0
		for _, r := range runs {
			longest = max(longest, r.Rows)
		}
		b.attendMMA(base, b.passTable(spans.Host, runTable, func() []int32 {
			t := make([]int32, 0, 4*len(runs))
			for _, r := range runs {
				t = append(t, int32(r.Row), int32(r.Rows), int32(r.Start), int32(r.Past+r.Rows))
			}
			return t
		}), longest, 0, 0)
		return
	}
	segs := make([]attnArgs, len(runs))
	for i, r := range runs {
		keys := r.Past + r.Rows
		segs[i] = b.attnArgs(out.RowsAt(r.Row, r.Rows), q.RowsAt(r.Row, r.Rows), kPool.RowsAt(r.Start, keys), vPool.RowsAt(r.Start, keys), a)
		segs[i].causal = true
	}
	b.attendAll(segs)
}

// sequenceSegments is iris_attn_mma's segment table of CachedAttention's spans (checked by
// ml.SpanRuns) with a segment a sequence: the consecutive rows of one key start, over the most
// keys any of them sees.
func sequenceSegments(spans []int32) []int32 {
	var t []int32
	for i := 0; i < len(spans)/2; {
		start, keys := spans[2*i], spans[2*i+1]
		j := i + 1
		for ; j < len(spans)/2 && spans[2*j] == start; j++ {
			keys = max(keys, spans[2*j+1])
		}
		t = append(t, int32(i), int32(j-i), start, keys)
		i = j
	}
	return t
}

// ----------------------------------------------------------------------------------------------
// graphs

// Graph implements ml.Grapher. A key's first run is plain (its buffers come to exist), the
// second is recorded and launched, later ones replay the recording: the ops are called but
// not issued (fn is told it replays: it issues only its inputs and outputs, whose pinned data
// the graph's copies read).
// When a buffer moved since the recording (or would move), the run is plain and the key is
// recorded again next time.
func (b *Backend) Graph(key string, run func(replay bool)) {
	fn := func() { run(false) }
	if b.opts.NoGraph || b.graphErr != nil || b.err != nil || b.prof != nil || len(b.reads) > 0 || b.stageAt != 0 {
		fn()
		return
	}
	e := b.graphs[key]
	if e == nil || e.never {
		if e == nil {
			b.graphs[key] = &graphEntry{}
		}
		fn()
		return
	}
	if e.g != nil && e.epoch == b.epoch {
		b.mode = replaying
		run(true) // the inputs and outputs only: the graph has the ops
		b.mode = plain
		if b.err == nil && e.epoch == b.epoch {
			b.fail(e.g.Launch(b.stream))
			b.afterKernel = false
			b.replays++
			return
		}
		if !errors.Is(b.err, errMoved) && b.err != nil {
			return
		}
		b.err = nil
		b.reset()
		_ = e.g.Destroy()
		e.g = nil
		fn()
		return
	}
	if e.g != nil {
		_ = e.g.Destroy()
		e.g = nil
	}
	if err := b.stream.BeginCapture(); err != nil {
		b.graphErr = err
		fn()
		return
	}
	b.mode = recording
	b.afterKernel = false
	fn()
	b.mode = plain
	g, err := b.stream.EndCapture() // always ends the capture, also after a failed enqueue
	switch {
	case b.err != nil:
		if g != nil {
			_ = g.Destroy()
		}
		if !errors.Is(b.err, errMoved) && !errors.Is(b.err, errNoGraph) {
			return
		}
		e.never = errors.Is(b.err, errNoGraph)
		b.err = nil
		b.reset()
		fn() // run plainly; record next time (unless the pass can never be a graph)
	case err != nil:
		if e.fails++; e.fails >= maxGraphFails {
			b.graphErr = fmt.Errorf("recording %s: %w", key, err)
		}
		b.reset()
		fn()
	default:
		e.g, e.epoch = g, b.epoch
		b.fail(g.Launch(b.stream))
		b.afterKernel = false
		b.replays++
	}
}

// GraphRuns counts the passes run as a recorded graph (tests check that decode steps are).
func (b *Backend) GraphRuns() int {
	n := 0
	_ = b.Do(func() error { n = b.replays; return nil })
	return n
}

// reset forgets the pinned areas' contents and pending reads of an abandoned run.
func (b *Backend) reset() {
	b.reads = b.reads[:0]
	b.stageAt, b.flushAt, b.backAt = 0, 0, 0
	clear(b.tables)
}

// ----------------------------------------------------------------------------------------------
// profiling

// profiler accumulates GPU time between named marks of a pass.
type profiler struct {
	ops    bool // an event after every op (SetProfileOps), not at the marks
	events []*gpu.Event
	names  []string
	n      int
	totals map[string]float64 // ms
	counts map[string]int
}

// Mark implements ml.Marker (with Options.Profile or SetProfile; graphs are off then).
func (b *Backend) Mark(stage string) {
	p := b.prof
	if p == nil || p.ops || b.mode != plain || b.err != nil {
		return
	}
	if p.n == 0 { // the pass's opening event
		b.record(p, "")
	}
	b.record(p, stage)
	b.afterKernel = false
}

// opsProfiled reports whether every op is timed (SetProfileOps).
func (b *Backend) opsProfiled() bool { return b.prof != nil && b.prof.ops && b.mode == plain }

// opStart opens a pass's op-level profile before its first op.
func (b *Backend) opStart() {
	if b.opsProfiled() && b.prof.n == 0 && b.err == nil {
		b.record(b.prof, "")
	}
}

// opEnd ends the op just issued: its time is from the previous op's end to this event, the gap
// between launches included (what the op costs the pass).
func (b *Backend) opEnd(name string) {
	if b.opsProfiled() && b.err == nil {
		b.record(b.prof, name)
	}
}

// opEndAttn is opEnd for a segment's attention through cuBLAS (two products and a softmax).
func (b *Backend) opEndAttn(a attnArgs) {
	if b.opsProfiled() {
		b.opEnd(fmt.Sprintf("attention %dx%d h%d/%d (cuBLAS)", a.nq, a.nk, a.heads, a.kvh))
	}
}

// record records the pass's next event, for the stage that ends at it.
func (b *Backend) record(p *profiler, stage string) {
	if b.err != nil {
		return
	}
	if p.n == len(p.events) {
		e, err := gpu.NewEvent()
		if err != nil {
			b.fail(err)
			return
		}
		p.events = append(p.events, e)
		p.names = append(p.names, "")
	}
	p.names[p.n] = stage
	b.fail(p.events[p.n].Record(b.stream))
	p.n++
}

// collect adds the durations of the pass's marks (after its final sync).
func (b *Backend) collect() {
	p := b.prof
	if p == nil || p.n == 0 {
		return
	}
	if p.totals == nil {
		p.totals, p.counts = map[string]float64{}, map[string]int{}
	}
	for i := 1; i < p.n; i++ {
		if d, err := p.events[i].Since(p.events[i-1]); err == nil {
			p.totals[p.names[i]] += float64(d.Microseconds()) / 1e3
			p.counts[p.names[i]]++
		}
	}
	p.n = 0
}

func (p *profiler) destroy() {
	for _, e := range p.events {
		_ = e.Destroy()
	}
}

// SetProfile turns the per-stage GPU timing of Options.Profile on or off (graphs are not used
// while it is on: a mark between a graph's kernels cannot be recorded).
func (b *Backend) SetProfile(on bool) {
	_ = b.Do(func() error {
		switch {
		case on && b.prof == nil:
			b.prof = &profiler{}
		case !on && b.prof != nil:
			b.prof.destroy()
			b.prof = nil
		}
		return nil
	})
	for _, l := range b.openLanes() {
		l.SetProfile(on)
	}
}

// SetProfileOps is SetProfile timing every op (a kernel, a product, a segment's attention) in
// place of the stages; dependent launches are off meanwhile, so that each op's time is its own.
func (b *Backend) SetProfileOps(on bool) {
	_ = b.Do(func() error {
		if b.prof != nil {
			b.prof.destroy()
			b.prof = nil
		}
		if on {
			b.prof = &profiler{ops: true}
		}
		return nil
	})
	for _, l := range b.openLanes() {
		l.SetProfileOps(on)
	}
}

// StageTime is the GPU time of one stage over the passes since the last Profile.
type StageTime struct {
	Stage   string
	TotalMS float64
	Calls   int
}

// Profile returns and clears the per-stage GPU times (its lanes' added in), sorted by stage
// name.
func (b *Backend) Profile() []StageTime {
	byStage := map[string]StageTime{}
	for _, x := range append([]*Backend{b}, b.openLanes()...) {
		_ = x.Do(func() error {
			if x.prof == nil {
				return nil
			}
			for k, v := range x.prof.totals {
				st := byStage[k]
				st.Stage, st.TotalMS, st.Calls = k, st.TotalMS+v, st.Calls+x.prof.counts[k]
				byStage[k] = st
			}
			x.prof.totals, x.prof.counts = nil, nil
			return nil
		})
	}
	out := make([]StageTime, 0, len(byStage))
	for _, st := range byStage {
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Stage < out[j].Stage })
	return out
}
