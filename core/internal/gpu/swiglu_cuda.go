//go:build cuda

package gpu

// SwiGLUVariant is one tile configuration of SwiGLUGemm: "pp|coop:<tile M>x<tile N>:<cluster
// M>x<cluster N>" (pp: the two consumer warp groups take turns, one's epilogue under the
// other's products), and whether it adds biases.
type SwiGLUVariant struct {
	Spec string
	Bias bool
}

func (v SwiGLUVariant) String() string {
	if v.Bias {
		return v.Spec + " with biases"
	}
	return v.Spec
}
