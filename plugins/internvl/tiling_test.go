package main

import (
	"errors"
	"slices"
	"testing"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
	"github.com/iris-vlm/iris/sdk-wasm/vlm"
)

func TestAspectRatiosOrder(t *testing.T) {
	// get_all_supported_aspect_ratios(1, 4)'s docstring example: the stable sort by tile count
	// keeps the cols-outer order within a count, which decides ties.
	want := []Tiling{{1, 1}, {1, 2}, {2, 1}, {1, 3}, {3, 1}, {1, 4}, {2, 2}, {4, 1}}
	if got := aspectRatios(1, 4); !slices.Equal(got, want) {
		t.Fatalf("aspectRatios(1, 4) = %v, want %v", got, want)
	}
	if got := aspectRatios(3, 2); len(got) != 0 {
		t.Fatalf("aspectRatios(3, 2) = %v, want none", got)
	}
}

func TestOptimalTiling(t *testing.T) {
	// Expectations from transformers 5.17 get_optimal_tiled_canvas (the full table is
	// testdata/cases.json); these pin the rules.
	for _, tc := range []struct {
		name       string
		w, h       int
		lo, hi     int
		cols, rows int
	}{
		{"4:3 is the 4x3 grid whatever the size", 320, 240, 1, 12, 4, 3},
		{"426x320 photo", 426, 320, 1, 12, 4, 3},
		{"square small: 1x1 wins the tie with 2x2, 3x3", 500, 500, 1, 12, 1, 1},
		{"square large: the later 2x2 and 3x3 win while area > half theirs", 2048, 2048, 1, 12, 3, 3},
		{"633² is under half of 2x2's area", 633, 633, 1, 12, 1, 1},
		{"634² is over half of 2x2's area", 634, 634, 1, 12, 2, 2},
		{"2:1 small stays 2x1", 896, 448, 1, 12, 2, 1},
		{"1x700 is the tallest grid", 1, 700, 1, 12, 1, 12},
		{"max_patches 1 is one tile", 4000, 3000, 1, 1, 1, 1},
		{"min_patches 3 leaves out 1x1 and 2-tile grids", 500, 500, 3, 12, 2, 2},
		{"min over max: the reference's initial 1x1", 500, 500, 5, 4, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := OptimalTiling(tc.w, tc.h, TileSize, tc.lo, tc.hi)
			if got != (Tiling{tc.cols, tc.rows}) {
				t.Fatalf("OptimalTiling(%d, %d, %d..%d) = %+v, want %dx%d", tc.w, tc.h, tc.lo, tc.hi, got, tc.cols, tc.rows)
			}
		})
	}
}

func TestPlanViews(t *testing.T) {
	params, err := vlm.NewParams(family{}.Describe().Params, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := family{}.Plan(vlm.ImageHeader{Width: 426, Height: 320}, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Views) != 13 || p.ImageTokens != 13*256 {
		t.Fatalf("%d views, %d tokens; want 13 views, 3328 tokens", len(p.Views), p.ImageTokens)
	}
	if err := p.Validate(abi.Size{Width: 426, Height: 320}); err != nil {
		t.Fatal(err)
	}
	// The twelve tiles share one resize (the host resizes once), the thumbnail has its own.
	for i, v := range p.Views[:12] {
		if v.Resize != p.Views[0].Resize || v.Region == nil || v.Region.X != i%4*448 || v.Region.Y != i/4*448 {
			t.Errorf("tile %d: resize %+v region %+v", i, v.Resize, v.Region)
		}
	}
	if th := p.Views[12]; th.Region != nil || th.Resize.Width != 448 || th.Resize.Height != 448 {
		t.Errorf("thumbnail: resize %+v region %+v", th.Resize, th.Region)
	}
	// An image of the canvas's own size is not resized (torchvision returns it untouched).
	p, err = family{}.Plan(vlm.ImageHeader{Width: 896, Height: 448}, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Views) != 3 || p.Views[0].Resize != nil || p.Views[2].Resize == nil {
		t.Errorf("896x448: %+v", p.Views)
	}
}

func TestPlanRejectsBadParams(t *testing.T) {
	for _, table := range []map[string]any{
		{"min_patches": 0},
		{"max_patches": 0},
		{"min_patches": 5, "max_patches": 4},
		{"max_patches": MaxPatchesLimit + 1},
	} {
		params, err := vlm.NewParams(family{}.Describe().Params, table)
		if err != nil {
			t.Fatal(err)
		}
		_, err = family{}.Plan(vlm.ImageHeader{Width: 100, Height: 100}, params)
		var e *abi.Error
		if !errors.As(err, &e) || e.Code != abi.CodeInvalidParams || e.Kind != abi.Failure {
			t.Errorf("params %v: got %v, want an invalid_params failure", table, err)
		}
	}
	params, err := vlm.NewParams(family{}.Describe().Params, map[string]any{"max_patches": MaxPatchesLimit})
	if err != nil {
		t.Fatal(err)
	}
	p, err := family{}.Plan(vlm.ImageHeader{Width: 30000, Height: 100}, params)
	if err != nil || len(p.Views) != abi.MaxViews {
		t.Fatalf("max_patches %d: %d views, %v", MaxPatchesLimit, len(p.Views), err)
	}
	if err := p.Validate(abi.Size{Width: 30000, Height: 100}); err != nil {
		t.Fatalf("the largest plan the params allow is refused by the host's checks: %v", err)
	}
}

func TestDescribe(t *testing.T) {
	d := family{}.Describe()
	d.Minor = abi.Minor
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if d.ABI != 2 || d.Limits.MinImageTokens != 256 || d.Limits.MaxImageTokens != 3328 {
		t.Errorf("ABI %d, limits %+v; want ABI 2, 256..3328 image tokens", d.ABI, d.Limits)
	}
}
