package cuda

// maskedRef, the float64 reference of attention with ml.Mask's forms that the cuda tests check the
// kernels against (mask_cuda_test.go writes the older tests' references as its forms), builds
// without the cuda tag so that its own test (TestMaskedRef) runs on any machine.

import (
	"math"
	"testing"
)

// maskedSeg is one segment of a masked attention: queries [q0, q0+nq) of q over keys [k0, k0+nk)
// of k and v.
type maskedSeg struct{ q0, nq, k0, nk int }

// maskedForm is what a masked attention adds to its segments' keys (mma_mask's fields, by
// ml.Mask's definitions): reach(s, i) is the keys [0, reach) local row i of segment s sees before
// flags (nk, the causal rule, a prefix or a per-row count); flags, when set, flags each k row;
// bias(r, h, j), when set, is added to the scaled score of query row r (of the op), head h, key j
// of its segment.
type maskedForm struct {
	reach func(s maskedSeg, i int) int
	flags []int32
	bias  func(r, h, j int) float64
}

// maskedRef is a masked attention in float64 over rows of q (ldq values) and of k and v (ldk
// values), heads of hd, kv heads h/(heads/kvh): a row that sees none of its keys gets the plain
// mean of the values it reaches. The output has heads*hd values a query row, up to the last row
// of a segment (rows of no segment are zeros).
func maskedRef(q, k, v []float32, segs []maskedSeg, heads, kvh, hd, ldq, ldk int, scale float64, f maskedForm) []float64 {
	rows := 0
	for _, s := range segs {
		rows = max(rows, s.q0+s.nq)
	}
	out := make([]float64, rows*heads*hd)
	for _, s := range segs {
		for i := range s.nq {
			r := s.q0 + i
			row := out[r*heads*hd : (r+1)*heads*hd]
			hi := f.reach(s, i)
			for h := range heads {
				g := h / (heads / kvh)
				w := make([]float64, hi)
				seen := false
				mx := math.Inf(-1)
				for j := range hi {
					if f.flags != nil && f.flags[s.k0+j] == 0 {
						continue
					}
					d := 0.0
					for c := range hd {
						d += float64(q[r*ldq+h*hd+c]) * float64(k[(s.k0+j)*ldk+g*hd+c])
					}
					w[j] = d * scale
					if f.bias != nil {
						w[j] += f.bias(r, h, j)
					}
					mx = math.Max(mx, w[j])
					seen = true
				}
				sum := 0.0
				for j := range hi {
					switch {
					case !seen:
						w[j] = 1
					case f.flags != nil && f.flags[s.k0+j] == 0:
						w[j] = 0
					default:
						w[j] = math.Exp(w[j] - mx)
					}
					sum += w[j]
				}
				for c := range hd {
					a := 0.0
					for j := range hi {
						a += w[j] * float64(v[(s.k0+j)*ldk+g*hd+c])
					}
					if sum > 0 {
						row[h*hd+c] = a / sum
					}
				}
			}
		}
	}
	return out
}

// TestMaskedRef checks the reference on cases worked by hand (head dim 1, scale 1): query 1 over
// keys 0 and ln 3 gives the weights 1/4 and 3/4, so values 4 and 8 average to 7.
func TestMaskedRef(t *testing.T) {
	ln3 := float32(math.Log(3))
	q := []float32{1, 1}
	k := []float32{0, ln3}
	v := []float32{4, 8}
	all := func(s maskedSeg, _ int) int { return s.nk }
	causal := func(prefix int) func(s maskedSeg, i int) int {
		return func(s maskedSeg, i int) int { return min(max(prefix, i+1), s.nk) }
	}
	one := []maskedSeg{{0, 2, 0, 2}}
	for _, tc := range []struct {
		name string
		segs []maskedSeg
		kvh  int
		f    maskedForm
		want []float64
	}{
		{"softmax", one, 1, maskedForm{reach: all}, []float64{7, 7}},
		{"a flagged key", one, 1, maskedForm{reach: all, flags: []int32{1, 0}}, []float64{4, 4}},
		{"every key flagged: the plain mean", one, 1, maskedForm{reach: all, flags: []int32{0, 0}}, []float64{6, 6}},
		{"causal", one, 1, maskedForm{reach: causal(0)}, []float64{4, 7}},
		{"a prefix of two", one, 1, maskedForm{reach: causal(2)}, []float64{7, 7}},
		{"a bias", one, 1, maskedForm{reach: all, bias: func(r, _, j int) float64 {
			if j == 0 {
				return 2 * float64(ln3) // scores 2 ln 3 and ln 3: weights 3/4 and 1/4
			}
			return 0
		}}, []float64{5, 5}},
		{"row 1 a segment of its own over key 1", []maskedSeg{{0, 1, 0, 2}, {1, 1, 1, 1}}, 1, maskedForm{reach: all}, []float64{7, 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := maskedRef(q, k, v, tc.segs, 1, tc.kvh, 1, 1, 1, 1, tc.f)
			for i := range tc.want {
				if math.Abs(got[i]-tc.want[i]) > 1e-6 {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
	// grouped heads: two query heads (rows of 2) over one kv head read the same keys
	got := maskedRef([]float32{1, 0}, k, v, []maskedSeg{{0, 1, 0, 2}}, 2, 1, 1, 2, 1, 1, maskedForm{reach: func(s maskedSeg, _ int) int { return 2 }})
	if math.Abs(got[0]-7) > 1e-6 || math.Abs(got[1]-6) > 1e-6 {
		t.Errorf("grouped heads: got %v, want [7 6 ...] (head 1's query 0 sees equal scores)", got)
	}
}
