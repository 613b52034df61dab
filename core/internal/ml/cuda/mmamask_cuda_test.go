//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/ml/cuda/gpu"
)

// TestKernelMMAMaskAttention launches iris_attn_mma_mask at every head dim on each mask form
// alone and combined, over segments of one row, of a tile and a key past it, of a tile's two
// halves, and of a thousand rows and more, with grouped KV heads, against maskedRef:
//   - prefix: causal rows that also see a segment's first keys (an encoder's image tokens);
//   - counts: per-row key counts from a span table (a bidirectional block inside causal rows,
//     after cached keys, beside a decode row);
//   - keys: flagged keys, one segment with every key flagged (the plain mean);
//   - relpos: SAM's 14x14 windows and a 40x40 global grid with a decomposed bias.
func TestKernelMMAMaskAttention(t *testing.T) {
	f := newKfix(t)
	r := rand.New(rand.NewPCG(81, 82))
	// a sequence after 5 cached keys: rows 3..60 of its 70-row chunk a block; a decode row
	var counts []int32
	for j := range 70 {
		n := 5 + j + 1
		if j >= 3 && j <= 60 {
			n = 5 + 60 + 1
		}
		counts = append(counts, 0, int32(n))
	}
	counts = append(counts, 80, 10)
	// a 1,100-row chunk of one sequence: rows 100..999 a block
	var long []int32
	for j := range 1100 {
		n := j + 1
		if j >= 100 && j < 1000 {
			n = 1000
		}
		long = append(long, 2000, int32(n))
	}
	type tc struct {
		name      string
		heads, kv int
		segs      []maskedSeg
		causal    bool
		prefix    int
		spans     []int32 // per-row counts (start, count a row), rows of the op's queries
		flags     func(n int) []int32
		grid      [2]int // a relative-position bias over this grid
	}
	flagsSome := func(n int) []int32 {
		fl := make([]int32, n)
		for i := range fl {
			fl[i] = 1
			if i%7 == 3 || (i >= 40 && i < 64) {
				fl[i] = 0
			}
		}
		return fl
	}
	flagsPadded := func(n int) []int32 { // the first segment's tail padding, the second all padding
		fl := make([]int32, n)
		for i := range fl {
			fl[i] = 1
			if (i >= 262 && i < 300) || (i >= 300 && i < 317) {
				fl[i] = 0
			}
		}
		return fl
	}
	cases := []tc{
		{name: "prefix", heads: 4, kv: 4, segs: []maskedSeg{{0, 40, 0, 40}, {40, 300, 40, 300}, {340, 1, 340, 1}}, causal: true, prefix: 16},
		{name: "prefix-long-gqa4", heads: 4, kv: 1, segs: []maskedSeg{{0, 1100, 0, 1100}}, causal: true, prefix: 1024},
		{name: "prefix-past", heads: 2, kv: 1, segs: []maskedSeg{{0, 65, 0, 130}}, causal: true, prefix: 100},
		{name: "counts", heads: 6, kv: 2, segs: []maskedSeg{{0, 70, 0, 75}, {70, 1, 80, 10}}, spans: counts},
		{name: "counts-long", heads: 4, kv: 4, segs: []maskedSeg{{0, 1100, 2000, 1100}}, spans: long},
		{name: "keys", heads: 4, kv: 2, segs: []maskedSeg{{0, 300, 0, 300}, {300, 17, 300, 17}, {317, 64, 317, 64}, {381, 65, 381, 65}}, flags: flagsPadded},
		{name: "keys-causal", heads: 3, kv: 1, segs: []maskedSeg{{0, 129, 0, 129}}, causal: true, flags: flagsSome},
		{name: "keys-1025", heads: 2, kv: 2, segs: []maskedSeg{{0, 1025, 0, 1025}, {1025, 1025, 1025, 1025}}, flags: flagsSome},
		{name: "relpos-windows", heads: 2, kv: 2, segs: []maskedSeg{{0, 196, 0, 196}, {196, 196, 196, 196}, {392, 196, 392, 196}}, grid: [2]int{14, 14}},
		{name: "relpos-global", heads: 2, kv: 2, segs: []maskedSeg{{0, 1600, 0, 1600}}, grid: [2]int{40, 40}},
		{name: "relpos-keys", heads: 4, kv: 4, segs: []maskedSeg{{0, 196, 0, 196}, {196, 196, 196, 196}}, grid: [2]int{14, 14}, flags: flagsSome},
		{name: "prefix-keys", heads: 4, kv: 2, segs: []maskedSeg{{0, 200, 0, 200}}, causal: true, prefix: 150, flags: flagsSome},
	}
	for _, c := range cases {
		for _, hd := range mmaHeadDims {
			t.Run(fmt.Sprintf("%s/%d", c.name, hd), func(t *testing.T) {
				qd, kvd := c.heads*hd, c.kv*hd
				ldq, ldk := qd+8, kvd+8 // padded rows, 16-byte multiples
				nq, nk, longest := 0, 0, 0
				var table []int32
				for _, s := range c.segs {
					nq, nk, longest = max(nq, s.q0+s.nq), max(nk, s.k0+s.nk), max(longest, s.nq)
					table = append(table, int32(s.q0), int32(s.nq), int32(s.k0), int32(s.nk))
				}
				q, k, v := randn(r, bf16, nq*ldq, 1), randn(r, bf16, nk*ldk, 1), randn(r, bf16, nk*ldk, 1)
				scale := 1 / math.Sqrt(float64(hd))
				form := maskedForm{reach: func(s maskedSeg, i int) int {
					switch {
					case c.spans != nil:
						return int(c.spans[2*(s.q0+i)+1])
					case c.causal:
						return min(s.nk, max(c.prefix, i+s.nk-s.nq+1))
					}
					return s.nk
				}}
				if c.flags != nil {
					form.flags = c.flags(nk)
				}
				var rh, rw []float32
				gh, gw := c.grid[0], c.grid[1]
				if gh > 0 {
					rh, rw = randn(r, bf16, nq*c.heads*gh, 1), randn(r, bf16, nq*c.heads*gw, 1)
					form.bias = func(row, h, j int) float64 {
						return round(bf16, float64(rh[row*c.heads*gh+h*gh+j/gw])+float64(rw[row*c.heads*gw+h*gw+j%gw]))
					}
				}
				want := maskedRef(q, k, v, c.segs, c.heads, c.kv, hd, ldq, ldk, scale, form)
				var got []float32
				f.do(func() error {
					qp, kp, vp, out := f.put(bf16, q), f.put(bf16, k), f.put(bf16, v), f.poisoned(bf16, nq*qd)
					sp := f.putI32(table)
					causal := 0
					if c.causal || c.spans != nil {
						causal = 1
					}
					lim, keys, rhp, rwp := gpu.DevPtr(0), gpu.DevPtr(0), gpu.DevPtr(0), gpu.DevPtr(0)
					if c.spans != nil {
						lim = f.putI32(c.spans).Add(4)
					}
					if form.flags != nil {
						keys = f.putI32(form.flags)
					}
					if gh > 0 {
						rhp, rwp = f.put(bf16, rh), f.put(bf16, rw)
					}
					err := f.ks[bf16].mmaMask[hd].Launch(mmaGrid(longest, c.heads, len(c.segs)),
						gpu.Dim3{X: mmaThreads}, 0, f.s, gpu.P(out), gpu.P(qp), gpu.P(kp), gpu.P(vp), gpu.I(ldq), gpu.I(ldk), gpu.I(ldk),
						gpu.I(qd), gpu.P(sp), gpu.I(c.heads), gpu.I(c.kv), gpu.I(causal), gpu.F(float32(scale)),
						gpu.I(c.prefix), gpu.P(lim), gpu.I(2), gpu.P(keys),
						gpu.P(rhp), gpu.P(rwp), gpu.I(c.heads*gh), gpu.I(c.heads*gw), gpu.I(gh), gpu.I(max(gw, 1)))
					if err == nil {
						err = f.s.Sync()
					}
					got = f.get(bf16, out, nq*qd)
					return err
				})
				for si, s := range c.segs {
					check(t, fmt.Sprintf("segment %d (%dx%d)", si, s.nq, s.nk), got[s.q0*qd:(s.q0+s.nq)*qd], want[s.q0*qd:(s.q0+s.nq)*qd], 2*tolFor(bf16))
				}
			})
		}
	}
}

