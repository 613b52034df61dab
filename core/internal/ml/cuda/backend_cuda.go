//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/ml/cuda/gpu"
	"github.com/iris-vlm/iris/core/internal/par"
)

// Interface guards: the op set and every fused form.
var (
	_ ml.Backend                = (*Backend)(nil)
	_ ml.Runner                 = (*Backend)(nil)
	_ ml.Laner                  = (*Backend)(nil)
	_ ml.Marker                 = (*Backend)(nil)
	_ ml.Grapher                = (*Backend)(nil)
	_ ml.NormLinearer           = (*Backend)(nil)
	_ ml.NormSwiGLUer           = (*Backend)(nil)
	_ ml.RopeCachedAttentioner  = (*Backend)(nil)
	_ ml.RopeSegmentAttentioner = (*Backend)(nil)
)

// Backend runs ml ops on one GPU: one stream, kernels of core/internal/ml/cuda/kernels, products through
// cuBLAS(Lt). Every method but Do, Info, Precision, SetProfile, Profile, Lane and Close must be
// called on the device thread (inside Do), as the model that owns the backend does.
type Backend struct {
	opts Options
	dt   dtype
	dev  *gpu.Device
	// parent is the backend a lane was opened from (nil for one of NewBackend): the kernels are
	// its; lanes are the lanes opened from this one, closed before it.
	parent *Backend
	lanes  ml.Lanes

	// Everything below is used only on the device thread.
	k *kernelSet
	// Options.QuackSwiGLU's and QuackLinear's products, without and with biases, shared with
	// the lanes
	swiglu, swigluBias, linQ, linQBias *gpu.QuackGemm
	blas                               *blas
	stream                             *gpu.Stream
	chunks                             []gpu.Buffer // weights and Alloc'd buffers
	arena                              arena        // where Load and Alloc place tensors
	scratch                            map[string]*gpu.Buffer
	// epoch counts scratch buffers that moved (grown): a recorded graph bakes addresses in.
	epoch   int
	staging *gpu.HostBuffer // pinned uploads (Write, Input, Ints, Load)
	stageAt int64
	// dstage mirrors staging on the device: Input and Ints data land at the same offsets, the
	// pass's pending range [flushAt, stageAt) going up in one copy before the next enqueue.
	dstage  gpu.Buffer
	flushAt int64
	// inputsLive: an Input or Ints of this pass lives in dstage (kernels still to come read it),
	// so the area cannot be rewound before the next Sync; a pass that outgrows it moves to a new
	// one, the old kept in retired until then.
	inputsLive bool
	retired    []func()
	// ptrs caches the attention pointer arrays by what they point to (uploaded once).
	ptrs     map[ptrKey]gpu.DevPtr
	tables   map[tableKey]ml.Ints // int tables uploaded this pass (passTable)
	f32Names map[string]string
	back     *gpu.HostBuffer // pinned downloads (Read, Argmax)
	backAt   int64
	reads    []pendingRead
	err      error
	// afterKernel: the last thing enqueued is a kernel (a dependent launch may follow it).
	afterKernel bool

	replays   int // passes run as a graph
	graphs    map[string]*graphEntry
	joined    map[joinKey]ml.Tensor  // biases of merged products, side by side (mergeOuts)
	joinedF32 map[joinKey]gpu.DevPtr // biases in f32 for quack's products (f32Biases)
	mode      graphMode
	graphErr  error // why graphs are off, if they are
	prof      *profiler
}

type graphMode int

const (
	plain     graphMode = iota
	recording           // ops are captured
	replaying           // ops are skipped: a recorded graph will run them
)

type graphEntry struct {
	g     *gpu.Graph
	epoch int
	never bool // the pass takes launch shapes from host data (errNoGraph): always plain
	fails int  // recordings the driver refused (graphs go off at maxGraphFails)
}

// maxGraphFails is how many refused recordings of one key turn graphs off: a lane's work on
// another thread may spoil one (a call that synchronises the device while this stream records),
// and the next step records again.
const maxGraphFails = 3

// pendingRead is a download into pinned memory to copy to its destination at Sync.
type pendingRead struct {
	at    int64 // offset in b.back
	f32   []float32
	i32   []int32
	bf16  bool // f32's values are bf16 in pinned memory
	count int
}

// arena hands out 256-byte aligned device memory from large chunks.
type arena struct {
	cur  gpu.Buffer
	used int64
}

