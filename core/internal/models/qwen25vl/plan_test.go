package qwen25vl

import (
	"slices"
	"testing"

	"github.com/iris-vlm/iris/core/internal/engine"
	"github.com/iris-vlm/iris/core/internal/engine/fixture"
)

func TestPlanVision(t *testing.T) {
	cfg, err := engine.LoadConfig(fixture.ModelDir("tiny-untied"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		grid    engine.Grid
		windows []int32 // boundaries in patches
	}{
		// 320x240: a 9x11 unit grid in 4x4-unit windows: 3x3 windows, the last row and column partial
		{engine.Grid{T: 1, H: 18, W: 22}, []int32{0, 64, 128, 176, 240, 304, 352, 368, 384, 396}},
		// 8x8 units: exactly 2x2 windows (the padded empty windows add no boundary)
		{engine.Grid{T: 1, H: 16, W: 16}, []int32{0, 64, 128, 192, 256}},
	} {
		p := planVision(&cfg.Vision, tc.grid)
		if !slices.Equal(p.windows, tc.windows) {
			t.Errorf("grid %v: windows %v, want %v", tc.grid, p.windows, tc.windows)
		}
		if want := []int32{0, int32(tc.grid.Patches())}; !slices.Equal(p.frames, want) {
			t.Errorf("grid %v: frames %v, want %v", tc.grid, p.frames, want)
		}
		seen := slices.Clone(p.index)
		slices.Sort(seen)
		for i, v := range seen {
			if int(v) != i {
				t.Fatalf("grid %v: window index is not a permutation of the %d units", tc.grid, p.units)
			}
		}
		half := cfg.Vision.Hidden / cfg.Vision.Heads / 2
		if len(p.rope) != 2*p.patches*half || p.rope[0] != 1 || p.rope[p.patches*half] != 0 {
			t.Errorf("grid %v: rotary table starts cos %v sin %v (len %d)", tc.grid, p.rope[0], p.rope[p.patches*half], len(p.rope))
		}
	}
}
