//go:build cuda && quack

package cuda

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/iris-vlm/iris/core/internal/ml"
)

// TestKernelBackendSwiGLUProduct runs ml.NormSwiGLU over prefill-sized rows on a bf16 backend
// with Options.QuackSwiGLU (the gate/up product with SwiGLU in its epilogue) and on one without
// (cuBLASLt, then iris_silu_mul): the same activations to bf16 rounding (the products' sums run
// in another order), and the op profiles name the path each took. Rows not a multiple of the
// 128-row tile, the 3B's K and an I of 11,008, and a small I.
func TestKernelBackendSwiGLUProduct(t *testing.T) {
	const eps = 1e-6
	for _, tc := range []struct{ rows, K, I int }{{200, 2048, 11008}, {1000, 2048, 512}, {129, 256, 264}} {
		t.Run(fmt.Sprintf("%dx%dx%d", tc.rows, tc.K, tc.I), func(t *testing.T) {
			r := rand.New(rand.NewPCG(81, uint64(tc.rows)))
			x := randn(r, bf16, tc.rows*tc.K, 1)
			delta := randn(r, bf16, tc.rows*tc.K, 1)
			w := randn(r, bf16, tc.K, 1)
			gu := randn(r, bf16, 2*tc.I*tc.K, 0.03) // the gate rows, then the up rows
			run := func(opts Options) (act []float32, ops map[string]int) {
				b := newBackend(t, opts)
				b.SetProfileOps(true)
				err := b.Do(func() error {
					wts := devTensor(b, 2*tc.I, tc.K, gu)
					mlp := ml.MLP{Gate: wts.RowsAt(0, tc.I), Up: wts.RowsAt(tc.I, tc.I)}
					xt, dt, wt := devTensor(b, tc.rows, tc.K, x), devTensor(b, tc.rows, tc.K, delta), devTensor(b, 1, tc.K, w)
					a, g := b.Scratch("act", tc.rows, tc.I), b.Scratch("gu", tc.rows, 2*tc.I)
					xn, xOut := b.Scratch("xn", tc.rows, tc.K), b.Scratch("xout", tc.rows, tc.K)
					ml.NormSwiGLU(b, a, g, xn, xOut, xt, dt, wt, eps, mlp)
					act = readBack(b, a)
					return b.Sync()
				})
				if err != nil {
					t.Fatal(err)
				}
				return act, opLaunches(b.Profile())
			}
			got, ops := run(Options{Precision: "bf16", QuackSwiGLU: true})
			want, opsLt := run(Options{Precision: "bf16"})
			check(t, "SwiGLU product against cuBLASLt and iris_silu_mul", got, widen(want), tolFor(bf16))
			name := fmt.Sprintf("swiglu product %dx%dx%d", tc.rows, 2*tc.I, tc.K)
			if ops[name] != 1 || ops["iris_silu_mul_bf16"] != 0 || opsLt["iris_silu_mul_bf16"] != 1 {
				t.Errorf("launches %v and, without the option, %v: want %q once and no iris_silu_mul, then iris_silu_mul", ops, opsLt, name)
			}
		})
	}
}
