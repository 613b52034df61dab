//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/ml/cuda/gpu"
)

// Each kernel of kernels/iris.cu against a CPU reference in float64 on fresh random inputs, in
// both storage types. Outputs are poisoned (NaN) before each run, so unwritten elements fail.

type kfix struct {
	t    testing.TB
	dev  *gpu.Device
	ks   map[dtype]*kernelSet
	s    *gpu.Stream
	blas *blas
	bufs []gpu.Buffer
}

func newKfix(t testing.TB) *kfix {
	t.Helper()
	dev, err := gpu.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	f := &kfix{t: t, dev: dev, ks: map[dtype]*kernelSet{}}
	err = dev.Do(func() error {
		for _, dt := range []dtype{f32, bf16} {
			k, err := loadKernels(dt)
			if err != nil {
				return err
			}
			f.ks[dt] = k
		}
		if f.s, err = gpu.NewStream(); err != nil {
			return err
		}
		f.blas, err = newBlas(f.s)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dev.Do(func() error {
			for i := range f.bufs {
				_ = f.bufs[i].Free()
			}
			f.blas.destroy()
			for _, k := range f.ks {
				_ = k.mod.Unload()
			}
			return f.s.Destroy()
		})
		dev.Close()
	})
	return f
}

func (f *kfix) do(fn func() error) {
	f.t.Helper()
	if err := f.dev.Do(func() error {
		if err := fn(); err != nil {
			return err
		}
		return f.s.Sync()
	}); err != nil {
		f.t.Fatal(err)
	}
}

// bf16 rounding on the host (round to nearest even), as __float2bfloat16_rn.
func toBF16(v float32) uint16 {
	b := math.Float32bits(v)
	if v != v {
		return 0x7fc0
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

func fromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

func roundBF16(v float32) float32 { return fromBF16(toBF16(v)) }

// round is what storage type dt keeps of v.
func round(dt dtype, v float64) float64 {
	if dt == bf16 {
		return float64(roundBF16(float32(v)))
	}
	return float64(float32(v))
}

// put uploads values in type dt (on the device thread).
func (f *kfix) put(dt dtype, v []float32) gpu.DevPtr {
	b, err := gpu.Alloc(int64(len(v))*dt.size() + 256)
	if err != nil {
		f.t.Fatal(err)
	}
	f.bufs = append(f.bufs, b)
	if dt == bf16 {
		h := make([]uint16, len(v))
		for i, x := range v {
			h[i] = toBF16(x)
		}
		err = gpu.CopyHtoD(b.Ptr, unsafe.Pointer(&h[0]), int64(len(h))*2)
	} else {
		err = gpu.CopyHtoD(b.Ptr, unsafe.Pointer(&v[0]), int64(len(v))*4)
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return b.Ptr
}

func (f *kfix) putI32(v []int32) gpu.DevPtr {
	b, err := gpu.Alloc(int64(len(v))*4 + 256)
	if err != nil {
		f.t.Fatal(err)
	}
	f.bufs = append(f.bufs, b)
	if err := gpu.CopyHtoD(b.Ptr, unsafe.Pointer(&v[0]), int64(len(v))*4); err != nil {
		f.t.Fatal(err)
	}
	return b.Ptr
}

// poisoned allocates n values of type dt filled with NaN.
func (f *kfix) poisoned(dt dtype, n int) gpu.DevPtr {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.NaN())
	}
	return f.put(dt, v)
}

// get downloads n values of type dt as float32 (after the stream is drained).
func (f *kfix) get(dt dtype, p gpu.DevPtr, n int) []float32 {
	out := make([]float32, n)
	var err error
	if dt == bf16 {
		h := make([]uint16, n)
		err = gpu.CopyDtoH(unsafe.Pointer(&h[0]), p, int64(n)*2)
		for i := range h {
			out[i] = fromBF16(h[i])
		}
	} else {
		err = gpu.CopyDtoH(unsafe.Pointer(&out[0]), p, int64(n)*4)
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// randn returns n normal values (rounded to dt, so that the reference sees the device's inputs).
func randn(r *rand.Rand, dt dtype, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(round(dt, r.NormFloat64()*scale))
	}
	return v
}

// randUniform returns n values uniform in [0, 1) (embedding-bag weights).
func randUniform(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.Float64())
	}
	return v
}

// randIDs returns n row indices below rows.
func randIDs(r *rand.Rand, n, rows int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(r.IntN(rows))
	}
	return ids
}

// relErr is ||got - want|| / ||want||; NaN in got fails.
func relErr(got []float32, want []float64) float64 {
	var num, den float64
	for i := range want {
		g := float64(got[i])
		if math.IsNaN(g) {
			return math.Inf(1)
		}
		num += (g - want[i]) * (g - want[i])
		den += want[i] * want[i]
	}
	return math.Sqrt(num / math.Max(den, 1e-30))
}

func tolFor(dt dtype) float64 {
	if dt == bf16 {
		return 8e-3
	}
	return 2e-6
}

func forTypes(t *testing.T, fn func(t *testing.T, dt dtype)) {
	for _, dt := range []dtype{f32, bf16} {
		t.Run(map[dtype]string{f32: "f32", bf16: "bf16"}[dt], func(t *testing.T) { fn(t, dt) })
	}
}

// productTol is the tolerance of a product over K values: in f32 the sum's order differs from
// the reference's, in bf16 the output's rounding dominates.
func productTol(dt dtype) float64 {
	if dt == f32 {
		return 1e-5
	}
	return tolFor(dt)
}

// siluRef is silu_mul's value in float64 with the kernel's roundings: silu(gate) rounded, then
// the product rounded.
func siluRef(dt dtype, g, u float64) float64 {
	return round(dt, round(dt, g/(1+math.Exp(-g)))*u)
}

func check(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if e := relErr(got, want); !(e <= tol) {
		t.Errorf("%s: relative error %.3g > %.1g", what, e, tol)
	} else {
		t.Logf("%s: relative error %.3g", what, e)
	}
}

// TestKernelRMSNorm covers the register path (rows of 16-byte chunks, at most four a thread),
// with and without the residual add, and the plain loop (other widths).
func TestKernelRMSNorm(t *testing.T) {
	f := newKfix(t)
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		n            int
		delta, apart bool
	}{{1280, true, false}, {2048, false, false}, {1300, true, false}, {8000, true, false}, {1280, true, true}, {1300, false, true}, {2048, true, true}} {
		t.Run(fmt.Sprintf("n%d-delta%v-apart%v", tc.n, tc.delta, tc.apart), func(t *testing.T) {
			forTypes(t, func(t *testing.T, dt dtype) {
				const rows = 7
				n := tc.n
				x := randn(r, dt, rows*n, 1)
				d := randn(r, dt, rows*n, 1)
				w := randn(r, dt, n, 1)
				var got, gotX, gotIn []float32
				f.do(func() error {
					xp, dp, wp, out := f.put(dt, x), f.put(dt, d), f.put(dt, w), f.poisoned(dt, rows*n)
					xo := xp // the residual in place
					if tc.apart {
						xo = f.poisoned(dt, rows*n)
					}
					if !tc.delta {
						dp = 0
					}
					err := f.ks[dt].rmsnorm.Launch(gpu.Dim3{X: rows}, gpu.Dim3{X: 256}, 0, f.s,
						gpu.P(out), gpu.P(xo), gpu.P(xp), gpu.P(dp), gpu.P(wp), gpu.I(n), gpu.F(1e-6))
					if err == nil {
						err = f.s.Sync()
					}
					got, gotX, gotIn = f.get(dt, out, rows*n), f.get(dt, xo, rows*n), f.get(dt, xp, rows*n)
					return err
				})
				want := make([]float64, rows*n)
				wantX := make([]float64, rows*n)
				for i := range rows {
					ss := 0.0
					for j := range n {
						v := float64(x[i*n+j])
						if tc.delta {
							v = round(dt, v+float64(d[i*n+j]))
						}
						wantX[i*n+j] = v
						ss += v * v
					}
					inv := 1 / math.Sqrt(ss/float64(n)+1e-6)
					for j := range n {
						want[i*n+j] = round(dt, float64(w[j])*round(dt, wantX[i*n+j]*inv))
					}
				}
				check(t, "residual", gotX, wantX, tolFor(dt))
				check(t, "norm", got, want, tolFor(dt))
				if tc.apart {
					in := make([]float64, len(x))
					for i, v := range x {
						in[i] = float64(v)
					}
					check(t, "input left alone", gotIn, in, 0)
				}
			})
		})
	}
}

// TestKernelSiluAligned covers silu_mul's 16-byte path (the text MLP: I a multiple of 8).
func TestKernelSiluAligned(t *testing.T) {
	f := newKfix(t)
	r := rand.New(rand.NewPCG(21, 22))
	forTypes(t, func(t *testing.T, dt dtype) {
		const rows, I = 3, 1104
		gu := randn(r, dt, rows*2*I, 2)
		var got []float32
		f.do(func() error {
			gp, out := f.put(dt, gu), f.poisoned(dt, rows*I)
			err := f.ks[dt].siluMul.Launch(gpu.Dim3{X: 1, Y: 2}, gpu.Dim3{X: 256}, 0, f.s, gpu.P(out), gpu.P(gp), gpu.I(rows), gpu.I(I), gpu.I(I))
			if err == nil {
				err = f.s.Sync()
			}
			got = f.get(dt, out, rows*I)
			return err
		})
		want := make([]float64, rows*I)
		for i := range rows {
			for j := range I {
				g, u := float64(gu[i*2*I+j]), float64(gu[i*2*I+I+j])
				want[i*I+j] = siluRef(dt, g, u)
			}
		}
		check(t, "silu*up", got, want, tolFor(dt))
	})
}

func TestKernelSiluGelu(t *testing.T) {
	f := newKfix(t)
	r := rand.New(rand.NewPCG(3, 4))
	for _, sh := range []struct{ I, ldo int }{
		{3420, 3424}, // a padded output row (the vision MLP in bf16): 16-byte vectors, up's in halves
		{20, 24},     // the last vector straddles I: up's second half not read
		{3418, 3424}, // pairs
	} {
		t.Run(fmt.Sprint(sh.I), func(t *testing.T) { siluGelu(t, f, r, sh.I, sh.ldo) })
	}
}

func siluGelu(t *testing.T, f *kfix, r *rand.Rand, I, ldo int) {
	forTypes(t, func(t *testing.T, dt dtype) {
		const rows = 5
		gu := randn(r, dt, rows*2*I, 2)
		h := randn(r, dt, rows*I, 2)
		var got, gotG, gotP []float32
		f.do(func() error {
			gp, out, hp := f.put(dt, gu), f.poisoned(dt, rows*ldo), f.put(dt, h)
			padded := f.poisoned(dt, rows*ldo)
			k := f.ks[dt]
			// a grid smaller than the matrix: both loops of ROWS stride
			err := k.siluMul.Launch(gpu.Dim3{X: 3, Y: 2}, gpu.Dim3{X: 256}, 0, f.s, gpu.P(out), gpu.P(gp), gpu.I(rows), gpu.I(I), gpu.I(ldo))
			if err == nil {
				err = k.padRows.Launch(grid2(rows, ldo), gpu.Dim3{X: 256}, 0, f.s, gpu.P(padded), gpu.P(hp), gpu.I(rows), gpu.I(I), gpu.I(ldo))
			}
			if err == nil {
				err = k.gelu.Launch(grid1(int64(rows*I)), gpu.Dim3{X: 256}, 0, f.s, gpu.P(hp), gpu.L(int64(rows*I)))
			}
			if err == nil {
				err = f.s.Sync()
			}
			got, gotG, gotP = f.get(dt, out, rows*ldo), f.get(dt, hp, rows*I), f.get(dt, padded, rows*ldo)
			return err
		})
		want := make([]float64, rows*ldo)
		wantP := make([]float64, rows*ldo)
		wantG := make([]float64, rows*I)
		for i := range rows {
			for j := range I {
				g, u := float64(gu[i*2*I+j]), float64(gu[i*2*I+I+j])
				want[i*ldo+j] = siluRef(dt, g, u)
				x := float64(h[i*I+j])
				wantP[i*ldo+j] = x
				wantG[i*I+j] = round(dt, 0.5*x*(1+math.Erf(x/math.Sqrt2)))
			}
		}
		check(t, "silu*up (padded rows)", got, want, tolFor(dt))
		check(t, "pad_rows", gotP, wantP, 0)
		check(t, "gelu", gotG, wantG, tolFor(dt))
	})
}