// NewBackend opens the device and loads the kernels.
func NewBackend(opts Options) (*Backend, error) {
	b := empty(opts)
	switch opts.Precision {
	case "", "bf16":
		b.dt = bf16
	case "fp32":
		b.dt = f32
	default:
		return nil, fmt.Errorf("precision %q: want bf16 or fp32", opts.Precision)
	}
	var err error
	if b.dev, err = gpu.Open(opts.Device); err != nil {
		return nil, err
	}
	if err := b.dev.Do(b.init); err != nil {
		_ = b.dev.Do(b.release)
		b.dev.Close()
		return nil, err
	}
	return b, nil
}

// empty is a backend of opts with its caches made and nothing on the device yet.
func empty(opts Options) *Backend {
	return &Backend{opts: opts, scratch: map[string]*gpu.Buffer{}, graphs: map[string]*graphEntry{}, joined: map[joinKey]ml.Tensor{}, joinedF32: map[joinKey]gpu.DevPtr{},
		ptrs: map[ptrKey]gpu.DevPtr{}, tables: map[tableKey]ml.Ints{}, f32Names: map[string]string{}}
}

// init makes the stream (of the greatest priority: a lane's passes fill the gaps its own
// leave) and loads the kernels.
func (b *Backend) init() error {
	var err error
	newStream := gpu.NewPriorityStream
	if b.opts.EqualPriority {
		newStream = gpu.NewStream
	}
	if b.stream, err = newStream(); err != nil {
		return err
	}
	if b.k, err = loadKernels(b.dt); err != nil {
		return err
	}
	if b.opts.QuackSwiGLU || b.opts.QuackLinear {
		if b.dt != bf16 {
			return fmt.Errorf("quack's products (QuackSwiGLU, QuackLinear) are bf16 only")
		}
		if err := b.loadQuack(); err != nil {
			return err
		}
	}
	return b.initPass(b.opts.Profile, false)
}

// initPass makes what a backend's passes need besides the stream and the kernels: cuBLAS
// handles on the stream, the pinned staging areas, and the profiler when profiling is on.
func (b *Backend) initPass(profile, ops bool) error {
	var err error
	if b.blas, err = newBlas(b.stream); err != nil {
		return err
	}
	if b.staging, err = gpu.AllocHost(64 << 20); err != nil {
		return err
	}
	if b.dstage, err = gpu.Alloc(64 << 20); err != nil {
		return err
	}
	if b.back, err = gpu.AllocHost(4 << 20); err != nil {
		return err
	}
	if profile {
		b.prof = &profiler{ops: ops}
	}
	return nil
}

// Lane implements ml.Laner: a backend over the same device, kernels and weights, with a thread,
// a stream (of lower priority than this backend's), cuBLAS handles and scratch and staging
// memory of its own, whose passes run on the GPU beside this backend's. Tensors it Allocs are
// its own; this backend's Close closes its lanes first. Profiling follows this backend's.
func (b *Backend) Lane() (ml.Backend, error) {
	if b.parent != nil {
		return b.parent.Lane()
	}
	if b.dev == nil {
		return nil, ml.ErrClosed
	}
	profile, ops := false, false
	if err := b.Do(func() error {
		if b.prof != nil {
			profile, ops = true, b.prof.ops
		}
		return nil
	}); err != nil {
		return nil, err
	}
	dev, err := b.dev.Lane()
	if err != nil {
		return nil, err
	}
	l := empty(b.opts)
	l.dt, l.dev, l.k, l.parent = b.dt, dev, b.k, b
	l.swiglu, l.swigluBias, l.linQ, l.linQBias = b.swiglu, b.swigluBias, b.linQ, b.linQBias
	if err := dev.Do(func() error {
		var err error
		if l.stream, err = gpu.NewStream(); err != nil {
			return err
		}
		return l.initPass(profile, ops)
	}); err != nil {
		_ = dev.Do(l.release)
		dev.Close()
		return nil, fmt.Errorf("opening a lane: %w", err)
	}
	b.lanes.Add(l)
	return l, nil
}

// openLanes are the lanes opened from b and not yet closed.
func (b *Backend) openLanes() []*Backend {
	var out []*Backend
	for _, l := range b.lanes.List() {
		out = append(out, l.(*Backend))
	}
	return out
}

