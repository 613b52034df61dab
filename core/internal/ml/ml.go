// Package ml is the op set: what a model family computes with and what a backend implements.
//
// A family (core/internal/models/<family>) writes its vision tower, projector and decoder once,
// as calls on a [Backend]; a backend (the C CPU engine in ml/cpu, the CUDA engine in
// ml/cuda) implements the ops on its device and knows no family, no tensor name and no
// checkpoint layout. Tensors are row-major matrix views of backend memory; ops are enqueued in
// call order (a CPU backend runs each at once, a GPU backend on its stream) and report failure
// through [Backend.Err], so a forward pass reads as the model's own equations.
//
// Fused forms (norm + linear, linear + SwiGLU, RoPE + attention, the greedy head) are optional
// interfaces a backend may implement; the helpers in fused.go call them when present and fall
// back to the composition of basic ops otherwise, so a family always writes the fused call and
// every backend runs it.
package ml

import (
	"fmt"
	"slices"
	"sync"
)

// DType is the element type of a tensor.
type DType uint8

// Element types.
const (
	F32 DType = iota
	BF16
)

// Size is the bytes of one element.
func (d DType) Size() int64 {
	if d == BF16 {
		return 2
	}
	return 4
}

func (d DType) String() string {
	if d == BF16 {
		return "bf16"
	}
	return "f32"
}

// Tensor is a row-major matrix view of backend memory: Rows rows of Cols elements, the rows
// Stride elements apart. The zero Tensor is "none" (an absent bias, no residual delta).
type Tensor struct {
	Addr               uintptr
	Rows, Cols, Stride int
	DType              DType
}

// Valid reports whether t refers to memory.
func (t Tensor) Valid() bool { return t.Addr != 0 }

// RowsAt is the view of rows [r, r+n). A view of the zero Tensor is the zero Tensor: a backend
// hands that out after a failure, and the ops that follow do nothing.
func (t Tensor) RowsAt(r, n int) Tensor {
	if !t.Valid() {
		return t
	}
	if r < 0 || n < 0 || r+n > t.Rows {
		panic(fmt.Sprintf("ml: rows [%d, %d) of a %d-row tensor", r, r+n, t.Rows))
	}
	t.Addr += uintptr(int64(r) * int64(t.Stride) * t.DType.Size())
	t.Rows = n
	return t
}

// ColsAt is the view of columns [c, c+n) of every row (the zero Tensor stays zero).
func (t Tensor) ColsAt(c, n int) Tensor {
	if !t.Valid() {
		return t
	}
	if c < 0 || n < 0 || c+n > t.Cols {
		panic(fmt.Sprintf("ml: columns [%d, %d) of a %d-column tensor", c, c+n, t.Cols))
	}
	t.Addr += uintptr(int64(c) * t.DType.Size())
	t.Cols = n
	return t
}

// Reshape views a contiguous tensor as rows x cols (the same elements, e.g. a merger's 2x2
// patches as one row).
func (t Tensor) Reshape(rows, cols int) Tensor {
	if !t.Valid() {
		return t
	}
	if t.Stride != t.Cols || rows*cols != t.Rows*t.Cols {
		panic(fmt.Sprintf("ml: reshape of %dx%d (stride %d) to %dx%d", t.Rows, t.Cols, t.Stride, rows, cols))
	}
	t.Rows, t.Cols, t.Stride = rows, cols, cols
	return t
}

// Contiguous reports whether the rows follow each other without gaps.
func (t Tensor) Contiguous() bool { return t.Stride == t.Cols || t.Rows <= 1 }

// Ints is a vector of int32 in backend memory (token ids, row indexes, attention spans), with
// the host copy it was written from (ops that plan launches from it read Host).
type Ints struct {
	Addr uintptr
	Len  int
	Host []int32
}

// Slice is v's values [i, j) (its device address moved to i).
func (v Ints) Slice(i, j int) Ints {
	return Ints{Addr: v.Addr + uintptr(4*i), Len: j - i, Host: v.Host[i:j]}
}

