package abi

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sampleMasked is a wire-minor-3 plan in Phi-4-multimodal's shape, shrunk to patches of 14 on
// 56×56 crops (4×4 patches, 2×2 tokens): a 100×60 image resized to 112×67 and padded white to
// 112×112; the global view is that canvas shrunk to 56×56 in float, then the 2×2 crops, the
// bottom ones padded and masked (67 rows: the canvas' last 45 rows are padding, 3 patch rows).
func sampleMasked() Plan {
	norm := Normalize{Rescale: 1.0 / 255, Mean: [3]float64{0.5, 0.5, 0.5}, Std: [3]float64{0.5, 0.5, 0.5},
		Flavor: FlavorTorchvision}
	resize := &Resize{Width: 112, Height: 67, Filter: FilterBilinear, Flavor: FlavorTorchvision, Antialias: true}
	white := RGB{255, 255, 255}
	view := func(region *Rect, pad *Pad) View {
		return View{Resize: resize, Region: region, Pad: pad, Normalize: norm,
			Patches: Patches{Size: 14, Temporal: 1, Merge: 2, Layout: LayoutTiles},
			Grid:    Grid{T: 1, H: 4, W: 4}, LLMGrid: Grid{T: 1, H: 2, W: 2}, ImageTokens: 4}
	}
	global := view(nil, &Pad{Bottom: 45, Color: white})
	global.FloatResize = &Resize{Width: 56, Height: 56, Filter: FilterBicubic, Flavor: FlavorTorchvision}
	bottomLeft := view(&Rect{X: 0, Y: 56, Width: 56, Height: 11}, &Pad{Bottom: 45, Color: white})
	bottomLeft.Mask, bottomLeft.ImageTokens = &Rect{Width: 4, Height: 1}, 2
	bottomRight := view(&Rect{X: 56, Y: 56, Width: 56, Height: 11}, &Pad{Bottom: 45, Color: white})
	bottomRight.Mask, bottomRight.ImageTokens = &Rect{Width: 4, Height: 1}, 2
	return Plan{Source: Size{Width: 100, Height: 60}, ImageTokens: 16 + 6, SeparatorTokens: 6, Views: []View{
		global,
		view(&Rect{X: 0, Y: 0, Width: 56, Height: 56}, nil),
		view(&Rect{X: 56, Y: 0, Width: 56, Height: 56}, nil),
		bottomLeft, bottomRight,
	}}
}

// TestMinor3RoundTrip: masks, float resizes and separator tokens cross the wire at minor 3, in
// a plan and inside a frame request, and are refused for a minor-2 peer (never dropped).
func TestMinor3RoundTrip(t *testing.T) {
	p := sampleMasked()
	if err := p.Validate(p.Source); err != nil {
		t.Fatalf("the sample plan: %v", err)
	}
	req := &FrameRequest{Question: "q", Plan: p}
	for _, m := range []any{&p, req} {
		b, err := Encode(m)
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		got := newOf(m)
		if err := Decode(b, got); err != nil || !reflect.DeepEqual(got, m) {
			t.Fatalf("%T round trip: %v\n got %+v\nwant %+v", m, err, got, m)
		}
		if _, err := EncodeAt(m, 2); err == nil || !strings.Contains(err.Error(), "needs wire minor 3") {
			t.Errorf("%T with masks encoded at minor 2: %v", m, err)
		}
	}
	for _, edit := range []func(*Plan){
		func(p *Plan) { p.Views[0].FloatResize = nil; p.Views[3].Mask, p.Views[4].Mask = nil, nil },
		func(p *Plan) { p.Views[0].FloatResize, p.SeparatorTokens = nil, 0 },
	} {
		q := sampleMasked()
		edit(&q)
		if _, err := EncodeAt(&q, 2); err == nil || !strings.Contains(err.Error(), "minor 3") {
			t.Errorf("a plan with one minor-3 field left encoded at minor 2: %v", err)
		}
	}
}