// release frees everything (on the device thread).
func (b *Backend) release() error {
	if b.stream != nil {
		_ = b.stream.Sync()
	}
	for _, g := range b.graphs {
		_ = g.g.Destroy()
	}
	b.graphs = nil
	for _, s := range b.scratch {
		_ = s.Free()
	}
	b.scratch = nil
	for i := range b.chunks {
		_ = b.chunks[i].Free()
	}
	b.chunks = nil
	_ = b.staging.Free()
	_ = b.dstage.Free()
	for _, free := range b.retired {
		free()
	}
	b.retired = nil
	_ = b.back.Free()
	if b.prof != nil {
		b.prof.destroy()
	}
	if b.blas != nil {
		b.blas.destroy()
	}
	if b.k != nil && b.parent == nil { // a lane's kernels are its parent's
		_ = b.k.mod.Unload()
	}
	if b.stream != nil {
		_ = b.stream.Destroy()
	}
	return nil
}

// Close implements ml.Backend.
func (b *Backend) Close() error {
	if b.dev == nil {
		return nil
	}
	b.lanes.CloseAll()
	if p := b.parent; p != nil {
		p.lanes.Remove(b)
	}
	err := b.dev.Do(b.release)
	if cerr := b.dev.Close(); err == nil {
		err = cerr
	}
	b.dev = nil
	return err
}

// Do implements ml.Runner: fn runs on the device thread. Whatever fn leaves behind (a failure it
// did not Sync, a recording it did not finish, a panic) is cleared for the next pass.
func (b *Backend) Do(fn func() error) error {
	if b.dev == nil {
		return ml.ErrClosed
	}
	return b.dev.Do(func() error {
		defer b.endPass()
		return fn()
	})
}

// endPass leaves the backend ready for the next pass.
func (b *Backend) endPass() {
	if b.mode == recording {
		if g, _ := b.stream.EndCapture(); g != nil {
			_ = g.Destroy()
		}
	}
	b.mode = plain
	if b.err != nil || len(b.reads) > 0 {
		_ = b.stream.Sync()
	}
	b.err = nil
	b.reset()
}

// Info describes the device.
func (b *Backend) Info() gpu.Info { return b.dev.Info() }

// Name implements ml.Backend.
func (b *Backend) Name() string { return "cuda/" + b.dev.Info().Name }

// Precision is "bf16" or "fp32".
func (b *Backend) Precision() string {
	if b.dt == bf16 {
		return "bf16"
	}
	return "fp32"
}

// DType implements ml.Backend.
func (b *Backend) DType() ml.DType { return b.dt.ml() }

// MatrixType implements ml.Backend: matrices are kept in the precision's type.
func (b *Backend) MatrixType(ml.DType) ml.DType { return b.dt.ml() }

// GraphError reports why graphs are not used, if they are not.
func (b *Backend) GraphError() error { return b.graphErr }

func (d dtype) ml() ml.DType {
	if d == bf16 {
		return ml.BF16
	}
	return ml.F32
}

func dp(t ml.Tensor) gpu.DevPtr { return gpu.DevPtr(t.Addr) }

func (b *Backend) fail(err error) {
	if err != nil && b.err == nil {
		b.err = err
	}
}

// Err implements ml.Backend.
func (b *Backend) Err() error { return b.err }

// live reports whether an op should enqueue work: no failure so far and not replaying a graph
// (which runs the recorded work instead).
func (b *Backend) live() bool { return b.err == nil && b.mode != replaying }

// ----------------------------------------------------------------------------------------------
// memory

// take places n bytes in the arena (256-byte aligned), adding a chunk when needed.
func (b *Backend) take(n int64) (gpu.DevPtr, error) {
	n = (n + 255) &^ 255
	a := &b.arena
	if a.cur.Size == 0 || a.used+n > a.cur.Size {
		size := max(n, 256<<20)
		buf, err := gpu.Alloc(size)
		if err != nil {
			return 0, fmt.Errorf("allocating %d bytes of device memory: %w", size, err)
		}
		b.chunks = append(b.chunks, buf)
		a.cur, a.used = buf, 0
	}
	p := a.cur.Ptr.Add(a.used)
	a.used += n
	return p, nil
}