// Mask describes which keys each query row of an attention sees, within its segment (the rows
// SegmentAttention's bounds give it, or the whole of q and k for Attention, or one sequence's
// cached keys for CachedAttention). Every form a family needs is a field here rather than an op
// of its own, and every backend implements each field (the CPU backend is the reference): an op
// given a form it does not take (a key mask over a KV pool) fails with ErrInvalidInput.
type Mask struct {
	// Causal lets query row i see keys [0, Past+i] only; otherwise every key is seen.
	Causal bool
	Past   int
	// Keys, when set, holds one flag a key row of the op's k (Attention and SegmentAttention: k's
	// rows, a segment's keys at its own rows): no query sees a key flagged 0 (a padded crop's
	// patches). A query that sees no key at all gets the plain mean of its segment's values, as
	// the reference's most-negative additive mask gives. CachedAttention takes no key flags.
	Keys Ints
	// Prefix, with Causal, lets every query row see keys [0, Prefix) as well: a prefix attended
	// both ways before causal rows (an encoder whose image tokens see one another and whose
	// learned queries see every image token and the queries before them). Query row i sees keys
	// [0, max(Prefix, Past+i+1)). Attention only; 0 is the plain causal mask.
	Prefix int
	// RelPos, when set (RelPos.H valid), adds a decomposed relative-position bias to every scaled
	// score before the softmax. Attention and SegmentAttention (within each segment, key j its
	// index in the segment); CachedAttention takes none.
	RelPos RelPos
}

// RelPos is a decomposed relative-position bias over keys laid out as a Height × Width grid in
// row-major order (a vision tower's window or whole grid): the score of query row i and key j
// under head h gains H[i, h·Height + j/Width] + W[i, h·Width + j%Width], the two summed first.
// H and W are in the activation type (the reference computes rel_h and rel_w in the model's
// dtype), a row for each query row of the op (heads·Height and heads·Width values); the family
// computes them from the queries and its position tables (rel_h = einsum(q, Rh), rel_w =
// einsum(q, Rw)).
type RelPos struct {
	H, W          Tensor
	Height, Width int
}

// RowsAt is the bias of query rows [r, r+n).
func (p RelPos) RowsAt(r, n int) RelPos {
	p.H, p.W = p.H.RowsAt(r, n), p.W.RowsAt(r, n)
	return p
}

// CheckRelPos refuses a bias that does not fit q rows of heads heads over keys keys.
func CheckRelPos(p RelPos, rows, heads, keys int) error {
	if !p.H.Valid() {
		return nil
	}
	if p.Height < 1 || p.Width < 1 || p.Height*p.Width < keys || p.H.Rows != rows || p.W.Rows != rows ||
		p.H.Cols != heads*p.Height || p.W.Cols != heads*p.Width || p.H.DType != p.W.DType {
		return fmt.Errorf("relative-position bias %dx%d and %dx%d over a %dx%d grid for %d rows of %d heads, %d keys: %w",
			p.H.Rows, p.H.Cols, p.W.Rows, p.W.Cols, p.Height, p.Width, rows, heads, keys, ErrInvalidInput)
	}
	return nil
}

// Attn describes one attention: heads of q over key/value heads of k and v (grouped when
// KVHeads < Heads), HeadDim each, the keys each query sees described by the Mask.
type Attn struct {
	Heads, KVHeads, HeadDim int
	Mask
	Scale float32
	// QNorm and KNorm, when set, RMS-normalise each head of q and of k in place (times the
	// weight's HeadDim values, epsilon NormEps) before the rotary embedding.
	// RopeCachedAttention and RopeSegmentAttention apply them; the other ops ignore them.
	QNorm, KNorm Tensor
	NormEps      float32
}