// TestKernelRopeRows rotates the heads of strided rows (q inside a fused q/k/v matrix) with both
// roundings, the whole head or its leading dimensions only (a partial rotary embedding: the rest
// pass through), and leaves the other columns alone.
func TestKernelRopeRows(t *testing.T) {
	f := newKfix(t)
	r := rand.New(rand.NewPCG(5, 6))
	// a fused qkv's rows (16-byte chunks: the vector path), and a head dim and stride without
	// whole chunks (the element loop); 96 of 128 rotated (Phi-3's 0.75), 12 of 20
	for _, sh := range []struct{ heads, hd, rd, ld int }{
		{4, 80, 80, 4*80 + 2*2*80}, {4, 20, 20, 4*20 + 3}, {3, 128, 96, 3*128 + 2*128}, {2, 20, 12, 2*20 + 1},
	} {
		for _, once := range []int{0, 1} {
			t.Run(fmt.Sprintf("hd%d-rd%d-ld%d-once%d", sh.hd, sh.rd, sh.ld, once), func(t *testing.T) {
				forTypes(t, func(t *testing.T, dt dtype) {
					const n = 3
					heads, hd, ld := sh.heads, sh.hd, sh.ld
					half := sh.rd / 2
					x := randn(r, dt, n*ld, 1)
					cs := randn(r, f32, 2*n*half, 1) // cos rows, then sin rows
					var got []float32
					f.do(func() error {
						xp, cp := f.put(dt, x), f.put(f32, cs)
						err := f.ks[dt].ropeRows.Launch(gpu.Dim3{X: n}, gpu.Dim3{X: 256}, 0, f.s, gpu.P(xp), gpu.I(ld), gpu.I(heads), gpu.I(hd),
							gpu.I(sh.rd), gpu.P(cp), gpu.P(cp.Add(int64(n*half)*4)), gpu.I(half), gpu.I(once))
						if err == nil {
							err = f.s.Sync()
						}
						got = f.get(dt, xp, n*ld)
						return err
					})
					want := make([]float64, n*ld)
					for i := range want {
						want[i] = float64(x[i])
					}
					for i := range n {
						for h := range heads {
							for fq := range half {
								c, s := float64(cs[i*half+fq]), float64(cs[n*half+i*half+fq])
								x1, x2 := float64(x[i*ld+h*hd+fq]), float64(x[i*ld+h*hd+fq+half])
								want[i*ld+h*hd+fq], want[i*ld+h*hd+fq+half] = ropePair(dt, x1, x2, c, s, once == 1)
							}
						}
					}
					check(t, "rotated rows", got, want, tolFor(dt))
				})
			})
		}
	}
}

// ropePair is the kernels' rope_pair on the host: the pair (x1, x2) of a head rotated by the
// angle (c, s), rounded to dt once (once: apply_rotary_pos_emb_vision), or with cos and sin cast
// to dt and each product and the sum rounded (a bf16 decoder's apply_rotary_pos_emb).
func ropePair(dt dtype, x1, x2, c, s float64, once bool) (lo, hi float64) {
	if once {
		return round(dt, x1*c-x2*s), round(dt, x2*c+x1*s)
	}
	c, s = round(dt, c), round(dt, s)
	return round(dt, round(dt, x1*c)+round(dt, -x2*s)), round(dt, round(dt, x2*c)+round(dt, x1*s))
}

// rotBF16 rotates one head's halves in place as the bf16 attention kernels with a rope table
// do: float32 products and sum (the conversions keep Go from fusing them), rounded to bf16
// once.
func rotBF16(x []float32, half int, cos, sin []float32) {
	for j := range half {
		a, b, c, s := x[j], x[j+half], cos[j], sin[j]
		x[j] = roundBF16(float32(a*c) + float32(-b*s))
		x[j+half] = roundBF16(float32(b*c) + float32(a*s))
	}
}

// TestKernelRopeKV rotates q in place and writes the rotated k and the v of each row to its pool
// row, leaving the other pool rows alone.
func TestKernelRopeKV(t *testing.T) {
	f := newKfix(t)
	r := rand.New(rand.NewPCG(7, 8))
	// 16-byte chunks (the vector path: a small shape and the 3B's), and a head dim without (the
	// element loop)
	for _, sh := range []struct{ heads, kvh, hd int }{{6, 2, 16}, {16, 2, 128}, {6, 2, 12}} {
		t.Run(fmt.Sprintf("%dx%d-hd%d", sh.heads, sh.kvh, sh.hd), func(t *testing.T) {
			forTypes(t, func(t *testing.T, dt dtype) {
				const n, poolRows = 3, 9
				heads, kvh, hd := sh.heads, sh.kvh, sh.hd
				qd, kvd, half := heads*hd, kvh*hd, hd/2
				ld := qd + 2*kvd
				qkv := randn(r, dt, n*ld, 1)
				cs := randn(r, f32, 2*n*half, 1)
				pool := randn(r, dt, 2*poolRows*kvd, 1)
				slots := []int32{4, 0, 7}
				var gotQ, gotK, gotV []float32
				f.do(func() error {
					qp, cp, pp, sl := f.put(dt, qkv), f.put(f32, cs), f.put(dt, pool), f.putI32(slots)
					kp, vp := pp, pp.Add(int64(poolRows*kvd)*dt.size())
					e := dt.size()
					err := f.ks[dt].ropeKV.Launch(gpu.Dim3{X: n}, gpu.Dim3{X: 256}, 0, f.s, gpu.P(qp), gpu.I(ld), gpu.P(qp.Add(int64(qd)*e)), gpu.I(ld),
						gpu.P(qp.Add(int64(qd+kvd)*e)), gpu.I(ld), gpu.P(cp), gpu.P(cp.Add(int64(n*half)*4)), gpu.I(half), gpu.I(0),
						gpu.P(kp), gpu.P(vp), gpu.P(sl), gpu.I(heads), gpu.I(kvh), gpu.I(hd))
					if err == nil {
						err = f.s.Sync()
					}
					gotQ, gotK, gotV = f.get(dt, qp, n*ld), f.get(dt, kp, poolRows*kvd), f.get(dt, vp, poolRows*kvd)
					return err
				})
				wantQ := make([]float64, n*ld)
				for i := range wantQ {
					wantQ[i] = float64(qkv[i])
				}
				wantK, wantV := make([]float64, poolRows*kvd), make([]float64, poolRows*kvd)
				for i := range poolRows * kvd {
					wantK[i], wantV[i] = float64(pool[i]), float64(pool[poolRows*kvd+i])
				}
				for i := range n {
					for h := range heads + kvh {
						for fq := range half {
							c, s := float64(cs[i*half+fq]), float64(cs[n*half+i*half+fq])
							x1, x2 := float64(qkv[i*ld+h*hd+fq]), float64(qkv[i*ld+h*hd+fq+half])
							lo, hi := ropePair(dt, x1, x2, c, s, false)
							if h < heads {
								wantQ[i*ld+h*hd+fq], wantQ[i*ld+h*hd+fq+half] = lo, hi
							} else {
								at := int(slots[i])*kvd + (h-heads)*hd
								wantK[at+fq], wantK[at+fq+half] = lo, hi
							}
						}
					}
					for j := range kvd {
						wantV[int(slots[i])*kvd+j] = float64(qkv[i*ld+qd+kvd+j])
					}
				}
				check(t, "q rotated in place (k, v columns untouched)", gotQ, wantQ, tolFor(dt))
				check(t, "keys in the pool", gotK, wantK, tolFor(dt))
				check(t, "values in the pool", gotV, wantV, 0)
			})
		})
	}
}

// TestKernelGatherScatter moves strided rows both ways.
func TestKernelGatherScatter(t *testing.T) {
	f := newKfix(t)
	r := rand.New(rand.NewPCG(15, 16))
	forTypes(t, func(t *testing.T, dt dtype) {
		const rows, W, ldi, ldo = 5, 36, 100, 40
		in := randn(r, dt, rows*ldi, 1)
		idx := []int32{3, 0, 4, 1, 2}
		var gathered, scattered []float32
		f.do(func() error {
			ip, ix := f.put(dt, in), f.putI32(idx)
			g, sc := f.poisoned(dt, rows*ldo), f.poisoned(dt, rows*ldo)
			k := f.ks[dt]
			err := k.gather.Launch(gpu.Dim3{X: rows}, gpu.Dim3{X: 256}, 0, f.s, gpu.P(g), gpu.I(ldo), gpu.P(ip), gpu.I(ldi), gpu.P(ix), gpu.I(W))
			if err == nil {
				err = k.scatter.Launch(gpu.Dim3{X: rows}, gpu.Dim3{X: 256}, 0, f.s, gpu.P(sc), gpu.I(ldo), gpu.P(ip), gpu.I(ldi), gpu.P(ix), gpu.I(W))
			}
			if err == nil {
				err = f.s.Sync()
			}
			gathered, scattered = f.get(dt, g, rows*ldo), f.get(dt, sc, rows*ldo)
			return err
		})
		for i, j := range idx {
			for c := range W {
				if gathered[i*ldo+c] != in[int(j)*ldi+c] || scattered[int(j)*ldo+c] != in[i*ldi+c] {
					t.Fatalf("row %d column %d: gathered %v scattered %v", i, c, gathered[i*ldo+c], scattered[int(j)*ldo+c])
				}
			}
		}
	})
}

// layerNormRef is the residual x + d (rounded to dt; x alone when d is nil) and nn.LayerNorm of
// it in float64 (the biased variance; no bias when bias is nil), the output rounded once.
func layerNormRef(dt dtype, x, d, w, bias []float32, rows, n int, eps float64) (res, out []float64) {
	res, out = make([]float64, rows*n), make([]float64, rows*n)
	for i := range rows {
		mean := 0.0
		for j := range n {
			v := float64(x[i*n+j])
			if d != nil {
				v = round(dt, v+float64(d[i*n+j]))
			}
			res[i*n+j] = v
			mean += v
		}
		mean /= float64(n)
		vr := 0.0
		for j := range n {
			vr += (res[i*n+j] - mean) * (res[i*n+j] - mean)
		}
		rstd := 1 / math.Sqrt(vr/float64(n)+eps)
		for j := range n {
			o := (res[i*n+j] - mean) * rstd * float64(w[j])
			if bias != nil {
				o += float64(bias[j])
			}
			out[i*n+j] = round(dt, o)
		}
	}
	return res, out
}

// offset returns v + c, rounded to dt (rows with a mean far from zero).
func offset(dt dtype, v []float32, c float64) []float32 {
	for i := range v {
		v[i] = float32(round(dt, float64(v[i])+c))
	}
	return v
}

// TestKernelLayerNorm covers the register path (rows of 16-byte chunks, at most four a thread),
// with and without the residual add and the bias, the plain loop (other widths: 4608 is past
// four chunks a thread in f32), and rows that are not 16-byte aligned (the plain loop too).
func TestKernelLayerNorm(t *testing.T) {
	f := newKfix(t)
	r := rand.New(rand.NewPCG(25, 26))
	for _, tc := range []struct {
		n                         int
		delta, apart, bias, shift bool
	}{
		{1152, true, false, true, false}, {1024, false, false, true, false}, {1152, true, true, false, false},
		{4608, true, true, true, false}, {1150, true, false, true, false}, {1152, true, true, true, true},
	} {
		t.Run(fmt.Sprintf("n%d-delta%v-apart%v-bias%v-shift%v", tc.n, tc.delta, tc.apart, tc.bias, tc.shift), func(t *testing.T) {
			forTypes(t, func(t *testing.T, dt dtype) {
				const rows = 7
				n := tc.n
				x := offset(dt, randn(r, dt, rows*n, 1), 3) // a mean of 3: the variance in two passes
				d := randn(r, dt, rows*n, 1)
				w := randn(r, dt, n, 1)
				bias := randn(r, dt, n, 1)
				var got, gotX, gotIn []float32
				f.do(func() error {
					e := int64(0)
					at := func(v []float32) gpu.DevPtr { return f.put(dt, v) }
					if tc.shift { // every row one element past 16-byte alignment
						e = dt.size()
						at = func(v []float32) gpu.DevPtr { return f.put(dt, append([]float32{0}, v...)).Add(e) }
					}
					xp, dp := at(x), at(d)
					wp, bp, out := f.put(dt, w), f.put(dt, bias), f.poisoned(dt, rows*n+1).Add(e)
					xo := xp // the residual in place
					if tc.apart {
						xo = f.poisoned(dt, rows*n+1).Add(e)
					}
					if !tc.delta {
						dp = 0
					}
					if !tc.bias {
						bp = 0
					}
					err := f.ks[dt].layernorm.Launch(gpu.Dim3{X: rows}, gpu.Dim3{X: 256}, 0, f.s,
						gpu.P(out), gpu.P(xo), gpu.P(xp), gpu.P(dp), gpu.P(wp), gpu.P(bp), gpu.I(n), gpu.F(1e-6))
					if err == nil {
						err = f.s.Sync()
					}
					got, gotX, gotIn = f.get(dt, out, rows*n), f.get(dt, xo, rows*n), f.get(dt, xp, rows*n)
					return err
				})
				var dIn, bIn []float32
				if tc.delta {
					dIn = d
				}
				if tc.bias {
					bIn = bias
				}
				wantX, want := layerNormRef(dt, x, dIn, w, bIn, rows, n, 1e-6)
				check(t, "residual", gotX, wantX, tolFor(dt))
				check(t, "norm", got, want, tolFor(dt))
				if tc.apart {
					in := make([]float64, len(x))
					for i, v := range x {
						in[i] = float64(v)
					}
					check(t, "input left alone", gotIn, in, 0)
				}
			})
		})
	}
}

