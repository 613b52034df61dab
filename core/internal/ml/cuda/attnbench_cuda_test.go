//go:build cuda

package cuda

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/iris-vlm/iris/core/internal/ml"
)

// attnShape is one attention of a family at full size, as testdata/attn_shapes.json describes
// it (scripts/gpu/attn_sdpa.py reads the same file).
type attnShape struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"` // segment, prefill or prefix
	Segs   int    `json:"segs"`
	N      int    `json:"n"`
	Heads  int    `json:"heads"`
	KVH    int    `json:"kvh"`
	HD     int    `json:"hd"`
	Pad    int    `json:"pad"`
	Grid   []int  `json:"grid"`
	Block  []int  `json:"block"`
	Prefix int    `json:"prefix"`
}

// masked reports whether s has a form beyond the causal rule (NoMMAMask changes its path).
func (s attnShape) masked() bool {
	return s.Pad > 0 || len(s.Grid) == 2 || len(s.Block) == 2 || s.Prefix > 0
}

// loadAttnShapes reads testdata/attn_shapes.json.
func loadAttnShapes(t testing.TB) []attnShape {
	t.Helper()
	data, err := os.ReadFile("testdata/attn_shapes.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Shapes []attnShape `json:"shapes"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("testdata/attn_shapes.json: %v", err)
	}
	for _, s := range f.Shapes {
		if s.N < 1 || s.Heads < 1 || s.KVH < 1 || s.Heads%s.KVH != 0 || s.HD < 1 || (s.Kind == "segment" && s.Segs < 1) {
			t.Fatalf("testdata/attn_shapes.json: shape %+v", s)
		}
	}
	return f.Shapes
}

// randTensor is a tensor of rows x cols standard normal values on bk.
func randTensor(bk *Backend, r *rand.Rand, rows, cols int) ml.Tensor {
	return devTensor(bk, rows, cols, randn(r, bk.dt, rows*cols, 1))
}

// issue builds s's inputs on bk and returns its op (one call).
func (s attnShape) issue(bk *Backend, r *rand.Rand) func() {
	hd, heads, kvh, n := s.HD, s.Heads, s.KVH, s.N
	a := ml.Attn{Heads: heads, KVHeads: kvh, HeadDim: hd, Scale: float32(1 / math.Sqrt(float64(hd)))}
	switch s.Kind {
	case "segment": // q, k and v in one fused row, as a tower's qkv product writes them
		w, kw := heads*hd, kvh*hd
		rows := s.Segs * n
		qkv := randTensor(bk, r, rows, w+2*kw)
		q, k, v := qkv.ColsAt(0, w), qkv.ColsAt(w, kw), qkv.ColsAt(w+kw, kw)
		out := bk.Scratch("bench.out", rows, w)
		bounds := make([]int32, s.Segs+1)
		for i := range bounds {
			bounds[i] = int32(i * n)
		}
		if s.Pad > 0 { // every other segment's last Pad keys padding
			flags := make([]int32, rows)
			for i := range flags {
				if (i/n)%2 == 1 || i%n < n-s.Pad {
					flags[i] = 1
				}
			}
			a.Keys = bk.Ints(flags)
		}
		if len(s.Grid) == 2 {
			gh, gw := s.Grid[0], s.Grid[1]
			a.RelPos = ml.RelPos{H: randTensor(bk, r, rows, heads*gh), W: randTensor(bk, r, rows, heads*gw), Height: gh, Width: gw}
		}
		return func() { bk.SegmentAttention(out, q, k, v, bounds, a) }
	case "prefill": // one prompt over the pool, causal, rows Block[0]..Block[1] a block
		q := randTensor(bk, r, n, heads*hd)
		kp, vp := randTensor(bk, r, n, kvh*hd), randTensor(bk, r, n, kvh*hd)
		out := bk.Scratch("bench.out", n, heads*hd)
		spans := make([]int32, 0, 2*n)
		for j := range n {
			c := j + 1
			if len(s.Block) == 2 && j >= s.Block[0] && j < s.Block[1] {
				c = s.Block[1]
			}
			spans = append(spans, 0, int32(c))
		}
		sp := bk.Ints(spans)
		a.Mask = ml.Mask{Causal: true}
		return func() { bk.CachedAttention(out, q, kp, vp, sp, a) }
	default: // prefix: causal after a prefix seen both ways
		q := randTensor(bk, r, n, heads*hd)
		k, v := randTensor(bk, r, n, kvh*hd), randTensor(bk, r, n, kvh*hd)
		out := bk.Scratch("bench.out", n, heads*hd)
		a.Mask = ml.Mask{Causal: true, Prefix: s.Prefix}
		return func() { bk.Attention(out, q, k, v, a) }
	}
}

// BenchmarkAttentionForms times each of testdata/attn_shapes.json's shapes on three paths of a bf16 backend in the same
// run: the tensor-core flash kernels (iris_attn_mma and its masked variant, the default), the
// masked forms through cuBLAS with the scores materialised (NoMMAMask), and every form through
// cuBLAS or the CUDA-core flash kernel (NoMMA). Best of max(N, 5) rounds of 10 calls, in µs a
// call. On the GPU machine:
//
//	cuda.test -test.run '^$' -test.bench AttentionForms -test.benchtime 5x
//
// scripts/gpu/attn_sdpa.py times torch's SDPA backends (flash, cuDNN, memory-efficient) on the
// same shapes for the comparison.
func BenchmarkAttentionForms(b *testing.B) {
	for _, sh := range loadAttnShapes(b) {
		for _, p := range []struct {
			name string
			opts Options
		}{{"mma", Options{Precision: "bf16"}}, {"cublas-masks", Options{Precision: "bf16", NoMMAMask: true}},
			{"cublas", Options{Precision: "bf16", NoMMA: true, NoMMAMask: true}}} {
			if p.opts.NoMMAMask && !p.opts.NoMMA && !sh.masked() {
				continue // the same path as mma
			}
			b.Run(sh.Name+"/"+p.name, func(b *testing.B) {
				bk := newBackend(b, p.opts)
				var op func()
				if err := bk.Do(func() error {
					op = sh.issue(bk, rand.New(rand.NewPCG(5, 6)))
					return bk.Sync()
				}); err != nil {
					b.Fatal(err)
				}
				const calls = 10
				round := func() time.Duration {
					start := time.Now()
					if err := bk.Do(func() error {
						for range calls {
							op()
						}
						return bk.Sync()
					}); err != nil {
						b.Fatal(err)
					}
					return time.Since(start)
				}
				round() // warm: scratch, tables, plans
				best := time.Duration(math.MaxInt64)
				for range max(b.N, 5) {
					best = min(best, round())
				}
				b.ReportMetric(float64(best.Nanoseconds())/1e3/calls, "us/call")
			})
		}
	}
}
