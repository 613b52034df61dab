package ml

// Fused forms. A backend that can do better than the composition implements the interface; the
// function of the same name calls it, or runs the composition. A family always calls the
// function, so its forward pass is the same on every backend.

// NormLinearer fuses an RMSNorm into the products that read its output (the decode step's
// one-row products, where reading the weights is the cost and the norm can ride along).
type NormLinearer interface {
	NormLinears(xn, x, delta, w Tensor, eps float32, outs ...Out)
}

// NormLinears adds delta into x, sets xn = RMSNorm(x) * w and computes the products of xn.
func NormLinears(b Backend, xn, x, delta, w Tensor, eps float32, outs ...Out) {
	if f, ok := b.(NormLinearer); ok {
		f.NormLinears(xn, x, delta, w, eps, outs...)
		return
	}
	b.RMSNorm(xn, x, delta, w, eps)
	b.Linears(xn, outs...)
}

// SwiGLUer fuses the gate and up products of a SwiGLU MLP with the activation between them.
type SwiGLUer interface {
	SwiGLU(act, x, gate, up, gateBias, upBias, gu Tensor)
}

// SwiGLU sets act = silu(x gate^T + gateBias) * (x up^T + upBias); gu is scratch for the two
// products, gate's columns then up's (a backend may not need it).
func SwiGLU(b Backend, act, x, gate, up, gateBias, upBias, gu Tensor) {
	if f, ok := b.(SwiGLUer); ok {
		f.SwiGLU(act, x, gate, up, gateBias, upBias, gu)
		return
	}
	n := act.Cols
	g, u := gu.ColsAt(0, n), gu.ColsAt(n, n)
	b.Linears(x, Out{Y: g, W: gate, B: gateBias}, Out{Y: u, W: up, B: upBias})
	b.SiluMul(act, g, u)
}
