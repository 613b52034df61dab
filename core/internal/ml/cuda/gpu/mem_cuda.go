//go:build cuda

package gpu

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
*/
import "C"

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// DevPtr is a device address.
type DevPtr uintptr

// Add offsets p by n bytes.
func (p DevPtr) Add(n int64) DevPtr { return p + DevPtr(n) }

// Buffer is an allocation of device memory.
type Buffer struct {
	Ptr  DevPtr
	Size int64
}

// Alloc allocates size bytes of device memory (cuMemAlloc, never managed memory).
func Alloc(size int64) (Buffer, error) {
	if size <= 0 {
		return Buffer{}, fmt.Errorf("allocating %d bytes: size must be positive", size)
	}
	p, err := cu.MemAlloc(size)
	if err != nil {
		return Buffer{}, fmt.Errorf("allocating %d bytes of device memory: %w", size, err)
	}
	return Buffer{Ptr: DevPtr(p), Size: size}, nil
}

// Free releases the buffer; a zero Buffer is ignored.
func (b *Buffer) Free() error {
	if b.Ptr == 0 {
		return nil
	}
	err := cu.MemFree(cu.DevicePtr(b.Ptr))
	*b = Buffer{}
	return err
}

// MemInfo reports free and total device memory.
func MemInfo() (free, total int64, err error) { return cu.MemInfo() }

// CopyHtoD copies n bytes from host memory to the device, synchronously.
func CopyHtoD(dst DevPtr, src unsafe.Pointer, n int64) error {
	if n == 0 {
		return nil
	}
	return cu.MemcpyHtoD(cu.DevicePtr(dst), src, n)
}

// CopyDtoH copies n bytes from the device to host memory, synchronously.
func CopyDtoH(dst unsafe.Pointer, src DevPtr, n int64) error {
	if n == 0 {
		return nil
	}
	return cu.MemcpyDtoH(dst, cu.DevicePtr(src), n)
}

// Synchronize waits for all work of the context.
func Synchronize() error { return cu.Synchronize() }

// HostBuffer is page-locked host memory: copies from and to it run asynchronously and can be
// captured in a graph.
type HostBuffer struct {
	p    unsafe.Pointer
	size int64
}

// AllocHost allocates size bytes of pinned host memory.
func AllocHost(size int64) (*HostBuffer, error) {
	var p unsafe.Pointer
	if r := C.cuMemHostAlloc(&p, C.size_t(size), 0); r != C.CUDA_SUCCESS {
		return nil, fmt.Errorf("allocating %d bytes of pinned host memory: %w", size, driverError(r))
	}
	return &HostBuffer{p: p, size: size}, nil
}

// Ptr is the buffer's address.
func (h *HostBuffer) Ptr() unsafe.Pointer { return h.p }

// Bytes views the buffer; the slice is invalid after Free.
func (h *HostBuffer) Bytes() []byte { return unsafe.Slice((*byte)(h.p), h.size) }

// Float32s views the buffer as float32 values.
func (h *HostBuffer) Float32s() []float32 { return unsafe.Slice((*float32)(h.p), h.size/4) }

// Int32s views the buffer as int32 values.
func (h *HostBuffer) Int32s() []int32 { return unsafe.Slice((*int32)(h.p), h.size/4) }

// Free releases the buffer; it is safe to call more than once.
func (h *HostBuffer) Free() error {
	if h == nil || h.p == nil {
		return nil
	}
	err := cu.MemFreeHost(h.p)
	h.p = nil
	return err
}

// driverError names a raw CUresult the way gorgonia.org/cu does.
func driverError(r C.CUresult) error {
	var name *C.char
	if C.cuGetErrorName(r, &name) == C.CUDA_SUCCESS && name != nil {
		return fmt.Errorf("%s (%d)", C.GoString(name), int(r))
	}
	return fmt.Errorf("CUresult %d", int(r))
}
