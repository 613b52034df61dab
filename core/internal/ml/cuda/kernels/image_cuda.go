//go:build cuda

package kernels

import _ "embed"

// Image is build/iris.fatbin, made by `just kernels` (scripts/gpu/build-kernels.sh).
//
//go:embed build/iris.fatbin
var Image []byte