// headNormRef RMS-normalises the heads of hd values at column off of each row of want (row
// stride ld) in place, with the kernel's roundings: the normalised value, then w times it.
func headNormRef(dt dtype, want []float64, ld, off, rows, heads, hd int, w []float32, eps float64) {
	for i := range rows {
		for h := range heads {
			p := want[i*ld+off+h*hd : i*ld+off+(h+1)*hd]
			ss := 0.0
			for _, v := range p {
				ss += v * v
			}
			inv := 1 / math.Sqrt(ss/float64(hd)+eps)
			for j := range p {
				p[j] = round(dt, float64(w[j])*round(dt, p[j]*inv))
			}
		}
	}
}

// TestKernelHeadNorm normalises the q heads and then the k heads of fused q/k/v rows in place
// (strided views, as the decoder's q and k), leaving v alone: decode-sized batches, a head dim
// that is not a multiple of the warp, head counts that do not fill the last block, and a grid
// with fewer rows than the matrix (the row loop strides).
func TestKernelHeadNorm(t *testing.T) {
	f := newKfix(t)
	r := rand.New(rand.NewPCG(27, 28))
	for _, tc := range []struct{ rows, heads, kvh, hd, gridY int }{
		{3, 16, 8, 128, 3}, {1, 32, 8, 128, 1}, {5, 6, 2, 80, 2}, {32, 16, 4, 128, 32},
	} {
		t.Run(fmt.Sprintf("rows%d-heads%d-kv%d-hd%d-grid%d", tc.rows, tc.heads, tc.kvh, tc.hd, tc.gridY), func(t *testing.T) {
			forTypes(t, func(t *testing.T, dt dtype) {
				rows, hd := tc.rows, tc.hd
				qd, kvd := tc.heads*hd, tc.kvh*hd
				ld := qd + 2*kvd
				x := randn(r, dt, rows*ld, 2)
				wq, wk := randn(r, dt, hd, 1), randn(r, dt, hd, 1)
				var got []float32
				f.do(func() error {
					xp, wqp, wkp := f.put(dt, x), f.put(dt, wq), f.put(dt, wk)
					k := f.ks[dt]
					launch := func(p gpu.DevPtr, heads int, w gpu.DevPtr) error {
						return k.headNorm.Launch(gpu.Dim3{X: (heads + headNormWarps - 1) / headNormWarps, Y: tc.gridY}, gpu.Dim3{X: 32 * headNormWarps}, 0, f.s,
							gpu.P(p), gpu.I(ld), gpu.I(rows), gpu.I(heads), gpu.I(hd), gpu.P(w), gpu.F(1e-6))
					}
					err := launch(xp, tc.heads, wqp)
					if err == nil {
						err = launch(xp.Add(int64(qd)*dt.size()), tc.kvh, wkp)
					}
					if err == nil {
						err = f.s.Sync()
					}
					got = f.get(dt, xp, rows*ld)
					return err
				})
				want := make([]float64, rows*ld)
				for i, v := range x {
					want[i] = float64(v)
				}
				headNormRef(dt, want, ld, 0, rows, tc.heads, hd, wq, 1e-6)
				headNormRef(dt, want, ld, qd, rows, tc.kvh, hd, wk, 1e-6)
				check(t, "q and k heads normalised in place (v untouched)", got, want, tolFor(dt))
			})
		})
	}
}

// geluTanhRef is gelu_pytorch_tanh in float64, rounded once.
func geluTanhRef(dt dtype, x float64) float64 {
	return round(dt, 0.5*x*(1+math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x))))
}

// TestKernelGeluTanh checks the tanh form of GELU (the erf form is in TestKernelSiluGelu), with
// a grid smaller than the data (the kernel strides).
func TestKernelGeluTanh(t *testing.T) {
	f := newKfix(t)
	r := rand.New(rand.NewPCG(29, 30))
	forTypes(t, func(t *testing.T, dt dtype) {
		const n = 5 * 4304
		h := randn(r, dt, n, 3)
		var got []float32
		f.do(func() error {
			hp := f.put(dt, h)
			err := f.ks[dt].geluTanh.Launch(gpu.Dim3{X: 7}, gpu.Dim3{X: 256}, 0, f.s, gpu.P(hp), gpu.L(n))
			if err == nil {
				err = f.s.Sync()
			}
			got = f.get(dt, hp, n)
			return err
		})
		want := make([]float64, n)
		for i, v := range h {
			want[i] = geluTanhRef(dt, float64(v))
		}
		check(t, "gelu tanh", got, want, tolFor(dt))
	})
}

// TestKernelScatterAdd adds strided rows to some rows of a strided matrix, the other rows and
// the columns past W left alone.
func TestKernelScatterAdd(t *testing.T) {
	f := newKfix(t)
	r := rand.New(rand.NewPCG(31, 32))
	forTypes(t, func(t *testing.T, dt dtype) {
		const rows, dstRows, W, ldi, ldo = 4, 9, 36, 50, 40
		in, dst := randn(r, dt, rows*ldi, 1), randn(r, dt, dstRows*ldo, 1)
		idx := []int32{7, 0, 3, 5}
		var got []float32
		f.do(func() error {
			ip, ix, dp := f.put(dt, in), f.putI32(idx), f.put(dt, dst)
			err := f.ks[dt].scatterAdd.Launch(gpu.Dim3{X: rows}, gpu.Dim3{X: 256}, 0, f.s, gpu.P(dp), gpu.I(ldo), gpu.P(ip), gpu.I(ldi), gpu.P(ix), gpu.I(W))
			if err == nil {
				err = f.s.Sync()
			}
			got = f.get(dt, dp, dstRows*ldo)
			return err
		})
		check(t, "scatter-add", got, scatterAddRef(dt, dst, ldo, in, ldi, idx, W), tolFor(dt))
	})
}

// embedBagRef adds to each of the rows of dst (row stride ldo) the weighted sum of K table rows
// (stride ldt) in float64, rounded to dt before the add as the kernel does.
func embedBagRef(dt dtype, dst []float32, ldo int, table []float32, ldt int, ids []int32, w []float32, ldw, K, H, rows int) []float64 {
	want := make([]float64, len(dst))
	for i, v := range dst {
		want[i] = float64(v)
	}
	for i := range rows {
		for j := range H {
			acc := 0.0
			for k := range K {
				acc += float64(w[i*ldw+k]) * float64(table[int(ids[i*K+k])*ldt+j])
			}
			want[i*ldo+j] = round(dt, want[i*ldo+j]+round(dt, acc))
		}
	}
	return want
}

// TestKernelEmbedBag adds bilinear mixes of four table rows (a padded table, strided weights and
// output rows, the columns past H left alone).
func TestKernelEmbedBag(t *testing.T) {
	f := newKfix(t)
	r := rand.New(rand.NewPCG(33, 34))
	forTypes(t, func(t *testing.T, dt dtype) {
		const rows, tableRows, H, ldt, ldo, K, ldw = 6, 20, 36, 40, 48, 4, 5
		table, dst := randn(r, dt, tableRows*ldt, 1), randn(r, dt, rows*ldo, 1)
		w, ids := randUniform(r, rows*ldw), randIDs(r, rows*K, tableRows)
		var got []float32
		f.do(func() error {
			tp, dp, wp, ip := f.put(dt, table), f.put(dt, dst), f.put(f32, w), f.putI32(ids)
			err := f.ks[dt].embedBag.Launch(gpu.Dim3{X: rows}, gpu.Dim3{X: 256}, 0, f.s, gpu.P(dp), gpu.I(ldo), gpu.P(tp), gpu.I(ldt),
				gpu.P(ip), gpu.P(wp), gpu.I(ldw), gpu.I(K), gpu.I(H))
			if err == nil {
				err = f.s.Sync()
			}
			got = f.get(dt, dp, rows*ldo)
			return err
		})
		check(t, "embed-bag add", got, embedBagRef(dt, dst, ldo, table, ldt, ids, w, ldw, K, H, rows), tolFor(dt))
	})
}

// attnRef is softmax(q k^T * scale + mask) v for one segment, GQA, in float64.
func attnRef(q, k, v []float32, nq, nk, heads, kvh, hd, ldq, ldk, ldv int, causal bool, scale float64) []float64 {
	out := make([]float64, nq*heads*hd)
	for h := range heads {
		g := h / (heads / kvh)
		for i := range nq {
			lim := nk - 1
			if causal {
				lim = i + nk - nq
			}
			sc := make([]float64, lim+1)
			mx := math.Inf(-1)
			for j := 0; j <= lim; j++ {
				s := 0.0
				for d := range hd {
					s += float64(q[i*ldq+h*hd+d]) * float64(k[j*ldk+g*hd+d])
				}
				sc[j] = s * scale
				mx = math.Max(mx, sc[j])
			}
			sum := 0.0
			for j := range sc {
				sc[j] = math.Exp(sc[j] - mx)
				sum += sc[j]
			}
			for d := range hd {
				a := 0.0
				for j := range sc {
					a += sc[j] * float64(v[j*ldv+g*hd+d])
				}
				out[i*heads*hd+h*hd+d] = a / sum
			}
		}
	}
	return out
}

// TestKernelFlashAttention covers causal GQA with a cached prefix (the decoder's prefill) and
// non-causal variable segments (the vision tower's windows and frames).
func TestKernelFlashAttention(t *testing.T) {
	f := newKfix(t)
	r := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct {
		name           string
		hd, heads, kvh int
		qseg, kseg     []int32
		causal         bool
	}{
		{"prefill-gqa-128", 128, 16, 2, []int32{0, 150}, []int32{0, 170}, true},
		{"prefill-gqa-128-200", 128, 16, 2, []int32{0, 200}, []int32{0, 200}, true},
		{"prefill-5-after-300", 128, 4, 2, []int32{0, 5}, []int32{0, 305}, true},
		{"prefill-16", 16, 2, 1, []int32{0, 70}, []int32{0, 70}, true},
		{"windows-80", 80, 16, 16, []int32{0, 64, 128, 176, 192}, []int32{0, 64, 128, 176, 192}, false},
		{"frame-80", 80, 4, 4, []int32{0, 300}, []int32{0, 300}, false},
		{"frames-64", 64, 2, 2, []int32{0, 130, 131, 260}, []int32{0, 130, 131, 260}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forTypes(t, func(t *testing.T, dt dtype) {
				nseg := len(tc.qseg) - 1
				nq, nk := int(tc.qseg[nseg]), int(tc.kseg[nseg])
				qd, kvd := tc.heads*tc.hd, tc.kvh*tc.hd
				q, k, v := randn(r, dt, nq*qd, 1), randn(r, dt, nk*kvd, 1), randn(r, dt, nk*kvd, 1)
				scale := 1 / math.Sqrt(float64(tc.hd))
				longest := maxSegment(tc.qseg)
				want := make([]float64, 0, nq*qd)
				for s := range nseg {
					q0, k0 := int(tc.qseg[s]), int(tc.kseg[s])
					part := attnRef(q[q0*qd:], k[k0*kvd:], v[k0*kvd:], int(tc.qseg[s+1])-q0, int(tc.kseg[s+1])-k0,
						tc.heads, tc.kvh, tc.hd, qd, kvd, kvd, tc.causal, scale)
					want = append(want, part...)
				}
				var got []float32
				f.do(func() error {
					qp, kp, vp, out := f.put(dt, q), f.put(dt, k), f.put(dt, v), f.poisoned(dt, nq*qd)
					qs, ks := f.putI32(tc.qseg), f.putI32(tc.kseg)
					c := 0
					if tc.causal {
						c = 1
					}
					err := f.ks[dt].flash[tc.hd].Launch(gpu.Dim3{X: (longest + attBQ - 1) / attBQ, Y: tc.heads, Z: nseg}, gpu.Dim3{X: 4 * attBQ}, 0, f.s,
						gpu.P(out), gpu.P(qp), gpu.P(kp), gpu.P(vp), gpu.I(qd), gpu.I(kvd), gpu.I(kvd), gpu.I(qd),
						gpu.P(qs), gpu.P(ks), gpu.I(tc.heads), gpu.I(tc.kvh), gpu.I(c), gpu.F(float32(scale)))
					if err == nil {
						err = f.s.Sync()
					}
					got = f.get(dt, out, nq*qd)
					return err
				})
				check(t, "attention", got, want, 2*tolFor(dt))
			})
		})
	}
}

