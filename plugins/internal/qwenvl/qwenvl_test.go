package qwenvl

import (
	"errors"
	"testing"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
	"github.com/iris-vlm/iris/sdk-wasm/vlm"
)

func TestSmartResize(t *testing.T) {
	// Expectations from transformers 5.17 smart_resize (the full table lives in the families'
	// testdata/cases.json); these pin the corners the brief asks about.
	for _, tc := range []struct {
		name                 string
		h, w, factor, lo, hi int
		wantH, wantW         int
		wantErr              string
	}{
		{"28x28 scales up to min_pixels", 28, 28, 28, 3136, 12845056, 56, 56, ""},
		{"29x1000 rounds, no refusal", 1000, 29, 28, 3136, 12845056, 1008, 28, ""},
		{"a side rounding to 0 takes the min branch", 10, 1000, 28, 3136, 12845056, 28, 560, ""},
		{"1x1", 1, 1, 28, 3136, 12845056, 56, 56, ""},
		{"ties round to even: 70/28 = 2.5 -> 2", 70, 70, 28, 3136, 12845056, 56, 56, ""},
		{"ties round to even: 42/28 = 1.5 -> 2", 42, 42, 28, 3136, 12845056, 56, 56, ""},
		{"ratio exactly 200 passes", 1, 200, 28, 3136, 12845056, 28, 812, ""},
		{"ratio 201 refused", 1, 201, 28, 3136, 12845056, 0, 0, abi.CodeAspectRatioTooExtreme},
		{"ratio 200.5 refused", 401, 2, 28, 3136, 12845056, 0, 0, abi.CodeAspectRatioTooExtreme},
		{"over max_pixels takes the floor branch", 8192, 8192, 28, 3136, 12845056, 3584, 3584, ""},
		{"320x240 qwen2.5", 240, 320, 28, 3136, 12845056, 252, 308, ""},
		{"320x240 qwen3", 240, 320, 32, 65536, 16777216, 256, 320, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, w, err := SmartResize(tc.h, tc.w, tc.factor, tc.lo, tc.hi)
			if tc.wantErr != "" {
				var e *abi.Error
				if !errors.As(err, &e) || e.Code != tc.wantErr || e.Kind != abi.Refusal {
					t.Fatalf("got (%d, %d, %v), want refusal %s", h, w, err, tc.wantErr)
				}
				return
			}
			if err != nil || h != tc.wantH || w != tc.wantW {
				t.Fatalf("got (%d, %d, %v), want (%d, %d)", h, w, err, tc.wantH, tc.wantW)
			}
		})
	}
}

func TestRefusalMessageMirrorsTransformers(t *testing.T) {
	_, _, err := SmartResize(601, 3, 28, 3136, 12845056)
	want := "aspect_ratio_too_extreme: absolute aspect ratio must be smaller than 200, got 200.33333333333334"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

func testFamily() *Family {
	return &Family{Name: "qwen_test", PatchSize: 14, MergeSize: 2, TemporalPatchSize: 2,
		Mean: [3]float64{0.5, 0.5, 0.5}, Std: [3]float64{0.5, 0.5, 0.5},
		DefaultMinPixels: 3136, DefaultMaxPixels: 12845056, DefaultSystemPrompt: "sys"}
}

func TestPlanRejectsBadParams(t *testing.T) {
	f := testFamily()
	for _, table := range []map[string]any{
		{"min_pixels": 0},
		{"min_pixels": 5000, "max_pixels": 4000},
	} {
		params, err := vlm.NewParams(f.Describe().Params, table)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Plan(vlm.ImageHeader{Width: 100, Height: 100}, params)
		var e *abi.Error
		if !errors.As(err, &e) || e.Code != abi.CodeInvalidParams || e.Kind != abi.Failure {
			t.Errorf("params %v: got %v, want an invalid_params failure", table, err)
		}
	}
	if _, err := vlm.NewParams(f.Describe().Params, map[string]any{"max_pixel": 1}); err == nil {
		t.Error("a misspelt param was accepted")
	}
	if _, err := vlm.NewParams(f.Describe().Params, map[string]any{"max_pixels": 1.5}); err == nil {
		t.Error("a fractional int param was accepted")
	}
}

func TestDescribe(t *testing.T) {
	d := testFamily().Describe()
	d.ABI = abi.Version
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if d.Limits.MinImageTokens != 4 || d.Limits.MaxImageTokens != 16384 {
		t.Errorf("limits %+v, want 4..16384 image tokens at the Qwen2.5-VL defaults", d.Limits)
	}
}
