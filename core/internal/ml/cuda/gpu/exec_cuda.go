//go:build cuda

package gpu

/*
#include <cuda.h>

// iris_launch launches f with n 8-byte parameter slots: each kernel parameter (a pointer, an
// int32 or a float) is read from the low bytes of its slot. The parameter array lives on this
// stack frame: cuLaunchKernel copies the values before it returns (also while capturing).
static CUresult iris_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                            unsigned bz, unsigned shmem, CUstream s, unsigned long long *args, int n) {
	void *params[32];
	if (n > 32) return CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < n; i++) params[i] = &args[i];
	return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, NULL);
}

// iris_launch_dependent is iris_launch with programmatic stream serialization: the kernel may
// start while the previous kernel in s is still running (see Function.LaunchDependent).
static CUresult iris_launch_dependent(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                      unsigned bz, unsigned shmem, CUstream s, unsigned long long *args, int n) {
	void *params[32];
	if (n > 32) return CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < n; i++) params[i] = &args[i];
	CUlaunchAttribute attr = {0};
	attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
	attr.value.programmaticStreamSerializationAllowed = 1;
	CUlaunchConfig cfg = {0};
	cfg.gridDimX = gx, cfg.gridDimY = gy, cfg.gridDimZ = gz;
	cfg.blockDimX = bx, cfg.blockDimY = by, cfg.blockDimZ = bz;
	cfg.sharedMemBytes = shmem, cfg.hStream = s, cfg.attrs = &attr, cfg.numAttrs = 1;
	return cuLaunchKernelEx(&cfg, f, params, NULL);
}
*/
import "C"

import (
	"fmt"
	"math"
	"time"
	"unsafe"

	"gorgonia.org/cu"
)

// Stream is a CUDA stream that does not synchronise with the legacy default stream.
type Stream struct{ s cu.Stream }

// NewStream creates a stream.
func NewStream() (*Stream, error) {
	s, err := cu.MakeStream(cu.NonBlocking)
	if err != nil {
		return nil, fmt.Errorf("creating a stream: %w", err)
	}
	return &Stream{s: s}, nil
}

// NewPriorityStream creates a stream of the context's greatest priority: where its kernels and
// a plain stream's wait for the same multiprocessors, its blocks go first.
func NewPriorityStream() (*Stream, error) {
	_, greatest, err := cu.StreamPriorityRange()
	if err != nil {
		return nil, fmt.Errorf("reading the stream priorities: %w", err)
	}
	s, err := cu.MakeStreamWithPriority(greatest, cu.NonBlocking)
	if err != nil {
		return nil, fmt.Errorf("creating a stream of priority %d: %w", greatest, err)
	}
	return &Stream{s: s}, nil
}

func (s *Stream) c() C.CUstream { return C.CUstream(unsafe.Pointer(s.s.C())) }

// Handle is the CUstream, for libraries such as cuBLAS that take one (cudaStream_t is the same
// type).
func (s *Stream) Handle() unsafe.Pointer { return unsafe.Pointer(s.s.C()) }

// Sync waits for the stream's work.
func (s *Stream) Sync() error { return s.s.Synchronize() }

// Destroy releases the stream.
func (s *Stream) Destroy() error { return s.s.Destroy() }

// CopyHtoD enqueues a copy of n bytes from host memory (pinned, for the copy to be asynchronous
// or captured) to the device.
func (s *Stream) CopyHtoD(dst DevPtr, src unsafe.Pointer, n int64) error {
	if n == 0 {
		return nil
	}
	return cu.MemcpyHtoDAsync(cu.DevicePtr(dst), src, n, s.s)
}

// CopyDtoH enqueues a copy of n bytes from the device to host memory.
func (s *Stream) CopyDtoH(dst unsafe.Pointer, src DevPtr, n int64) error {
	if n == 0 {
		return nil
	}
	return cu.MemcpyDtoHAsync(dst, cu.DevicePtr(src), n, s.s)
}

// CopyDtoD enqueues a device-to-device copy of n bytes.
func (s *Stream) CopyDtoD(dst, src DevPtr, n int64) error {
	if n == 0 {
		return nil
	}
	return cu.MemcpyDtoDAsync(cu.DevicePtr(dst), cu.DevicePtr(src), n, s.s)
}

// Memset32 enqueues filling n 32-bit words at dst with v.
func (s *Stream) Memset32(dst DevPtr, v uint32, n int64) error {
	if n == 0 {
		return nil
	}
	return cu.MemsetD32Async(cu.DevicePtr(dst), uint(v), n, s.s)
}

// Module is a loaded cubin, fatbin or PTX image.
type Module struct{ m cu.Module }

// LoadModule loads an image into the current context (the driver picks the SASS for this device
// from a fatbin, or JIT-compiles its PTX).
func LoadModule(image []byte) (*Module, error) {
	if len(image) == 0 {
		return nil, fmt.Errorf("loading module: empty image")
	}
	m, err := cu.LoadData(string(image))
	if err != nil {
		return nil, fmt.Errorf("loading module: %w", err)
	}
	return &Module{m: m}, nil
}

// Function looks up a kernel by its (extern "C") name.
func (m *Module) Function(name string) (*Function, error) {
	f, err := m.m.Function(name)
	if err != nil {
		return nil, fmt.Errorf("kernel %s: %w", name, err)
	}
	return &Function{f: f, name: name}, nil
}

// Unload releases the module.
func (m *Module) Unload() error { return m.m.Unload() }

// Function is a kernel of a loaded module.
type Function struct {
	f    cu.Function
	name string
}

// Name is the kernel's name.
func (f *Function) Name() string { return f.name }

func (f *Function) c() C.CUfunction {
	// cu.Function holds exactly one CUfunction; gorgonia does not export it.
	return *(*C.CUfunction)(unsafe.Pointer(&f.f))
}