// TestKernelMMAAttention checks the tensor-core flash kernel (bf16) against float64 on tables of
// segments in one launch: causal chunks after cached keys whose pool rows are out of order,
// frames, GQA ratios of 8 and 3, one query head over one KV head, lengths that are not
// multiples of the 16-row tiles, rows wider than the heads (a fused qkv's stride); windows and
// frames with the tower's rope table rotated inside (rounded as rope_rows in F32 on the host),
// the table's cos/sin rows staged by cp.async or, from an address that is not 16-byte aligned,
// plainly, and restaged for key tiles other than the query tile's rows (frames); windows with
// and without it, and over grouped KV heads.
func TestKernelMMAAttention(t *testing.T) {
	f := newKfix(t)
	r := rand.New(rand.NewPCG(51, 52))
	windows := []int32{0, 64, 0, 64, 64, 64, 64, 64, 128, 48, 128, 48, 176, 16, 176, 16, 192, 1, 192, 1}
	for _, tc := range []struct {
		name         string
		heads, kv    int
		segs         []int32 // q0, nq, k0, nk each
		causal, rope bool
		csOff        int // the rope table this many floats past an aligned address
	}{
		{"prefill-gqa8", 16, 2, []int32{0, 200, 0, 200, 200, 37, 500, 57, 237, 1, 300, 130}, true, false, 0},
		{"frames", 4, 4, []int32{0, 130, 0, 130, 130, 65, 130, 65, 195, 63, 195, 63}, false, false, 0},
		{"chunk-gqa3", 12, 4, []int32{0, 70, 0, 70, 70, 129, 80, 140}, true, false, 0},
		{"one-kv-head", 3, 1, []int32{0, 17, 0, 300, 17, 80, 300, 5}, false, false, 0},
		{"windows", 3, 3, windows, false, false, 0},
		{"windows-rope", 3, 3, windows, false, true, 0},
		{"windows-rope-gqa3", 6, 2, windows, false, true, 0},
		{"frames-rope", 2, 2, []int32{0, 150, 0, 150, 150, 77, 150, 77}, false, true, 0},
		{"windows-rope-unaligned", 3, 3, windows, false, true, 1},
		{"frames-rope-unaligned", 2, 2, []int32{0, 150, 0, 150, 150, 77, 150, 77}, false, true, 3},
	} {
		for _, hd := range mmaHeadDims {
			if tc.rope && hd%16 != 0 {
				continue // the kernel rotates whole k16 head dims only (the backend rotates 72 first)
			}
			t.Run(fmt.Sprintf("%s/%d", tc.name, hd), func(t *testing.T) {
				dt := bf16
				qd, kvd := tc.heads*hd, tc.kv*hd
				ldq, ldk := qd+16, kvd+8 // padded rows, still 16-byte multiples
				nq, nk, longest := 0, 0, 0
				for i := 0; i < len(tc.segs); i += 4 {
					nq, nk = max(nq, int(tc.segs[i]+tc.segs[i+1])), max(nk, int(tc.segs[i+2]+tc.segs[i+3]))
					longest = max(longest, int(tc.segs[i+1]))
				}
				q, k, v := randn(r, dt, nq*ldq, 1), randn(r, dt, nk*ldk, 1), randn(r, dt, nk*ldk, 1)
				scale := 1 / math.Sqrt(float64(hd))
				qr, kr, cs := q, k, []float32(nil) // what the reference attends: rotated with a table
				if tc.rope {                       // the frames' queries and keys are the same rows
					half := hd / 2
					cs = make([]float32, 2*nq*half)
					for i := range nq * half {
						a := r.Float64() * 2 * math.Pi
						cs[i], cs[nq*half+i] = float32(math.Cos(a)), float32(math.Sin(a))
					}
					qr, kr = slices.Clone(q), slices.Clone(k)
					for i := range nq {
						c, sn := cs[i*half:], cs[nq*half+i*half:]
						for h := range tc.heads {
							rotBF16(qr[i*ldq+h*hd:], half, c, sn)
						}
						for h := range tc.kv {
							rotBF16(kr[i*ldk+h*hd:], half, c, sn)
						}
					}
				}
				var got []float32
				f.do(func() error {
					qp, kp, vp, out := f.put(dt, q), f.put(dt, k), f.put(dt, v), f.poisoned(dt, nq*qd)
					sp := f.putI32(tc.segs)
					csp := gpu.DevPtr(0)
					if tc.rope {
						csp = f.put(f32, append(make([]float32, tc.csOff), cs...)).Add(4 * int64(tc.csOff))
					}
					c := 0
					if tc.causal {
						c = 1
					}
					err := f.ks[dt].mma[hd].Launch(mmaGrid(longest, tc.heads, len(tc.segs)/4),
						gpu.Dim3{X: mmaThreads}, 0, f.s, gpu.P(out), gpu.P(qp), gpu.P(kp), gpu.P(vp), gpu.I(ldq), gpu.I(ldk), gpu.I(ldk),
						gpu.I(qd), gpu.P(sp), gpu.I(tc.heads), gpu.I(tc.kv), gpu.I(c), gpu.F(float32(scale)), gpu.P(csp), gpu.I(nq))
					if err == nil {
						err = f.s.Sync()
					}
					got = f.get(dt, out, nq*qd)
					return err
				})
				for i := 0; i < len(tc.segs); i += 4 {
					q0, n, k0, m := int(tc.segs[i]), int(tc.segs[i+1]), int(tc.segs[i+2]), int(tc.segs[i+3])
					want := attnRef(qr[q0*ldq:], kr[k0*ldk:], v[k0*ldk:], n, m, tc.heads, tc.kv, hd, ldq, ldk, ldk, tc.causal, scale)
					check(t, fmt.Sprintf("segment %d (%dx%d)", i/4, n, m), got[q0*qd:(q0+n)*qd], want, 2*tolFor(dt))
				}
			})
		}
	}
}

// TestKernelWindowAttention checks the tensor-core window kernel (bf16) on segments of at most
// WIN_MAX rows, full and partial, against float64; with a rope table it rotates q and k first,
// as rope_rows in F32 (RoundOnce; rounded the same way on the host).
func TestKernelWindowAttention(t *testing.T) {
	f := newKfix(t)
	r := rand.New(rand.NewPCG(23, 24))
	for _, hd := range windowHeadDims {
		for _, rope := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d rope=%v", hd, rope), func(t *testing.T) {
				const heads = 3
				seg := []int32{0, 64, 128, 176, 192, 193}
				dt := bf16
				n, half := int(seg[len(seg)-1]), hd/2
				ld := 3 * heads * hd // rows of a fused qkv, as in the tower
				qkv := randn(r, dt, n*ld, 1)
				scale := 1 / math.Sqrt(float64(hd))
				in, cs := qkv, []float32(nil)
				if rope {
					cs = make([]float32, 2*n*half)
					for i := range n * half {
						a := r.Float64() * 2 * math.Pi
						cs[i], cs[n*half+i] = float32(math.Cos(a)), float32(math.Sin(a))
					}
					in = slices.Clone(qkv)
					for i := range n {
						for h := range 2 * heads { // q heads, then k heads
							rotBF16(in[i*ld+h*hd:], half, cs[i*half:], cs[n*half+i*half:])
						}
					}
				}
				var got []float32
				f.do(func() error {
					qp, out, sp := f.put(dt, qkv), f.poisoned(dt, n*heads*hd), f.putI32(seg)
					csp := gpu.DevPtr(0)
					if rope {
						csp = f.put(f32, cs)
					}
					e := int64(heads*hd) * dt.size()
					err := f.ks[dt].window[hd].Launch(gpu.Dim3{X: len(seg) - 1, Y: heads}, gpu.Dim3{X: winThreads}, 0, f.s,
						gpu.P(out), gpu.P(qp), gpu.P(qp.Add(e)), gpu.P(qp.Add(2*e)), gpu.I(ld), gpu.I(ld), gpu.I(ld), gpu.I(heads*hd),
						gpu.P(sp), gpu.F(float32(scale)), gpu.P(csp), gpu.I(n))
					if err == nil {
						err = f.s.Sync()
					}
					got = f.get(dt, out, n*heads*hd)
					return err
				})
				var want []float64
				for s := 0; s+1 < len(seg); s++ {
					r0, m := int(seg[s]), int(seg[s+1]-seg[s])
					want = append(want, attnRef(in[r0*ld:], in[r0*ld+heads*hd:], in[r0*ld+2*heads*hd:], m, m, heads, heads, hd, ld, ld, ld, false, scale)...)
				}
				check(t, "window attention", got, want, 2*tolFor(dt))
			})
		}
	}
}

// TestKernelDecodeAttention checks the fused decode step attention: M-RoPE of q and of the new
// key, the cache write, attention over the cache split in DEC_SK-key pieces and the merge by the
// last split (run twice, so that the tickets must have been reset), against rope_text's rule and
// float64 attention.
// TestKernelPoolAttention runs iris_attn_pool on a batch of decode rows, each its own sequence
// in one KV pool (other starts and lengths, the new key at the end), twice (the tickets reset);
// in bf16 iris_attn_pool_gqa (a block a KV group) too, GQA ratios 7, 8 and 16, and with q/k
// norms against iris_attn_pool; and iris_attn_pool_gqa_whole (a block over all of a row's keys)
// where every row's cache fits it (at most 256 keys: 1, 64, 65, 130, 256).
func TestKernelPoolAttention(t *testing.T) {
	f := newKfix(t)
	r := rand.New(rand.NewPCG(9, 10))
	for _, tc := range []struct {
		name           string
		heads, kvh, hd int
		pasts          []int // cached keys of each row's sequence
		splits         int   // grid splits (>= the active ones)
	}{
		{"3b-long", 16, 2, 128, []int{600}, 64},
		{"batch3", 16, 2, 128, []int{40, 0, 129}, 8},
		{"split-edge", 16, 2, 128, []int{63}, 1}, // the new token last in the only split
		{"mha-hd16", 2, 2, 16, []int{129, 3}, 3},
		{"gqa7-hd64", 14, 2, 64, []int{0, 70}, 4},
		{"hd256", 4, 1, 256, []int{70}, 2},
		{"gqa16", 16, 1, 128, []int{100, 5}, 2},
		{"whole-edges", 16, 2, 128, []int{255, 63, 64, 0, 129}, 4},
		{"whole-gqa7-hd64", 14, 2, 64, []int{200, 31}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forTypes(t, func(t *testing.T, dt dtype) {
				heads, kvh, hd := tc.heads, tc.kvh, tc.hd
				qd, kvd, rows, half := heads*hd, kvh*hd, len(tc.pasts), hd/2
				ld := qd + 2*kvd
				qkv := randn(r, dt, rows*ld, 1)
				cs := randn(r, f32, 2*rows*half, 1)
				// sequences one after another in the pool, 16 rows of room apart
				var starts, slots, spans []int32
				poolRows := 0
				for _, p := range tc.pasts {
					starts = append(starts, int32(poolRows))
					slots = append(slots, int32(poolRows+p))
					spans = append(spans, int32(poolRows), int32(p+1))
					poolRows += p + 17
				}
				kc := randn(r, dt, poolRows*kvd, 1)
				vc := randn(r, dt, poolRows*kvd, 1)
				scale := 1 / math.Sqrt(float64(hd))
				// the one-head kernel, and in bf16 the group kernel where it serves the shape,
				// twice each on the same pool (the new keys written again are the same)
				type launch struct {
					name         string
					fn           *gpu.Function
					x, y, shared int
				}
				k := f.ks[dt]
				runs := []launch{{"pool attention", k.attnPool, heads, tc.splits, 0}}
				if g := k.poolGQA[hd]; g != nil && heads/kvh <= gqaMax {
					runs = append(runs, launch{"group pool attention", g, kvh, tc.splits, 0})
				}
				if w := k.poolGQAWhole[hd]; w != nil && heads/kvh <= gqaMax && slices.Max(tc.pasts) < gqaWhole {
					runs = append(runs, launch{"whole group pool attention", w, kvh, 1, gqaWholeSmem(hd)})
				}
				got := make([][2][]float32, len(runs))
				var gotK, gotV []float32
				// with q/k norms (Qwen3's), the group kernel against the one-head kernel (whose
				// norms TestKernelBackendQKNorm checks), each on its own copy of the pool
				var normed [2][3][]float32 // kernel: out, keys in the pool, values in the pool
				wq, wk := randn(r, dt, hd, 1), randn(r, dt, hd, 1)
				f.do(func() error {
					qp, cp := f.put(dt, qkv), f.put(f32, cs)
					part := f.poisoned(f32, rows*heads*tc.splits*(hd+2))
					ticket := f.putI32(make([]int32, rows*heads))
					sl, sp := f.putI32(slots), f.putI32(spans)
					pool := func(run launch, out, kp, vp, qnw, knw gpu.DevPtr) error {
						err := run.fn.Launch(gpu.Dim3{X: run.x, Y: run.y, Z: rows}, gpu.Dim3{X: decThreads}, run.shared, f.s,
							gpu.P(out), gpu.I(qd), gpu.P(part), gpu.P(ticket), gpu.P(qp), gpu.I(ld),
							gpu.P(qp.Add(int64(qd)*dt.size())), gpu.I(ld), gpu.P(qp.Add(int64(qd+kvd)*dt.size())), gpu.I(ld),
							gpu.P(cp), gpu.P(cp.Add(int64(rows*half)*4)), gpu.I(half), gpu.P(kp), gpu.P(vp), gpu.P(sl), gpu.P(sp),
							gpu.I(heads), gpu.I(kvh), gpu.I(hd), gpu.F(float32(scale)), gpu.P(qnw), gpu.P(knw), gpu.F(1e-6))
						if err == nil {
							err = f.s.Sync()
						}
						return err
					}
					kp, vp := f.put(dt, kc), f.put(dt, vc)
					for i := range 2 * len(runs) {
						out := f.poisoned(dt, rows*qd)
						if err := pool(runs[i/2], out, kp, vp, 0, 0); err != nil { // no q/k norms
							return err
						}
						got[i/2][i%2] = f.get(dt, out, rows*qd)
					}
					gotK, gotV = f.get(dt, kp, poolRows*kvd), f.get(dt, vp, poolRows*kvd)
					if len(runs) >= 2 {
						qn, kn := f.put(dt, wq), f.put(dt, wk)
						for i, run := range runs[:2] {
							out, kp, vp := f.poisoned(dt, rows*qd), f.put(dt, kc), f.put(dt, vc)
							if err := pool(run, out, kp, vp, qn, kn); err != nil {
								return err
							}
							normed[i] = [3][]float32{f.get(dt, out, rows*qd), f.get(dt, kp, poolRows*kvd), f.get(dt, vp, poolRows*kvd)}
						}
					}
					return nil
				})
				if normed[1][0] != nil {
					check(t, "group pool attention with q/k norms", normed[1][0], widen(normed[0][0]), tolFor(dt))
					check(t, "keys in the pool with q/k norms", normed[1][1], widen(normed[0][1]), tolFor(dt)/4)
					check(t, "values in the pool with q/k norms", normed[1][2], widen(normed[0][2]), 0)
				}
				// rope_rows' decoder rounding, then float64 attention per row
				want := make([]float64, rows*qd)
				for b, p := range tc.pasts {
					row := qkv[b*ld:]
					roped := make([]float32, qd+kvd)
					for h := range heads + kvh {
						for fq := range half {
							c, s := float64(cs[b*half+fq]), float64(cs[rows*half+b*half+fq])
							x1, x2 := float64(row[h*hd+fq]), float64(row[h*hd+fq+half])
							lo, hi := ropePair(dt, x1, x2, c, s, false)
							roped[h*hd+fq], roped[h*hd+fq+half] = float32(lo), float32(hi)
						}
					}
					at := int(slots[b]) * kvd
					copy(kc[at:], roped[qd:])
					copy(vc[at:], row[qd+kvd:qd+2*kvd])
					st := int(starts[b]) * kvd
					copy(want[b*qd:], attnRef(roped[:qd], kc[st:], vc[st:], 1, p+1, heads, kvh, hd, qd, kvd, kvd, false, scale))
				}
				wantK := make([]float64, len(kc))
				wantV := make([]float64, len(vc))
				for i := range kc {
					wantK[i], wantV[i] = float64(kc[i]), float64(vc[i])
				}
				check(t, "keys in the pool", gotK, wantK, tolFor(dt))
				check(t, "values in the pool", gotV, wantV, 0)
				for i, run := range runs {
					check(t, run.name, got[i][0], want, 2*tolFor(dt))
					check(t, run.name+", second launch", got[i][1], want, 2*tolFor(dt))
				}
			})
		})
	}
}

