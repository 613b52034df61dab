package ml

// Fused forms. A backend that can do better than the composition implements the interface; the
// function of the same name calls it, or runs the composition. A family always calls the
// function, so its forward pass is the same on every backend.

// NormLinearer fuses an RMSNorm into the products that read its output (the decode step's
// one-row products, where reading the weights is the cost and the norm can ride along).
type NormLinearer interface {
	NormLinears(xn, xOut, x, delta, w Tensor, eps float32, outs ...Out)
}

// NormLinears sets xOut = x + delta and xn = RMSNorm(xOut) * w (RMSNorm), then the products of
// xn. xOut must not be x (a fused form reads x while it writes xOut); xn's contents are
// undefined afterwards (a fused form may never write it).
func NormLinears(b Backend, xn, xOut, x, delta, w Tensor, eps float32, outs ...Out) {
	if f, ok := b.(NormLinearer); ok {
		f.NormLinears(xn, xOut, x, delta, w, eps, outs...)
		return
	}
	b.RMSNorm(xn, xOut, x, delta, w, eps)
	b.Linears(xn, outs...)
}

// MLP is a SwiGLU MLP's input side: act = silu(x gate^T + GateB) * (x up^T + UpB).
type MLP struct {
	Gate, Up, GateB, UpB Tensor
}

// NormSwiGLUer fuses an RMSNorm, the gate and up products and the activation between them.
type NormSwiGLUer interface {
	NormSwiGLU(act, gu, xn, xOut, x, delta, w Tensor, eps float32, mlp MLP)
}

// NormSwiGLU sets xOut = x + delta, xn = RMSNorm(xOut) * w (as NormLinears) and act =
// silu(xn gate^T + GateB) * (xn up^T + UpB). gu is scratch for the two products (gate's columns,
// then up's).
func NormSwiGLU(b Backend, act, gu, xn, xOut, x, delta, w Tensor, eps float32, mlp MLP) {
	if f, ok := b.(NormSwiGLUer); ok {
		f.NormSwiGLU(act, gu, xn, xOut, x, delta, w, eps, mlp)
		return
	}
	b.RMSNorm(xn, xOut, x, delta, w, eps)
	n := act.Cols
	g, u := gu.ColsAt(0, n), gu.ColsAt(n, n)
	b.Linears(xn, Out{Y: g, W: mlp.Gate, B: mlp.GateB}, Out{Y: u, W: mlp.Up, B: mlp.UpB})
	b.SiluMul(act, g, u)
}

// RopeCachedAttentioner fuses the rotary embedding of q and k, the write of k and v into a KV
// pool, and attention over the pool (the decode step's attention, where latency is the cost).
type RopeCachedAttentioner interface {
	RopeCachedAttention(out, q, k, v Tensor, rot Rotary, kPool, vPool Tensor, slots, spans Ints, a Attn)
}

// HeadNorms applies a's per-head q and k norms (Attn.QNorm, Attn.KNorm) in place when set: the
// fallbacks below, and a backend's fused attention on the paths that do not normalise in-kernel.
func HeadNorms(b Backend, q, k Tensor, a Attn) {
	if a.QNorm.Valid() {
		b.HeadNorm(q, a.Heads, a.HeadDim, a.QNorm, a.NormEps)
	}
	if a.KNorm.Valid() {
		b.HeadNorm(k, a.KVHeads, a.HeadDim, a.KNorm, a.NormEps)
	}
}

// RopeCachedAttention normalises the heads of q and k when a says so, rotates them, writes row i of k and v to row slots[i] of the pools, and
// runs CachedAttention of q over the pools.
func RopeCachedAttention(b Backend, out, q, k, v Tensor, rot Rotary, kPool, vPool Tensor, slots, spans Ints, a Attn) {
	if f, ok := b.(RopeCachedAttentioner); ok {
		f.RopeCachedAttention(out, q, k, v, rot, kPool, vPool, slots, spans, a)
		return
	}
	HeadNorms(b, q, k, a)
	b.Rope(q, a.Heads, a.HeadDim, rot)
	b.Rope(k, a.KVHeads, a.HeadDim, rot)
	b.Scatter(kPool, k, slots)
	b.Scatter(vPool, v, slots)
	b.CachedAttention(out, q, kPool, vPool, spans, a)
}

// RopeSegmentAttentioner fuses the rotary embedding of q and k with SegmentAttention.
type RopeSegmentAttentioner interface {
	RopeSegmentAttention(out, q, k, v Tensor, rot Rotary, bounds []int32, a Attn)
}

// RopeSegmentAttention normalises the heads of q and k when a says so, rotates them in place and
// runs SegmentAttention.
func RopeSegmentAttention(b Backend, out, q, k, v Tensor, rot Rotary, bounds []int32, a Attn) {
	if f, ok := b.(RopeSegmentAttentioner); ok {
		f.RopeSegmentAttention(out, q, k, v, rot, bounds, a)
		return
	}
	HeadNorms(b, q, k, a)
	b.Rope(q, a.Heads, a.HeadDim, rot)
	b.Rope(k, a.KVHeads, a.HeadDim, rot)
	b.SegmentAttention(out, q, k, v, bounds, a)
}

// Grapher records the ops a function issues as a graph the first time a key is seen, and replays
// the graph for that key afterwards (a decode step of a given batch size: the same ops on the same
// buffers, only the data of Input and Ints differs). The backend falls back to running fn when a
// buffer moved since the recording.
type Grapher interface {
	Graph(key string, fn func(replay bool))
}

// KeyBucket is the cache length up to which a recorded decode step serves: the power of two at
// or above n keys (the longest cache in the step), at least 64. A decode step's graph key
// carries it, so a step whose caches outgrow the bucket records another graph, and a backend
// sizes the attention's launch for the bucket rather than for the longest cache any graph may
// meet (a grid for 8,192 keys over 54 caches of 200 keys was mostly empty blocks: ~14 ms of a
// decode step on the H200).
func KeyBucket(n int) int {
	b := 64
	for b < n {
		b *= 2
	}
	return b
}

// Graph runs fn through b's graphs under key when b records graphs (key not empty), else plainly.
// fn must issue the same ops on the same buffers every time it is called with the key; called
// with replay set, it issues only its inputs (Input, Ints) and its outputs (Read, Argmax), in
// the same order, and skips the ops between them: the recording runs those, and the host's time
// stays off the step.
func Graph(b Backend, key string, fn func(replay bool)) {
	if g, ok := b.(Grapher); ok && key != "" {
		g.Graph(key, fn)
		return
	}
	fn(false)
}
