//go:build cuda

package gpu

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

static int iris_has_symbol(const char *lib, const char *name) {
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h) return -1;
	int ok = dlsym(h, name) != NULL;
	dlclose(h);
	return ok;
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// CompatSymbols are the CUDA 12 driver entry points that cudacompat/cuda.h binds gorgonia.org/cu
// to; the driver must keep exporting them.
var CompatSymbols = []string{"cuCtxCreate_v2", "cuMemAdvise", "cuMemPrefetchAsync", "cuGraphAddDependencies", "cuGraphGetEdges"}

// MissingCompatSymbols returns the CompatSymbols that the driver library (libcuda.so.1) does not
// export.
func MissingCompatSymbols() ([]string, error) {
	lib := C.CString("libcuda.so.1")
	defer C.free(unsafe.Pointer(lib))
	var missing []string
	for _, s := range CompatSymbols {
		name := C.CString(s)
		ok := C.iris_has_symbol(lib, name)
		C.free(unsafe.Pointer(name))
		if ok < 0 {
			return nil, fmt.Errorf("dlopen libcuda.so.1: %s", C.GoString(C.dlerror()))
		}
		if ok == 0 {
			missing = append(missing, s)
		}
	}
	return missing, nil
}