// SetMaxDynamicShared allows launches with up to n bytes of dynamic shared memory (above 48 KiB
// a kernel must opt in).
func (f *Function) SetMaxDynamicShared(n int) error {
	if r := C.cuFuncSetAttribute(f.c(), C.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, C.int(n)); r != C.CUDA_SUCCESS {
		return fmt.Errorf("kernel %s: dynamic shared memory %d: %w", f.name, n, driverError(r))
	}
	return nil
}

// Arg is one kernel parameter in an 8-byte slot; build it with P, I or F.
type Arg uint64

// P passes a device pointer.
func P(p DevPtr) Arg { return Arg(p) }

// I passes an int (as the kernel's int32).
func I(v int) Arg { return Arg(uint32(int32(v))) }

// L passes an int64 (a C long).
func L(v int64) Arg { return Arg(uint64(v)) }

// F passes a float32.
func F(v float32) Arg { return Arg(math.Float32bits(v)) }

// Launch enqueues the kernel on s. Parameters must be 4 or 8 bytes wide, at most 32.
func (f *Function) Launch(grid, block Dim3, shmem int, s *Stream, args ...Arg) error {
	return f.launch(false, grid, block, shmem, s, args)
}

// LaunchDependent enqueues the kernel on s as a programmatic dependent launch (sm_90): it may
// start while the kernel before it in s finishes, so that work which does not depend on that
// kernel (loading weights) overlaps its tail and the launch latency. The kernel must execute
// griddepcontrol.wait before it reads what the previous kernel writes, or writes what it reads;
// the wait returns once that kernel has completed and its writes are visible. It also works
// under stream capture (the graph keeps the programmatic edge).
func (f *Function) LaunchDependent(grid, block Dim3, shmem int, s *Stream, args ...Arg) error {
	return f.launch(true, grid, block, shmem, s, args)
}

func (f *Function) launch(dependent bool, grid, block Dim3, shmem int, s *Stream, args []Arg) error {
	var ap *C.ulonglong
	if len(args) > 0 {
		ap = (*C.ulonglong)(unsafe.Pointer(&args[0]))
	}
	gx, gy, gz, bx, by, bz := dim(grid.X), dim(grid.Y), dim(grid.Z), dim(block.X), dim(block.Y), dim(block.Z)
	var r C.CUresult
	kind := ""
	if dependent {
		kind = " (dependent)"
		r = C.iris_launch_dependent(f.c(), gx, gy, gz, bx, by, bz, C.uint(shmem), s.c(), ap, C.int(len(args)))
	} else {
		r = C.iris_launch(f.c(), gx, gy, gz, bx, by, bz, C.uint(shmem), s.c(), ap, C.int(len(args)))
	}
	if r != C.CUDA_SUCCESS {
		return fmt.Errorf("launching %s%s grid %v block %v: %w", f.name, kind, grid, block, driverError(r))
	}
	return nil
}

func dim(v int) C.uint {
	if v <= 0 {
		return 1
	}
	return C.uint(v)
}

// Event marks a point in a stream, for timing and waiting.
type Event struct{ e cu.Event }

// NewEvent creates an event that records time.
func NewEvent() (*Event, error) {
	e, err := cu.MakeEvent(cu.DefaultEvent)
	if err != nil {
		return nil, fmt.Errorf("creating an event: %w", err)
	}
	return &Event{e: e}, nil
}

// Record marks the current end of s.
func (e *Event) Record(s *Stream) error { return e.e.Record(s.s) }

// Sync waits until the event has happened.
func (e *Event) Sync() error { return e.e.Synchronize() }

// Since is the GPU time from start to e; both must have happened.
func (e *Event) Since(start *Event) (time.Duration, error) {
	ms, err := start.e.Elapsed(e.e)
	if err != nil {
		return 0, err
	}
	return time.Duration(ms * float64(time.Millisecond)), nil
}

// Destroy releases the event.
func (e *Event) Destroy() error { return cu.DestroyEvent(&e.e) }

// Graph is an instantiated CUDA graph, captured from a stream.
type Graph struct{ exec C.CUgraphExec }

// BeginCapture starts recording the work enqueued on s (by this thread) instead of running it.
func (s *Stream) BeginCapture() error {
	if r := C.cuStreamBeginCapture(s.c(), C.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL); r != C.CUDA_SUCCESS {
		return fmt.Errorf("beginning stream capture: %w", driverError(r))
	}
	return nil
}

// EndCapture stops recording and instantiates what was recorded.
func (s *Stream) EndCapture() (*Graph, error) {
	var g C.CUgraph
	if r := C.cuStreamEndCapture(s.c(), &g); r != C.CUDA_SUCCESS {
		return nil, fmt.Errorf("ending stream capture: %w", driverError(r))
	}
	defer C.cuGraphDestroy(g)
	var exec C.CUgraphExec
	if r := C.cuGraphInstantiate(&exec, g, 0); r != C.CUDA_SUCCESS {
		return nil, fmt.Errorf("instantiating graph: %w", driverError(r))
	}
	return &Graph{exec: exec}, nil
}

// Launch runs the graph on s.
func (g *Graph) Launch(s *Stream) error {
	if r := C.cuGraphLaunch(g.exec, s.c()); r != C.CUDA_SUCCESS {
		return fmt.Errorf("launching graph: %w", driverError(r))
	}
	return nil
}

// Destroy releases the graph; it is safe to call more than once.
func (g *Graph) Destroy() error {
	if g == nil || g.exec == nil {
		return nil
	}
	r := C.cuGraphExecDestroy(g.exec)
	g.exec = nil
	if r != C.CUDA_SUCCESS {
		return driverError(r)
	}
	return nil
}