// TestMinor3KeepsOlderBytes: what minor 2 could say is written the same at minor 2 as before,
// and a plan without views is the same bytes at minor 2 and 3 (a peer of minor 2 reads what it
// always read; a minor-3 host reads a minor-2 plugin's plans).
func TestMinor3KeepsOlderBytes(t *testing.T) {
	single := samplePlan()
	b2, err2 := EncodeAt(&single, 2)
	b3, err3 := EncodeAt(&single, 3)
	if err2 != nil || err3 != nil || !bytes.Equal(b2[2:], b3[2:]) || b3[1] != 3 {
		t.Fatalf("a plan without views: minor 2 %x (%v), minor 3 %x (%v)", b2, err2, b3, err3)
	}
	views := sampleViews()
	old, err := EncodeAt(&views, 2)
	if err != nil {
		t.Fatal(err)
	}
	// minor 2 as it was: the view fields up to image tokens, nothing after the last view
	cur, _ := EncodeAt(&views, 3)
	if len(cur) != len(old)+2*len(views.Views)+1 {
		t.Errorf("views at minor 3: %d bytes, minor 2: %d; want two presence bytes a view and a separator count", len(cur), len(old))
	}
	var got Plan
	if err := Decode(old, &got); err != nil || !reflect.DeepEqual(got, views) {
		t.Fatalf("a minor-2 plan of views: %+v, %v", got, err)
	}
	empty := Plan{Source: Size{Width: 1, Height: 1}, SeparatorTokens: 3}
	if _, err := Encode(&empty); err == nil || !strings.Contains(err.Error(), "without views has no separator tokens") {
		t.Errorf("separator tokens without views encoded: %v", err)
	}
}

// TestMinor3Validate: every malformed mask, float resize or separator count is refused, with a
// message naming what is wrong.
func TestMinor3Validate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Plan)
		want string
	}{
		{"mask outside the grid", func(p *Plan) { p.Views[3].Mask.Width = 5 }, "mask {X:0 Y:0 Width:5 Height:1} is not inside the 4x4 patch grid"},
		{"mask negative", func(p *Plan) { p.Views[3].Mask.X = -1 }, "is not inside the 4x4 patch grid"},
		{"mask empty", func(p *Plan) { p.Views[3].Mask.Height = 0 }, "is not inside the 4x4 patch grid"},
		{"mask above the grid", func(p *Plan) { p.Views[3].Mask.Y = -1 }, "mask {X:0 Y:-1 Width:4 Height:1} is not inside the 4x4 patch grid"},
		{"mask narrow", func(p *Plan) { p.Views[3].Mask.Width = 0 }, "mask {X:0 Y:0 Width:0 Height:1} is not inside the 4x4 patch grid"},
		{"mask below the grid", func(p *Plan) { p.Views[3].Mask.Y = 4 }, "mask {X:0 Y:4 Width:4 Height:1} is not inside the 4x4 patch grid"},
		{"masked view's grid", func(p *Plan) { p.Views[3].LLMGrid.W = 3 }, "llm grid {T:1 H:2 W:3}, the canvas gives {T:1 H:2 W:2}"},
		{"float resize of a huge canvas", func(p *Plan) { p.Views[0].Pad.Bottom = MaxSide }, "padded canvas size 112x32835 outside [1, 32768]"},
		{"mask keeps no token", func(p *Plan) { p.Views[3].Mask = &Rect{X: 1, Y: 0, Width: 1, Height: 4} },
			"mask {X:1 Y:0 Width:1 Height:4} keeps no cell of the 2x2 llm grid"},
		{"masked tokens", func(p *Plan) { p.Views[3].ImageTokens = 4; p.ImageTokens += 2 },
			"image tokens 4, the llm grid under mask {X:0 Y:0 Width:4 Height:1} keeps 2"},
		{"float filter", func(p *Plan) { p.Views[0].FloatResize.Filter = FilterBilinear },
			"float resize bilinear/torchvision antialias=false: the float resize is bicubic/torchvision without antialias"},
		{"float flavor", func(p *Plan) { p.Views[0].FloatResize.Flavor = FlavorPIL }, "float resize bicubic/pil"},
		{"float antialias", func(p *Plan) { p.Views[0].FloatResize.Antialias = true }, "antialias=true"},
		{"float size", func(p *Plan) { p.Views[0].FloatResize.Width = 0 }, "float resize size 0x56 outside [1, 32768]"},
		{"float canvas not a multiple", func(p *Plan) { p.Views[0].FloatResize.Width = 57 }, "canvas 57x56 is not a multiple of patch size × merge = 28"},
		{"float canvas area", func(p *Plan) {
			for i := range 2 { // two views resized in float to 32256² pixels: over 2^30 together
				v := &p.Views[i]
				v.FloatResize = &Resize{Width: 32256, Height: 32256, Filter: FilterBicubic, Flavor: FlavorTorchvision}
				v.Patches = Patches{Size: 64, Temporal: 1, Merge: 8, Layout: LayoutTiles}
				v.Grid, v.LLMGrid, v.ImageTokens = Grid{T: 1, H: 504, W: 504}, Grid{T: 1, H: 63, W: 63}, 63*63
			}
		}, "views 0 to 1 already make 7938 image tokens (at most 1048576) over 2080914752 canvas pixels (at most 1073741824)"},
		{"separators negative", func(p *Plan) { p.SeparatorTokens = -1 }, "separator tokens -1 outside [0, 1048576]"},
		{"separators huge", func(p *Plan) { p.SeparatorTokens = MaxImageTokens + 1 }, "separator tokens 1048577 outside"},
		{"separators sum", func(p *Plan) { p.SeparatorTokens = 4 }, "image tokens 22, the views give 16 and the separators 4"},
		{"separators without views", func(p *Plan) { *p = samplePlan(); p.SeparatorTokens = 1 }, "separator tokens 1 in a plan without views"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := sampleMasked()
			tc.edit(&p)
			err := p.Validate(p.Source)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrMalformed saying %q", err, tc.want)
			}
		})
	}
}

