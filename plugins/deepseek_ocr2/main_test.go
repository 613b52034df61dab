package main

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/plugins/internal/gotocr2"
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

// TestGeometry pins the rules on sizes whose results the reference cases hold.
func TestGeometry(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		w, h                     int
		tiles                    gotocr2.Grid
		gw, gh                   int
		left, top, right, bottom int
	}{
		{"320x240: no tiles, 1024x768 with 128 grey rows above and below (257 tokens)", 320, 240, gotocr2.Grid{}, 1024, 768, 0, 128, 0, 128},
		{"768x768 is not past 768: no tiles", 768, 768, gotocr2.Grid{}, 1024, 1024, 0, 0, 0, 0},
		{"769x768 is: a square's 2x2", 769, 768, gotocr2.Grid{Cols: 2, Rows: 2}, 1024, 1023, 0, 0, 0, 1},
		{"a page of 1700x2200: 2x3, 791x1024 centred", 1700, 2200, gotocr2.Grid{Cols: 2, Rows: 3}, 791, 1024, 116, 0, 117, 0},
		{"2048x5: 2.5 rounds to even, 2 rows", 2048, 5, gotocr2.Grid{Cols: 6, Rows: 1}, 1024, 2, 0, 511, 0, 511},
		{"2048x7: 3.5 rounds to even, 4 rows", 2048, 7, gotocr2.Grid{Cols: 6, Rows: 1}, 1024, 4, 0, 510, 0, 510},
		{"midpoint tie of 2x2 and 3x2 under half the area: the earlier 2x2", 770, 616, gotocr2.Grid{Cols: 2, Rows: 2}, 1024, 819, 0, 102, 0, 103},
		{"the same tie past half of 3x2's area: the later 3x2", 1490, 1192, gotocr2.Grid{Cols: 3, Rows: 2}, 1024, 819, 0, 102, 0, 103},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, ok := Geometry(tc.w, tc.h, DefaultMinTiles, DefaultMaxTiles)
			want := Layout{Tiles: tc.tiles, GlobalW: tc.gw, GlobalH: tc.gh, Left: tc.left, Top: tc.top, Right: tc.right, Bottom: tc.bottom}
			if !ok || l != want {
				t.Fatalf("Geometry = %+v, %v; want %+v", l, ok, want)
			}
		})
	}
}

// TestCasesCatchMutations: the reference cases hold the rules a port gets wrong, so a plugin
// with any one of them changed fails some case: the tie rule flipped (the earlier grid kept),
// half-up rounding of the global view's sides, tiles from 768 px on instead of past it, the
// padding's odd pixel on the left instead of the right.
func TestCasesCatchMutations(t *testing.T) {
	s, err := plugintest.LoadSuite("testdata/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	type geom struct {
		tiles  int
		gw, gh int
		left   int
		top    int
	}
	ref := func(w, h int) geom {
		l, _ := Geometry(w, h, DefaultMinTiles, DefaultMaxTiles)
		return geom{l.TileCount(), l.GlobalW, l.GlobalH, l.Left, l.Top}
	}
	for _, m := range []struct {
		name string
		f    func(w, h int) geom
	}{
		{"tie rule flipped", func(w, h int) geom {
			g := ref(w, h)
			if max(w, h) > TileSize {
				best, bestDiff := gotocr2.Grid{Cols: 1, Rows: 1}, math.Inf(1)
				for _, c := range gotocr2.AspectRatios(DefaultMinTiles, DefaultMaxTiles) {
					if d := math.Abs(float64(w)/float64(h) - float64(c.Cols)/float64(c.Rows)); d < bestDiff {
						best, bestDiff = c, d
					}
				}
				g.tiles = best.Tiles()
			}
			return g
		}},
		{"half-up rounding", func(w, h int) geom {
			g := ref(w, h)
			s := float64(GlobalSize) / float64(max(w, h))
			g.gw, g.gh = int(math.Floor(float64(w)*s+0.5)), int(math.Floor(float64(h)*s+0.5))
			g.left, g.top = (GlobalSize-g.gw)/2, (GlobalSize-g.gh)/2
			return g
		}},
		{"tiles from 768 on", func(w, h int) geom {
			g := ref(w, h)
			if max(w, h) == TileSize {
				g.tiles = gotocr2.OptimalCanvas(w, h, TileSize, DefaultMinTiles, DefaultMaxTiles).Tiles()
			}
			return g
		}},
		{"odd pixel of padding on the left", func(w, h int) geom {
			g := ref(w, h)
			g.left, g.top = (GlobalSize-g.gw+1)/2, (GlobalSize-g.gh+1)/2
			return g
		}},
	} {
		caught := false
		for _, c := range s.Cases {
			if c.Want == nil || len(c.Params) > 0 {
				continue
			}
			got := m.f(c.Image.Width, c.Image.Height)
			vs := c.Want.Views
			g := vs[len(vs)-1]
			want := geom{len(vs) - 1, g.Resized.Width, g.Resized.Height, g.Pad.Left, g.Pad.Top}
			if got != want {
				caught = true
				break
			}
		}
		if !caught {
			t.Errorf("%s: every default case still agrees", m.name)
		}
	}
}

