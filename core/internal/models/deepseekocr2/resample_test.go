package deepseekocr2

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"testing"
)

// values is the golden script's weight(): ((i·7919 + seed·104729) mod 2003) / 2003 − 0.5, times
// scale, rounded once to float32.
func values(n, seed int, scale float64) []float32 {
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

type resampleGolden struct {
	Pos []struct {
		Src, Dst, Channels, Seed int
		Out                      string
	}
	Rel []struct {
		Rows, Size, Channels, Seed int
		Picked                     string
	}
}

func readResample(t *testing.T) *resampleGolden {
	t.Helper()
	raw, err := os.ReadFile("testdata/resample.json")
	if err != nil {
		t.Fatal(err)
	}
	var g resampleGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Pos) < 5 || len(g.Rel) < 4 {
		t.Fatalf("golden: %d position tables, %d relative tables", len(g.Pos), len(g.Rel))
	}
	return &g
}

// applyPos sums the taps over a table of c channels a row, in float64.
func applyPos(tp PosTaps, table []float32, c int) []float64 {
	out := make([]float64, len(tp.IDs)/tp.K*c)
	for o := range len(tp.IDs) / tp.K {
		for k := range tp.K {
			id, w := int(tp.IDs[o*tp.K+k]), float64(tp.Weights[o*tp.K+k])
			for ch := range c {
				out[o*c+ch] += w * float64(table[id*c+ch])
			}
		}
	}
	return out
}

// TestPosTaps: the taps resample a position table as torch's antialiased bicubic interpolate does
// (64 -> 48 for a 768 tile, the identity at 64, other down- and upscales), within float32's last
// bits (torch rounds between its two passes); the plain bicubic kernel's a = −0.75, or no
// antialiasing, lands far from it.
func TestPosTaps(t *testing.T) {
	g := readResample(t)
	for _, c := range g.Pos {
		table := values(c.Src*c.Src*c.Channels, c.Seed, 2)
		want := f32s(t, c.Out)
		got := applyPos(NewPosTaps(c.Src, c.Dst), table, c.Channels)
		var worst float64
		for i := range want {
			worst = math.Max(worst, math.Abs(got[i]-float64(want[i])))
		}
		t.Logf("%d -> %d: max |diff| %g", c.Src, c.Dst, worst)
		if worst > 2e-6 {
			t.Errorf("%d -> %d: max |diff| %g against torch", c.Src, c.Dst, worst)
		}
		if c.Src == 64 && c.Dst == 48 {
			// the same resize without antialiasing: the filter's support not widened
			noAA := plainBicubicTaps(c.Src, c.Dst)
			other := applyPos(noAA, table, c.Channels)
			var apart float64
			for i := range want {
				apart = math.Max(apart, math.Abs(other[i]-float64(want[i])))
			}
			if apart < 1e-3 {
				t.Errorf("64 -> 48 without antialiasing lands within %g of torch's: the golden does not test it", apart)
			}
		}
	}
}

// plainBicubicTaps is the resize without antialiasing (support 2 whatever the scale), for the
// mutation above.
func plainBicubicTaps(src, dst int) PosTaps {
	scale := float32(src) / float32(dst)
	first, w := make([]int, dst), make([][]float32, dst)
	for i := range dst {
		center := scale * (float32(i) + 0.5)
		xmin := max(int(center-2+0.5), 0)
		xsize := min(int(center+2+0.5), src) - xmin
		ws := make([]float32, xsize)
		var total float32
		for j := range xsize {
			ws[j] = aaCubic(float32(j+xmin) - center + 0.5)
			total += ws[j]
		}
		for j := range ws {
			ws[j] /= total
		}
		first[i], w[i] = xmin, ws
	}
	tp := PosTaps{K: 16}
	for y := range dst {
		for x := range dst {
			for a := range 4 {
				for c := range 4 {
					if a < len(w[y]) && c < len(w[x]) {
						tp.IDs = append(tp.IDs, int32((first[y]+a)*src+first[x]+c))
						tp.Weights = append(tp.Weights, w[y][a]*w[x][c])
					} else {
						tp.IDs, tp.Weights = append(tp.IDs, 0), append(tp.Weights, 0)
					}
				}
			}
		}
	}
	return tp
}

// TestLinearTaps: a relative-position table resampled with the linear taps, then indexed as
// get_rel_pos indexes it (row q − k + size − 1 for query q and key k of a grid side of size),
// equals torch's for a global layer on a tile's grid (127 -> 95 rows) and other sizes, the
// identity included.
func TestLinearTaps(t *testing.T) {
	g := readResample(t)
	for _, c := range g.Rel {
		table := values(c.Rows*c.Channels, c.Seed, 2)
		m := 2*c.Size - 1
		tp := NewLinearTaps(c.Rows, m)
		want := f32s(t, c.Picked)
		var worst float64
		for q := range c.Size {
			for k := range c.Size {
				r := q - k + c.Size - 1
				for ch := range c.Channels {
					// torch's linear kernel: w0·in[i0] + w1·in[i1] in float32
					got := tp.W0[r]*table[int(tp.I0[r])*c.Channels+ch] + tp.W1[r]*table[int(tp.I1[r])*c.Channels+ch]
					worst = math.Max(worst, math.Abs(float64(got-want[(q*c.Size+k)*c.Channels+ch])))
				}
			}
		}
		t.Logf("%d -> %d rows: max |diff| %g", c.Rows, m, worst)
		if worst > 1e-6 {
			t.Errorf("%d -> %d rows: max |diff| %g against torch", c.Rows, m, worst)
		}
	}
}
