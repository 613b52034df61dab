//go:build cuda && !quack

package gpu

import "errors"

// QuackGemm is a product compiled from quack's CuTe DSL GEMM; this build has none (it needs the
// quack tag and scripts/gpu/swiglu-gemm's export).
type QuackGemm struct{}

// QuackAvailable reports whether this build carries QuackGemm.
const QuackAvailable = false

var errNoQuack = errors.New("quack's products need a build with -tags cuda,quack (scripts/gpu/swiglu-gemm)")

// QuackVariants is empty: this build has no quack products.
func QuackVariants() []QuackVariant { return nil }

// LoadQuack reports that this build has no quack products.
func LoadQuack(int, int) (*QuackGemm, error) { return nil, errNoQuack }

// SwiGLU reports that this build has no quack products.
func (g *QuackGemm) SwiGLU(*Stream, DevPtr, int, int, int, DevPtr, int, DevPtr, int, int, DevPtr) error {
	return errNoQuack
}

// Linear reports that this build has no quack products.
func (g *QuackGemm) Linear(*Stream, DevPtr, int, int, int, DevPtr, int, DevPtr, int, DevPtr) error {
	return errNoQuack
}
