package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
	"github.com/iris-vlm/iris/sdk-wasm/plugintest"
	"github.com/iris-vlm/iris/sdk-wasm/vlm"
)

// TestCases runs the reference conformance cases natively; core/internal/plugin/plugintest runs
// the same file against the compiled module.
func TestCases(t *testing.T) {
	s, err := plugintest.LoadSuite("testdata/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	s.Run(t, plugintest.Native(family{}))
}

func plan(t *testing.T, w, h int, table map[string]any) (vlm.Plan, error) {
	t.Helper()
	params, err := vlm.NewParams(family{}.Describe().Params, table)
	if err != nil {
		t.Fatal(err)
	}
	return family{}.Plan(vlm.ImageHeader{Width: w, Height: h}, params)
}

// TestLayout pins the rules on sizes whose results the reference cases hold.
func TestLayout(t *testing.T) {
	for _, tc := range []struct {
		name               string
		w, h, maxCrops     int
		grid               Grid
		newW, newH         int
		maskCols, maskRows int
		tokens             int
	}{
		{"320x240: 448x336, 8 patch rows masked, 477 tokens", 320, 240, 36, Grid{1, 1}, 448, 336, 32, 24, 477},
		{"1x1 is upscaled to one crop", 1, 1, 36, Grid{1, 1}, 448, 448, 32, 32, 545},
		{"an exact multiple is not padded", 896, 448, 36, Grid{2, 1}, 896, 448, 64, 32, 273 + 512 + 16},
		{"447x447: 447·(448/447) is 448.0 in float64, no pad", 447, 447, 36, Grid{1, 1}, 448, 448, 32, 32, 545},
		{"500x300: 150 pixels of padding mask 10 patch columns", 500, 300, 36, Grid{2, 1}, 746, 448, 54, 32, 273 + 16*27 + 16},
		{"a 1-pixel strip of 20 is upscaled to 22x448: 30 of 32 patch columns masked", 1, 20, 36, Grid{1, 1}, 22, 448, 2, 32, 273 + 16 + 16},
		{"200:1 keeps an 11-pixel canvas row", 2000, 10, 36, Grid{5, 1}, 2240, 11, 160, 1, 273 + 80 + 1},
		{"fallback tie: (2,18) after (1,9) while the area exceeds half its canvas", 897, 7874, 36, Grid{2, 18}, 896, 7865, 64, 562, 9546},
		{"fallback midpoint tie of 2/7 and 3/11: the later 3x11", 1462, 5236, 36, Grid{3, 11}, 1344, 4813, 96, 344, 8701},
		{"fallback square: 6x6 after the ties of 1x1 .. 5x5", 3000, 3000, 36, Grid{6, 6}, 2688, 2688, 192, 192, 9585},
		{"dynamic_hd 4 on 1000x1000: 2x2 (transformers' own test: 5 views)", 1000, 1000, 4, Grid{2, 2}, 896, 896, 64, 64, 273 + 1024 + 32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hd, err := Layout(tc.w, tc.h, CropSize, PatchSize, tc.maxCrops)
			if err != nil {
				t.Fatal(err)
			}
			if hd.Grid != tc.grid || hd.NewW != tc.newW || hd.NewH != tc.newH || hd.MaskCols != tc.maskCols || hd.MaskRows != tc.maskRows {
				t.Fatalf("Layout = %+v, want grid %+v, %dx%d, mask %dx%d", hd, tc.grid, tc.newW, tc.newH, tc.maskCols, tc.maskRows)
			}
			if hd.Tokens() != tc.tokens {
				t.Errorf("tokens %d, want %d", hd.Tokens(), tc.tokens)
			}
		})
	}
}

// TestTieRuleMatters: the reference cases hold fallback ties, so a plugin with the tie rule
// flipped (the earlier grid kept on a tie) fails them: on every tie case of this table the
// flipped rule picks another grid than the one cases.json says.
func TestTieRuleMatters(t *testing.T) {
	s, err := plugintest.LoadSuite("testdata/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"897x7874": true, "862x8141": true, "1462x5236": true, "3000x3000": true, "4480x4480": true}
	flipped := func(aspect float64, candidates []Grid) Grid {
		best, bestDiff := Grid{Cols: 1, Rows: 1}, 2.0e9
		for _, g := range candidates {
			d := aspect - float64(g.Cols)/float64(g.Rows)
			if d < 0 {
				d = -d
			}
			if d < bestDiff {
				best, bestDiff = g, d
			}
		}
		return best
	}
	for _, c := range s.Cases {
		if !want[c.Name] {
			continue
		}
		delete(want, c.Name)
		views := len(c.Want.Views)
		w, h := c.Image.Width, c.Image.Height
		g := flipped(float64(w)/float64(h), grids(DefaultDynamicHD))
		if 1+g.Crops() == views {
			t.Errorf("%s: the flipped tie rule gives %+v, as many views (%d) as the reference", c.Name, g, views)
		}
	}
	if len(want) > 0 {
		t.Errorf("cases.json lacks the tie cases %v", want)
	}
}

// TestRefusals: an empty image is too small; a resized side under 10 pixels is the
// reference's ValueError, with its message.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		w, h       int
		code, text string
	}{
		{0, 5, abi.CodeImageTooSmall, "image is 0x5"},
		{1, 45, abi.CodeAspectRatioTooExtreme, "the aspect ratio is very extreme (9, 448)"},
		{1000, 1, abi.CodeAspectRatioTooExtreme, "the aspect ratio is very extreme (1344, 1)"},
		{448, 9, abi.CodeAspectRatioTooExtreme, "the aspect ratio is very extreme (448, 9)"},
	} {
		_, err := plan(t, tc.w, tc.h, nil)
		var e *abi.Error
		if !errors.As(err, &e) || e.Kind != abi.Refusal || e.Code != tc.code || e.Message != tc.text {
			t.Errorf("%dx%d: %v, want %s %q", tc.w, tc.h, err, tc.code, tc.text)
		}
	}
	for _, v := range []int{0, MaxDynamicHD + 1} {
		_, err := plan(t, 640, 480, map[string]any{ParamDynamicHD: v})
		var e *abi.Error
		if !errors.As(err, &e) || e.Kind != abi.Failure || !strings.Contains(e.Message, "dynamic_hd") {
			t.Errorf("dynamic_hd %d: %v", v, err)
		}
	}
}

// TestPlanValidates: the plans of a spread of sizes pass the host's validation, with the
// separator tokens making the count num_img_tokens.
func TestPlanValidates(t *testing.T) {
	for _, sz := range [][2]int{{1, 1}, {320, 240}, {500, 300}, {897, 7874}, {32768, 164}, {2000, 10}, {10, 2000}} {
		p, err := plan(t, sz[0], sz[1], nil)
		if err != nil {
			t.Fatalf("%v: %v", sz, err)
		}
		if err := p.Validate(p.Source); err != nil {
			t.Errorf("%v: %v", sz, err)
		}
		if err := p.Uniform(); err != nil {
			t.Errorf("%v: %v", sz, err)
		}
		hd, _ := Layout(sz[0], sz[1], CropSize, PatchSize, DefaultDynamicHD)
		if p.ImageTokens != hd.Tokens() || p.SeparatorTokens != GlobalRows+1+(hd.MaskRows+1)/2 {
			t.Errorf("%v: %d tokens (%d separators), want %d", sz, p.ImageTokens, p.SeparatorTokens, hd.Tokens())
		}
	}
}