// Alloc implements ml.Backend.
func (b *Backend) Alloc(rows, cols int, dt ml.DType) (ml.Tensor, error) {
	n := int64(rows) * int64(cols) * dt.Size()
	p, err := b.take(n)
	if err != nil {
		return ml.Tensor{}, err
	}
	if err := b.stream.Memset32(p, 0, (n+3)/4); err != nil {
		return ml.Tensor{}, err
	}
	return ml.Tensor{Addr: uintptr(p), Rows: rows, Cols: cols, Stride: cols, DType: dt}, nil
}

// padCols is the row stride (elements) of a matrix of cols values of dt: 16-byte rows, which
// cuBLAS's tensor-core kernels want (3420 bf16 are not).
func padCols(cols int, dt ml.DType) int {
	per := int(16 / dt.Size())
	return (cols + per - 1) / per * per
}

// Load implements ml.Backend: the bytes go through pinned memory to the device, converted to dt
// there; a matrix whose rows are not 16-byte multiples is stored with zero-padded rows.
func (b *Backend) Load(src []byte, from string, rows, cols int, dt ml.DType) (ml.Tensor, error) {
	srcElt := int64(2)
	if from == "F32" {
		srcElt = 4
	}
	if from != "F32" && from != "BF16" && from != "F16" {
		return ml.Tensor{}, fmt.Errorf("dtype %s: want F32, BF16 or F16", from)
	}
	n := int64(rows) * int64(cols)
	if int64(len(src)) != n*srcElt {
		return ml.Tensor{}, fmt.Errorf("%d bytes for %dx%d %s", len(src), rows, cols, from)
	}
	stride := cols
	if rows > 1 {
		stride = padCols(cols, dt)
	}
	p, err := b.take(int64(rows) * int64(stride) * dt.Size())
	if err != nil {
		return ml.Tensor{}, err
	}
	t := ml.Tensor{Addr: uintptr(p), Rows: rows, Cols: cols, Stride: stride, DType: dt}
	packed := p
	if stride != cols {
		if packed, err = b.buf("load.packed", n*dt.Size()); err != nil {
			return ml.Tensor{}, err
		}
	}
	if err := b.upload(packed, src, from, dt); err != nil {
		return ml.Tensor{}, err
	}
	if stride != cols {
		if err := b.k.padRows.Launch(grid2(rows, stride), gpu.Dim3{X: 256}, 0, b.stream,
			gpu.P(p), gpu.P(packed), gpu.I(rows), gpu.I(cols), gpu.I(stride)); err != nil {
			return ml.Tensor{}, err
		}
	}
	return t, b.stream.Sync()
}

// upload copies src (from's type) to dst (dt), in pinned chunks, converting on the device.
func (b *Backend) upload(dst gpu.DevPtr, src []byte, from string, dt ml.DType) error {
	if from == "F16" { // widened on the host (rare: hub checkpoints are bf16)
		w := make([]float32, len(src)/2)
		if err := ml.Widen(w, src, "F16"); err != nil {
			return err
		}
		src, from = unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(w)*4), "F32"
	}
	fromElt := int64(4)
	if from == "BF16" {
		fromElt = 2
	}
	const chunk = 32 << 20 // bytes, whole elements of either type
	for off := int64(0); off < int64(len(src)); off += chunk {
		part := src[off:min(int64(len(src)), off+chunk)]
		elems := int64(len(part)) / fromElt
		out := dst.Add(off / fromElt * dt.Size())
		if err := b.stream.Sync(); err != nil { // the staging area is reused
			return err
		}
		b.stageAt, b.flushAt = 0, 0
		if fromElt == dt.Size() {
			if err := b.stage(out, unsafe.Pointer(&part[0]), int64(len(part))); err != nil {
				return err
			}
			continue
		}
		conv, err := b.buf("load.conv", int64(len(part)))
		if err != nil {
			return err
		}
		if err := b.stage(conv, unsafe.Pointer(&part[0]), int64(len(part))); err != nil {
			return err
		}
		f := b.k.f32ToBF16
		if dt == ml.F32 {
			f = b.k.bf16ToF32
		}
		if err := f.Launch(grid1(elems), gpu.Dim3{X: 256}, 0, b.stream, gpu.P(out), gpu.P(conv), gpu.L(elems)); err != nil {
			return err
		}
	}
	b.stageAt, b.flushAt = 0, 0
	return nil
}

