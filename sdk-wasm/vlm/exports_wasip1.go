//go:build wasip1

// The functions here are called by the host through //go:wasmexport, which linters do not see.
//lint:file-ignore U1000 exported to the host with //go:wasmexport

package vlm

import (
	"unsafe"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
)

// pinned holds every buffer handed to the host since the last iris_reset, so that the garbage
// collector keeps them (Go's collector never moves memory, so their addresses stay valid).
var pinned [][]byte

// inbuf is the request buffer, reused across calls: allocation is among the dearest things a Go
// guest does under wazero, and the host writes one request per call.
var inbuf []byte

// The marker names the highest ABI this SDK speaks; Describe says which one the plugin speaks.
//
//go:wasmexport iris_abi_v2
func irisABIV2() {}

//go:wasmexport iris_alloc
func irisAlloc(n uint32) uint32 {
	if n > abi.MaxMessageBytes {
		return 0
	}
	if len(pinned) > 0 || cap(inbuf) < int(max(n, 1)) {
		// A second buffer before a reset, or a bigger one: allocate afresh.
		inbuf = make([]byte, max(n, 1, 256))
	}
	buf := inbuf[:max(n, 1)]
	pinned = append(pinned, buf)
	return addr(buf)
}

//go:wasmexport iris_reset
func irisReset() {
	clear(pinned)
	pinned = pinned[:0]
}

//go:wasmexport iris_describe
func irisDescribe() uint64 {
	return respond(server().Handle(abi.ExportDescribe, nil))
}

//go:wasmexport iris_plan
func irisPlan(ptr, n uint32) uint64 {
	return respond(server().Handle(abi.ExportPlan, input(ptr, n)))
}

//go:wasmexport iris_frame
func irisFrame(ptr, n uint32) uint64 {
	return respond(server().Handle(abi.ExportFrame, input(ptr, n)))
}

func addr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// input returns the request the host wrote into a buffer from iris_alloc. It looks the buffer up
// instead of converting the address back to a pointer, so a host that passes anything else gets
// an empty request (and a bad_request answer), not a read of arbitrary memory.
func input(ptr, n uint32) []byte {
	for _, b := range pinned {
		if addr(b) == ptr && int(n) <= len(b) {
			return b[:n]
		}
	}
	return nil
}

func respond(b []byte) uint64 {
	pinned = append(pinned, b)
	return abi.Pack(addr(b), uint32(len(b)))
}

// server returns the registered plugin's server, or one that reports that none was registered.
func server() *Server {
	if registered == nil {
		registered = NewServer(nil)
	}
	return registered
}