// Rotary are the cosines and sines of the rotary angles of some rows (F32, Dims/2 values a row).
type Rotary struct {
	Cos, Sin Tensor
	// Dims is the number of leading dimensions of each head that rotate (a partial rotary
	// embedding: the first 96 of 128, the rest passed through as they are); 0 rotates the whole
	// head. Even, and at most the head dim.
	Dims int
	// RoundOnce computes the rotation in F32 and rounds it to the storage type once (a vision
	// tower's apply_rotary_pos_emb_vision); otherwise cos, sin and each product round to it (a
	// decoder's apply_rotary_pos_emb in a bf16 model). Equal in F32.
	RoundOnce bool
}

// RowsAt is the angles of rows [r, r+n).
func (r Rotary) RowsAt(r0, n int) Rotary {
	r.Cos, r.Sin = r.Cos.RowsAt(r0, n), r.Sin.RowsAt(r0, n)
	return r
}

// Rotated is the number of leading dimensions of a head of hd that r rotates.
func (r Rotary) Rotated(hd int) int {
	if r.Dims == 0 {
		return hd
	}
	return r.Dims
}

// Partial reports whether r leaves some of a head of hd unrotated: a backend's kernels that
// rotate whole heads in place of the op then compose it from Rope instead.
func (r Rotary) Partial(hd int) bool { return r.Dims != 0 && r.Dims != hd }

// CheckRotary refuses angles that do not fit heads of hd: an odd or oversized Dims.
func CheckRotary(r Rotary, hd int) error {
	if d := r.Rotated(hd); d <= 0 || d%2 != 0 || d > hd {
		return fmt.Errorf("rotary over %d of a head's %d dimensions: %w", d, hd, ErrInvalidInput)
	}
	return nil
}

// GELUApprox selects GELU's form.
type GELUApprox uint8

// GELU forms: nn.GELU() and gelu_pytorch_tanh (nn.GELU(approximate="tanh")).
const (
	GELUErf GELUApprox = iota
	GELUTanh
)

// MoE describes a mixture-of-experts feed-forward with a softmax router and shared experts (the
// form of transformers 5.17's top-k routed MoE modules): a router picks TopK of Experts gated
// MLPs for each row, and the row's output is their outputs weighted by the router.
//
// Routing, in F32 whatever the activations' type: logits = x Router^T, scores = softmax(logits);
// greedy: the TopK highest scores; group-limited greedy (Groups > 1): the experts split into
// Groups consecutive groups, each group scored by its best expert, the scores of every expert
// outside the TopGroups best groups zeroed, then the TopK highest. Ties go to the lower expert
// index. The weights are the chosen scores times Scale (routed_scaling_factor), not renormalised.
//
// Slots: a row's TopK picks in order of descending score. Each expert computes
// down(silu(gate(x)) * up(x)) as a gated MLP of the activations' type does; the output sums, in
// F32 and in slot order, each expert's output times its F32 weight, rounds the sum once to the
// activations' type and adds add's row: the order of transformers' default experts path
// ("grouped_mm": proj_out * weights, then view(tokens, top_k, hidden).sum(1)), not the eager
// loop's (index_add_ per expert, ascending expert index), with the shared experts' output as add
// (experts(...) + shared_experts(residuals)). torch's CPU topk(sorted=False)
// hands the slots over in its selection's order, not by score: for TopK >= 3 its sum may differ
// from this one in the last bits.
type MoE struct {
	// Router is the gate's weight: Experts rows of the hidden size, F32.
	Router Tensor
	// GateUp holds every expert's gate and up projections, Experts·2·Inter rows of the hidden
	// size: expert e's gate in rows [2e·Inter, (2e+1)·Inter), its up in the next Inter rows (the
	// checkpoint's gate_up_proj [E, 2I, H] as one matrix).
	GateUp Tensor
	// Down holds every expert's down projection, Experts·hidden rows of Inter (down_proj
	// [E, H, I] as one matrix).
	Down Tensor
	// Experts routed experts of intermediate size Inter; TopK of them a row.
	Experts, TopK, Inter int
	// Groups > 1 selects group-limited greedy routing over TopGroups of Groups groups
	// (Experts divisible by Groups); 0 or 1 is greedy.
	Groups, TopGroups int
	// Scale multiplies every routing weight.
	Scale float32
}

