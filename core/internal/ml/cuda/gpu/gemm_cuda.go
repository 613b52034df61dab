//go:build cuda

package gpu

// QuackVariant is one of QuackGemm's products: the gate/up product with SwiGLU (Linear false)
// or a plain one, with biases or without, in a tile configuration "pp|coop:<tile M>x<tile
// N>:<cluster M>x<cluster N>" (pp: the two consumer warp groups take turns, one's epilogue
// under the other's products).
type QuackVariant struct {
	Spec         string
	Linear, Bias bool
}

func (v QuackVariant) String() string {
	s := "swiglu " + v.Spec
	if v.Linear {
		s = "linear " + v.Spec
	}
	if v.Bias {
		s += " with biases"
	}
	return s
}