// TestKernelLinear checks the products of the linear layers (y = x W^T + b) in both types:
// cuBLASLt with the bias in the epilogue (with and without a bias, twice each so the cached plan
// is reused, and with an input only 16-byte aligned) and cublasGemmEx after the bias kernel.
func TestKernelLinear(t *testing.T) {
	f := newKfix(t)
	r := rand.New(rand.NewPCG(11, 12))
	forTypes(t, func(t *testing.T, dt dtype) {
		for _, sh := range [][3]int{{1, 2560, 2048}, {37, 300, 1176}, {200, 256, 1176}} {
			M, N, K := sh[0], sh[1], sh[2]
			x, w, b := randn(r, dt, M*K, 1), randn(r, dt, N*K, 0.05), randn(r, dt, N, 1)
			for _, v := range []struct {
				name         string
				gemmEx, bias bool
				xOff         int64 // bytes
			}{
				{"gemmex", true, true, 0},
				{"lt", false, true, 0},
				{"lt again", false, true, 0},
				{"lt no bias", false, false, 0},
				{"lt x+16B", false, true, 16},
			} {
				var got []float32
				f.do(func() error {
					xb := f.put(dt, append(make([]float32, v.xOff/dt.size()), x...))
					xp, wp, bp, y := xb.Add(v.xOff), f.put(dt, w), f.put(dt, b), f.poisoned(dt, M*N)
					if !v.bias {
						bp = 0
					}
					var err error
					if v.gemmEx {
						err = f.ks[dt].bias.Launch(grid2(M, N), gpu.Dim3{X: 256}, 0, f.s, gpu.P(y), gpu.P(bp), gpu.I(M), gpu.I(N), gpu.I(N))
						if err == nil {
							err = f.blas.linear(dt, y, N, xp, K, wp, M, N, K, true)
						}
					} else {
						err = f.blas.ltLinear(dt, y, N, xp, K, wp, bp, M, N, K)
					}
					if err == nil {
						err = f.s.Sync()
					}
					got = f.get(dt, y, M*N)
					return err
				})
				want := make([]float64, M*N)
				for i := range M {
					for j := range N {
						a := 0.0
						if v.bias {
							a = float64(b[j])
						}
						for kk := range K {
							a += float64(x[i*K+kk]) * float64(w[j*K+kk])
						}
						want[i*N+j] = a
					}
				}
				check(t, fmt.Sprintf("linear %dx%dx%d %s", M, N, K, v.name), got, want, productTol(dt))
			}
		}
	})
}

// TestKernelArgmax checks the greedy choice in one block and in two stages (the engine's), on a
// vocabulary with a tie for the best and NaNs, and on one of NaNs and -inf only.
func TestKernelArgmax(t *testing.T) {
	f := newKfix(t)
	r := rand.New(rand.NewPCG(13, 14))
	const n = 151936
	v := randn(r, f32, n, 1)
	v[777], v[99000], v[150000] = 9, 9, 8.5 // a tie: the first index wins
	v[5], v[140000] = float32(math.NaN()), float32(math.NaN())
	odd := make([]float32, 3000)
	for i := range odd {
		odd[i] = float32(math.NaN())
	}
	odd[2000], odd[2500] = float32(math.Inf(-1)), float32(math.Inf(-1))
	for _, tc := range []struct {
		name       string
		logits     []float32
		idx        [2]int32
		best, next float32
	}{
		{"vocabulary", v, [2]int32{777, 99000}, 9, 9},
		{"NaN and -inf", odd, [2]int32{2000, 2500}, float32(math.Inf(-1)), float32(math.Inf(-1))},
	} {
		for _, stages := range []int{1, 2} {
			var idx []int32
			var vals []float32
			f.do(func() error {
				m := len(tc.logits)
				lp, op, vp := f.put(f32, tc.logits), f.putI32([]int32{-1, -1}), f.poisoned(f32, 2)
				var err error
				if stages == 1 {
					err = f.ks[f32].argmax.Launch(gpu.Dim3{X: 1}, gpu.Dim3{X: 1024}, 0, f.s, gpu.P(op), gpu.P(vp), gpu.P(lp), gpu.P(0), gpu.I(m), gpu.I(4))
				} else {
					pv, pi := f.poisoned(f32, 2*argmaxParts), f.putI32(make([]int32, 2*argmaxParts))
					err = f.ks[f32].argmaxPart.Launch(gpu.Dim3{X: argmaxParts}, gpu.Dim3{X: argmaxThreads}, 0, f.s, gpu.P(pv), gpu.P(pi), gpu.P(lp), gpu.I(m), gpu.L(int64(m)))
					if err == nil {
						err = f.ks[f32].argmax.Launch(gpu.Dim3{X: 1}, gpu.Dim3{X: argmaxThreads}, 0, f.s, gpu.P(op), gpu.P(vp), gpu.P(pv), gpu.P(pi), gpu.I(2*argmaxParts), gpu.I(4))
					}
				}
				if err == nil {
					err = f.s.Sync()
				}
				idx = make([]int32, 2)
				if err == nil {
					err = gpu.CopyDtoH(unsafe.Pointer(&idx[0]), op, 8)
				}
				vals = f.get(f32, vp, 2)
				return err
			})
			if idx[0] != tc.idx[0] || idx[1] != tc.idx[1] || vals[0] != tc.best || vals[1] != tc.next {
				t.Errorf("%s, %d stages: argmax/top2 = %v %v, want %v [%v %v]", tc.name, stages, idx, vals, tc.idx, tc.best, tc.next)
			}
		}
	}
}

