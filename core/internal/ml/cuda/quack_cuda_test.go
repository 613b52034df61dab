//go:build cuda && quack

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/ml/cuda/gpu"
)

// swigluCase is one NormSwiGLU: rows of K values into I activations at a row stride of
// stride (0: I), with biases or without.
type swigluCase struct {
	rows, K, I, stride int
	bias               bool
}

func (c swigluCase) String() string {
	s := fmt.Sprintf("%dx%dx%d", c.rows, c.K, c.I)
	if c.stride != 0 {
		s += fmt.Sprintf("/%d", c.stride)
	}
	if c.bias {
		s += "+bias"
	}
	return s
}

// swigluInputs are a case's seeded inputs: x, delta, the norm's weight, [gate; up], the gate's
// and up's biases (none without).
type swigluInputs struct{ x, delta, w, gu, gb, ub []float32 }

func newSwiGLUInputs(c swigluCase) swigluInputs {
	r := rand.New(rand.NewPCG(81, uint64(c.rows)))
	in := swigluInputs{randn(r, bf16, c.rows*c.K, 1), randn(r, bf16, c.rows*c.K, 1), randn(r, bf16, c.K, 1),
		randn(r, bf16, 2*c.I*c.K, 0.03), nil, nil}
	if c.bias {
		in.gb, in.ub = randn(r, bf16, c.I, 0.5), randn(r, bf16, c.I, 0.5)
	}
	return in
}

// runSwiGLU runs ml.NormSwiGLU warm times, then reps times, over in on a backend with opts and
// returns the activations (every column of the stride: those past I must stay zero) and the op
// profile of the reps. The activations' scratch starts with NaNs past I, as a reused buffer
// may hold anything.
func runSwiGLU(t testing.TB, opts Options, c swigluCase, in swigluInputs, warm, reps int) (act []float32, ops []StageTime) {
	t.Helper()
	const eps = 1e-6
	return profiledRuns(t, opts, warm, reps, func(b *Backend) (func(), ml.Tensor) {
		wts := devTensor(b, 2*c.I, c.K, in.gu)
		mlp := ml.MLP{Gate: wts.RowsAt(0, c.I), Up: wts.RowsAt(c.I, c.I)}
		if c.bias {
			mlp.GateB, mlp.UpB = devTensor(b, 1, c.I, in.gb), devTensor(b, 1, c.I, in.ub)
		}
		xt, dt, wt := devTensor(b, c.rows, c.K, in.x), devTensor(b, c.rows, c.K, in.delta), devTensor(b, 1, c.K, in.w)
		stride := max(c.stride, c.I)
		full := b.Scratch("act", c.rows, stride)
		b.Write(full, slices.Repeat([]float32{float32(math.NaN())}, c.rows*stride))
		a, g := full.ColsAt(0, c.I), b.Scratch("gu", c.rows, 2*c.I)
		xn, xOut := b.Scratch("xn", c.rows, c.K), b.Scratch("xout", c.rows, c.K)
		return func() { ml.NormSwiGLU(b, a, g, xn, xOut, xt, dt, wt, eps, mlp) }, full
	})
}

// profiledRuns opens a backend with opts and the op profiler, makes a step and its output with
// setup (on the device thread), runs the step warm times, then reps times, and returns the
// output and the op profile of the reps.
func profiledRuns(t testing.TB, opts Options, warm, reps int, setup func(b *Backend) (step func(), out ml.Tensor)) ([]float32, []StageTime) {
	t.Helper()
	b := newBackend(t, opts)
	b.SetProfileOps(true)
	var step func()
	var out ml.Tensor
	var y []float32
	run := func(n int) error {
		for range n {
			step()
		}
		y = readBack(b, out)
		return b.Sync()
	}
	err := b.Do(func() error {
		step, out = setup(b)
		return run(warm)
	})
	b.Profile() // the warm-up's, dropped
	if err == nil {
		err = b.Do(func() error { return run(reps) })
	}
	if err != nil {
		t.Fatal(err)
	}
	return y, b.Profile()
}

// quackOptions are the bf16 options that run quack's variant v (an index of
// gpu.QuackVariants): QuackSwiGLU or QuackLinear, and its index among the variants of its kind.
func quackOptions(v int) Options {
	vs := gpu.QuackVariants()
	o := Options{Precision: "bf16", QuackSwiGLU: !vs[v].Linear, QuackLinear: vs[v].Linear}
	n := 0
	for _, x := range vs[:v] {
		if x.Linear == vs[v].Linear && x.Bias == vs[v].Bias {
			n++
		}
	}
	switch {
	case vs[v].Linear && vs[v].Bias:
		o.QuackLinearBiasVariant = n
	case vs[v].Linear:
		o.QuackLinearVariant = n
	case vs[v].Bias:
		o.QuackBiasVariant = n
	default:
		o.QuackVariant = n
	}
	return o
}