// buf returns the scratch buffer called name with at least n bytes, growing it (the stream is
// drained first: a pending kernel may still use the old one).
func (b *Backend) buf(name string, n int64) (gpu.DevPtr, error) {
	s := b.scratch[name]
	if s != nil && s.Size >= n {
		return s.Ptr, nil
	}
	if b.mode == recording {
		return 0, errMoved
	}
	if s != nil {
		if err := b.stream.Sync(); err != nil {
			return 0, err
		}
		_ = s.Free()
	}
	nb, err := gpu.Alloc(max(n, 256)*5/4 + 256)
	if err != nil {
		return 0, fmt.Errorf("scratch %s: %w", name, err)
	}
	if err := b.stream.Memset32(nb.Ptr, 0, nb.Size/4); err != nil {
		return 0, err
	}
	b.scratch[name] = &nb
	b.epoch++
	return nb.Ptr, nil
}

// errMoved stops a recording that would move a buffer (Graph then runs plainly).
var errMoved = errors.New("a buffer moved while a graph was recorded")

// errNoGraph stops a recording of ops whose launch shapes come from host data that changes
// between steps (attention composed per sequence): such a pass always runs plainly.
var errNoGraph = errors.New("launch shapes from host data: no graph")

func (b *Backend) scratchT(name string, rows, cols int, dt ml.DType) ml.Tensor {
	if b.err != nil {
		return ml.Tensor{}
	}
	if dt == ml.F32 && b.dt == bf16 { // its own buffer (the names are the family's)
		name = b.f32Name(name)
	}
	p, err := b.buf(name, int64(rows)*int64(cols)*dt.Size())
	if err != nil {
		b.fail(err)
		return ml.Tensor{}
	}
	return ml.Tensor{Addr: uintptr(p), Rows: rows, Cols: cols, Stride: cols, DType: dt}
}

// Scratch implements ml.Backend.
func (b *Backend) Scratch(name string, rows, cols int) ml.Tensor {
	return b.scratchT(name, rows, cols, b.dt.ml())
}

// ScratchF32 implements ml.Backend.
func (b *Backend) ScratchF32(name string, rows, cols int) ml.Tensor {
	return b.scratchT(name, rows, cols, ml.F32)
}

// f32Name is the buffer name of an F32 scratch of a bf16 backend, made once a name.
func (b *Backend) f32Name(name string) string {
	n, ok := b.f32Names[name]
	if !ok {
		n = "f32." + name
		b.f32Names[name] = n
	}
	return n
}

// stage copies host data to dst through the pinned staging area, asynchronously on the stream.
// The area is recycled at each Sync and each Graph run, so a recorded graph's copies read the
// same pinned addresses on every replay.
func (b *Backend) stage(dst gpu.DevPtr, src unsafe.Pointer, n int64) error {
	if n == 0 {
		return nil
	}
	at, err := b.place(src, n)
	if err != nil || b.mode == replaying {
		return err
	}
	b.flush()
	b.afterKernel = false
	return b.stream.CopyHtoD(dst, unsafe.Pointer(&b.staging.Bytes()[at]), n)
}

// place copies n bytes of host data to the pinned staging area and returns their offset.
func (b *Backend) place(src unsafe.Pointer, n int64) (int64, error) {
	need := (n + 255) &^ 255
	if size := int64(len(b.staging.Bytes())); b.stageAt+need > size {
		if b.mode != plain || b.flushAt != b.stageAt {
			return 0, errMoved // pending inputs still point into the area
		}
		if b.inputsLive {
			// this pass's inputs are in the area (an image's 123 MB of F32 rows written after
			// them once freed it under them): a new area, the old one until Sync
			old, dold := b.staging, b.dstage
			b.retired = append(b.retired, func() { _ = old.Free(); _ = dold.Free() })
			if err := b.newStaging(max(size, need*3/2)); err != nil {
				return 0, err
			}
		} else {
			if err := b.stream.Sync(); err != nil {
				return 0, err
			}
			b.stageAt, b.flushAt = 0, 0
			if need > size {
				_ = b.staging.Free()
				_ = b.dstage.Free()
				if err := b.newStaging(need * 3 / 2); err != nil {
					return 0, err
				}
			}
		}
	}
	at := b.stageAt
	parallelCopy(b.staging.Bytes()[at:at+n], unsafe.Slice((*byte)(src), n))
	b.stageAt += need
	return at, nil
}

// newStaging allocates a staging area of n bytes and its device mirror, empty.
func (b *Backend) newStaging(n int64) error {
	var err error
	if b.staging, err = gpu.AllocHost(n); err != nil {
		return err
	}
	if b.dstage, err = gpu.Alloc(n); err != nil {
		return err
	}
	b.stageAt, b.flushAt = 0, 0
	b.epoch++
	return nil
}

