package pixels

import (
	"testing"
)

// naivePatchify transcribes the Qwen2-VL processor's reshape/permute/expand literally:
// [C, gh/m, m, p, gw/m, m, p] -> [gh/m, gw/m, m, m, C, T, p, p].
func naivePatchify(img *RGB, t *Table, p Patches) []float32 {
	ps, m, tt := p.Size, p.Merge, p.Temporal
	gh, gw := img.H/ps, img.W/ps
	out := make([]float32, 0, gh*gw*p.RowLen())
	for bh := range gh / m {
		for bw := range gw / m {
			for mh := range m {
				for mw := range m {
					for c := range 3 {
						for range tt {
							for py := range ps {
								for px := range ps {
									y := (bh*m+mh)*ps + py
									x := (bw*m+mw)*ps + px
									out = append(out, t[c][img.Pix[3*(y*img.W+x)+c]])
								}
							}
						}
					}
				}
			}
		}
	}
	return out
}

// TestNormalizePatchifyLayouts compares NormalizePatchify with the naive layout, with the
// vector copy and with the scalar one.
func TestNormalizePatchifyLayouts(t *testing.T) { withKernels(t, testNormalizePatchifyLayouts) }

func testNormalizePatchifyLayouts(t *testing.T) {
	tab, err := Norm{Rescale: 1.0 / 255, Mean: [3]float64{0.1, 0.5, 0.9}, Std: [3]float64{0.2, 0.3, 0.4}, Flavor: Torch}.Table()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		w, h int
		p    Patches
	}{
		{56, 28, Patches{Size: 14, Temporal: 2, Merge: 2}},
		{64, 96, Patches{Size: 16, Temporal: 2, Merge: 2}},
		{12, 18, Patches{Size: 3, Temporal: 1, Merge: 2}},
		{10, 10, Patches{Size: 5, Temporal: 3, Merge: 1}},
		{336, 112, Patches{Size: 14, Temporal: 2, Merge: 4}},
		{48, 32, Patches{Size: 8, Temporal: 1, Merge: 2}},
		{54, 18, Patches{Size: 9, Temporal: 3, Merge: 1}},
		{420, 308, Patches{Size: 14, Temporal: 2, Merge: 2}},
	} {
		img := synth(tc.w, tc.h, uint64(tc.w*tc.h))
		got, gh, gw, err := NormalizePatchify(make([]float32, 7), img, tab, tc.p)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		want := naivePatchify(img, tab, tc.p)
		if gh != tc.h/tc.p.Size || gw != tc.w/tc.p.Size || len(got) != len(want) {
			t.Fatalf("%+v: grid %dx%d, %d values, want %d", tc, gh, gw, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%+v: value %d is %v, want %v", tc, i, got[i], want[i])
			}
		}
	}
}

func TestNormalizePatchifyRejects(t *testing.T) {
	tab, _ := Norm{Rescale: 1, Std: [3]float64{1, 1, 1}, Flavor: PIL}.Table()
	img := NewRGB(30, 28)
	if _, _, _, err := NormalizePatchify(nil, img, tab, Patches{Size: 14, Temporal: 2, Merge: 2}); err == nil {
		t.Error("a 30-pixel width accepted for 28-pixel merge blocks")
	}
	if _, _, _, err := NormalizePatchify(nil, &RGB{W: 28, H: 28, Pix: make([]byte, 5)}, tab, Patches{Size: 14, Temporal: 2, Merge: 1}); err == nil {
		t.Error("a short pixel buffer accepted")
	}
	if _, _, _, err := NormalizePatchify(nil, img, tab, Patches{Size: 0, Temporal: 2, Merge: 2}); err == nil {
		t.Error("a zero patch size accepted")
	}
}

func TestNormalizeCHW(t *testing.T) {
	tab, _ := Norm{Rescale: 1.0 / 255, Mean: [3]float64{0.5, 0.5, 0.5}, Std: [3]float64{0.5, 0.5, 0.5}, Flavor: Torch}.Table()
	img := synth(7, 5, 3)
	got, err := NormalizeCHW(nil, img, tab)
	if err != nil {
		t.Fatal(err)
	}
	for c := range 3 {
		for y := range 5 {
			for x := range 7 {
				if want := tab[c][img.Pix[3*(y*7+x)+c]]; got[c*35+y*7+x] != want {
					t.Fatalf("(%d,%d,%d) = %v, want %v", c, y, x, got[c*35+y*7+x], want)
				}
			}
		}
	}
}
