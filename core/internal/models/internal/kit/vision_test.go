package kit

import (
	"math"
	"slices"
	"testing"

	"github.com/iris-vlm/iris/core/internal/model"
)

func TestPlanVisionWindows(t *testing.T) {
	// the tiny Qwen2.5-VL fixture's tower: 14-pixel patches, 2x2 units, windows of 112 pixels
	cfg := &model.Config{Vision: model.VisionConfig{Hidden: 64, Heads: 4, PatchSize: 14, MergeSize: 2, WindowSize: 112, RopeTheta: 1e4}}
	for _, tc := range []struct {
		grid    model.Grid
		windows []int32 // boundaries in patches
	}{
		// 320x240: a 9x11 unit grid in 4x4-unit windows: 3x3 windows, the last row and column partial
		{model.Grid{T: 1, H: 18, W: 22}, []int32{0, 64, 128, 176, 240, 304, 352, 368, 384, 396}},
		// 8x8 units: exactly 2x2 windows (the padded empty windows add no boundary)
		{model.Grid{T: 1, H: 16, W: 16}, []int32{0, 64, 128, 192, 256}},
	} {
		p := PlanVision(&cfg.Vision, []model.Grid{tc.grid})
		if !slices.Equal(p.Windows, tc.windows) {
			t.Errorf("grid %v: windows %v, want %v", tc.grid, p.Windows, tc.windows)
		}
		if want := []int32{0, int32(tc.grid.Patches())}; !slices.Equal(p.Frames, want) {
			t.Errorf("grid %v: frames %v, want %v", tc.grid, p.Frames, want)
		}
		seen := slices.Clone(p.Index)
		slices.Sort(seen)
		for i, v := range seen {
			if int(v) != i {
				t.Fatalf("grid %v: window index is not a permutation of the %d units", tc.grid, p.Units)
			}
		}
		half := cfg.Vision.Hidden / cfg.Vision.Heads / 2
		if len(p.Rope) != 2*p.Patches*half || p.Rope[0] != 1 || p.Rope[p.Patches*half] != 0 {
			t.Errorf("grid %v: rotary table starts cos %v sin %v (len %d)", tc.grid, p.Rope[0], p.Rope[p.Patches*half], len(p.Rope))
		}
	}
}

// TestPlanVisionImages: the plan of several images is each image's plan, offset by the patches
// and units before it, with no segment crossing from one image into the next.
func TestPlanVisionImages(t *testing.T) {
	v := &model.VisionConfig{Hidden: 64, Heads: 4, PatchSize: 14, MergeSize: 2, WindowSize: 112, RopeTheta: 1e4}
	grids := []model.Grid{{T: 1, H: 18, W: 22}, {T: 1, H: 6, W: 10}, {T: 2, H: 16, W: 16}, {T: 1, H: 2, W: 2}}
	all := PlanVision(v, grids)
	half := v.Hidden / v.Heads / 2
	patches, units := 0, 0
	for _, g := range grids {
		p := PlanVision(v, []model.Grid{g})
		for u, src := range p.Index {
			if got := all.Index[units+u]; got != int32(units)+src {
				t.Fatalf("grid %v: unit %d is %d, want %d", g, u, got, int32(units)+src)
			}
		}
		for _, bounds := range [][2][]int32{{p.Windows, all.Windows}, {p.Frames, all.Frames}} {
			for _, b := range bounds[0] {
				if !slices.Contains(bounds[1], int32(patches)+b) {
					t.Errorf("grid %v: boundary %d missing from %v", g, int32(patches)+b, bounds[1])
				}
			}
		}
		n := p.Patches * half
		if !slices.Equal(all.Cos()[patches*half:patches*half+n], p.Cos()) || !slices.Equal(all.Sin()[patches*half:patches*half+n], p.Sin()) {
			t.Errorf("grid %v: rotary rows differ from the image's alone", g)
		}
		patches += p.Patches
		units += p.Units
	}
	if all.Patches != patches || all.Units != units || len(all.Index) != units || len(all.Rope) != 2*patches*half {
		t.Errorf("%d patches, %d units (%d indexes, %d angles), want %d, %d", all.Patches, all.Units, len(all.Index), len(all.Rope), patches, units)
	}
	if want := []int32{0, 396, 396 + 60, 396 + 60 + 256, 396 + 60 + 512, 396 + 60 + 512 + 4}; !slices.Equal(all.Frames, want) {
		t.Errorf("frames %v, want %v", all.Frames, want)
	}
}

// TestFreqAxes pins both rotary layouts: Qwen2.5-VL's chunks and Qwen3-VL's interleaving
// (recomposition_frequencies: h at 1, 4, ..., w at 2, 5, ..., t elsewhere and past 3*section).
func TestFreqAxes(t *testing.T) {
	if got, want := FreqAxes([3]int{2, 1, 1}, false, 4), []int{0, 0, 1, 2}; !slices.Equal(got, want) {
		t.Errorf("chunked: %v, want %v", got, want)
	}
	got := FreqAxes([3]int{24, 20, 20}, true, 64)
	for f, axis := range got {
		want := 0
		switch {
		case f%3 == 1 && f < 60:
			want = 1
		case f%3 == 2 && f < 60:
			want = 2
		}
		if axis != want {
			t.Fatalf("interleaved: frequency %d follows axis %d, want %d (%v)", f, axis, want, got)
		}
	}
	if got, want := FreqAxes([3]int{4, 2, 2}, true, 8), []int{0, 1, 2, 0, 1, 2, 0, 0}; !slices.Equal(got, want) {
		t.Errorf("interleaved tiny: %v, want %v", got, want)
	}
}

// TestInvFreqFactors: LongRoPE's factors divide each frequency (a factor of 1 changes nothing,
// bit for bit), and the angles' cos and sin are scaled by the attention factor in F32.
func TestInvFreqFactors(t *testing.T) {
	plain := invFreq(6, 12, 1e4, nil)
	ones := invFreq(6, 12, 1e4, []float64{1, 1, 1, 1, 1, 1})
	if !slices.Equal(plain, ones) {
		t.Errorf("factors of 1: %v, want %v", ones, plain)
	}
	factors := []float64{1, 2, 4, 1.5, 3, 8}
	got := invFreq(6, 12, 1e4, factors)
	for i := range got {
		p := float32(math.Pow(1e4, float64(float32(2*i)/12)))
		if want := 1 / (p * float32(factors[i])); got[i] != want {
			t.Errorf("frequency %d: %v, want %v", i, got[i], want)
		}
	}
	table := &angleTable{invFreq: got, scale: 1.25}
	cos, sin := table.angles(3)
	for p := range 3 {
		for f := range 6 {
			a := float64(float32(p) * got[f])
			if c, s := cos[p*6+f], sin[p*6+f]; c != float32(math.Cos(a))*1.25 || s != float32(math.Sin(a))*1.25 {
				t.Fatalf("position %d frequency %d: cos %v sin %v", p, f, c, s)
			}
		}
	}
}