// CheckMoE refuses a description whose shapes disagree with a hidden size of hidden.
func CheckMoE(m MoE, hidden int) error {
	switch {
	case m.Experts < 1 || m.TopK < 1 || m.TopK > m.Experts || m.Inter < 1:
		return fmt.Errorf("moe: top %d of %d experts of width %d: %w", m.TopK, m.Experts, m.Inter, ErrInvalidInput)
	case m.Groups > 1 && (m.Experts%m.Groups != 0 || m.TopGroups < 1 || m.TopGroups > m.Groups ||
		m.TopGroups*(m.Experts/m.Groups) < m.TopK):
		return fmt.Errorf("moe: top %d of %d groups of %d experts for top %d: %w", m.TopGroups, m.Groups, m.Experts, m.TopK, ErrInvalidInput)
	case m.Router.Rows != m.Experts || m.Router.Cols != hidden || m.Router.DType != F32 || !m.Router.Contiguous():
		return fmt.Errorf("moe: router %dx%d %s for %d experts of hidden %d (want f32, contiguous): %w",
			m.Router.Rows, m.Router.Cols, m.Router.DType, m.Experts, hidden, ErrInvalidInput)
	case m.GateUp.Rows != 2*m.Experts*m.Inter || m.GateUp.Cols != hidden || !m.GateUp.Contiguous():
		return fmt.Errorf("moe: gate/up %dx%d for %d experts of %d, hidden %d: %w", m.GateUp.Rows, m.GateUp.Cols, m.Experts, m.Inter, hidden, ErrInvalidInput)
	case m.Down.Rows != m.Experts*hidden || m.Down.Cols != m.Inter || !m.Down.Contiguous() || m.Down.DType != m.GateUp.DType:
		return fmt.Errorf("moe: down %dx%d %s for %d experts of %d, hidden %d: %w", m.Down.Rows, m.Down.Cols, m.Down.DType, m.Experts, m.Inter, hidden, ErrInvalidInput)
	}
	return nil
}

// Out is one output of a [Backend.Linears] product: Y = x W^T + B.
type Out struct {
	Y, W, B Tensor
}

