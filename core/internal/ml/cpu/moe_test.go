package cpu

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"testing"

	"github.com/iris-vlm/iris/core/internal/ml"
)

// moeGolden is scripts/reference/golden_moe.py's output: transformers 5.17's DeepseekOcr2TextMoe
// (grouped_mm experts path) on weights and inputs of an integer formula (moeValues).
type moeGolden struct {
	ExpertsImplementation string `json:"experts_implementation"`
	Cases                 []struct {
		Name                           string
		Hidden, Inter, Experts, Shared int
		TopK                           int `json:"top_k"`
		Groups                         int
		TopGroups                      int `json:"top_groups"`
		Scale                          float32
		Rows, Seed                     int
		IDs                            [][]int
		Weights                        string
		ExpertsOut                     string `json:"experts_out"`
		SharedOut                      string `json:"shared_out"`
		Out                            string
		EagerMaxAbsDiff                float64 `json:"eager_max_abs_diff"`
	}
}

// moeValues is golden_moe.py's weight(): ((i·7919 + seed·104729) mod 2003) / 2003 − 0.5, times
// scale, in float64 rounded once to float32.
func moeValues(n, seed int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32((float64((i*7919+seed*104729)%2003)/2003.0 - 0.5) * scale)
	}
	return v
}

func f32s(t *testing.T, s string) []float32 {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

func tensorOf(t *testing.T, b *Backend, v []float32, rows, cols int, dt ml.DType) ml.Tensor {
	t.Helper()
	raw, from := make([]byte, 4*len(v)), "F32"
	for i, x := range v {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
	}
	if dt == ml.BF16 { // the upper halves: v must hold BF16-exact values
		for i, x := range v {
			binary.LittleEndian.PutUint16(raw[2*i:], uint16(math.Float32bits(x)>>16))
		}
		raw, from = raw[:2*len(v)], "BF16"
	}
	x, err := b.Load(raw, from, rows, cols, dt)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestMoEGolden: the op equals transformers' DeepseekOcr2TextMoe on every golden case (experts
// 4-16, top-k 1-3, shared experts 0-2, greedy and group-limited routing, scaling factors, a single
// row): the routed experts alone, and with the shared experts' output as add, the whole module.
// The goldens catch the routing's own hazards: group-limited routing run as plain greedy, the
// scaling factor left out, or the top-k renormalised (DeepSeek-V3's norm_topk_prob, which
// DeepSeek-OCR-2's router does not do) each fail some case.
func TestMoEGolden(t *testing.T) {
	raw, err := os.ReadFile("testdata/moe.json")
	if err != nil {
		t.Fatal(err)
	}
	var g moeGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if g.ExpertsImplementation != "grouped_mm" || len(g.Cases) < 8 {
		t.Fatalf("golden: %s path, %d cases", g.ExpertsImplementation, len(g.Cases))
	}
	b := newBackend(t)
	caught := map[string]bool{}
	for _, c := range g.Cases {
		h, in, e := c.Hidden, c.Inter, c.Experts
		m := ml.MoE{
			Router:  tensorOf(t, b, moeValues(e*h, c.Seed+1, 2), e, h, ml.F32),
			GateUp:  tensorOf(t, b, moeValues(e*2*in*h, c.Seed+2, 0.5), e*2*in, h, ml.F32),
			Down:    tensorOf(t, b, moeValues(e*h*in, c.Seed+3, 0.5), e*h, in, ml.F32),
			Experts: e, TopK: c.TopK, Inter: in, Groups: c.Groups, TopGroups: c.TopGroups, Scale: c.Scale,
		}
		x := tensorOf(t, b, moeValues(c.Rows*h, c.Seed+7, 2), c.Rows, h, ml.F32)
		shared := tensorOf(t, b, f32s(t, c.SharedOut), c.Rows, h, ml.F32)
		y, err := b.Alloc(c.Rows, h, ml.F32)
		if err != nil {
			t.Fatal(err)
		}
		// diff runs m and returns its largest difference from want and whether it is within the
		// ulps that another summation order gives.
		diff := func(m ml.MoE, add ml.Tensor, want []float32) (float64, bool) {
			b.MoE(y, x, add, m)
			got := read(t, b, y)
			var worst, scale float64
			for i := range got {
				worst = math.Max(worst, math.Abs(float64(got[i]-want[i])))
				scale = math.Max(scale, math.Abs(float64(want[i])))
			}
			return worst, worst <= 1e-6*math.Max(scale, 1)
		}
		t.Run(c.Name, func(t *testing.T) {
			for _, v := range []struct {
				name string
				add  ml.Tensor
				want []float32
			}{{"experts", ml.Tensor{}, f32s(t, c.ExpertsOut)}, {"experts + shared", shared, f32s(t, c.Out)}} {
				if worst, ok := diff(m, v.add, v.want); !ok {
					t.Errorf("%s: max |diff| %g against transformers", v.name, worst)
				}
			}
		})
		want := f32s(t, c.ExpertsOut)
		if c.Groups > 1 {
			greedy := m
			greedy.Groups, greedy.TopGroups = 0, 0
			_, ok := diff(greedy, ml.Tensor{}, want)
			caught["group-limited run as greedy"] = caught["group-limited run as greedy"] || !ok
		}
		if c.Scale != 1 {
			unscaled := m
			unscaled.Scale = 1
			_, ok := diff(unscaled, ml.Tensor{}, want)
			caught["no scaling factor"] = caught["no scaling factor"] || !ok
		}
		if c.TopK > 1 {
			// renormalised weights: the golden's weights over their row sum, as the op's scale
			// cannot express per row; compare the first row only
			ws := f32s(t, c.Weights)
			var sum float32
			for _, w := range ws[:c.TopK] {
				sum += w
			}
			renorm := m
			renorm.Scale = c.Scale / sum
			b.MoE(y, x, ml.Tensor{}, renorm)
			got := read(t, b, y)
			if math.Abs(float64(got[0]-want[0])) > 1e-4*math.Max(1, math.Abs(float64(want[0]))) {
				caught["top-k renormalised"] = true
			}
		}
	}
	for _, name := range []string{"group-limited run as greedy", "no scaling factor", "top-k renormalised"} {
		if !caught[name] {
			t.Errorf("mutation %q: every golden case still agrees", name)
		}
	}
}

// moeRef is the op's definition in Go for the tests below: routing in float64-free F32 steps as
// the op describes, F32 weights only.
func moeRef(x []float32, rows, hidden int, m ml.MoE, router, gateUp, down []float32) []float32 {
	e, k, in := m.Experts, m.TopK, m.Inter
	y := make([]float32, rows*hidden)
	for r := range rows {
		xr := x[r*hidden : (r+1)*hidden]
		scores := make([]float64, e)
		var mx, sum float64 = math.Inf(-1), 0
		for j := range e {
			var s float64
			for c := range hidden {
				s += float64(xr[c]) * float64(router[j*hidden+c])
			}
			scores[j] = s
			mx = math.Max(mx, s)
		}
		for j := range e {
			scores[j] = math.Exp(scores[j] - mx)
			sum += scores[j]
		}
		for j := range e {
			scores[j] /= sum
		}
		taken := make([]bool, e)
		acc := make([]float64, hidden)
		for range k {
			best := -1
			for j := range e {
				if !taken[j] && (best < 0 || scores[j] > scores[best]) {
					best = j
				}
			}
			taken[best] = true
			w := scores[best] * float64(m.Scale)
			act := make([]float64, in)
			for i := range in {
				var g, u float64
				for c := range hidden {
					g += float64(xr[c]) * float64(gateUp[(best*2*in+i)*hidden+c])
					u += float64(xr[c]) * float64(gateUp[(best*2*in+in+i)*hidden+c])
				}
				act[i] = g / (1 + math.Exp(-g)) * u
			}
			for c := range hidden {
				var d float64
				for i := range in {
					d += act[i] * float64(down[(best*hidden+c)*in+i])
				}
				acc[c] += d * w
			}
		}
		for c := range hidden {
			y[r*hidden+c] = float32(acc[c])
		}
	}
	return y
}

// TestMoETiesAndBF16: two experts with the same router row tie on every row, and the lower index
// wins (the op's rule; the experts' outputs differ, so the other choice would show); BF16 expert
// weights give what F32 weights of the same (rounded) values give.
func TestMoETiesAndBF16(t *testing.T) {
	b := newBackend(t)
	const hidden, in, e, rows = 16, 8, 6, 5
	router := moeValues(e*hidden, 3, 2)
	copy(router[4*hidden:5*hidden], router[1*hidden:2*hidden]) // experts 1 and 4 tie
	for c := range hidden {
		router[1*hidden+c] += 4 // and lead every row (x's values are positive below)
		router[4*hidden+c] += 4
	}
	gateUp, down := moeValues(e*2*in*hidden, 4, 0.5), moeValues(e*hidden*in, 5, 0.5)
	for i := range gateUp { // BF16-exact values
		gateUp[i] = math.Float32frombits(math.Float32bits(gateUp[i]) &^ 0xffff)
	}
	for i := range down {
		down[i] = math.Float32frombits(math.Float32bits(down[i]) &^ 0xffff)
	}
	xv := moeValues(rows*hidden, 6, 1)
	for i := range xv {
		xv[i] = float32(math.Abs(float64(xv[i]))) + 0.1
	}
	x := tensorOf(t, b, xv, rows, hidden, ml.F32)
	y, _ := b.Alloc(rows, hidden, ml.F32)
	for _, dt := range []ml.DType{ml.F32, ml.BF16} {
		m := ml.MoE{Router: tensorOf(t, b, router, e, hidden, ml.F32), GateUp: tensorOf(t, b, gateUp, e*2*in, hidden, dt),
			Down: tensorOf(t, b, down, e*hidden, in, dt), Experts: e, TopK: 1, Inter: in, Scale: 1}
		b.MoE(y, x, ml.Tensor{}, m)
		got := read(t, b, y)
		want := moeRef(xv, rows, hidden, m, router, gateUp, down)
		// the tie broken the other way: expert 4 in place of expert 1
		swapped := append([]float32(nil), router...)
		for c := range hidden {
			swapped[1*hidden+c] -= 1
		}
		other := moeRef(xv, rows, hidden, m, swapped, gateUp, down)
		var worst, apart float64
		for i := range got {
			worst = math.Max(worst, math.Abs(float64(got[i]-want[i])))
			apart = math.Max(apart, math.Abs(float64(other[i]-want[i])))
		}
		if worst > 1e-5 || apart < 1e-3 {
			t.Errorf("%s: max |diff| %g against the definition (the other tie-break lies %g away)", dt, worst, apart)
		}
	}
}

// TestMoERefusals: shapes that disagree fail with ErrInvalidInput.
func TestMoERefusals(t *testing.T) {
	b := newBackend(t)
	const hidden = 8
	x, _ := b.Alloc(2, hidden, ml.F32)
	y, _ := b.Alloc(2, hidden, ml.F32)
	router, _ := b.Alloc(4, hidden, ml.F32)
	gu, _ := b.Alloc(4*2*4, hidden, ml.F32)
	down, _ := b.Alloc(4*hidden, 4, ml.F32)
	good := ml.MoE{Router: router, GateUp: gu, Down: down, Experts: 4, TopK: 2, Inter: 4, Scale: 1}
	for name, m := range map[string]ml.MoE{
		"top-k over the experts":       func() ml.MoE { m := good; m.TopK = 5; return m }(),
		"groups not dividing experts":  func() ml.MoE { m := good; m.Groups, m.TopGroups = 3, 1; return m }(),
		"groups keeping under top-k":   func() ml.MoE { m := good; m.Groups, m.TopGroups, m.TopK = 4, 1, 2; return m }(),
		"a router of the wrong width":  func() ml.MoE { m := good; m.Router = gu; return m }(),
		"gate/up of the wrong experts": func() ml.MoE { m := good; m.Experts = 3; m.Router = router.RowsAt(0, 3); return m }(),
	} {
		b.MoE(y, x, ml.Tensor{}, m)
		if err := b.Sync(); !errors.Is(err, ml.ErrInvalidInput) {
			t.Errorf("%s: %v, want ErrInvalidInput", name, err)
		}
	}
	b.MoE(y, x, ml.Tensor{}, good)
	if err := b.Sync(); err != nil {
		t.Errorf("the good description: %v", err)
	}
}
