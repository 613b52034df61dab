// Package cpu is Iris's CPU backend: the ops of core/internal/ml in C (iris_cpu.h, one .c file
// per concern) behind cgo, on a thread pool. It knows no model family: a family's forward pass
// (core/internal/models/...) is Go code calling these ops.
//
// Activations are F32; weight matrices are F32 or BF16, used in place from the mapped checkpoint
// (F16 is widened at load); every computation is F32, which reproduces transformers run in float32
// on the same checkpoint. Matrix products use AVX-512 or AVX2/FMA kernels when the CPU has them and
// portable C otherwise.
//
// # Notes
//
//   - A Backend is not safe for concurrent use: the model that owns it serialises its calls.
//   - Ops run at once; a failure sticks until Sync (ml.Backend's contract).
package cpu

/*
#cgo CFLAGS: -O3 -std=gnu11 -Wall -Wextra -Wno-unused-parameter
#cgo LDFLAGS: -lm -lpthread
#include <stdlib.h>
#include <string.h>
#include "iris_cpu.h"

// Addresses cross as integers: the memory is C's or a mapped file's, never Go's heap.
static inline float *F(uintptr_t p) { return (float *)p; }
static inline const void *V(uintptr_t p) { return (const void *)p; }
static inline const int32_t *I(uintptr_t p) { return (const int32_t *)p; }
static inline iris_out out_at(uintptr_t base, int i) { return ((iris_out *)base)[i]; }

// glibc keeps freed memory in each thread's malloc arena; malloc_trim hands the free pages back.
#ifdef __GLIBC__
#include <malloc.h>
static int trim_heap(void) { return malloc_trim(0); }
#else
static int trim_heap(void) { return 0; }
#endif
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/iris-vlm/iris/core/internal/ml"
)

// Interface guards.
var (
	_ ml.Backend = (*Backend)(nil)
	_ ml.Laner   = (*Backend)(nil)
)

// TrimHeap hands the C heap's free pages back to the OS (glibc's malloc_trim; nothing elsewhere).
// The engine's scratch and the pixel primitives free their buffers into per-thread malloc arenas
// that glibc keeps mapped; an idle server calls it to return them. It reports whether any memory
// was released. Safe at any time, from any goroutine.
func TrimHeap() bool { return C.trim_heap() != 0 }

// StatusError is a failure status from the C backend.
type StatusError struct {
	Op   string // the call that failed, e.g. "attention"
	Code int    // the iris_status value
	Msg  string // iris_status_string
}

func (e *StatusError) Error() string { return fmt.Sprintf("cpu %s: %s", e.Op, e.Msg) }

// Unwrap maps an invalid-argument status to ml.ErrInvalidInput.
func (e *StatusError) Unwrap() error {
	if C.iris_status(e.Code) == C.IRIS_ERR_INVALID {
		return ml.ErrInvalidInput
	}
	return nil
}

func status(op string, s C.iris_status) error {
	if s == C.IRIS_OK {
		return nil
	}
	return &StatusError{Op: op, Code: int(s), Msg: C.GoString(C.iris_status_string(s))}
}

// Options tune a backend.
type Options struct {
	// Threads is the size of the thread pool; 0 means one per online CPU.
	Threads int
	// Kernels caps the matmul kernels: "" (the best the CPU has), "avx512", "avx2" or
	// "generic" (portable C). Results agree to rounding; tests pin each one.
	Kernels string
}

// Backend runs ml ops on the host's cores.
type Backend struct {
	opts      Options
	lanes     ml.Lanes // opened by Lane, closed by Close
	c         *C.iris_cpu
	scratch   map[string]*buffer
	owned     []unsafe.Pointer
	inputs    int       // the pass's inputs so far (Input, Ints)
	inputBufs []*buffer // their buffers, reused from pass to pass
	err       error
	// Calls counts the ops run, so tests can prove a refusal ran nothing.
	Calls int64
}

type buffer struct {
	p     unsafe.Pointer
	bytes int64
}

// New starts a backend.
func New(opts Options) (*Backend, error) {
	var cap C.int
	switch opts.Kernels {
	case "":
		cap = C.IRIS_KERNELS_BEST
	case "generic":
		cap = C.IRIS_KERNELS_GENERIC
	case "avx2":
		cap = C.IRIS_KERNELS_AVX2
	case "avx512":
		cap = C.IRIS_KERNELS_AVX512
	default:
		return nil, fmt.Errorf("kernels %q: want avx512, avx2 or generic", opts.Kernels)
	}
	var c *C.iris_cpu
	if err := status("start", C.iris_cpu_new(C.int(opts.Threads), cap, &c)); err != nil {
		return nil, err
	}
	return &Backend{opts: opts, c: c, scratch: map[string]*buffer{}}, nil
}

// Lane implements ml.Laner: a backend with a thread pool and scratch memory of its own over the
// same weights (host memory), closed with b. On the cores the two compete: the CPU gains
// little from lanes; they let the same scheduler paths run here as on a GPU.
func (b *Backend) Lane() (ml.Backend, error) {
	if b.c == nil {
		return nil, ml.ErrClosed
	}
	l, err := New(b.opts)
	if err != nil {
		return nil, fmt.Errorf("opening a lane: %w", err)
	}
	b.lanes.Add(l)
	return l, nil
}

// Name implements ml.Backend: "cpu/<kernels>".
func (b *Backend) Name() string { return "cpu/" + b.Kernels() }

// Kernels names the matmul kernels in use: "avx512", "avx2" or "generic".
func (b *Backend) Kernels() string {
	if b.c == nil {
		return ""
	}
	return C.GoString(C.iris_cpu_kernels(b.c))
}

// DType implements ml.Backend: activations are F32.
func (b *Backend) DType() ml.DType { return ml.F32 }

// MatrixType implements ml.Backend: F32 and BF16 matrices are used as stored.
func (b *Backend) MatrixType(stored ml.DType) ml.DType { return stored }

// Close implements ml.Backend.
func (b *Backend) Close() error {
	b.lanes.CloseAll()
	for _, s := range b.scratch {
		C.free(s.p)
	}
	for _, p := range b.owned {
		C.free(p)
	}
	for _, in := range b.inputBufs {
		C.free(in.p)
	}
	b.inputBufs = nil
	b.scratch, b.owned = map[string]*buffer{}, nil
	if b.c != nil {
		C.iris_cpu_free(b.c)
		b.c = nil
	}
	return nil
}

func (b *Backend) fail(err error) {
	if err != nil && b.err == nil {
		b.err = err
	}
}

// Err implements ml.Backend.
func (b *Backend) Err() error { return b.err }

// Sync implements ml.Backend: ops have already run.
func (b *Backend) Sync() error {
	err := b.err
	b.err, b.inputs = nil, 0
	return err
}

// ok reports whether an op should run, counting it.
func (b *Backend) ok() bool {
	if b.err != nil {
		return false
	}
	if b.c == nil {
		b.err = ml.ErrClosed
		return false
	}
	b.Calls++
	return true
}

func (b *Backend) grow(name string, bytes int64) unsafe.Pointer {
	s := b.scratch[name]
	if s != nil && s.bytes >= bytes {
		return s.p
	}
	if s != nil {
		C.free(s.p)
		delete(b.scratch, name)
	}
	p := C.malloc(C.size_t(max(bytes, 64)))
	if p == nil {
		b.fail(fmt.Errorf("scratch %s of %d bytes: out of memory", name, bytes))
		return nil
	}
	b.scratch[name] = &buffer{p: p, bytes: bytes}
	return p
}

func (b *Backend) tensor(p unsafe.Pointer, rows, cols int, dt ml.DType) ml.Tensor {
	if p == nil {
		return ml.Tensor{}
	}
	return ml.Tensor{Addr: uintptr(p), Rows: rows, Cols: cols, Stride: cols, DType: dt}
}

// Scratch implements ml.Backend.
func (b *Backend) Scratch(name string, rows, cols int) ml.Tensor {
	return b.tensor(b.grow(name, int64(rows)*int64(cols)*4), rows, cols, ml.F32)
}

// ScratchF32 implements ml.Backend.
func (b *Backend) ScratchF32(name string, rows, cols int) ml.Tensor {
	return b.Scratch(name, rows, cols)
}

// Alloc implements ml.Backend.
func (b *Backend) Alloc(rows, cols int, dt ml.DType) (ml.Tensor, error) {
	n := int64(rows) * int64(cols) * dt.Size()
	p := C.calloc(C.size_t(max(n, 1)), 1)
	if p == nil {
		return ml.Tensor{}, fmt.Errorf("allocating %d bytes: out of memory", n)
	}
	b.owned = append(b.owned, p)
	return b.tensor(p, rows, cols, dt), nil
}

// Load implements ml.Backend: F32 and BF16 bytes of the wanted type are used in place (src must
// outlive the backend); anything else is widened to F32 into memory the backend owns.
func (b *Backend) Load(src []byte, from string, rows, cols int, dt ml.DType) (ml.Tensor, error) {
	n := rows * cols
	if (from == "F32" && dt == ml.F32) || (from == "BF16" && dt == ml.BF16) {
		if int64(len(src)) != int64(n)*dt.Size() {
			return ml.Tensor{}, fmt.Errorf("%d bytes for %dx%d %s", len(src), rows, cols, dt)
		}
		return ml.Tensor{Addr: uintptr(unsafe.Pointer(&src[0])), Rows: rows, Cols: cols, Stride: cols, DType: dt}, nil
	}
	if dt != ml.F32 {
		return ml.Tensor{}, fmt.Errorf("%s to %s: the CPU backend widens to f32 only", from, dt)
	}
	t, err := b.Alloc(rows, cols, ml.F32)
	if err != nil {
		return t, err
	}
	if err := ml.Widen(hostRow(t.Addr, n), src, from); err != nil {
		return ml.Tensor{}, err
	}
	return t, nil
}

// hostRow is n F32 values of C memory at addr, as a Go slice.
func hostRow(addr uintptr, n int) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(C.F(C.uintptr_t(addr)))), n)
}

func ptr(t ml.Tensor) *C.float { return C.F(C.uintptr_t(t.Addr)) }

// ptrOrNil is t's address, or NULL for the zero Tensor.
func ptrOrNil(t ml.Tensor) *C.float {
	if !t.Valid() {
		return nil
	}
	return ptr(t)
}

func (b *Backend) f32(op string, ts ...ml.Tensor) bool {
	for _, t := range ts {
		if t.Valid() && t.DType != ml.F32 {
			b.fail(fmt.Errorf("cpu %s: %s operand, want f32: %w", op, t.DType, ml.ErrInvalidInput))
			return false
		}
	}
	return true
}

// Write implements ml.Backend.
func (b *Backend) Write(dst ml.Tensor, src []float32) {
	if b.err != nil || !b.f32("write", dst) {
		return
	}
	if len(src) != dst.Rows*dst.Cols {
		b.fail(fmt.Errorf("cpu write: %d values into %dx%d: %w", len(src), dst.Rows, dst.Cols, ml.ErrInvalidInput))
		return
	}
	for r := range dst.Rows {
		copy(hostRow(dst.Addr+uintptr(r*dst.Stride*4), dst.Cols), src[r*dst.Cols:(r+1)*dst.Cols])
	}
}

// input is the pass's next input buffer of n bytes (buffers are reused from pass to pass).
func (b *Backend) input(n int64) unsafe.Pointer {
	if b.inputs == len(b.inputBufs) {
		b.inputBufs = append(b.inputBufs, &buffer{})
	}
	in := b.inputBufs[b.inputs]
	b.inputs++
	if in.bytes < n {
		C.free(in.p)
		in.p, in.bytes = C.malloc(C.size_t(max(n, 64))), n
		if in.p == nil {
			in.bytes = 0
			b.fail(fmt.Errorf("input of %d bytes: out of memory", n))
			return nil
		}
	}
	return in.p
}

// Input implements ml.Backend.
func (b *Backend) Input(v []float32, rows, cols int) ml.Tensor {
	if len(v) != rows*cols {
		b.fail(fmt.Errorf("cpu input: %d values for %dx%d: %w", len(v), rows, cols, ml.ErrInvalidInput))
		return ml.Tensor{}
	}
	p := b.input(int64(len(v)) * 4)
	if p == nil {
		return ml.Tensor{}
	}
	copy(unsafe.Slice((*float32)(p), len(v)), v)
	return b.tensor(p, rows, cols, ml.F32)
}

// Ints implements ml.Backend.
func (b *Backend) Ints(v []int32) ml.Ints {
	p := b.input(int64(len(v)) * 4)
	if p == nil {
		return ml.Ints{}
	}
	copy(unsafe.Slice((*int32)(p), len(v)), v)
	return ml.Ints{Addr: uintptr(p), Len: len(v), Host: v}
}

// Read implements ml.Backend: the ops have run, so dst is filled at once.
func (b *Backend) Read(dst []float32, src ml.Tensor) {
	if b.err != nil || !b.f32("read", src) {
		return
	}
	if len(dst) != src.Rows*src.Cols {
		b.fail(fmt.Errorf("cpu read: %dx%d into %d values: %w", src.Rows, src.Cols, len(dst), ml.ErrInvalidInput))
		return
	}
	for r := range src.Rows {
		copy(dst[r*src.Cols:(r+1)*src.Cols], hostRow(src.Addr+uintptr(r*src.Stride*4), src.Cols))
	}
}

// Argmax implements ml.Backend: dst is filled at once.
func (b *Backend) Argmax(dst []int32, x ml.Tensor) {
	if b.err != nil || !b.f32("argmax", x) {
		return
	}
	if len(dst) != x.Rows {
		b.fail(fmt.Errorf("cpu argmax: %d rows into %d values: %w", x.Rows, len(dst), ml.ErrInvalidInput))
		return
	}
	for r := range x.Rows {
		dst[r] = ml.Argmax(hostRow(x.Addr+uintptr(r*x.Stride*4), x.Cols))
	}
}

func dt(t ml.Tensor) C.int {
	if t.DType == ml.BF16 {
		return C.IRIS_BF16
	}
	return C.IRIS_F32
}

// Embed implements ml.Backend.
func (b *Backend) Embed(dst, table ml.Tensor, ids ml.Ints) {
	if !b.f32("embed", dst) || !b.ok() {
		return
	}
	C.iris_embed(ptr(dst), C.int(dst.Stride), dt(table), C.V(C.uintptr_t(table.Addr)), C.int(table.Stride), C.int(dst.Cols),
		C.I(C.uintptr_t(ids.Addr)), C.int(ids.Len))
}

// Linears implements ml.Backend.
func (b *Backend) Linears(x ml.Tensor, outs ...ml.Out) {
	if len(outs) == 0 || len(outs) > 16 || !b.f32("linear", x) || !b.ok() {
		if len(outs) > 16 {
			b.fail(fmt.Errorf("cpu linear: %d outputs, at most 16: %w", len(outs), ml.ErrInvalidInput))
		}
		return
	}
	// The descriptors live in C memory: cgo forbids passing Go memory that holds pointers.
	cs := (*[16]C.iris_out)(b.grow("linears", 16*int64(unsafe.Sizeof(C.iris_out{}))))
	if cs == nil {
		return
	}
	for i, o := range outs {
		if !b.f32("linear", o.Y, o.B) {
			return
		}
		if o.W.Cols != x.Cols || o.Y.Cols != o.W.Rows || o.Y.Rows != x.Rows || !o.W.Contiguous() {
			b.fail(fmt.Errorf("cpu linear: x %dx%d, w %dx%d, y %dx%d: %w", x.Rows, x.Cols, o.W.Rows, o.W.Cols, o.Y.Rows, o.Y.Cols, ml.ErrInvalidInput))
			return
		}
		cs[i] = C.iris_out{dt: dt(o.W), w: C.V(C.uintptr_t(o.W.Addr)), rows: C.int(o.W.Rows), cols: C.int(o.W.Cols),
			b: ptrOrNil(o.B), y: ptr(o.Y), ldy: C.int(o.Y.Stride)}
	}
	C.iris_linears(b.c, ptr(x), C.int(x.Stride), C.int(x.Rows), &cs[0], C.int(len(outs)))
}

func stride(t ml.Tensor) C.int { return C.int(t.Stride) }

// RMSNorm implements ml.Backend.
func (b *Backend) RMSNorm(y, xOut, x, delta, w ml.Tensor, eps float32) {
	if !b.f32("rmsnorm", y, xOut, x, delta, w) || !b.ok() {
		return
	}
	C.iris_rmsnorm(b.c, ptr(y), stride(y), ptr(xOut), stride(xOut), ptr(x), stride(x), ptrOrNil(delta), stride(delta), ptr(w),
		C.int(x.Rows), C.int(x.Cols), C.float(eps))
}

// SiluMul implements ml.Backend.
func (b *Backend) SiluMul(y, gate, up ml.Tensor) {
	if !b.f32("silu", y, gate, up) || !b.ok() {
		return
	}
	C.iris_silu_mul(b.c, ptr(y), stride(y), ptr(gate), stride(gate), ptr(up), stride(up), C.int(y.Rows), C.int(y.Cols))
}

// LayerNorm implements ml.Backend.
func (b *Backend) LayerNorm(y, xOut, x, delta, w, bias ml.Tensor, eps float32) {
	if !b.f32("layernorm", y, xOut, x, delta, w, bias) || !b.ok() {
		return
	}
	C.iris_layernorm(b.c, ptr(y), stride(y), ptr(xOut), stride(xOut), ptr(x), stride(x), ptrOrNil(delta), stride(delta), ptr(w),
		ptrOrNil(bias), C.int(x.Rows), C.int(x.Cols), C.float(eps))
}

// HeadNorm implements ml.Backend.
func (b *Backend) HeadNorm(x ml.Tensor, heads, hd int, w ml.Tensor, eps float32) {
	if !b.f32("headnorm", x, w) || !b.ok() {
		return
	}
	if heads*hd > x.Cols || w.Rows*w.Cols != hd {
		b.fail(fmt.Errorf("cpu headnorm: %d heads of %d in %d columns, weight of %d: %w", heads, hd, x.Cols, w.Rows*w.Cols, ml.ErrInvalidInput))
		return
	}
	C.iris_head_rmsnorm(b.c, ptr(x), stride(x), C.int(x.Rows), C.int(heads), C.int(hd), ptr(w), C.float(eps))
}

// GELU implements ml.Backend.
func (b *Backend) GELU(x ml.Tensor, approx ml.GELUApprox) {
	if !b.f32("gelu", x) || !b.ok() {
		return
	}
	tanh := C.int(0)
	if approx == ml.GELUTanh {
		tanh = 1
	}
	C.iris_gelu(b.c, ptr(x), stride(x), C.int(x.Rows), C.int(x.Cols), tanh)
}

// ScaleCols implements ml.Backend.
func (b *Backend) ScaleCols(x, w ml.Tensor) {
	if !b.f32("scale-cols", x, w) || !b.ok() {
		return
	}
	if w.Rows*w.Cols != x.Cols || (w.Rows > 1 && w.Stride != w.Cols) {
		b.fail(fmt.Errorf("cpu scale-cols: a weight of %dx%d for %d columns: %w", w.Rows, w.Cols, x.Cols, ml.ErrInvalidInput))
		return
	}
	C.iris_scale_cols(b.c, ptr(x), stride(x), C.int(x.Rows), C.int(x.Cols), ptr(w))
}

// Gather implements ml.Backend.
func (b *Backend) Gather(dst, src ml.Tensor, idx ml.Ints) {
	if !b.f32("gather", dst, src) || !b.ok() {
		return
	}
	C.iris_gather(ptr(dst), stride(dst), ptr(src), stride(src), C.int(dst.Cols), C.I(C.uintptr_t(idx.Addr)), C.int(idx.Len))
}

// Scatter implements ml.Backend.
func (b *Backend) Scatter(dst, src ml.Tensor, idx ml.Ints) {
	if !b.f32("scatter", dst, src) || !b.ok() {
		return
	}
	C.iris_scatter(ptr(dst), stride(dst), ptr(src), stride(src), C.int(src.Cols), C.I(C.uintptr_t(idx.Addr)), C.int(idx.Len))
}

// ScatterAdd implements ml.Backend.
func (b *Backend) ScatterAdd(dst, src ml.Tensor, idx ml.Ints) {
	if !b.f32("scatter-add", dst, src) || !b.ok() {
		return
	}
	C.iris_scatter_add(ptr(dst), stride(dst), ptr(src), stride(src), C.int(src.Cols), C.I(C.uintptr_t(idx.Addr)), C.int(idx.Len))
}

// AddEmbedBag implements ml.Backend.
func (b *Backend) AddEmbedBag(dst, table ml.Tensor, ids ml.Ints, weights ml.Tensor) {
	if !b.f32("embed-bag", dst, weights) || !b.ok() {
		return
	}
	if ids.Len != dst.Rows*weights.Cols || weights.Rows != dst.Rows || table.Cols != dst.Cols {
		b.fail(fmt.Errorf("cpu embed-bag: %d ids, weights %dx%d, table %dx%d, dst %dx%d: %w", ids.Len, weights.Rows, weights.Cols,
			table.Rows, table.Cols, dst.Rows, dst.Cols, ml.ErrInvalidInput))
		return
	}
	C.iris_embed_bag_add(ptr(dst), stride(dst), dt(table), C.V(C.uintptr_t(table.Addr)), C.int(table.Stride), C.int(dst.Cols),
		C.I(C.uintptr_t(ids.Addr)), ptr(weights), stride(weights), C.int(weights.Cols), C.int(dst.Rows))
}

// Rope implements ml.Backend (in F32 the two roundings agree).
func (b *Backend) Rope(x ml.Tensor, heads, hd int, rot ml.Rotary) {
	if !b.f32("rope", x, rot.Cos, rot.Sin) || !b.ok() {
		return
	}
	if err := ml.CheckRotary(rot, hd); err != nil {
		b.fail(fmt.Errorf("cpu rope: %w", err))
		return
	}
	C.iris_rope(b.c, ptr(x), stride(x), C.int(x.Rows), C.int(heads), C.int(hd), C.int(rot.Rotated(hd)), ptr(rot.Cos), ptr(rot.Sin),
		stride(rot.Cos))
}

// MoE implements ml.Backend: the reference (moe.c), each expert's rows gathered and run as one
// product of its slice of the stacked weights.
func (b *Backend) MoE(y, x, add ml.Tensor, m ml.MoE) {
	if !b.f32("moe", y, x, add) || !b.ok() {
		return
	}
	if err := ml.CheckMoE(m, x.Cols); err != nil {
		b.fail(fmt.Errorf("cpu %w", err))
		return
	}
	if y.Rows != x.Rows || y.Cols != x.Cols || (add.Valid() && (add.Rows != x.Rows || add.Cols != x.Cols)) {
		b.fail(fmt.Errorf("cpu moe: x %dx%d, y %dx%d, add %dx%d: %w", x.Rows, x.Cols, y.Rows, y.Cols, add.Rows, add.Cols, ml.ErrInvalidInput))
		return
	}
	cm := (*C.iris_moe)(b.grow("moe", int64(unsafe.Sizeof(C.iris_moe{}))))
	if cm == nil {
		return
	}
	*cm = C.iris_moe{router: ptr(m.Router), dt: dt(m.GateUp), gate_up: C.V(C.uintptr_t(m.GateUp.Addr)), down: C.V(C.uintptr_t(m.Down.Addr)),
		experts: C.int(m.Experts), topk: C.int(m.TopK), inter: C.int(m.Inter), groups: C.int(m.Groups), topgroups: C.int(m.TopGroups),
		scale: C.float(m.Scale)}
	b.fail(status("moe", C.iris_moe_forward(b.c, ptr(y), stride(y), ptr(x), stride(x), ptrOrNil(add), stride(add), C.int(x.Rows), C.int(x.Cols), cm)))
}

// Attention implements ml.Backend.
func (b *Backend) Attention(out, q, k, v ml.Tensor, a ml.Attn) {
	if !b.f32("attention", out, q, k, v) || !b.ok() {
		return
	}
	causal := C.int(0)
	if a.Causal {
		causal = 1
	}
	var keys *C.int32_t
	if a.Keys.Len > 0 {
		if a.Keys.Len != k.Rows {
			b.fail(fmt.Errorf("cpu attention: %d key flags for %d keys: %w", a.Keys.Len, k.Rows, ml.ErrInvalidInput))
			return
		}
		keys = C.I(C.uintptr_t(a.Keys.Addr))
	}
	var rel *C.iris_rel_pos
	if a.RelPos.H.Valid() {
		if !b.f32("attention", a.RelPos.H, a.RelPos.W) {
			return
		}
		if err := ml.CheckRelPos(a.RelPos, q.Rows, a.Heads, k.Rows); err != nil {
			b.fail(fmt.Errorf("cpu attention: %w", err))
			return
		}
		rel = (*C.iris_rel_pos)(b.grow("relpos", int64(unsafe.Sizeof(C.iris_rel_pos{}))))
		if rel == nil {
			return
		}
		p := a.RelPos
		*rel = C.iris_rel_pos{h_bias: ptr(p.H), w_bias: ptr(p.W), ld_h: stride(p.H), ld_w: stride(p.W), height: C.int(p.Height), width: C.int(p.Width)}
	}
	if a.Prefix < 0 {
		b.fail(fmt.Errorf("cpu attention: prefix %d: %w", a.Prefix, ml.ErrInvalidInput))
		return
	}
	b.fail(status("attention", C.iris_attention(b.c, ptr(out), stride(out), ptr(q), stride(q), ptr(k), stride(k), ptr(v), stride(v),
		C.int(q.Rows), C.int(k.Rows), C.int(a.Heads), C.int(a.KVHeads), C.int(a.HeadDim), causal, C.int(a.Past), C.int(a.Prefix),
		C.float(a.Scale), keys, rel)))
}

// CachedAttention implements ml.Backend: each run of rows that continue one sequence is one
// causal attention over that sequence's keys.
func (b *Backend) CachedAttention(out, q, k, v ml.Tensor, spans ml.Ints, a ml.Attn) {
	if a.Keys.Len > 0 || a.RelPos.H.Valid() || a.Prefix != 0 {
		b.fail(fmt.Errorf("cpu attention: key flags, a prefix or a relative-position bias over a KV pool: %w", ml.ErrInvalidInput))
		return
	}
	runs, err := ml.SpanRuns(spans.Host, q.Rows, k.Rows)
	if err != nil {
		b.fail(fmt.Errorf("cpu attention: %w: %w", err, ml.ErrInvalidInput))
		return
	}
	a.Causal = true
	for _, r := range runs {
		a.Past = r.Past
		keys := r.Past + r.Rows
		b.Attention(out.RowsAt(r.Row, r.Rows), q.RowsAt(r.Row, r.Rows), k.RowsAt(r.Start, keys), v.RowsAt(r.Start, keys), a)
	}
}

// SegmentAttention implements ml.Backend.
func (b *Backend) SegmentAttention(out, q, k, v ml.Tensor, bounds []int32, a ml.Attn) {
	a.Causal = false
	for i := 0; i+1 < len(bounds) && b.err == nil; i++ {
		r0, n := int(bounds[i]), int(bounds[i+1]-bounds[i])
		if n <= 0 || r0+n > q.Rows {
			b.fail(fmt.Errorf("cpu attention: segment [%d, %d) of %d rows: %w", r0, r0+n, q.Rows, ml.ErrInvalidInput))
			return
		}
		seg := a
		if a.RelPos.H.Valid() {
			if a.RelPos.H.Rows != q.Rows || a.RelPos.W.Rows != q.Rows {
				b.fail(fmt.Errorf("cpu attention: a relative-position bias of %d and %d rows for %d: %w", a.RelPos.H.Rows, a.RelPos.W.Rows, q.Rows, ml.ErrInvalidInput))
				return
			}
			seg.RelPos = a.RelPos.RowsAt(r0, n)
		}
		if a.Keys.Len > 0 {
			if a.Keys.Len != k.Rows {
				b.fail(fmt.Errorf("cpu attention: %d key flags for %d keys: %w", a.Keys.Len, k.Rows, ml.ErrInvalidInput))
				return
			}
			seg.Keys = a.Keys.Slice(r0, r0+n)
		}
		b.Attention(out.RowsAt(r0, n), q.RowsAt(r0, n), k.RowsAt(r0, n), v.RowsAt(r0, n), seg)
	}
}