// Backend is one device's memory and ops. Calls on a Backend are not safe for concurrent use;
// the model that owns it serialises them.
type Backend interface {
	// Name is e.g. "cpu/avx2" or "cuda/H200".
	Name() string
	// DType is the storage type of activations.
	DType() DType
	// MatrixType is the type a weight matrix stored as stored is kept in.
	MatrixType(stored DType) DType

	// Scratch is a buffer of rows x cols activations kept by name between calls (grown when
	// asked for more); its contents are undefined. Buffers of different names never overlap.
	Scratch(name string, rows, cols int) Tensor
	// ScratchF32 is Scratch in F32 whatever DType is (rotary tables, logits).
	ScratchF32(name string, rows, cols int) Tensor
	// Alloc is a zeroed buffer that lives until the backend is closed (KV caches).
	Alloc(rows, cols int, dt DType) (Tensor, error)
	// Load copies a host tensor (F32, BF16 or F16 bytes, little-endian, rows x cols) into
	// backend memory of type dt, which lives until the backend is closed. A backend may use
	// src in place when the types agree and src outlives the backend (a mapped file).
	Load(src []byte, from string, rows, cols int, dt DType) (Tensor, error)
	// Write copies host values into dst (converted to its type).
	Write(dst Tensor, src []float32)
	// Input is host values as a rows x cols F32 tensor that the ops after it read (rotary
	// tables), and Ints host ints the same way (token ids, row indexes, spans); both are valid
	// until the next Sync. A backend may gather a pass's inputs into one upload.
	Input(v []float32, rows, cols int) Tensor
	Ints(v []int32) Ints
	// Read copies src (F32) into host values once the ops before it have run: dst is filled by
	// the next Sync.
	Read(dst []float32, src Tensor)

	// Embed sets row i of dst to row ids[i] of table.
	Embed(dst, table Tensor, ids Ints)
	// Linears computes Y = x W^T + B for each output (B may be none); they share x.
	Linears(x Tensor, outs ...Out)
	// RMSNorm sets xOut = x + delta (x alone when delta is none; xOut may be x) and y =
	// xOut / rms(xOut) * w: the residual add before a norm, fused.
	RMSNorm(y, xOut, x, delta, w Tensor, eps float32)
	// LayerNorm sets xOut = x + delta as RMSNorm does and y = (xOut - mean) / sqrt(var + eps)
	// * w + bias (bias may be none): nn.LayerNorm, statistics in F32.
	LayerNorm(y, xOut, x, delta, w, bias Tensor, eps float32)
	// HeadNorm RMS-normalises each of the heads (hd values) of every row of x in place and
	// multiplies by w (hd values): a per-head q/k norm before RoPE.
	HeadNorm(x Tensor, heads, hd int, w Tensor, eps float32)
	// SiluMul sets y = silu(gate) * up.
	SiluMul(y, gate, up Tensor)
	// GELU applies GELU to x in place: the erf form or the tanh approximation.
	GELU(x Tensor, approx GELUApprox)
	// ScaleCols multiplies column j of every row of x by w's value j in place (w holds x.Cols
	// values), rounding each product once to x's type: a LayerScale (a vision
	// block's per-channel lambda times its attention or MLP output).
	ScaleCols(x, w Tensor)
	// Gather sets dst row i to src row idx[i]; Scatter sets dst row idx[i] to src row i.
	Gather(dst, src Tensor, idx Ints)
	Scatter(dst, src Tensor, idx Ints)
	// ScatterAdd adds src row i to dst row idx[i] (features added at some positions of a
	// residual stream), rounding the sum once to dst's type.
	ScatterAdd(dst, src Tensor, idx Ints)
	// AddEmbedBag adds to row i of dst the sum over k < K of weights[i, k] * table row ids[i*K+k]
	// (K = weights.Cols, weights F32): a learned position table resampled to a grid. The sum is
	// accumulated in F32 and rounded to dst's type before the add.
	AddEmbedBag(dst, table Tensor, ids Ints, weights Tensor)
	// Rope rotates each of the heads of every row of x (head dim hd) by the row's angles:
	// x*cos + rotate_half(x)*sin over the head's first rot.Dims dimensions (all of them when 0),
	// the second half of the angles equal to the first.
	Rope(x Tensor, heads, hd int, rot Rotary)
	// Attention sets out = softmax(q k^T * scale [+ causal mask]) v for every head.
	Attention(out, q, k, v Tensor, a Attn)
	// CachedAttention is attention over a KV pool: query row i sees the rows [spans[2i],
	// spans[2i] + spans[2i+1]) of k and v (a sequence's cached keys up to its own position), so
	// that one call serves every sequence of a batch, prefill rows and decode rows alike.
	CachedAttention(out, q, k, v Tensor, spans Ints, a Attn)
	// SegmentAttention is Attention within each segment of rows [bounds[i], bounds[i+1]) of q,
	// k and v alike (not causal): windows and frames of a vision tower.
	SegmentAttention(out, q, k, v Tensor, bounds []int32, a Attn)
	// MoE sets y = the mixture of experts m over the rows of x, plus add (see [MoE]; add may be
	// none, y may be add). On a GPU the experts' products are grouped: one product an expert over
	// the rows routed to it.
	MoE(y, x, add Tensor, m MoE)
	// Argmax writes the index of the largest value of each row of x (F32) to dst, the first
	// one on ties, skipping NaNs; dst is filled by the next Sync.
	Argmax(dst []int32, x Tensor)

	// Err is the first failure of an op since the last Sync (ops after a failure do nothing).
	Err() error
	// Sync waits for every op, fills the destinations of Read and Argmax, and returns Err,
	// then clears it.
	Sync() error
	// Close releases every buffer; the backend is unusable after it.
	Close() error
}

// Runner is a backend whose ops must all be issued from one thread (a GPU context's): Do runs
// fn there. Families issue a pass's ops inside Do (see the function of that name).
type Runner interface {
	Do(fn func() error) error
}