// TestKeptTokens: a mask keeps the cells whose first patch (row i·merge, column j·merge) it
// covers, mask[::merge, ::merge] of the patch mask.
func TestKeptTokens(t *testing.T) {
	for _, tc := range []struct {
		mask *Rect
		want int
	}{
		{nil, 256},
		{&Rect{Width: 32, Height: 32}, 256},
		{&Rect{Width: 32, Height: 24}, 16 * 12}, // Phi-4's 320×240: 8 padded patch rows
		{&Rect{Width: 31, Height: 23}, 16 * 12}, // an odd count keeps its last, half-covered cell
		{&Rect{Width: 1, Height: 1}, 1},
		{&Rect{X: 1, Y: 1, Width: 1, Height: 1}, 0},
		{&Rect{X: 1, Y: 3, Width: 2, Height: 3}, 1 * 1},
		{&Rect{X: 1, Y: 1, Width: 31, Height: 31}, 15 * 15},
	} {
		v := View{Patches: Patches{Size: 14, Temporal: 1, Merge: 2, Layout: LayoutTiles},
			Grid: Grid{T: 1, H: 32, W: 32}, LLMGrid: Grid{T: 1, H: 16, W: 16}, Mask: tc.mask}
		if got := v.KeptTokens(); got != tc.want {
			t.Errorf("mask %+v: %d tokens, want %d", tc.mask, got, tc.want)
		}
		if tc.mask == nil && v.PatchMask() != (Rect{Width: 32, Height: 32}) {
			t.Errorf("no mask: PatchMask %+v", v.PatchMask())
		}
	}
}

// minor3Seed is the committed fuzz seed holding sampleMasked, so that FuzzDecode starts from
// the minor-3 fields too.
const minor3Seed = "testdata/fuzz/FuzzDecode/minor3_masked_views"

// TestMinor3FuzzSeed: the committed seed is the current encoding of sampleMasked (a plan and a
// frame request; regenerate with IRIS_WRITE_SEEDS=1).
func TestMinor3FuzzSeed(t *testing.T) {
	p := sampleMasked()
	plan, _ := Encode(&p)
	req, _ := Encode(&FrameRequest{Question: "q", Plan: p})
	resp, _ := EncodeResult(p)
	for i, b := range [][]byte{plan, req, resp} {
		path := fmt.Sprintf("%s_%d", minor3Seed, i)
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if os.Getenv("IRIS_WRITE_SEEDS") == "1" {
			if err := os.WriteFile(filepath.FromSlash(path), []byte(want), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(filepath.FromSlash(path))
		if err != nil || string(got) != want {
			t.Errorf("%s is not the current encoding of sampleMasked (IRIS_WRITE_SEEDS=1 rewrites it): %v", path, err)
		}
	}
}