// TestKernelArgmaxRows checks the backend's Argmax over several rows in one pair of launches
// (a decode step's sequences): each row's pick is its own, rows laid out at a stride.
func TestKernelArgmaxRows(t *testing.T) {
	b := newBackend(t, Options{Precision: "fp32"})
	r := rand.New(rand.NewPCG(41, 42))
	const rows, n, ld = 5, 151936, 151940
	v := randn(r, f32, rows*ld, 1)
	want := make([]int32, rows)
	for i := range rows {
		want[i] = int32(r.IntN(n))
		v[i*ld+int(want[i])] = 50 + float32(i)
		v[i*ld+n] = 100 // past the row's columns: never picked
	}
	got := make([]int32, rows)
	err := b.Do(func() error {
		m, err := b.Alloc(rows, ld, ml.F32)
		if err != nil {
			return err
		}
		b.Write(m, v)
		b.Argmax(got, m.ColsAt(0, n))
		return b.Sync()
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("argmax of %d rows = %v, want %v", rows, got, want)
	}
}

// TestAttentionGemm checks attention through cuBLAS and the row softmax (the path of long
// segments): causal GQA after a cached prefix, and all-heads self-attention in head chunks.
func TestAttentionGemm(t *testing.T) {
	f := newKfix(t)
	r := rand.New(rand.NewPCG(15, 16))
	for _, tc := range []struct {
		name               string
		nq, nk, heads, kvh int
		hd, chunk, q0, k0  int
		causal             bool
	}{
		{"prefill-gqa", 150, 170, 16, 2, 128, 3, 0, 0, true},
		{"frame-allheads", 200, 200, 16, 16, 80, 5, 7, 7, false},
		{"prefill-gqa-batched", 150, 170, 16, 2, 128, 16, 0, 0, true}, // chunk = heads: pointer arrays
	} {
		t.Run(tc.name, func(t *testing.T) {
			forTypes(t, func(t *testing.T, dt dtype) {
				qd, kvd := tc.heads*tc.hd, tc.kvh*tc.hd
				rowsQ, rowsK := tc.q0+tc.nq, tc.k0+tc.nk
				q, k, v := randn(r, dt, rowsQ*qd, 1), randn(r, dt, rowsK*kvd, 1), randn(r, dt, rowsK*kvd, 1)
				scale := 1 / math.Sqrt(float64(tc.hd))
				var got []float32
				f.do(func() error {
					qp, kp, vp, out := f.put(dt, q), f.put(dt, k), f.put(dt, v), f.poisoned(dt, rowsQ*qd)
					area := tc.nq * tc.nk
					s, p := f.poisoned(f32, tc.chunk*area), f.poisoned(dt, tc.chunk*area)
					a := attnArgs{out: out, q: qp, k: kp, v: vp, q0: tc.q0, k0: tc.k0, ldo: qd, ldq: qd, ldk: kvd, ldv: kvd,
						nq: tc.nq, nk: tc.nk, heads: tc.heads, kvh: tc.kvh, hd: tc.hd, causal: tc.causal, scale: float32(scale)}
					var err error
					if tc.chunk == tc.heads && tc.kvh < tc.heads {
						ptrs := gqaPointers(dt, a, s, p)
						a.ptrs = f.put(f32, make([]float32, 2*len(ptrs)))
						err = gpu.CopyHtoD(a.ptrs, unsafe.Pointer(&ptrs[0]), int64(len(ptrs))*8)
					}
					if err == nil {
						err = attnGemm(dt, f.ks[dt], f.blas, f.s, a, s, p, tc.chunk)
					}
					if err == nil {
						err = f.s.Sync()
					}
					got = f.get(dt, out.Add(int64(tc.q0*qd)*dt.size()), tc.nq*qd)
					return err
				})
				want := attnRef(q[tc.q0*qd:], k[tc.k0*kvd:], v[tc.k0*kvd:], tc.nq, tc.nk, tc.heads, tc.kvh, tc.hd, qd, kvd, kvd, tc.causal, scale)
				check(t, "attention", got, want, 2*tolFor(dt))
			})
		})
	}
}

// gemvLaunch launches a gemv kernel as the engine does, with at most maxBlocks blocks (fewer
// make the warps stride over rows).
func (f *kfix) gemvLaunch(fn *gpu.Function, dt dtype, maxBlocks, N, K int, args ...gpu.Arg) error {
	blocks := min((N+gemvWarps-1)/gemvWarps, maxBlocks)
	return fn.Launch(gpu.Dim3{X: blocks}, gpu.Dim3{X: 32 * gemvWarps}, int((int64(K)*dt.size()+15)&^15), f.s, args...)
}

// TestKernelGemv checks the decode step's one-row product (with and without bias, vector and
// scalar loads, a grid with and without row striding, the F32 copy of the output) against
// float64.
func TestKernelGemv(t *testing.T) {
	f := newKfix(t)
	r := rand.New(rand.NewPCG(17, 18))
	forTypes(t, func(t *testing.T, dt dtype) {
		for _, sh := range []struct {
			N, K, blocks int
			bias         bool
		}{{2560, 2048, 1 << 20, true}, {2048, 11008, 7, false}, {37, 36, 1 << 20, true}, {300, 2048, 3, true}, {5, 12, 1, false}} {
			x, w, b := randn(r, dt, sh.K, 1), randn(r, dt, sh.N*sh.K, 0.05), randn(r, dt, sh.N, 1)
			var got, gotF []float32
			f.do(func() error {
				xp, wp, y, yf := f.put(dt, x), f.put(dt, w), f.poisoned(dt, sh.N), f.poisoned(f32, sh.N)
				bp := gpu.DevPtr(0)
				if sh.bias {
					bp = f.put(dt, b)
				}
				err := f.gemvLaunch(f.ks[dt].gemv, dt, sh.blocks, sh.N, sh.K,
					gpu.P(y), gpu.P(yf), gpu.P(wp), gpu.P(xp), gpu.P(bp), gpu.I(sh.N), gpu.I(sh.K), gpu.I(0), gpu.P(0), gpu.P(0), gpu.P(0), gpu.F(0))
				if err == nil {
					err = f.s.Sync()
				}
				got, gotF = f.get(dt, y, sh.N), f.get(f32, yf, sh.N)
				return err
			})
			want := make([]float64, sh.N)
			for j := range want {
				a := 0.0
				if sh.bias {
					a = float64(b[j])
				}
				for k := range sh.K {
					a += float64(w[j*sh.K+k]) * float64(x[k])
				}
				want[j] = a
			}
			check(t, fmt.Sprintf("gemv %dx%d", sh.N, sh.K), got, want, productTol(dt))
			for i := range got {
				if got[i] != gotF[i] {
					t.Fatalf("gemv %dx%d: F32 output %d = %v, T output %v", sh.N, sh.K, i, gotF[i], got[i])
				}
			}
		}
	})
}

// TestKernelGemvFused checks the decode products that compute their input row, RMSNorm of the
// residual plus a delta (mode 1, the residual written to a second buffer), with a plain output
// and with the SwiGLU output of the gate/up pair (iris_gemv_glu).
func TestKernelGemvFused(t *testing.T) {
	f := newKfix(t)
	r := rand.New(rand.NewPCG(19, 20))
	forTypes(t, func(t *testing.T, dt dtype) {
		const N, K, I = 3000, 2048, 1100
		x, d, nw := randn(r, dt, K, 1), randn(r, dt, K, 1), randn(r, dt, K, 1)
		w, b := randn(r, dt, N*K, 0.05), randn(r, dt, N, 1)
		wg := randn(r, dt, 2*I*K, 0.05)
		var gotN, gotX, gotG, gotX2 []float32
		f.do(func() error {
			xp, dp, np := f.put(dt, x), f.put(dt, d), f.put(dt, nw)
			wp, bp, wgp := f.put(dt, w), f.put(dt, b), f.put(dt, wg)
			yn, yg, xo, xo2 := f.poisoned(dt, N), f.poisoned(dt, I), f.poisoned(dt, K), f.poisoned(dt, K)
			k := f.ks[dt]
			err := f.gemvLaunch(k.gemv, dt, 50, N, K, gpu.P(yn), gpu.P(0), gpu.P(wp), gpu.P(xp), gpu.P(bp), gpu.I(N), gpu.I(K),
				gpu.I(1), gpu.P(dp), gpu.P(np), gpu.P(xo), gpu.F(1e-6))
			if err == nil {
				err = f.gemvLaunch(k.gemvGLU, dt, 1<<20, I, K, gpu.P(yg), gpu.P(0), gpu.P(wgp), gpu.P(xp), gpu.P(0), gpu.I(I), gpu.I(K),
					gpu.I(1), gpu.P(dp), gpu.P(np), gpu.P(xo2), gpu.F(1e-6))
			}
			if err == nil {
				err = f.s.Sync()
			}
			gotN, gotX, gotG, gotX2 = f.get(dt, yn, N), f.get(dt, xo, K), f.get(dt, yg, I), f.get(dt, xo2, K)
			return err
		})
		res := make([]float64, K)
		xn := make([]float64, K)
		ss := 0.0
		for i := range res {
			res[i] = round(dt, float64(x[i])+float64(d[i]))
			ss += res[i] * res[i]
		}
		inv := 1 / math.Sqrt(ss/K+1e-6)
		for i := range xn {
			xn[i] = round(dt, float64(nw[i])*round(dt, res[i]*inv))
		}
		dot := func(w []float32, row int) float64 {
			a := 0.0
			for i := range K {
				a += float64(w[row*K+i]) * xn[i]
			}
			return a
		}
		wantN, wantG := make([]float64, N), make([]float64, I)
		for j := range N {
			wantN[j] = float64(b[j]) + dot(w, j)
		}
		for j := range I {
			g, u := round(dt, dot(wg, j)), round(dt, dot(wg, I+j))
			wantG[j] = siluRef(dt, g, u)
		}
		tol := productTol(dt)
		check(t, "residual out", gotX, res, tolFor(dt))
		check(t, "residual out (glu)", gotX2, res, tolFor(dt))
		check(t, "gemv(rmsnorm(x+d))", gotN, wantN, tol)
		check(t, "silu(gate)*up of gemv(rmsnorm(x+d))", gotG, wantG, 2*tol)
	})
}

// TestKernelBackendOps runs LayerNorm, HeadNorm, both GELUs, ScatterAdd and AddEmbedBag through
// the backend's methods in both precisions (their launch shapes and argument order, the strides
// they pass: a padded table, q and k views of fused rows) against the references of the kernel
// tests, and checks that what they cannot do is refused.
func TestKernelBackendOps(t *testing.T) {
	forBackends(t, func(t *testing.T, b *Backend) {
		dt := b.dt
		r := rand.New(rand.NewPCG(35, 36))
		const eps = 1e-6
		// LayerNorm: rows of 1152 with the residual add and a bias
		const rows, n = 3, 1152
		x, d := offset(dt, randn(r, dt, rows*n, 1), 3), randn(r, dt, rows*n, 1)
		lw, lb := randn(r, dt, n, 1), randn(r, dt, n, 1)
		// HeadNorm: q and k of fused q/k/v rows
		const hrows, heads, kvh, hd = 2, 16, 8, 128
		qd, kvd := heads*hd, kvh*hd
		ld := qd + 2*kvd
		qkv, wq, wk := randn(r, dt, hrows*ld, 2), randn(r, dt, hd, 1), randn(r, dt, hd, 1)
		// GELU in both forms
		g := randn(r, dt, 2*1000, 3)
		// ScaleCols on a view of 37 columns of rows of 50 (a LayerScale)
		const cRows, cCols, cN = 9, 50, 37
		sc, sw := randn(r, dt, cRows*cCols, 2), randn(r, dt, cN, 1)
		// ScatterAdd
		const sRows, dRows, W = 3, 6, 40
		src, sdst, sidx := randn(r, dt, sRows*W, 1), randn(r, dt, dRows*W, 1), []int32{4, 1, 5}
		// AddEmbedBag: a table of 34 columns, stored padded (136 and 68 bytes are not 16-byte rows)
		const eRows, tRows, H, K = 5, 20, 34, 4
		table, edst := randn(r, dt, tRows*H, 1), randn(r, dt, eRows*H, 1)
		ew, ids := randUniform(r, eRows*K), randIDs(r, eRows*K, tRows)

		var gotY, gotX, gotQKV, gotErf, gotTanh, gotS, gotE, gotC []float32
		var tab ml.Tensor
		err := b.Do(func() error {
			var err error
			tab, err = b.Load(unsafe.Slice((*byte)(unsafe.Pointer(&table[0])), len(table)*4), "F32", tRows, H, dt.ml())
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if tab.Stride == tab.Cols {
			t.Fatalf("table of %d columns stored at stride %d: want a padded one", tab.Cols, tab.Stride)
		}
		err = b.Do(func() error {
			tensor := func(rows, cols int, v []float32) ml.Tensor { return devTensor(b, rows, cols, v) }
			read := func(m ml.Tensor) []float32 { return readBack(b, m) }
			xt, dtn, y, xo := tensor(rows, n, x), tensor(rows, n, d), b.Scratch("y", rows, n), b.Scratch("xo", rows, n)
			b.LayerNorm(y, xo, xt, dtn, tensor(1, n, lw), tensor(1, n, lb), eps)
			qt := tensor(hrows, ld, qkv)
			b.HeadNorm(qt.ColsAt(0, qd), heads, hd, tensor(1, hd, wq), eps)
			b.HeadNorm(qt.ColsAt(qd, kvd), kvh, hd, tensor(1, hd, wk), eps)
			ge, gt := tensor(2, 1000, g), tensor(2, 1000, g)
			b.GELU(ge, ml.GELUErf)
			b.GELU(gt, ml.GELUTanh)
			ct := tensor(cRows, cCols, sc)
			b.ScaleCols(ct.ColsAt(5, cN), tensor(1, cN, sw))
			st := tensor(dRows, W, sdst)
			b.ScatterAdd(st, tensor(sRows, W, src), b.Ints(sidx))
			et := tensor(eRows, H, edst)
			b.AddEmbedBag(et, tab, b.Ints(ids), b.Input(ew, eRows, K))
			gotY, gotX, gotQKV, gotErf, gotTanh, gotS, gotE = read(y), read(xo), read(qt), read(ge), read(gt), read(st), read(et)
			gotC = read(ct)
			return b.Sync()
		})
		if err != nil {
			t.Fatal(err)
		}
		wantX, wantY := layerNormRef(dt, x, d, lw, lb, rows, n, eps)
		check(t, "layernorm residual", gotX, wantX, tolFor(dt))
		check(t, "layernorm", gotY, wantY, tolFor(dt))
		wantQKV := make([]float64, len(qkv))
		for i, v := range qkv {
			wantQKV[i] = float64(v)
		}
		headNormRef(dt, wantQKV, ld, 0, hrows, heads, hd, wq, eps)
		headNormRef(dt, wantQKV, ld, qd, hrows, kvh, hd, wk, eps)
		check(t, "headnorm of q and k", gotQKV, wantQKV, tolFor(dt))
		wantErf, wantTanh := make([]float64, len(g)), make([]float64, len(g))
		for i, v := range g {
			h := float64(v)
			wantErf[i], wantTanh[i] = round(dt, 0.5*h*(1+math.Erf(h/math.Sqrt2))), geluTanhRef(dt, h)
		}
		check(t, "gelu erf", gotErf, wantErf, tolFor(dt))
		check(t, "gelu tanh", gotTanh, wantTanh, tolFor(dt))
		wantC := make([]float64, len(sc))
		for i, v := range sc {
			wantC[i] = float64(v)
			if j := i % cCols; j >= 5 && j < 5+cN {
				wantC[i] = round(dt, float64(v)*float64(sw[j-5]))
			}
		}
		check(t, "scale-cols", gotC, wantC, 0)
		check(t, "scatter-add", gotS, scatterAddRef(dt, sdst, W, src, W, sidx, W), tolFor(dt))
		check(t, "embed-bag add", gotE, embedBagRef(dt, edst, H, table, H, ids, ew, K, K, H, eRows), tolFor(dt))

		// refusals: each a failed pass with ErrInvalidInput, the next pass clean
		for _, bad := range []struct {
			name string
			op   func(a, c ml.Tensor)
		}{
			{"scatter-add to a row twice", func(a, c ml.Tensor) { b.ScatterAdd(a, c, b.Ints([]int32{1, 1})) }},
			{"scatter-add past the rows", func(a, c ml.Tensor) { b.ScatterAdd(a, c, b.Ints([]int32{0, 4})) }},
			{"embed-bag id past the table", func(a, c ml.Tensor) {
				b.AddEmbedBag(a.RowsAt(0, 2).ColsAt(0, H), tab, b.Ints([]int32{0, 0, 0, 20, 1, 1, 1, 1}), b.Input(make([]float32, 8), 2, K))
			}},
			{"gelu of no form", func(a, _ ml.Tensor) { b.GELU(a, ml.GELUApprox(7)) }},
			{"scale-cols of the wrong width", func(a, c ml.Tensor) { b.ScaleCols(a, c.RowsAt(0, 1).ColsAt(0, W-1)) }},
			{"headnorm past the columns", func(a, c ml.Tensor) { b.HeadNorm(a, 2, 24, c.RowsAt(0, 1).ColsAt(0, 24), eps) }},
		} {
			err := b.Do(func() error {
				a, err := b.Alloc(4, W, dt.ml())
				if err != nil {
					return err
				}
				c, err := b.Alloc(2, W, dt.ml())
				if err != nil {
					return err
				}
				bad.op(a, c)
				return b.Sync()
			})
			if !errors.Is(err, ml.ErrInvalidInput) {
				t.Errorf("%s: %v, want ErrInvalidInput", bad.name, err)
			}
		}
	})
}

// TestKernelWriteBF16 writes F32 values into bf16 tensors (staged, then rounded on the device),
// small and over parallelCopyMin, and reads back exactly ml.BF16Bits of each: the host's and the
// device's roundings agree.
func TestKernelWriteBF16(t *testing.T) {
	b := newBackend(t, Options{Precision: "bf16"})
	r := rand.New(rand.NewPCG(61, 62))
	for _, n := range []int{1000, 3_000_000} {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64() * 3)
		}
		v[0], v[1] = math.Float32frombits(0x3f808000), float32(math.Inf(-1)) // a tie, an infinity
		got := make([]float32, n)
		err := b.Do(func() error {
			m, err := b.Alloc(n/1000, 1000, ml.BF16)
			if err != nil {
				return err
			}
			b.Write(m, v)
			b.Read(got, m)
			return b.Sync()
		})
		if err != nil {
			t.Fatal(err)
		}
		for i := range v {
			if want := fromBF16(ml.BF16Bits(v[i])); got[i] != want {
				t.Fatalf("%d values: value %d %g read back %g, want %g", n, i, v[i], got[i], want)
			}
		}
	}
}

// devTensor is a new rows x cols tensor of b's type holding v (on the device thread).
func devTensor(b *Backend, rows, cols int, v []float32) ml.Tensor {
	m, err := b.Alloc(rows, cols, b.dt.ml())
	b.fail(err)
	b.Write(m, v)
	return m
}

// scatterAddRef is dst (rows of ldo) with row i of src (rows of ldi) added to row idx[i], W
// columns each, every sum rounded to dt.
func scatterAddRef(dt dtype, dst []float32, ldo int, src []float32, ldi int, idx []int32, W int) []float64 {
	want := widen(dst)
	for i, j := range idx {
		for c := range W {
			want[int(j)*ldo+c] = round(dt, want[int(j)*ldo+c]+float64(src[i*ldi+c]))
		}
	}
	return want
}

// opLaunches is an op profile's launches by op.
func opLaunches(ops []StageTime) map[string]int {
	n := map[string]int{}
	for _, o := range ops {
		n[o.Stage] = o.Calls
	}
	return n
}

// newBackend opens a backend for the test, closed when it ends.
func newBackend(t testing.TB, opts Options) *Backend {
	t.Helper()
	b, err := NewBackend(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// forBackends runs fn on a new backend of each precision.
func forBackends(t *testing.T, fn func(t *testing.T, b *Backend)) {
	for _, prec := range []string{"fp32", "bf16"} {
		t.Run(prec, func(t *testing.T) {
			fn(t, newBackend(t, Options{Precision: prec}))
		})
	}
}

// widen is v in float64: another run's output as the reference.
func widen(v []float32) []float64 {
	w := make([]float64, len(v))
	for i, x := range v {
		w[i] = float64(x)
	}
	return w
}

// readBack enqueues a read of m; the values are there after the next Sync.
func readBack(b *Backend, m ml.Tensor) []float32 {
	v := make([]float32, m.Rows*m.Cols)
	b.Read(v, m)
	return v
}

// TestKernelBackendQKNorm checks that the fused RoPE attentions apply ml.Attn's per-head q and k
// norms (QNorm, KNorm): each path (decode rows through the pool kernel, a prefill through
// rope_kv, segments through the window kernel in bf16 or flash) gives what HeadNorm of q and k
// followed by the same call without the norms gives, outputs and pools.
func TestKernelBackendQKNorm(t *testing.T) {
	const eps = 1e-6
	forBackends(t, func(t *testing.T, b *Backend) {
		dt := b.dt
		r := rand.New(rand.NewPCG(37, 38))
		for _, tc := range []struct {
			name              string
			heads, kvh, rows  int
			slots, spans, seg []int32 // seg: segment bounds (RopeSegmentAttention)
		}{
			{"decode", 4, 2, 2, []int32{2, 8}, []int32{0, 3, 8, 1}, nil},
			{"prefill", 4, 2, 3, []int32{0, 1, 2}, []int32{0, 1, 0, 2, 0, 3}, nil},
			{"segments", 4, 4, 6, nil, nil, []int32{0, 3, 6}},
		} {
			const hd, poolRows = 64, 16
			qd, kvd := tc.heads*hd, tc.kvh*hd
			ld := qd + 2*kvd
			qkv := randn(r, dt, tc.rows*ld, 2)
			wq, wk := randn(r, dt, hd, 1), randn(r, dt, hd, 1)
			cs := make([]float32, tc.rows*hd) // cos rows, then sin rows
			for i := range tc.rows * hd / 2 {
				a := r.Float64() * 2 * math.Pi
				cs[i], cs[tc.rows*hd/2+i] = float32(math.Cos(a)), float32(math.Sin(a))
			}
			run := func(inAttn bool) (out, pool []float32) {
				err := b.Do(func() error {
					m := devTensor(b, tc.rows, ld, qkv)
					q, k, v := m.ColsAt(0, qd), m.ColsAt(qd, kvd), m.ColsAt(qd+kvd, kvd)
					qn, kn := devTensor(b, 1, hd, wq), devTensor(b, 1, hd, wk)
					a := ml.Attn{Heads: tc.heads, KVHeads: tc.kvh, HeadDim: hd, Mask: ml.Mask{Causal: tc.seg == nil}, Scale: 0.125}
					if inAttn {
						a.QNorm, a.KNorm, a.NormEps = qn, kn, eps
					} else {
						b.HeadNorm(q, tc.heads, hd, qn, eps)
						b.HeadNorm(k, tc.kvh, hd, kn, eps)
					}
					rope := b.Input(cs, 2*tc.rows, hd/2)
					rot := ml.Rotary{Cos: rope.RowsAt(0, tc.rows), Sin: rope.RowsAt(tc.rows, tc.rows), RoundOnce: tc.seg != nil}
					att := b.Scratch("att", tc.rows, qd)
					if tc.seg != nil {
						ml.RopeSegmentAttention(b, att, q, k, v, rot, tc.seg, a)
					} else {
						kPool, err := b.Alloc(poolRows, kvd, dt.ml())
						b.fail(err)
						vPool, err := b.Alloc(poolRows, kvd, dt.ml())
						b.fail(err)
						ml.RopeCachedAttention(b, att, q, k, v, rot, kPool, vPool, b.Ints(tc.slots), b.Ints(tc.spans), a)
						pool = readBack(b, kPool)
					}
					out = readBack(b, att)
					return b.Sync()
				})
				if err != nil {
					t.Fatal(err)
				}
				return out, pool
			}
			out, pool := run(true)
			wantOut, wantPool := run(false)
			// the same kernels on the same values: equal but for any reordering of sums
			check(t, tc.name+": attention with the norms in Attn", out, widen(wantOut), tolFor(dt)/4)
			if pool != nil {
				check(t, tc.name+": keys in the pool", pool, widen(wantPool), tolFor(dt)/4)
			}
		}
	})
}

// TestKernelBackendInputsOutliveALargeWrite: a pass's inputs stay valid when a later Write of the same
// pass outgrows the staging area (host image rows of a large image on an 8B model: 123 MB after
// the rotary tables, which the old code freed under the kernels still to read them).
func TestKernelBackendInputsOutliveALargeWrite(t *testing.T) {
	b := newBackend(t, Options{Precision: "fp32"})
	vals := []float32{1, 2, 3, 4, 5, 6, 7, 8}
	want := []float32{5, 6, 7, 8, 1, 2, 3, 4}
	got := make([]float32, len(want))
	err := b.Do(func() error {
		in := b.Input(vals, 2, 4)
		idx := b.Ints([]int32{1, 0})
		dst := b.Scratch("dst", 2, 4)
		b.Gather(dst, in, idx)                // a kernel: the inputs go up
		big := b.Scratch("big", 1<<14, 1<<11) // 128 MiB, over the 64 MiB staging area
		b.Write(big, make([]float32, 1<<25))
		b.Gather(dst, in, idx) // reads the inputs again, after the Write
		b.Read(got, dst)
		return b.Sync()
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("gathered %v after a large write, want %v", got, want)
	}
}

// TestKernelGroupedAttention checks attention over several segments of one shape in one batch
// of pointers (attendAll): the frames of a vision pass (SegmentAttention, every head its own kv
// head) and the prompts of a prefill pass (CachedAttention over the pool, grouped kv heads, a
// past), each segment against float64, with a segment of another shape beside them; the op
// profile shows that the equal ones ran as one batch (fp32), or all in one launch of the
// tensor-core kernel (bf16).
func TestKernelGroupedAttention(t *testing.T) {
	forBackends(t, func(t *testing.T, b *Backend) {
		dt := b.dt
		r := rand.New(rand.NewPCG(37, 38))
		const hd = 64
		// frames: 3 of 130 rows and one of 140, 4 heads
		bounds := []int32{0, 130, 260, 390, 530}
		const fh, fRows = 4, 530
		fd := fh * hd
		fq, fk, fv := randn(r, dt, fRows*fd, 1), randn(r, dt, fRows*fd, 1), randn(r, dt, fRows*fd, 1)
		// sequences: two of 130 rows after 20 cached keys, one of 140 without; 8 heads over 2
		type seq struct{ start, past, rows int }
		seqs := []seq{{0, 20, 130}, {200, 20, 130}, {400, 0, 140}}
		const sh, skv, poolRows = 8, 2, 600
		sqd, skd := sh*hd, skv*hd
		var spans []int32
		qRows := 0
		for _, s := range seqs {
			for j := range s.rows {
				spans = append(spans, int32(s.start), int32(s.past+j+1))
			}
			qRows += s.rows
		}
		sq, kp, vp := randn(r, dt, qRows*sqd, 1), randn(r, dt, poolRows*skd, 1), randn(r, dt, poolRows*skd, 1)
		scale := 1 / math.Sqrt(hd)

		b.SetProfileOps(true)
		var gotF, gotS []float32
		err := b.Do(func() error {
			tensor := func(rows, cols int, v []float32) ml.Tensor { return devTensor(b, rows, cols, v) }
			fo := b.Scratch("frames.out", fRows, fd)
			b.SegmentAttention(fo, tensor(fRows, fd, fq), tensor(fRows, fd, fk), tensor(fRows, fd, fv), bounds,
				ml.Attn{Heads: fh, KVHeads: fh, HeadDim: hd, Scale: float32(scale)})
			so := b.Scratch("seqs.out", qRows, sqd)
			b.CachedAttention(so, tensor(qRows, sqd, sq), tensor(poolRows, skd, kp), tensor(poolRows, skd, vp), b.Ints(spans),
				ml.Attn{Heads: sh, KVHeads: skv, HeadDim: hd, Mask: ml.Mask{Causal: true}, Scale: float32(scale)})
			gotF, gotS = readBack(b, fo), readBack(b, so)
			return b.Sync()
		})
		ops := b.Profile()
		b.SetProfileOps(false)
		if err != nil {
			t.Fatal(err)
		}
		for i := range len(bounds) - 1 {
			r0, n := int(bounds[i]), int(bounds[i+1]-bounds[i])
			want := attnRef(fq[r0*fd:], fk[r0*fd:], fv[r0*fd:], n, n, fh, fh, hd, fd, fd, fd, false, scale)
			check(t, fmt.Sprintf("frame %d", i), gotF[r0*fd:(r0+n)*fd], want, 2*tolFor(dt))
		}
		row := 0
		for i, s := range seqs {
			nk := s.past + s.rows
			want := attnRef(sq[row*sqd:], kp[s.start*skd:], vp[s.start*skd:], s.rows, nk, sh, skv, hd, sqd, skd, skd, true, scale)
			check(t, fmt.Sprintf("sequence %d", i), gotS[row*sqd:(row+s.rows)*sqd], want, 2*tolFor(dt))
			row += s.rows
		}
		launches := opLaunches(ops)
		if dt == bf16 { // every frame in one tensor-core launch, every sequence in another
			if n := launches["iris_attn_mma_bf16_64"]; n != 2 {
				t.Errorf("%d launches of iris_attn_mma_bf16_64 (ops %v), want 2", n, launches)
			}
			return
		}
		for _, want := range []string{"attention 130x130 h12/4 (cuBLAS)", "attention 130x150 h16/2 (cuBLAS)"} {
			if launches[want] == 0 {
				t.Errorf("no op %q among %v: the equal segments did not run as one batch", want, launches)
			}
		}
	})
}

// TestKernelBackendGroupDecode runs a decode step of 32 rows (16 query heads over 2 KV heads: 64
// rows x groups) through RopeCachedAttention on a bf16 backend, which takes the group kernel over
// all of each row's keys, on one with Options.NoWholeDecode (the group kernel in splits) and on
// one with Options.NoGroupDecode (a block a head): the same attention and pool, and the op
// profiles name the kernel each ran.
func TestKernelBackendGroupDecode(t *testing.T) {
	const heads, kvh, hd, rows = 16, 2, 128, 32
	qd, kvd := heads*hd, kvh*hd
	ld := qd + 2*kvd
	r := rand.New(rand.NewPCG(71, 72))
	// row i: its own sequence at pool rows [8i, 8i + L), L = 1 + i%7 keys, the new one last
	var slots, spans []int32
	for i := range rows {
		L := 1 + i%7
		spans = append(spans, int32(8*i), int32(L))
		slots = append(slots, int32(8*i+L-1))
	}
	poolRows := 8 * rows
	qkv := randn(r, bf16, rows*ld, 1)
	kp, vp := randn(r, bf16, poolRows*kvd, 1), randn(r, bf16, poolRows*kvd, 1)
	cs := make([]float32, rows*hd) // cos rows, then sin rows
	for i := range rows * hd / 2 {
		a := r.Float64() * 2 * math.Pi
		cs[i], cs[rows*hd/2+i] = float32(math.Cos(a)), float32(math.Sin(a))
	}
	run := func(opts Options) (out, keys []float32, launches map[string]int) {
		b := newBackend(t, opts)
		b.SetProfileOps(true)
		err := b.Do(func() error {
			m := devTensor(b, rows, ld, qkv)
			q, k, v := m.ColsAt(0, qd), m.ColsAt(qd, kvd), m.ColsAt(qd+kvd, kvd)
			rope := b.Input(cs, 2*rows, hd/2)
			rot := ml.Rotary{Cos: rope.RowsAt(0, rows), Sin: rope.RowsAt(rows, rows)}
			kPool, vPool := devTensor(b, poolRows, kvd, kp), devTensor(b, poolRows, kvd, vp)
			att := b.Scratch("att", rows, qd)
			ml.RopeCachedAttention(b, att, q, k, v, rot, kPool, vPool, b.Ints(slots), b.Ints(spans),
				ml.Attn{Heads: heads, KVHeads: kvh, HeadDim: hd, Mask: ml.Mask{Causal: true}, Scale: float32(1 / math.Sqrt(hd))})
			out, keys = readBack(b, att), readBack(b, kPool)
			return b.Sync()
		})
		if err != nil {
			t.Fatal(err)
		}
		return out, keys, opLaunches(b.Profile())
	}
	out, keys, ops := run(Options{Precision: "bf16"})
	splitOut, splitKeys, opsSplit := run(Options{Precision: "bf16", NoWholeDecode: true})
	wantOut, wantKeys, opsHead := run(Options{Precision: "bf16", NoGroupDecode: true})
	check(t, "attention, a block a group against a block a head", out, widen(wantOut), tolFor(bf16))
	check(t, "attention, a block a group in splits against a block a head", splitOut, widen(wantOut), tolFor(bf16))
	check(t, "keys in the pool", keys, widen(wantKeys), 0) // the same rotation, op for op
	check(t, "keys in the pool, splits", splitKeys, widen(wantKeys), 0)
	if ops["iris_attn_pool_gqa_whole_bf16_128"] != 1 || opsSplit["iris_attn_pool_gqa_bf16_128"] != 1 || opsHead["iris_attn_pool_bf16"] != 1 {
		t.Errorf("launches %v, with NoWholeDecode %v, with NoGroupDecode %v: want iris_attn_pool_gqa_whole_bf16_128, iris_attn_pool_gqa_bf16_128 and iris_attn_pool_bf16 once",
			ops, opsSplit, opsHead)
	}
}

// TestKernelMixedPassAttention checks a prefill pass that carries decode steps (the scheduler
// puts them first): its leading one-row sequences go through the pool kernel and the prefill
// chunk after them per sequence, giving the outputs and pools of the two run apart.
func TestKernelMixedPassAttention(t *testing.T) {
	forBackends(t, func(t *testing.T, b *Backend) {
		dt := b.dt
		r := rand.New(rand.NewPCG(43, 44))
		const heads, kvh, hd, poolRows, rows = 4, 2, 64, 24, 5
		qd, kvd := heads*hd, kvh*hd
		ld := qd + 2*kvd
		// two decode steps (3 and 1 keys), then a chunk of 3 rows after 2 cached keys
		slots := []int32{2, 8, 14, 15, 16}
		spans := []int32{0, 3, 8, 1, 12, 3, 12, 4, 12, 5}
		qkv, kp, vp := randn(r, dt, rows*ld, 2), randn(r, dt, poolRows*kvd, 1), randn(r, dt, poolRows*kvd, 1)
		cs := make([]float32, rows*hd)
		for i := range rows * hd / 2 {
			a := r.Float64() * 2 * math.Pi
			cs[i], cs[rows*hd/2+i] = float32(math.Cos(a)), float32(math.Sin(a))
		}
		a := ml.Attn{Heads: heads, KVHeads: kvh, HeadDim: hd, Mask: ml.Mask{Causal: true}, Scale: 0.125}
		run := func(parts [][2]int) (out, kOut, vOut []float32) {
			err := b.Do(func() error {
				m := devTensor(b, rows, ld, qkv)
				q, k, v := m.ColsAt(0, qd), m.ColsAt(qd, kvd), m.ColsAt(qd+kvd, kvd)
				rope := b.Input(cs, 2*rows, hd/2)
				kPool, vPool := devTensor(b, poolRows, kvd, kp), devTensor(b, poolRows, kvd, vp)
				att := b.Scratch("att", rows, qd)
				sl, sp := b.Ints(slots), b.Ints(spans)
				for _, p := range parts {
					r0, n := p[0], p[1]
					at := func(t ml.Tensor) ml.Tensor { return t.RowsAt(r0, n) }
					rot := ml.Rotary{Cos: rope.RowsAt(r0, n), Sin: rope.RowsAt(rows+r0, n)}
					ml.RopeCachedAttention(b, at(att), at(q), at(k), at(v), rot, kPool, vPool, sl.Slice(r0, r0+n), sp.Slice(2*r0, 2*(r0+n)), a)
				}
				out, kOut, vOut = readBack(b, att), readBack(b, kPool), readBack(b, vPool)
				return b.Sync()
			})
			if err != nil {
				t.Fatal(err)
			}
			return out, kOut, vOut
		}
		if d := ml.LeadingDecodeRows(spans); d != 2 {
			t.Fatalf("leadingDecodeRows = %d, want 2", d)
		}
		out, k1, v1 := run([][2]int{{0, rows}})
		wantOut, k2, v2 := run([][2]int{{0, 2}, {2, 3}})
		check(t, "attention of the mixed pass", out, widen(wantOut), 0)
		check(t, "keys in the pool", k1, widen(k2), 0)
		check(t, "values in the pool", v1, widen(v2), 0)
	})
}

// TestKernelBackendKeyFlags runs SegmentAttention with key flags (ml.Mask.Keys: a crop's padded
// patches) on both backend types against a float64 reference: segments with their last keys
// flagged out, one with none flagged out, one with every key flagged out (the plain mean of its
// values); Attention with flags too; and CachedAttention refuses them.
func TestKernelBackendKeyFlags(t *testing.T) {
	forBackends(t, func(t *testing.T, b *Backend) {
		dt := b.dt
		r := rand.New(rand.NewPCG(41, 42))
		const heads, kvh, hd = 4, 2, 64
		ld := heads*hd + 2*kvh*hd // a fused q/k/v row
		bounds := []int32{0, 300, 320, 327, 400}
		n := int(bounds[len(bounds)-1])
		qkv := randn(r, dt, n*ld, 1)
		flags := make([]int32, n)
		for i := range flags {
			flags[i] = 1
		}
		for i := 262; i < 300; i++ { // the first segment's last 38 keys: padding
			flags[i] = 0
		}
		for i := 320; i < 327; i++ { // the third: every key padding
			flags[i] = 0
		}
		flags[399] = 0
		scale := 1 / math.Sqrt(hd)
		var got, gotOne []float32
		var cachedErr error
		err := b.Do(func() error {
			x := devTensor(b, n, ld, qkv)
			q, k, v := x.ColsAt(0, heads*hd), x.ColsAt(heads*hd, kvh*hd), x.ColsAt(heads*hd+kvh*hd, kvh*hd)
			out := b.Scratch("out", n, heads*hd)
			a := ml.Attn{Heads: heads, KVHeads: kvh, HeadDim: hd, Mask: ml.Mask{Keys: b.Ints(flags)}, Scale: float32(scale)}
			b.SegmentAttention(out, q, k, v, bounds, a)
			got = readBack(b, out)
			// Attention over the last segment alone, its flags alone
			one := b.Scratch("one", 73, heads*hd)
			a.Keys = b.Ints(flags[327:])
			b.Attention(one, q.RowsAt(327, 73), k.RowsAt(327, 73), v.RowsAt(327, 73), a)
			gotOne = readBack(b, one)
			if err := b.Sync(); err != nil {
				return err
			}
			b.CachedAttention(one, q.RowsAt(0, 1), k, v, b.Ints([]int32{0, 1}), a)
			cachedErr = b.Sync()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(cachedErr, ml.ErrInvalidInput) {
			t.Errorf("CachedAttention with key flags: %v, want ml.ErrInvalidInput", cachedErr)
		}
		tol := 1e-5
		if dt == bf16 {
			tol = 2e-2
		}
		for s := 0; s+1 < len(bounds); s++ {
			r0, r1 := int(bounds[s]), int(bounds[s+1])
			want := keyFlagsRef(qkv[r0*ld:], qkv[r0*ld+heads*hd:], qkv[r0*ld+heads*hd+kvh*hd:], r1-r0, heads, kvh, hd, ld, flags[r0:r1], scale)
			check(t, fmt.Sprintf("segment [%d, %d)", r0, r1), got[r0*heads*hd:r1*heads*hd], want, tol)
			if s == len(bounds)-2 {
				check(t, "Attention of the last segment", gotOne, want, tol)
			}
		}
	})
}

// TestKernelBackendBidirectionalBlock: CachedAttention's spans give each query row its own keys,
// so a block of a prefill chunk that attends to all of itself (an image between
// <|vision_start|> and <|vision_end|>, TextConfig.BidirectionalImage) is rows with one key
// count, causal rows around it. Two sequences in one call (the second a decode step), on both
// backend types and head dims of the tensor-core and plain paths, against a float64 reference.
func TestKernelBackendBidirectionalBlock(t *testing.T) {
	forBackends(t, func(t *testing.T, b *Backend) {
		for _, hd := range []int{64, 40} {
			t.Run(fmt.Sprint(hd), func(t *testing.T) {
				dt := b.dt
				r := rand.New(rand.NewPCG(61, uint64(hd)))
				const heads, kvh, poolRows = 6, 2, 96
				qd, kvd := heads*hd, kvh*hd
				// sequence A at pool rows [0, 80): 5 cached keys, then a chunk of 70 rows whose
				// rows 3..60 (pool rows 8..65) form a block; sequence B at [80, 96): a decode row
				// after 9 keys
				var spans []int32
				for j := range 70 {
					n := 5 + j + 1
					if j >= 3 && j <= 60 {
						n = 5 + 60 + 1
					}
					spans = append(spans, 0, int32(n))
				}
				spans = append(spans, 80, 10)
				rows := len(spans) / 2
				q := randn(r, dt, rows*qd, 1)
				kp, vp := randn(r, dt, poolRows*kvd, 1), randn(r, dt, poolRows*kvd, 1)
				scale := 1 / math.Sqrt(float64(hd))
				want := spanAttnRef(q, kp, vp, spans, heads, kvh, hd, scale)
				var got []float32
				err := b.Do(func() error {
					qt := devTensor(b, rows, qd, q)
					kt, vt := devTensor(b, poolRows, kvd, kp), devTensor(b, poolRows, kvd, vp)
					out := b.Scratch("att", rows, qd)
					b.CachedAttention(out, qt, kt, vt, b.Ints(spans), ml.Attn{Heads: heads, KVHeads: kvh, HeadDim: hd,
						Mask: ml.Mask{Causal: true}, Scale: float32(scale)})
					got = readBack(b, out)
					return b.Sync()
				})
				if err != nil {
					t.Fatal(err)
				}
				tol := 2e-5
				if dt == bf16 {
					tol = 2e-2
				}
				check(t, "attention with a bidirectional block", got, want, tol)
			})
		}
	})
}
