//go:build cuda && !quack

package gpu

import "errors"

// SwiGLUGemm is the gate/up product with SwiGLU in its epilogue; this build has none (it needs
// the quack tag and scripts/gpu/swiglu-gemm's export).
type SwiGLUGemm struct{}

// SwiGLUAvailable reports whether this build carries SwiGLUGemm.
const SwiGLUAvailable = false

var errNoSwiGLU = errors.New("the SwiGLU product needs a build with -tags cuda,quack (scripts/gpu/swiglu-gemm)")

// SwiGLUVariants is empty: this build has no SwiGLU product.
func SwiGLUVariants() []SwiGLUVariant { return nil }

// LoadSwiGLUGemm reports that this build has no SwiGLU product.
func LoadSwiGLUGemm(int, int) (*SwiGLUGemm, error) { return nil, errNoSwiGLU }

// Run reports that this build has no SwiGLU product.
func (g *SwiGLUGemm) Run(*Stream, DevPtr, int, int, int, DevPtr, int, DevPtr, int, int, DevPtr) error {
	return errNoSwiGLU
}
