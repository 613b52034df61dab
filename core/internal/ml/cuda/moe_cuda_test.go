//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/iris-vlm/iris/core/internal/ml"
)

// moeRef is ml.MoE in float64 with the roundings of storage type dt: the router over x as
// stored (F32 logits, softmax, greedy or group-limited top-k, ties to the lower index), each
// expert's products rounded to dt, silu and its product rounded, the slots' weighted sum rounded
// once, then add.
func moeRef(dt dtype, x []float32, rows, H int, router, gateUp, down []float32, E, K, I, groups, topGroups int, scale float64,
	add []float32) []float64 {
	y := make([]float64, rows*H)
	for r := range rows {
		xr := x[r*H : (r+1)*H]
		s := make([]float64, E)
		mx := math.Inf(-1)
		for e := range E {
			for c := range H {
				s[e] += float64(xr[c]) * float64(router[e*H+c])
			}
			mx = math.Max(mx, s[e])
		}
		var sum float64
		for e := range E {
			s[e] = math.Exp(s[e] - mx)
			sum += s[e]
		}
		for e := range E {
			s[e] /= sum
		}
		if groups > 1 {
			per := E / groups
			gs := make([]float64, groups)
			for g := range groups {
				gs[g] = s[g*per]
				for j := 1; j < per; j++ {
					gs[g] = math.Max(gs[g], s[g*per+j])
				}
			}
			keep := make([]bool, groups)
			for range topGroups {
				best := -1
				for g := range groups {
					if !keep[g] && (best < 0 || gs[g] > gs[best]) {
						best = g
					}
				}
				keep[best] = true
			}
			for e := range E {
				if !keep[e/per] {
					s[e] = 0
				}
			}
		}
		taken := make([]bool, E)
		acc := make([]float64, H)
		for range K {
			best := -1
			for e := range E {
				if !taken[e] && (best < 0 || s[e] > s[best]) {
					best = e
				}
			}
			taken[best] = true
			w := float64(float32(s[best] * scale))
			act := make([]float64, I)
			for i := range I {
				var g, u float64
				for c := range H {
					g += float64(xr[c]) * float64(gateUp[(best*2*I+i)*H+c])
					u += float64(xr[c]) * float64(gateUp[(best*2*I+I+i)*H+c])
				}
				act[i] = siluRef(dt, round(dt, g), round(dt, u))
			}
			for c := range H {
				var d float64
				for i := range I {
					d += act[i] * float64(down[(best*H+c)*I+i])
				}
				acc[c] += round(dt, d) * w
			}
		}
		for c := range H {
			v := round(dt, acc[c])
			if add != nil {
				v = round(dt, v+float64(add[r*H+c]))
			}
			y[r*H+c] = v
		}
	}
	return y
}

// TestKernelBackendMoE runs ml.MoE on the GPU (router, plan, the two grouped products, SiLU, the
// slot sum) against moeRef in both storage types: a decode row, group-limited routing, a routing
// of 64 experts top-6 whose experts get more rows than one GEMM tile (and experts none), odd
// widths, a shared experts' output added, and y the same tensor as add.
func TestKernelBackendMoE(t *testing.T) {
	forBackends(t, func(t *testing.T, b *Backend) {
		dt := b.dt
		r := rand.New(rand.NewPCG(51, 52))
		for _, tc := range []struct {
			rows, H, I, E, K, groups, topGroups int
			scale                               float64
			add, inPlace                        bool
		}{
			{1, 64, 32, 8, 2, 0, 0, 1, false, false},
			{37, 96, 40, 16, 3, 4, 2, 2.5, true, false},
			{300, 128, 64, 64, 6, 0, 0, 1, true, false},
			{9, 50, 20, 12, 1, 3, 1, 1, false, false},
			{5, 48, 24, 4, 2, 0, 0, 16, true, true},
		} {
			t.Run(fmt.Sprintf("rows%d-h%d-i%d-e%d-k%d-g%d", tc.rows, tc.H, tc.I, tc.E, tc.K, tc.groups), func(t *testing.T) {
				x := randn(r, dt, tc.rows*tc.H, 1)
				router := randn(r, f32, tc.E*tc.H, 0.5)
				gateUp := randn(r, dt, tc.E*2*tc.I*tc.H, 1/math.Sqrt(float64(tc.H)))
				down := randn(r, dt, tc.E*tc.H*tc.I, 1/math.Sqrt(float64(tc.I)))
				var add []float32
				if tc.add {
					add = randn(r, dt, tc.rows*tc.H, 1)
				}
				var got []float32
				err := b.Do(func() error {
					rt, err := b.Alloc(tc.E, tc.H, ml.F32)
					if err != nil {
						return err
					}
					b.Write(rt, router)
					m := ml.MoE{Router: rt, GateUp: devTensor(b, tc.E*2*tc.I, tc.H, gateUp), Down: devTensor(b, tc.E*tc.H, tc.I, down),
						Experts: tc.E, TopK: tc.K, Inter: tc.I, Groups: tc.groups, TopGroups: tc.topGroups, Scale: float32(tc.scale)}
					xt := devTensor(b, tc.rows, tc.H, x)
					var at ml.Tensor
					if tc.add {
						at = devTensor(b, tc.rows, tc.H, add)
					}
					y := at
					if !tc.inPlace {
						y = devTensor(b, tc.rows, tc.H, make([]float32, tc.rows*tc.H))
					}
					b.MoE(y, xt, at, m)
					got = readBack(b, y)
					return b.Sync()
				})
				if err != nil {
					t.Fatal(err)
				}
				want := moeRef(dt, x, tc.rows, tc.H, router, gateUp, down, tc.E, tc.K, tc.I, tc.groups, tc.topGroups, tc.scale, add)
				tol := 1e-5
				if dt == bf16 {
					tol = 2e-2
				}
				check(t, "moe", got, want, tol)
			})
		}
	})
}
