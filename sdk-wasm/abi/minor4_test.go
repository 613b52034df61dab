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

// sampleTwice is a wire-minor-4 plan in LocateAnything's shape: one view of a 4000×3000 image
// shrunk to 1847×1385 (its token limit), then stretched to 1848×1400 (multiples of 28), in raster
// patches of 14 (132×100), 2×2 of them to a token.
func sampleTwice() Plan {
	return Plan{Source: Size{Width: 4000, Height: 3000}, ImageTokens: 66 * 50, Views: []View{{
		PreResize: &Resize{Width: 1847, Height: 1385, Filter: FilterBicubic, Flavor: FlavorPIL, Antialias: true},
		Resize:    &Resize{Width: 1848, Height: 1400, Filter: FilterBicubic, Flavor: FlavorPIL, Antialias: true},
		Normalize: Normalize{Rescale: 1.0 / 255, Mean: [3]float64{0.5, 0.5, 0.5}, Std: [3]float64{0.5, 0.5, 0.5},
			Flavor: FlavorPIL},
		Patches:     Patches{Size: 14, Temporal: 1, Merge: 2, Layout: LayoutTiles},
		Grid:        Grid{T: 1, H: 100, W: 132},
		LLMGrid:     Grid{T: 1, H: 50, W: 66},
		ImageTokens: 66 * 50,
	}}}
}

// TestMinor4RoundTrip: a pre-resize crosses the wire at minor 4, in a plan and inside a frame
// request, and is refused for a minor-3 peer (never dropped).
func TestMinor4RoundTrip(t *testing.T) {
	p := sampleTwice()
	if err := p.Validate(p.Source); err != nil {
		t.Fatalf("the sample plan: %v", err)
	}
	for _, m := range []any{&p, &FrameRequest{Question: "q", Plan: p}} {
		b, err := Encode(m)
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		got := newOf(m)
		if err := Decode(b, got); err != nil || !reflect.DeepEqual(got, m) {
			t.Fatalf("%T round trip: %v\n got %+v\nwant %+v", m, err, got, m)
		}
		for _, minor := range []int{2, 3} {
			if _, err := EncodeAt(m, minor); err == nil || !strings.Contains(err.Error(), "needs wire minor 4") {
				t.Errorf("%T with a pre-resize encoded at minor %d: %v", m, minor, err)
			}
		}
	}
}

// TestMinor4KeepsOlderBytes: a plan without views is the same bytes at minors 3 and 4, and a
// plan of views grows by one presence byte a view; a minor-3 plan of views decodes unchanged.
func TestMinor4KeepsOlderBytes(t *testing.T) {
	single := samplePlan()
	b3, err3 := EncodeAt(&single, 3)
	b4, err4 := Encode(&single)
	if err3 != nil || err4 != nil || !bytes.Equal(b3[2:], b4[2:]) || b4[1] != 4 {
		t.Fatalf("a plan without views: minor 3 %x (%v), minor 4 %x (%v)", b3, err3, b4, err4)
	}
	views := sampleMasked()
	old, err := EncodeAt(&views, 3)
	if err != nil {
		t.Fatal(err)
	}
	cur, _ := Encode(&views)
	if len(cur) != len(old)+len(views.Views) {
		t.Errorf("views at minor 4: %d bytes, minor 3: %d; want one presence byte a view", len(cur), len(old))
	}
	var got Plan
	if err := Decode(old, &got); err != nil || !reflect.DeepEqual(got, views) {
		t.Fatalf("a minor-3 plan of views: %+v, %v", got, err)
	}
}

// TestMinor4Validate: every malformed pre-resize is refused, with a message naming what is wrong.
func TestMinor4Validate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Plan)
		want string
	}{
		{"pre-resize alone", func(p *Plan) { p.Views[0].Resize = nil }, "a pre-resize without a resize"},
		{"pre-resize size", func(p *Plan) { p.Views[0].PreResize.Height = 0 }, "pre-resize: " + ErrMalformed.Error() + ": resize size 1847x0 outside [1, 32768]"},
		{"pre-resize filter", func(p *Plan) { p.Views[0].PreResize.Filter = "lanczos" }, `pre-resize: ` + ErrMalformed.Error() + `: resize filter "lanczos"`},
		{"pre-resize flavor", func(p *Plan) { p.Views[0].PreResize.Flavor = "cv2" }, `resize flavor "cv2"`},
		{"pre-resize area", func(p *Plan) {
			p.Views[0].PreResize.Width, p.Views[0].PreResize.Height = MaxSide, MaxSide
		}, "over 1076329024 canvas pixels (at most 1073741824)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := sampleTwice()
			tc.edit(&p)
			err := p.Validate(p.Source)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrMalformed saying %q", err, tc.want)
			}
		})
	}
}

// minor4Seed is the committed fuzz seed holding sampleTwice, so that FuzzDecode starts from the
// minor-4 field too.
const minor4Seed = "testdata/fuzz/FuzzDecode/minor4_pre_resize"

// TestMinor4FuzzSeed: the committed seed is the current encoding of sampleTwice (a plan, a frame
// request and a response; regenerate with IRIS_WRITE_SEEDS=1).
func TestMinor4FuzzSeed(t *testing.T) {
	p := sampleTwice()
	plan, _ := Encode(&p)
	req, _ := Encode(&FrameRequest{Question: "q", Plan: p})
	resp, _ := EncodeResult(p)
	for i, b := range [][]byte{plan, req, resp} {
		path := fmt.Sprintf("%s_%d", minor4Seed, i)
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if os.Getenv("IRIS_WRITE_SEEDS") == "1" {
			if err := os.WriteFile(filepath.FromSlash(path), []byte(want), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(filepath.FromSlash(path))
		if err != nil || string(got) != want {
			t.Errorf("%s is not the current encoding of sampleTwice (IRIS_WRITE_SEEDS=1 rewrites it): %v", path, err)
		}
	}
}
