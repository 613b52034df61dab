package main

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
	"github.com/iris-vlm/iris/sdk-wasm/imageproc"
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

// TestBuckets pins init_buckets' results at the profile's resolution (448² area, stride 16),
// as BucketResize prints them, and their token counts after DivisibleCrop(28).
func TestBuckets(t *testing.T) {
	want := []struct {
		h, w, tokens int
		drawn        uint32
	}{
		{288, 672, 240, 0x40155555}, {336, 592, 252, 0x3fe18618}, {384, 512, 234, 0x3faaaaab},
		{448, 448, 256, 0x3f800000}, {512, 384, 234, 0x3f400000}, {592, 336, 252, 0x3f114c1c},
	}
	got := Buckets(448)
	if len(got) != len(want) {
		t.Fatalf("%d buckets, want %d", len(got), len(want))
	}
	for i, w := range want {
		b := got[i]
		if b.H != w.h || b.W != w.w || b.Ratio != float64(w.w)/float64(w.h) || math.Float32bits(float32(b.Drawn)) != w.drawn {
			t.Errorf("bucket %d: %+v, want %dx%d drawn %#x", i, b, w.h, w.w, w.drawn)
		}
		g := Layout(b.W, b.H, got, Divisible)
		if n := (g.Region.Width / 28) * (g.Region.Height / 28); n != w.tokens || !g.Drawn || g.Crop != (abi.Rect{Width: b.W, Height: b.H}) {
			t.Errorf("bucket %d: %+v (%d tokens), want the whole image drawn and %d tokens", i, g, n, w.tokens)
		}
	}
}

// TestDrawnRatioFallback: for a ratio the table lacks, drawn's float32 arithmetic in Go gives
// what torch gave for the six the table holds.
func TestDrawnRatioFallback(t *testing.T) {
	for r, bits := range drawnRatios {
		f := math.Float64frombits(r)
		if got := math.Float32bits(float32(math.Exp(float64(float32(math.Log(f)))))); got != bits {
			t.Errorf("ratio %v: Go's float32(exp(float32(log r))) is %#x, torch's %#x", f, got, bits)
		}
	}
}

func params(t *testing.T, table map[string]any) vlm.Params {
	t.Helper()
	p, err := vlm.NewParams(family{}.Describe().Params, table)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRefusals: an empty image is too small; an unknown resolution is the bundle's error.
func TestRefusals(t *testing.T) {
	for _, sz := range [][2]int{{0, 5}, {5, 0}, {0, 0}} {
		_, err := family{}.Plan(vlm.ImageHeader{Width: sz[0], Height: sz[1]}, params(t, nil))
		var e *abi.Error
		if !errors.As(err, &e) || e.Kind != abi.Refusal || e.Code != abi.CodeImageTooSmall {
			t.Errorf("%v: %v, want an image_too_small refusal", sz, err)
		}
	}
	_, err := family{}.Plan(vlm.ImageHeader{Width: 64, Height: 64}, params(t, map[string]any{ParamResolution: "image_1024res"}))
	var e *abi.Error
	if !errors.As(err, &e) || e.Kind != abi.Failure || e.Code != abi.CodeInvalidParams || !strings.Contains(e.Message, "image_1024res") {
		t.Errorf("unknown resolution: %v", err)
	}
}

// TestPlansValidate: the plans of a spread of sizes pass the host's validation.
func TestPlansValidate(t *testing.T) {
	for res := range Resolutions {
		for _, sz := range [][2]int{{1, 1}, {1, 32768}, {32768, 1}, {320, 240}, {100, 101}, {32768, 32768}, {7, 2000}} {
			p, err := family{}.Plan(vlm.ImageHeader{Width: sz[0], Height: sz[1]}, params(t, map[string]any{ParamResolution: res}))
			if err != nil {
				t.Fatalf("%s %v: %v", res, sz, err)
			}
			if err := p.Validate(p.Source); err != nil {
				t.Errorf("%s %v: %v", res, sz, err)
			}
		}
	}
}

// TestGoldensCatchHazards: each of the reference's arithmetic choices, flipped alone, changes
// the plans of some reference cases (so a plugin that got it wrong fails TestCases), and the
// framing's hazards change its frames.
func TestGoldensCatchHazards(t *testing.T) {
	s, err := plugintest.LoadSuite("testdata/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	halfUp := func(x float64) int { return int(math.Floor(x + 0.5)) }
	for _, tc := range []struct {
		name string
		r    rules
	}{
		{"round half up instead of Python's round", rules{round: halfUp}},
		{"the bucket's float64 ratio drawn instead of torch's float32", rules{round: imageproc.Round, float64Draw: true}},
		{"the last nearest bucket instead of argmin's first", rules{round: imageproc.Round, lastOnTie: true}},
		{"DivisibleCrop at the corner instead of centred", rules{round: imageproc.Round, cornerRegion: true}},
		{"a drawn crop a pixel short offset by 1", rules{round: imageproc.Round, drawnOffset: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			caught := 0
			for _, c := range s.Cases {
				if c.Want == nil || c.Want.Plan == nil {
					continue
				}
				res, _ := c.Params[ParamResolution].(string)
				if res == "" {
					res = DefaultResolution
				}
				img := c.Image
				p := planOf(img, tc.r.layout(img.Width, img.Height, buckets[Resolutions[res]], Divisible))
				if !reflect.DeepEqual(p, *c.Want.Plan) {
					caught++
				}
			}
			if caught == 0 {
				t.Error("no reference case tells this mutation from the reference")
			}
			t.Logf("%d cases differ", caught)
		})
	}

	// framing: <|image_pad|> instead of <|video_pad|>, or the Qwen default system turn instead
	// of the empty one, changes the frames the reference rendered
	var framed *plugintest.Case
	for i := range s.Cases {
		if len(s.Cases[i].Frames) > 0 && len(s.Cases[i].Params) == 0 {
			framed = &s.Cases[i]
			break
		}
	}
	if framed == nil {
		t.Fatal("no framed case with the default params")
	}
	fc := framed.Frames[0]
	f, err := family{}.Frame(vlm.FrameRequest{Question: fc.Question, Plan: *framed.Want.Plan}, params(t, nil))
	if err != nil || !reflect.DeepEqual(f, fc.Want) {
		t.Fatalf("the reference frame: %v\n got %+v\nwant %+v", err, f, fc.Want)
	}
	imagePad := f
	imagePad.Span.Pad = "<|image_pad|>"
	qwenSystem, err := family{}.Frame(vlm.FrameRequest{Question: fc.Question, Plan: *framed.Want.Plan},
		params(t, map[string]any{ParamSystemPrompt: "You are a helpful assistant."}))
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]vlm.Frame{"image_pad": imagePad, "Qwen's default system turn": qwenSystem} {
		if reflect.DeepEqual(m, fc.Want) {
			t.Errorf("%s: the reference frame does not tell it apart", name)
		}
	}
}
