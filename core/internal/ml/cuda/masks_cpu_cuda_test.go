//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/ml/cpu"
)

// maskCase is one attention op with a mask form, written against ml.Backend so that the CPU
// backend (the reference) and each CUDA backend run the same calls on the same values.
type maskCase struct {
	name  string
	heads int
	kvh   int
	run   func(bk ml.Backend, in maskInputs) ml.Tensor // issues the op, returns its output
	rows  int                                          // query rows (and k/v rows: the pool for CachedAttention)
}

// maskInputs are a case's tensors on one backend: q (rows x heads*hd), k and v (rows x kvh*hd),
// and a bias's two tables when the case has one.
type maskInputs struct {
	q, k, v, rh, rw ml.Tensor
	a               ml.Attn
}

// maskCases are the forms of ml.Mask at a length of n rows: key flags over segments, a
// relative-position bias over a grid that holds a segment, a prefix seen both ways before causal
// rows, a bidirectional block in a causal chunk after cached keys, and that chunk plainly causal.
func maskCases(n int) []maskCase {
	half := max(1, n/2)
	bounds := []int32{0, int32(half)} // two segments, or one of a single row
	if half < n {
		bounds = append(bounds, int32(n))
	}
	gh := int(math.Ceil(math.Sqrt(float64(n))))
	gw := (n + gh - 1) / gh
	const past = 7
	spans := func(block bool) []int32 { // a chunk of n rows after past cached keys
		var s []int32
		lo, hi := n/4, max(n/4+1, 3*n/4)
		for j := range n {
			c := past + j + 1
			if block && j >= lo && j < hi {
				c = past + hi
			}
			s = append(s, 0, int32(c))
		}
		return s
	}
	flags := make([]int32, n)
	for i := range flags {
		if i%5 != 2 && i < n-n/8 {
			flags[i] = 1
		}
	}
	return []maskCase{
		{"keys", 4, 2, func(bk ml.Backend, in maskInputs) ml.Tensor {
			out := bk.Scratch("m.out", n, in.q.Cols)
			in.a.Keys = bk.Ints(flags)
			bk.SegmentAttention(out, in.q, in.k, in.v, bounds, in.a)
			return out
		}, n},
		{"relpos", 3, 3, func(bk ml.Backend, in maskInputs) ml.Tensor {
			out := bk.Scratch("m.out", n, in.q.Cols)
			in.a.RelPos = ml.RelPos{H: in.rh, W: in.rw, Height: gh, Width: gw}
			bk.SegmentAttention(out, in.q, in.k, in.v, bounds, in.a)
			return out
		}, n},
		{"prefix", 4, 1, func(bk ml.Backend, in maskInputs) ml.Tensor {
			out := bk.Scratch("m.out", n, in.q.Cols)
			in.a.Mask = ml.Mask{Causal: true, Prefix: min(half+1, n)}
			bk.Attention(out, in.q, in.k, in.v, in.a)
			return out
		}, n},
		{"block", 6, 2, func(bk ml.Backend, in maskInputs) ml.Tensor {
			out := bk.Scratch("m.out", n, in.q.Cols)
			in.a.Mask = ml.Mask{Causal: true}
			bk.CachedAttention(out, in.q, in.k, in.v, bk.Ints(spans(true)), in.a)
			return out
		}, n + past},
		{"causal-chunk", 6, 2, func(bk ml.Backend, in maskInputs) ml.Tensor {
			out := bk.Scratch("m.out", n, in.q.Cols)
			in.a.Mask = ml.Mask{Causal: true}
			bk.CachedAttention(out, in.q, in.k, in.v, bk.Ints(spans(false)), in.a)
			return out
		}, n + past},
	}
}

// TestKernelBackendMasksAgainstCPU runs every mask form at every head dim of the tensor-core
// kernel and lengths across its tiles (one row, under a tile, a tile and a row past it, a
// thousand and more) on the CPU backend, the reference, and on the CUDA backends: fp32 (the
// cuBLAS and CUDA-core paths) and bf16 (iris_attn_mma and iris_attn_mma_mask), on the same
// bf16-exact values.
func TestKernelBackendMasksAgainstCPU(t *testing.T) {
	ref, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ref.Close() })
	cudas := map[string]*Backend{"fp32": newBackend(t, Options{Precision: "fp32"}), "bf16": newBackend(t, Options{Precision: "bf16"})}
	for _, n := range []int{1, 17, 64, 65, 200, 1025} {
		for _, hd := range mmaHeadDims {
			for _, c := range maskCases(n) {
				t.Run(fmt.Sprintf("%s/n%d/d%d", c.name, n, hd), func(t *testing.T) {
					r := rand.New(rand.NewPCG(uint64(n), uint64(hd)))
					qd, kvd := c.heads*hd, c.kvh*hd
					gh := int(math.Ceil(math.Sqrt(float64(n))))
					gw := (n + gh - 1) / gh
					q, k, v := randn(r, bf16, n*qd, 1), randn(r, bf16, c.rows*kvd, 1), randn(r, bf16, c.rows*kvd, 1)
					rh, rw := randn(r, bf16, n*c.heads*gh, 1), randn(r, bf16, n*c.heads*gw, 1)
					a := ml.Attn{Heads: c.heads, KVHeads: c.kvh, HeadDim: hd, Scale: float32(1 / math.Sqrt(float64(hd)))}
					// issue runs the case on bk (on its device thread for a CUDA backend: errors
					// come back, never t.Fatal there)
					issue := func(bk ml.Backend, dt ml.DType) ([]float32, error) {
						var err error
						put := func(rows, cols int, v []float32) ml.Tensor {
							m, e := bk.Alloc(rows, cols, dt)
							if e != nil {
								err = e
								return m
							}
							bk.Write(m, v)
							return m
						}
						in := maskInputs{q: put(n, qd, q), k: put(c.rows, kvd, k), v: put(c.rows, kvd, v),
							rh: put(n, c.heads*gh, rh), rw: put(n, c.heads*gw, rw), a: a}
						if err != nil {
							return nil, err
						}
						out := c.run(bk, in)
						got := make([]float32, out.Rows*out.Cols)
						bk.Read(got, out)
						return got, bk.Sync()
					}
					w, err := issue(ref, ml.F32)
					if err != nil {
						t.Fatalf("the CPU backend: %v", err)
					}
					want := widen(w)
					for _, prec := range []string{"fp32", "bf16"} {
						b := cudas[prec]
						var got []float32
						if err := b.Do(func() error {
							var err error
							got, err = issue(b, b.dt.ml())
							return err
						}); err != nil {
							t.Fatalf("%s: %v", prec, err)
						}
						tol := 2e-5
						if prec == "bf16" {
							tol = 2 * tolFor(bf16)
						}
						check(t, prec+" against the CPU backend", got, want, tol)
					}
				})
			}
		}
	}
}