// Laner is a backend that opens lanes: backends over the same device and weights (tensors of
// either are valid in both), each with a thread, a queue of work (a GPU stream) and scratch
// memory of its own, whose passes run beside their parent's, so that a model's vision tower
// overlaps its decoder. The parent's Close closes its lanes.
type Laner interface {
	Lane() (Backend, error)
}

// Lanes are the lanes a backend has opened and not yet closed, for its Close (and whatever else
// it applies to them all); safe for concurrent use.
type Lanes struct {
	mu   sync.Mutex
	open []Backend
}

// Add records an opened lane.
func (l *Lanes) Add(b Backend) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open = append(l.open, b)
}

// Remove forgets a lane that closed on its own.
func (l *Lanes) Remove(b Backend) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open = slices.DeleteFunc(l.open, func(x Backend) bool { return x == b })
}

// List returns the lanes open now.
func (l *Lanes) List() []Backend {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.open)
}

// CloseAll closes every lane and forgets them.
func (l *Lanes) CloseAll() {
	l.mu.Lock()
	open := l.open
	l.open = nil
	l.mu.Unlock()
	for _, b := range open {
		_ = b.Close()
	}
}

// Do runs fn on b's thread when b has one, else on the caller's.
func Do(b Backend, fn func() error) error {
	if r, ok := b.(Runner); ok {
		return r.Do(fn)
	}
	return fn()
}

// Marker is a backend that times the ops between marks (a profile by stage).
type Marker interface {
	Mark(stage string)
}

// Mark ends the stage before it: the ops issued since the previous mark belong to stage.
func Mark(b Backend, stage string) {
	if m, ok := b.(Marker); ok {
		m.Mark(stage)
	}
}

// LongestSpan is the most keys any query row of CachedAttention's spans sees: the longest cache
// of a decode step (its graph key's ml.KeyBucket, and the backend's attention grid, both come
// from it).
func LongestSpan(spans []int32) int {
	longest := 0
	for i := 1; i < len(spans); i += 2 {
		longest = max(longest, int(spans[i]))
	}
	return longest
}

// LeadingDecodeRows counts the query rows at the start of CachedAttention's spans that are each a
// sequence of their own (one new token: a decode step) when a sequence of several rows follows
// them, and is 0 otherwise: a prefill pass that carries decode steps first (engine.Scheduler), whose
// leading rows a backend may attend to as a decode step's.
func LeadingDecodeRows(spans []int32) int {
	rows := len(spans) / 2
	for i := range rows - 1 {
		if spans[2*i+2] == spans[2*i] { // row i+1 continues row i's sequence
			return i
		}
	}
	return 0 // every row its own sequence, or none
}

// SpanRun is a run of CachedAttention's query rows that continue one sequence: row Row+i sees
// the pool rows [Start, Start+Past+1+i), a causal attention after Past cached keys.
type SpanRun struct {
	Row, Rows, Start, Past int
}

// SpanRuns splits CachedAttention's spans (two values a query row) into runs of one sequence
// each, checking them against the pool's rows. Backends that attend per sequence share it.
func SpanRuns(spans []int32, rows, poolRows int) ([]SpanRun, error) {
	if len(spans) != 2*rows {
		return nil, fmt.Errorf("%d span values for %d rows", len(spans), rows)
	}
	var runs []SpanRun
	for i := 0; i < rows; {
		start, n0 := int(spans[2*i]), int(spans[2*i+1])
		j := i + 1
		for j < rows && int(spans[2*j]) == start && int(spans[2*j+1]) == n0+(j-i) {
			j++
		}
		keys := n0 + (j - i) - 1
		if start < 0 || n0 < 1 || start+keys > poolRows {
			return nil, fmt.Errorf("keys [%d, %d) of a pool of %d rows", start, start+keys, poolRows)
		}
		runs = append(runs, SpanRun{Row: i, Rows: j - i, Start: start, Past: n0 - 1})
		i = j
	}
	return runs, nil
}