// TestKernelBackendSwiGLUProduct runs ml.NormSwiGLU over prefill- and tower-sized rows on a bf16
// backend with Options.QuackSwiGLU (the gate/up product with SwiGLU and any biases in its
// epilogue), each tile variant the build carries, and on one without (cuBLASLt, then
// iris_silu_mul): the same activations to bf16 rounding (the products' sums run in another
// order), zeros in the columns past I of a padded stride (SiluMul's, which the down product of
// a padded weight reads), and the op profiles name the path each took. Rows not a multiple of
// the 128-row tile, the 3B's K and an I of 11,008; the tower's K and I of 3,420 (not a whole
// 16-byte chunk) at the down weight's padded stride of 3,424 with biases; small Is.
func TestKernelBackendSwiGLUProduct(t *testing.T) {
	for _, tc := range []swigluCase{{rows: 200, K: 2048, I: 11008}, {rows: 1000, K: 2048, I: 512}, {rows: 129, K: 256, I: 264},
		{rows: 660, K: 1280, I: 3420, stride: 3424, bias: true}, {rows: 300, K: 256, I: 260, stride: 264, bias: true}} {
		in := newSwiGLUInputs(tc)
		want, opsLt := runSwiGLU(t, Options{Precision: "bf16"}, tc, in, 0, 1)
		for v, spec := range gpu.QuackVariants() {
			if spec.Linear || spec.Bias != tc.bias {
				continue
			}
			t.Run(fmt.Sprintf("%s/%v", spec, tc), func(t *testing.T) {
				got, ops := runSwiGLU(t, quackOptions(v), tc, in, 0, 1)
				check(t, "SwiGLU product against cuBLASLt and iris_silu_mul", got, widen(want), tolFor(bf16))
				name := fmt.Sprintf("swiglu product %dx%dx%d", tc.rows, 2*tc.I, tc.K)
				n, nLt := opLaunches(ops), opLaunches(opsLt)
				if n[name] != 1 || n["iris_silu_mul_bf16"] != 0 || nLt["iris_silu_mul_bf16"] != 1 {
					t.Errorf("launches %v and, without the option, %v: want %q once and no iris_silu_mul, then iris_silu_mul", n, nLt, name)
				}
			})
		}
	}
}

// BenchmarkSwiGLUProduct times the gate/up product and SwiGLU of prefill and tower passes of
// the 3B (5 and 10 prompts of the photo; 5 images' patches at the tower's shapes, unbiased)
// through each variant of the SwiGLU product against cuBLASLt and iris_silu_mul in the same
// run: GPU time per op by the op profiler's events, the mean of b.N runs after a warm-up.
// Run on the GPU machine:
//
//	cuda.test -test.run '^$' -test.bench SwiGLUProduct -test.benchtime 20x
func BenchmarkSwiGLUProduct(b *testing.B) {
	for _, c := range []swigluCase{{rows: 925, K: 2048, I: 11008}, {rows: 1850, K: 2048, I: 11008},
		{rows: 3300, K: 1280, I: 3420, stride: 3424, bias: true}} {
		b.Run(c.String(), func(b *testing.B) {
			in := newSwiGLUInputs(c)
			// ops' mean microseconds a call, a warm-up run's left out
			mean := func(opts Options, keep func(string) bool) float64 {
				_, ops := runSwiGLU(b, opts, c, in, 1, b.N)
				us := 0.0
				for _, o := range ops {
					if keep(o.Stage) {
						us += o.TotalMS * 1e3 / float64(b.N)
					}
				}
				return us
			}
			base := mean(Options{Precision: "bf16"}, func(s string) bool {
				return s == "iris_silu_mul_bf16" || s == fmt.Sprintf("linear %dx%dx%d", c.rows, 2*c.I, c.K)
			})
			line := fmt.Sprintf("swiglu %dx%dx%d cuBLASLt + iris_silu_mul %8.1f us", c.rows, 2*c.I, c.K, base)
			b.Log(line)
			fmt.Println(line)
			for v, spec := range gpu.QuackVariants() {
				if spec.Linear || spec.Bias != c.bias {
					continue
				}
				us := mean(quackOptions(v), func(s string) bool {
					return strings.HasPrefix(s, "swiglu product")
				})
				flops := 2 * float64(c.rows) * float64(2*c.I) * float64(c.K)
				line := fmt.Sprintf("swiglu %dx%dx%d %-22s %8.1f us  %.3fx  %4.0f TFLOP/s", c.rows, 2*c.I, c.K, spec.Spec, us, base/us, flops/us/1e6)
				b.Log(line)
				fmt.Println(line)
			}
		})
	}
}

// linearCase is one product: rows of K values into N outputs, with a bias or without.
type linearCase struct {
	rows, K, N int
	bias       bool
}

func (c linearCase) String() string {
	s := fmt.Sprintf("%dx%dx%d", c.rows, c.N, c.K)
	if c.bias {
		s += "+bias"
	}
	return s
}