// flush uploads the pending inputs (Input, Ints) in one copy; every enqueue calls it first.
func (b *Backend) flush() {
	if b.flushAt == b.stageAt || b.err != nil {
		return
	}
	if b.mode != replaying {
		n := b.stageAt - b.flushAt
		b.fail(b.stream.CopyHtoD(b.dstage.Ptr.Add(b.flushAt), unsafe.Pointer(&b.staging.Bytes()[b.flushAt]), n))
		b.afterKernel = false
	}
	b.flushAt = b.stageAt
}

// input places host data among the pass's pending inputs and returns its device address.
func (b *Backend) input(src unsafe.Pointer, n int64) gpu.DevPtr {
	if b.err != nil || n == 0 {
		return 0
	}
	at, err := b.place(src, n)
	if err != nil {
		b.fail(err)
		return 0
	}
	b.inputsLive = true
	return b.dstage.Ptr.Add(at)
}

// Input implements ml.Backend.
func (b *Backend) Input(v []float32, rows, cols int) ml.Tensor {
	if len(v) != rows*cols {
		b.bad("input: %d values for %dx%d", len(v), rows, cols)
		return ml.Tensor{}
	}
	if len(v) == 0 {
		return ml.Tensor{}
	}
	p := b.input(unsafe.Pointer(&v[0]), int64(len(v))*4)
	if p == 0 {
		return ml.Tensor{}
	}
	return ml.Tensor{Addr: uintptr(p), Rows: rows, Cols: cols, Stride: cols, DType: ml.F32}
}

// Ints implements ml.Backend.
func (b *Backend) Ints(v []int32) ml.Ints {
	if len(v) == 0 {
		return ml.Ints{Host: v}
	}
	p := b.input(unsafe.Pointer(&v[0]), int64(len(v))*4)
	if p == 0 {
		return ml.Ints{}
	}
	return ml.Ints{Addr: uintptr(p), Len: len(v), Host: v}
}

// parallelCopyMin is the size from which parallelCopy splits the copy, in bands of at least
// 256 KiB: one core copies about 10 GB/s, so an image's 3 MB of f32 pixels took 0.3 ms of the
// request before the upload.
const parallelCopyMin = 1 << 20

// parallelCopy is copy(dst, src) for len(dst) == len(src), in bands over the cores when the
// copy is large.
func parallelCopy(dst, src []byte) {
	if len(dst) < parallelCopyMin {
		copy(dst, src)
		return
	}
	par.Bands(len(dst), max(256<<10, (len(dst)+7)/8), func(lo, hi int) { copy(dst[lo:hi], src[lo:hi]) })
}

// Write implements ml.Backend: F32 host values into dst (converted on the device for bf16).
func (b *Backend) Write(dst ml.Tensor, src []float32) {
	if b.err != nil {
		return
	}
	if len(src) != dst.Rows*dst.Cols || !dst.Contiguous() {
		b.fail(fmt.Errorf("cuda write: %d values into %dx%d (stride %d): %w", len(src), dst.Rows, dst.Cols, dst.Stride, ml.ErrInvalidInput))
		return
	}
	if len(src) == 0 {
		return
	}
	n := int64(len(src))
	if dst.DType == ml.F32 {
		b.fail(b.stage(dp(dst), unsafe.Pointer(&src[0]), n*4))
		return
	}
	conv, err := b.buf("write.f32", n*4)
	if err != nil {
		b.fail(err)
		return
	}
	b.fail(b.stage(conv, unsafe.Pointer(&src[0]), n*4))
	b.elems(b.k.f32ToBF16, n, gpu.P(dp(dst)), gpu.P(conv), gpu.L(n))
}

// download enqueues a copy of n bytes at src to pinned memory and returns where it lands.
func (b *Backend) download(src gpu.DevPtr, n int64) (int64, bool) {
	need := (n + 255) &^ 255
	if b.backAt+need > int64(len(b.back.Bytes())) {
		if b.mode != plain || len(b.reads) > 0 {
			// a pending read still points into the area: a new one cannot be made now
			b.fail(fmt.Errorf("cuda read: %d bytes over the %d of the download area in one sync", b.backAt+need, len(b.back.Bytes())))
			return 0, false
		}
		_ = b.back.Free()
		var err error
		if b.back, err = gpu.AllocHost(need * 2); err != nil {
			b.fail(err)
			return 0, false
		}
		b.backAt = 0
	}
	at := b.backAt
	b.backAt += need
	b.flush()
	if b.mode != replaying {
		b.fail(b.stream.CopyDtoH(unsafe.Pointer(&b.back.Bytes()[at]), src, n))
		b.afterKernel = false
	}
	return at, true
}

