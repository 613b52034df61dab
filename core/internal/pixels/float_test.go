package pixels

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/big"
	"os"
	"testing"
)

// floatCase is one row of testdata/float_resize_golden.json.
type floatCase struct {
	W, H, OW, OH int
	Seed         uint64
	Norm         string
	SHA256       string
	Synth        string
}

type floatGolden struct {
	Norms map[string]struct{ Mean, Std [3]float64 }
	Cases []floatCase
}

func loadFloatGolden(t *testing.T) *floatGolden {
	t.Helper()
	path := "testdata/float_resize_golden.json"
	if p := os.Getenv("IRIS_FLOAT_RESIZE_SWEEP"); p != "" {
		path = p // a larger uncommitted grid from `just float-resize-sweep`
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden: %v", err)
	}
	var g floatGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatalf("parsing golden: %v", err)
	}
	if len(g.Cases) < 100 || len(g.Norms) < 2 {
		t.Fatalf("golden holds only %d cases and %d norms", len(g.Cases), len(g.Norms))
	}
	return &g
}

func float32LE(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// floatResize runs one golden case through resize, the function under test.
func floatResize(t *testing.T, g *floatGolden, c floatCase,
	resize func([]float32, *RGB, *Table, int, int) ([]float32, error)) string {
	t.Helper()
	src := synth(c.W, c.H, c.Seed)
	if got := sha(src.Pix)[:16]; got != c.Synth {
		t.Fatalf("synthetic image %s, want %s", got, c.Synth)
	}
	n := g.Norms[c.Norm]
	table, err := Norm{Rescale: 1.0 / 255, Mean: n.Mean, Std: n.Std, Flavor: Torch}.Table()
	if err != nil {
		t.Fatal(err)
	}
	out, err := resize(nil, src, table, c.OW, c.OH)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 3*c.OW*c.OH {
		t.Fatalf("%d values, want 3x%dx%d", len(out), c.OH, c.OW)
	}
	return sha(float32LE(out))
}

// TestFloatResizeGolden: ResizeFloatBicubic equals torch's float bicubic interpolate bit for bit
// on the whole grid (Phi-4's global-view scales, fractional scales, upscales, 1-pixel sides).
func TestFloatResizeGolden(t *testing.T) {
	g := loadFloatGolden(t)
	for _, c := range g.Cases {
		if got := floatResize(t, g, c, ResizeFloatBicubic); got != c.SHA256 {
			t.Errorf("%dx%d -> %dx%d (%s): sha256 %s, want %s", c.W, c.H, c.OW, c.OH, c.Norm, got[:12], c.SHA256[:12])
		}
	}
}

// TestFloatResizeGoldenCatchesUnfused: the same kernel with every step rounded on its own (no
// fused multiply-add, the textbook reading of torch's source) fails the golden, on Phi-4's
// global-view scales too: the goldens pin the rounding, not just the formula.
func TestFloatResizeGoldenCatchesUnfused(t *testing.T) {
	g := loadFloatGolden(t)
	failed, phi := 0, 0
	for _, c := range g.Cases {
		if floatResize(t, g, c, resizeFloatUnfused) != c.SHA256 {
			failed++
			if c.OW == 448 && c.OH == 448 && c.W%448 == 0 && c.H%448 == 0 {
				phi++
			}
		}
	}
	if failed < len(g.Cases)/2 || phi == 0 {
		t.Errorf("the unfused kernel fails only %d of %d cases (%d of Phi-4's canvases)", failed, len(g.Cases), phi)
	}
}

// resizeFloatUnfused is ResizeFloatBicubic with every multiply and add rounded on its own.
func resizeFloatUnfused(dst []float32, src *RGB, t *Table, w, h int) ([]float32, error) {
	taps := func(in, out int) ([]int, []float32) {
		idx, wt := make([]int, 4*out), make([]float32, 4*out)
		scale := float32(in) / float32(out)
		near := func(x float32) float32 {
			return float32(float32(float32(float32(1.25*x)-2.25)*x)*x) + 1
		}
		far := func(x float32) float32 {
			return float32(float32(float32(float32(float32(-0.75*x)+3.75)*x)-6)*x) + 3
		}
		for i := range out {
			real := float32(scale*(float32(i)+0.5)) - 0.5
			k := min(int(math.Floor(float64(real))), in-1)
			l := min(max(real-float32(k), 0), 1)
			x2 := float32(1 - float64(l))
			ws := [4]float32{far(float32(float64(l) + 1)), near(l), near(x2), far(float32(float64(x2) + 1))}
			for j := range 4 {
				idx[4*i+j], wt[4*i+j] = max(min(k-1+j, in-1), 0), ws[j]
			}
		}
		return idx, wt
	}
	sum := func(v [4]float32, w []float32) float32 {
		acc := float32(v[0] * w[0])
		for j := 1; j < 4; j++ {
			acc += float32(v[j] * w[j])
		}
		return acc
	}
	ix, wx := taps(src.W, w)
	iy, wy := taps(src.H, h)
	dst = growFloats(dst, 3*w*h)
	for c := range 3 {
		for y := range h {
			for x := range w {
				var rows [4]float32
				for j := range 4 {
					r := src.Row(iy[4*y+j])
					var v [4]float32
					for k := range 4 {
						v[k] = t[c][r[3*ix[4*x+k]+c]]
					}
					rows[j] = sum(v, wx[4*x:4*x+4])
				}
				dst[c*w*h+y*w+x] = sum(rows, wy[4*y:4*y+4])
			}
		}
	}
	return dst, nil
}

// TestFMA32: fma32 rounds x·y+z once, including when the float64 sum lands exactly halfway
// between two float32 values, checked against exact arithmetic.
func TestFMA32(t *testing.T) {
	exact := func(x, y, z float32) float32 {
		var p, s big.Float
		p.SetPrec(256).SetFloat64(float64(x)).Mul(&p, new(big.Float).SetFloat64(float64(y)))
		s.SetPrec(256).Add(&p, new(big.Float).SetFloat64(float64(z)))
		f, _ := s.Float32()
		return f
	}
	one := float32(1)
	cases := [][3]float32{
		{0.59375, -0.654902, -0.09375 * -0.96862745},
		{1 + 0x1p-23, 1 + 0x1p-23, -1},
		// x·y = 1 + 2^-24 + 2^-47 exactly: the float64 sum is the float32 midpoint 1 + 2^-24
		// once the last bit is dropped, and only the dropped bit says to round up
		{1 + 0x1p-23, 1 + 0x1p-24, 0},
		{one, 1e-40, 1e-39}, // a subnormal float32 result
		{-0.75, 1.5, 3.75},
		{3, 1.0 / 3, -1},
	}
	for i := range 20000 { // a seeded spread of awkward operands
		a := math.Float32frombits(0x3f800000 | uint32(i*2654435761)&0x7fffff)
		b := math.Float32frombits(0x3f800000 | uint32(i*40503+7)&0x7fffff)
		cases = append(cases, [3]float32{a, b, -float32(float64(a) * float64(b))}, [3]float32{a, b, float32(i%7) - 3})
	}
	for _, c := range cases {
		if got, want := fma32(c[0], c[1], c[2]), exact(c[0], c[1], c[2]); got != want {
			t.Errorf("fma32(%g, %g, %g) = %g, want %g", c[0], c[1], c[2], got, want)
		}
	}
}

// TestPatchifyCHW: patchifying a normalised float image gives what NormalizePatchify gives from
// its bytes, for the merge-block and the plain raster (merge 1) layouts.
func TestPatchifyCHW(t *testing.T) {
	src := synth(56, 84, 7)
	table, err := Norm{Rescale: 1.0 / 255, Mean: [3]float64{0.5, 0.5, 0.5}, Std: [3]float64{0.5, 0.5, 0.5}, Flavor: Torch}.Table()
	if err != nil {
		t.Fatal(err)
	}
	planes, err := NormalizeCHW(nil, src, table)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []Patches{{Size: 14, Temporal: 1, Merge: 1}, {Size: 14, Temporal: 2, Merge: 2}, {Size: 7, Temporal: 1, Merge: 4}} {
		want, wh, ww, err := NormalizePatchify(nil, src, table, p)
		if err != nil {
			t.Fatal(err)
		}
		got, gh, gw, err := PatchifyCHW(nil, planes, src.W, src.H, p)
		if err != nil || gh != wh || gw != ww || sha(float32LE(got)) != sha(float32LE(want)) {
			t.Errorf("%+v: grid %dx%d (want %dx%d), values equal %t, %v", p, gh, gw, wh, ww,
				sha(float32LE(got)) == sha(float32LE(want)), err)
		}
	}
	if _, _, _, err := PatchifyCHW(nil, planes[1:], src.W, src.H, Patches{Size: 14, Temporal: 1, Merge: 1}); err == nil {
		t.Error("a short plane buffer was patchified")
	}
}