// runLinear runs b.Linears over c's seeded inputs warm times, then reps times, on a backend
// with opts and returns the output and the op profile of the reps.
func runLinear(t testing.TB, opts Options, c linearCase, warm, reps int) (y []float32, ops []StageTime) {
	t.Helper()
	r := rand.New(rand.NewPCG(82, uint64(c.rows*c.N)))
	xv, wv := randn(r, bf16, c.rows*c.K, 1), randn(r, bf16, c.N*c.K, 0.03)
	var bv []float32
	if c.bias {
		bv = randn(r, bf16, c.N, 0.5)
	}
	return profiledRuns(t, opts, warm, reps, func(b *Backend) (func(), ml.Tensor) {
		x, w := devTensor(b, c.rows, c.K, xv), devTensor(b, c.N, c.K, wv)
		o := ml.Out{Y: b.Scratch("y", c.rows, c.N), W: w}
		if c.bias {
			o.B = devTensor(b, 1, c.N, bv)
		}
		return func() { b.Linears(x, o) }, o.Y
	})
}

// TestKernelBackendQuackLinear runs products of prefill and tower passes on a bf16 backend with
// Options.QuackLinear (quack's plain product), each variant the build carries, and on one
// without (cuBLASLt): the same outputs to bf16 rounding, biases added before the one rounding,
// and the op profiles name the path each took. Rows not a multiple of a tile, Ns not of one.
func TestKernelBackendQuackLinear(t *testing.T) {
	for _, tc := range []linearCase{{rows: 200, K: 2048, N: 2560, bias: true}, {rows: 925, K: 11008, N: 2048}, {rows: 300, K: 1280, N: 3840, bias: true},
		{rows: 129, K: 256, N: 264}, {rows: 130, K: 512, N: 200, bias: true}} {
		want, opsLt := runLinear(t, Options{Precision: "bf16"}, tc, 0, 1)
		for v, spec := range gpu.QuackVariants() {
			if !spec.Linear || spec.Bias != tc.bias {
				continue
			}
			t.Run(fmt.Sprintf("%s/%v", spec, tc), func(t *testing.T) {
				got, ops := runLinear(t, quackOptions(v), tc, 0, 1)
				check(t, "quack's product against cuBLASLt", got, widen(want), tolFor(bf16))
				name := fmt.Sprintf("quack linear %dx%dx%d", tc.rows, tc.N, tc.K)
				lt := fmt.Sprintf("linear %dx%dx%d", tc.rows, tc.N, tc.K)
				if n, nLt := opLaunches(ops), opLaunches(opsLt); n[name] != 1 || n[lt] != 0 || nLt[lt] != 1 {
					t.Errorf("launches %v and, without the option, %v: want %q once, then %q", n, nLt, name, lt)
				}
			})
		}
	}
}

// BenchmarkQuackLinear times the products of a 5-image tower pass and of 5- and 10-prompt
// prefill passes of the 3B (other than the gate/up product) through each variant of quack's
// plain product against cuBLASLt in the same run: GPU time per op by the op profiler's events,
// the mean of b.N runs after a warm-up. Run on the GPU machine:
//
//	cuda.test -test.run '^$' -test.bench QuackLinear -test.benchtime 20x
func BenchmarkQuackLinear(b *testing.B) {
	for _, c := range []linearCase{
		{rows: 3300, K: 1280, N: 3840, bias: true}, {rows: 3300, K: 3424, N: 1280, bias: true}, {rows: 3300, K: 1280, N: 1280, bias: true},
		{rows: 925, K: 2048, N: 2560, bias: true}, {rows: 925, K: 2048, N: 2048}, {rows: 925, K: 11008, N: 2048},
		{rows: 1850, K: 2048, N: 2560, bias: true}, {rows: 1850, K: 11008, N: 2048}} {
		b.Run(c.String(), func(b *testing.B) {
			mean := func(opts Options, name string) float64 {
				_, ops := runLinear(b, opts, c, 1, b.N)
				for _, o := range ops {
					if o.Stage == name {
						return o.TotalMS * 1e3 / float64(b.N)
					}
				}
				return 0
			}
			flops := 2 * float64(c.rows) * float64(c.N) * float64(c.K)
			base := mean(Options{Precision: "bf16"}, fmt.Sprintf("linear %dx%dx%d", c.rows, c.N, c.K))
			line := fmt.Sprintf("linear %-18v cuBLASLt               %8.1f us         %4.0f TFLOP/s", c, base, flops/base/1e6)
			b.Log(line)
			fmt.Println(line)
			for v, spec := range gpu.QuackVariants() {
				if !spec.Linear || spec.Bias != c.bias {
					continue
				}
				us := mean(quackOptions(v), fmt.Sprintf("quack linear %dx%dx%d", c.rows, c.N, c.K))
				line := fmt.Sprintf("linear %-18v %-22s %8.1f us  %.3fx  %4.0f TFLOP/s", c, spec.Spec, us, base/us, flops/us/1e6)
				b.Log(line)
				fmt.Println(line)
			}
		})
	}
}