// Read implements ml.Backend.
func (b *Backend) Read(dst []float32, src ml.Tensor) {
	if b.err != nil {
		return
	}
	if len(dst) != src.Rows*src.Cols || !src.Contiguous() {
		b.fail(fmt.Errorf("cuda read: %dx%d (stride %d) into %d values: %w", src.Rows, src.Cols, src.Stride, len(dst), ml.ErrInvalidInput))
		return
	}
	at, ok := b.download(dp(src), int64(len(dst))*src.DType.Size())
	if ok {
		b.reads = append(b.reads, pendingRead{at: at, f32: dst, bf16: src.DType == ml.BF16, count: len(dst)})
	}
}

// Argmax implements ml.Backend: on the device (two launches a row), only the index comes back.
func (b *Backend) Argmax(dst []int32, x ml.Tensor) {
	if b.err != nil {
		return
	}
	if x.DType != ml.F32 || len(dst) != x.Rows {
		b.fail(fmt.Errorf("cuda argmax: %dx%d %s into %d values: %w", x.Rows, x.Cols, x.DType, len(dst), ml.ErrInvalidInput))
		return
	}
	// every row in the same two launches: the parts of row r at r*2*argmaxParts of pv and pi,
	// its pick (index, runner-up, their values) in row r of pick
	part := b.scratchT("argmax.part", x.Rows, 2*argmaxParts*2, ml.F32)
	pick := b.scratchT("argmax.pick", x.Rows, 4, ml.F32)
	if b.err != nil {
		return
	}
	pv, pi := dp(part), dp(part).Add(int64(x.Rows)*2*argmaxParts*4)
	b.launchDep(b.k.argmaxPart, gpu.Dim3{X: argmaxParts, Y: x.Rows}, gpu.Dim3{X: argmaxThreads}, 0, gpu.P(pv), gpu.P(pi), gpu.P(dp(x)),
		gpu.I(x.Cols), gpu.L(int64(x.Stride)))
	b.launchDep(b.k.argmax, gpu.Dim3{X: 1, Y: x.Rows}, gpu.Dim3{X: argmaxThreads}, 0, gpu.P(dp(pick)), gpu.P(dp(pick).Add(8)), gpu.P(pv), gpu.P(pi),
		gpu.I(2*argmaxParts), gpu.I(4))
	at, ok := b.download(dp(pick), int64(x.Rows)*16)
	if ok {
		b.reads = append(b.reads, pendingRead{at: at, i32: dst, count: x.Cols})
	}
}

// Sync implements ml.Backend.
func (b *Backend) Sync() error {
	if b.err == nil {
		b.fail(b.stream.Sync())
	}
	if b.err == nil {
		back := b.back.Bytes()
		for _, r := range b.reads {
			switch {
			case r.i32 != nil: // argmax rows of 16 bytes: index, runner-up, values
				for i := range r.i32 {
					tok := *(*int32)(unsafe.Pointer(&back[r.at+int64(i)*16]))
					if tok < 0 || int(tok) >= r.count {
						tok = 0 // all NaN: ml.Argmax's answer
					}
					r.i32[i] = tok
				}
			case r.bf16:
				h := unsafe.Slice((*uint16)(unsafe.Pointer(&back[r.at])), len(r.f32))
				for i, v := range h {
					r.f32[i] = math.Float32frombits(uint32(v) << 16)
				}
			default:
				copy(r.f32, unsafe.Slice((*float32)(unsafe.Pointer(&back[r.at])), len(r.f32)))
			}
		}
	}
	b.reads = b.reads[:0]
	b.backAt, b.stageAt, b.flushAt = 0, 0, 0
	b.inputsLive = false
	if b.err == nil { // the stream is drained: nothing reads the retired areas any more
		for _, free := range b.retired {
			free()
		}
		b.retired = b.retired[:0]
	}
	clear(b.tables)
	b.collect()
	err := b.err
	b.err = nil
	return err
}