// TestKernelBackendMaskedKernel runs each mask form through the backend's ops in bf16 at the head
// dims of the tensor-core kernel and checks that iris_attn_mma_mask served it (one launch for
// all of an op's segments) and agrees with the cuBLAS path (Options.NoMMAMask): key flags
// through SegmentAttention and Attention, a prefix through Attention, a bias through
// SegmentAttention, per-row key counts (a bidirectional block) through CachedAttention.
func TestKernelBackendMaskedKernel(t *testing.T) {
	for _, hd := range mmaHeadDims {
		t.Run(fmt.Sprint(hd), func(t *testing.T) {
			r := rand.New(rand.NewPCG(91, uint64(hd)))
			const heads, kvh = 4, 2
			qd, kvd := heads*hd, kvh*hd
			bounds := []int32{0, 300, 317, 381, 446}
			n := int(bounds[len(bounds)-1])
			q, k, v := randn(r, bf16, n*qd, 1), randn(r, bf16, n*kvd, 1), randn(r, bf16, n*kvd, 1)
			flags := make([]int32, n)
			for i := range flags {
				flags[i] = 1
				if i%5 == 2 || (i >= 262 && i < 317) {
					flags[i] = 0
				}
			}
			big := [2]int{18, 17} // the bias's grid: 306 keys, the longest segment 300 of them
			rh, rw := randn(r, bf16, n*heads*big[0], 1), randn(r, bf16, n*heads*big[1], 1)
			var spans []int32
			for j := range n {
				c := j + 1
				if j >= 40 && j < 300 {
					c = 300
				}
				spans = append(spans, 0, int32(c))
			}
			scale := float32(1 / math.Sqrt(float64(hd)))
			type result struct {
				flagsSeg, flagsOne, prefix, rel, counts []float32
				ops                                     map[string]int
			}
			run := func(opts Options) result {
				b := newBackend(t, opts)
				b.SetProfileOps(true)
				var res result
				err := b.Do(func() error {
					qt, kt, vt := devTensor(b, n, qd, q), devTensor(b, n, kvd, k), devTensor(b, n, kvd, v)
					a := ml.Attn{Heads: heads, KVHeads: kvh, HeadDim: hd, Scale: scale}
					out := b.Scratch("out", n, qd)
					fa := a
					fa.Keys = b.Ints(flags)
					b.SegmentAttention(out, qt, kt, vt, bounds, fa)
					res.flagsSeg = readBack(b, out)
					fa.Keys = b.Ints(flags[:300])
					b.Attention(out.RowsAt(0, 300), qt.RowsAt(0, 300), kt.RowsAt(0, 300), vt.RowsAt(0, 300), fa)
					res.flagsOne = readBack(b, out.RowsAt(0, 300))
					pa := a
					pa.Mask = ml.Mask{Causal: true, Prefix: 200}
					b.Attention(out, qt, kt, vt, pa)
					res.prefix = readBack(b, out)
					ra := a
					ra.RelPos = ml.RelPos{H: devTensor(b, n, heads*big[0], rh), W: devTensor(b, n, heads*big[1], rw), Height: big[0], Width: big[1]}
					b.SegmentAttention(out, qt, kt, vt, bounds, ra)
					res.rel = readBack(b, out)
					ca := a
					ca.Mask = ml.Mask{Causal: true}
					b.CachedAttention(out, qt, kt, vt, b.Ints(spans), ca)
					res.counts = readBack(b, out)
					return b.Sync()
				})
				if err != nil {
					t.Fatal(err)
				}
				res.ops = opLaunches(b.Profile())
				return res
			}
			got, ref := run(Options{Precision: "bf16"}), run(Options{Precision: "bf16", NoMMAMask: true})
			check(t, "SegmentAttention with key flags", got.flagsSeg, widen(ref.flagsSeg), tolFor(bf16))
			check(t, "Attention with key flags", got.flagsOne, widen(ref.flagsOne), tolFor(bf16))
			check(t, "Attention with a prefix", got.prefix, widen(ref.prefix), tolFor(bf16))
			check(t, "SegmentAttention with a bias", got.rel, widen(ref.rel), tolFor(bf16))
			check(t, "CachedAttention with a bidirectional block", got.counts, widen(ref.counts), tolFor(bf16))
			name := fmt.Sprintf("iris_attn_mma_mask_bf16_%d", hd)
			if got.ops[name] != 5 || ref.ops[name] != 0 {
				t.Errorf("%s launched %d times (want 5: one an op), with NoMMAMask %d (want 0); launches %v", name, got.ops[name], ref.ops[name], got.ops)
			}
		})
	}
}

// TestKernelSequenceSegments checks the masked kernel's segments of CachedAttention's spans: a
// sequence's consecutive rows one segment over the most keys any of them sees.
func TestKernelSequenceSegments(t *testing.T) {
	spans := []int32{0, 6, 0, 9, 0, 9, 0, 9, 0, 10, 80, 10, 120, 3, 120, 4}
	got := sequenceSegments(spans)
	want := []int32{0, 5, 0, 10, 5, 1, 80, 10, 6, 2, 120, 4}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("sequenceSegments(%v) = %v, want %v", spans, got, want)
	}
}