// TestRefusals: an empty image is too small; a global side that scales to 0 pixels is refused
// (the reference fails in its resize); bad tile params are the bundle's fault.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		w, h       int
		code, text string
	}{
		{0, 5, abi.CodeImageTooSmall, "image is 0x5"},
		{1, 2048, abi.CodeAspectRatioTooExtreme, "a 1x2048 image scaled to a long side of 1024 has a side of 0 pixels (0x1024)"},
		{6144, 3, abi.CodeAspectRatioTooExtreme, "a 6144x3 image scaled to a long side of 1024 has a side of 0 pixels (1024x0)"},
	} {
		_, err := plan(t, tc.w, tc.h, nil)
		var e *abi.Error
		if !errors.As(err, &e) || e.Kind != abi.Refusal || e.Code != tc.code || e.Message != tc.text {
			t.Errorf("%dx%d: %v, want %s %q", tc.w, tc.h, err, tc.code, tc.text)
		}
	}
	for _, p := range []map[string]any{{ParamMinTiles: 0}, {ParamMaxTiles: 7}, {ParamMinTiles: 4, ParamMaxTiles: 3}} {
		_, err := plan(t, 1600, 1200, p)
		var e *abi.Error
		if !errors.As(err, &e) || e.Kind != abi.Failure || e.Code != abi.CodeInvalidParams || !strings.Contains(e.Message, "min_tiles") {
			t.Errorf("%v: %v", p, err)
		}
	}
}

// TestPlanValidates: the plans of a spread of sizes pass the host's validation and are uniform
// (one 64x64 grid: the tiles padded to the global view's canvas, their masks 48x48), and the
// tokens are 256 + 144 x tiles + 1.
func TestPlanValidates(t *testing.T) {
	for _, sz := range [][2]int{{1, 1}, {320, 240}, {768, 768}, {769, 768}, {1700, 2200}, {32768, 32768}, {1, 2047}, {1536, 768}} {
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
		l, _ := Geometry(sz[0], sz[1], DefaultMinTiles, DefaultMaxTiles)
		if p.ImageTokens != 256+144*l.TileCount()+1 || len(p.Views) != l.TileCount()+1 || p.SeparatorTokens != 1 {
			t.Errorf("%v: %d tokens, %d views, %d separators; want %d tiles", sz, p.ImageTokens, len(p.Views), p.SeparatorTokens, l.TileCount())
		}
		for i, v := range p.Views[:len(p.Views)-1] {
			if v.PatchMask() != (abi.Rect{Width: 48, Height: 48}) || v.ImageTokens != 144 {
				t.Errorf("%v: tile %d mask %+v, %d tokens", sz, i, v.PatchMask(), v.ImageTokens)
			}
		}
	}
}

// TestFrame: the plain format, both part orders; a system message is refused.
func TestFrame(t *testing.T) {
	params, err := vlm.NewParams(family{}.Describe().Params, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := vlm.Plan{ImageTokens: 257}
	f, err := family{}.Frame(vlm.FrameRequest{Question: "Free OCR.", Plan: p}, params)
	if err != nil || f.Before != tokBOS || f.After != "\nFree OCR." || f.Span.Count != 257 || f.Span.Pad != "<image>" {
		t.Errorf("image first: %+v, %v", f, err)
	}
	f, err = family{}.Frame(vlm.FrameRequest{Question: "Free OCR.", TextFirst: true, Plan: p}, params)
	if err != nil || f.Before != tokBOS+"Free OCR.\n" || f.After != "" {
		t.Errorf("text first: %+v, %v", f, err)
	}
	sys := ""
	_, err = family{}.Frame(vlm.FrameRequest{Question: "Free OCR.", Plan: p, System: &sys}, params)
	var e *abi.Error
	if !errors.As(err, &e) || e.Kind != abi.Refusal || e.Code != abi.CodeSystemNotSupported {
		t.Errorf("system message: %v, want a %s refusal", err, abi.CodeSystemNotSupported)
	}
}
