package abi

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// Every refusal case below breaks one field of a valid message and names the check that must
// refuse it by a fragment of that check's message: a case refused by some other, later check
// fails. `go run ./scripts/mutate -terms sdk-wasm/abi/validate.go` (from the repository root)
// disables each check, and each operand of a check's ||, in turn; every one is caught here.

// wantMalformed fails unless err wraps ErrMalformed and its text contains want.
func wantMalformed(t *testing.T, err error, want string) {
	t.Helper()
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want ErrMalformed containing %q", err, want)
	}
}

// planCases break a valid single-view plan (samplePlan: 640x480, crop 600x400, resize 644x476,
// pad 28 right and bottom: a 672x504 canvas of 14-pixel patches, merged 2x2: 432 tokens).
var planCases = []struct {
	name string
	src  Size // the image's size; zero: the plan's own source
	edit func(*Plan)
	want string
}{
	{"source mismatch", Size{Width: 641, Height: 480}, nil, "plan is for a 640x480 image, the image is 641x480"},
	{"source zero width", Size{}, func(p *Plan) { p.Source.Width = 0 }, "source size 0x480"},
	{"source zero height", Size{}, func(p *Plan) { p.Source.Height = 0 }, "source size 640x0"},
	{"source too wide", Size{}, func(p *Plan) { p.Source.Width = MaxSide + 1 }, "source size 32769x480"},
	{"source too tall", Size{}, func(p *Plan) { p.Source.Height = MaxSide + 1 }, "source size 640x32769"},
	{"crop outside", Size{}, func(p *Plan) { p.Crop.X = 100 }, "crop {X:100"},
	{"crop negative", Size{}, func(p *Plan) { p.Crop.Y = -1 }, "crop {X:1 Y:-1"},
	{"crop empty", Size{}, func(p *Plan) { p.Crop.Width = 0 }, "crop {X:1 Y:2 Width:0"},
	{"resize zero", Size{}, func(p *Plan) { p.Resize.Width = 0 }, "resize size 0x476"},
	{"resize zero height", Size{}, func(p *Plan) { p.Resize.Height = 0 }, "resize size 644x0"},
	{"resize huge", Size{}, func(p *Plan) { p.Resize.Width = MaxSide + 1 }, "resize size 32769x476"},
	{"resize huge height", Size{}, func(p *Plan) { p.Resize.Height = MaxSide + 1 }, "resize size 644x32769"},
	{"filter", Size{}, func(p *Plan) { p.Resize.Filter = "lanczos" }, `resize filter "lanczos"`},
	{"flavor", Size{}, func(p *Plan) { p.Resize.Flavor = "opencv" }, `resize flavor "opencv"`},
	{"pad negative", Size{}, func(p *Plan) { p.Pad.Top = -28 }, "pad {Top:-28"},
	{"pad huge", Size{}, func(p *Plan) { p.Pad.Bottom = MaxSide + 1 }, "pad {Top:0 Right:28 Bottom:32769"},
	{"canvas too wide", Size{}, func(p *Plan) { p.Pad.Right = MaxSide }, "canvas size 33412x504"},
	{"layout", Size{}, func(p *Plan) { p.Patches.Layout = "raster" }, `patch layout "raster" is not "merge_blocks"`},
	{"norm flavor", Size{}, func(p *Plan) { p.Normalize.Flavor = "" }, `normalize flavor ""`},
	{"norm rescale", Size{}, func(p *Plan) { p.Normalize.Rescale = 0 }, "rescale factor 0 "},
	{"norm rescale NaN", Size{}, func(p *Plan) { p.Normalize.Rescale = math.NaN() }, "rescale factor NaN"},
	{"norm std zero", Size{}, func(p *Plan) { p.Normalize.Std[1] = 0 }, "need finite values and a non-zero std"},
	{"norm std infinite", Size{}, func(p *Plan) { p.Normalize.Std[2] = math.Inf(1) }, "need finite values and a non-zero std"},
	{"norm mean NaN", Size{}, func(p *Plan) { p.Normalize.Mean[0] = math.NaN() }, "need finite values and a non-zero std"},
	{"patch size", Size{}, func(p *Plan) { p.Patches.Size = 0 }, "patches {Size:0"},
	{"patch size huge", Size{}, func(p *Plan) { p.Patches.Size = 65 }, "patches {Size:65"},
	{"patch temporal zero", Size{}, func(p *Plan) { p.Patches.Temporal = 0 }, "patches {Size:14 Temporal:0"},
	{"patch temporal huge", Size{}, func(p *Plan) { p.Patches.Temporal = 9 }, "patches {Size:14 Temporal:9"},
	{"patch merge zero", Size{}, func(p *Plan) { p.Patches.Merge = 0 }, "patches {Size:14 Temporal:2 Merge:0"},
	{"patch merge huge", Size{}, func(p *Plan) { p.Patches.Merge = 9 }, "patches {Size:14 Temporal:2 Merge:9"},
	{"canvas not a multiple", Size{}, func(p *Plan) { p.Pad.Right = 27 }, "canvas 671x504 is not a multiple of patch size × merge = 28"},
	{"canvas height not a multiple", Size{}, func(p *Plan) { p.Pad.Bottom = 27 }, "canvas 672x503 is not a multiple"},
	{"grid", Size{}, func(p *Plan) { p.Grid.H++ }, "malformed message: grid {T:1 H:37 W:48}"},
	{"llm grid", Size{}, func(p *Plan) { p.LLMGrid.W-- }, "malformed message: llm grid {T:1 H:18 W:23}"},
	{"tokens", Size{}, func(p *Plan) { p.ImageTokens++ }, "image tokens 433, the llm grid gives 432"},
	{"tokens over the cap", Size{}, func(p *Plan) {
		// a 32768² canvas of 8-pixel patches, unmerged: 4096² tokens, each derived number agreeing
		*p = Plan{Source: Size{Width: MaxSide, Height: MaxSide}, Normalize: p.Normalize,
			Patches: Patches{Size: 8, Temporal: 1, Merge: 1, Layout: LayoutMergeBlocks},
			Grid:    Grid{T: 1, H: 4096, W: 4096}, LLMGrid: Grid{T: 1, H: 4096, W: 4096}, ImageTokens: 4096 * 4096}
	}, "image tokens 16777216, the llm grid gives 16777216 (at most 1048576)"},
}

func TestPlanValidate(t *testing.T) {
	good := samplePlan()
	if err := good.Validate(good.Source); err != nil {
		t.Fatalf("sample plan: %v", err)
	}
	for _, tc := range planCases {
		t.Run(tc.name, func(t *testing.T) {
			p := samplePlan()
			if tc.edit != nil {
				tc.edit(&p)
			}
			src := tc.src
			if src == (Size{}) {
				src = p.Source
			}
			wantMalformed(t, p.Validate(src), tc.want)
		})
	}
}

func goodFrame(p *Plan) Frame {
	return Frame{Before: "a", Span: ImageSpan{Open: []string{"<s>"}, Pad: "<p>", Count: p.ImageTokens}, After: "b",
		StopTokenIDs: []int32{1}}
}

var frameCases = []struct {
	name string
	edit func(*Frame)
	want string
}{
	{"count", func(f *Frame) { f.Span.Count-- }, "image span has 431 placeholders, the plan has 432 image tokens"},
	{"no pad", func(f *Frame) { f.Span.Pad = "" }, `image span pad token ""`},
	{"long pad", func(f *Frame) { f.Span.Pad = strings.Repeat("p", MaxTokenText+1) }, "image span pad token"},
	{"long token", func(f *Frame) { f.Span.Close = []string{string(make([]byte, MaxTokenText+1))} }, "image span open/close token"},
	{"bad utf8 token", func(f *Frame) { f.Span.Open = []string{"\xff"} }, `image span open/close token "\xff"`},
	{"many opens", func(f *Frame) { f.Span.Open = []string{"a", "b", "c", "d", "e"} }, "image span has 5 open and 0 close tokens"},
	{"many closes", func(f *Frame) { f.Span.Close = []string{"a", "b", "c", "d", "e"} }, "image span has 1 open and 5 close tokens"},
	{"bad utf8", func(f *Frame) { f.After = "\xff" }, "prompt text is not valid UTF-8"},
	{"bad utf8 before", func(f *Frame) { f.Before = "\xff" }, "prompt text is not valid UTF-8"},
	{"no stop", func(f *Frame) { f.StopTokenIDs = nil }, "0 stop tokens (want 1 to 16)"},
	{"too many stops", func(f *Frame) { f.StopTokenIDs = make([]int32, MaxStopTokens+1) }, "17 stop tokens (want 1 to 16)"},
	{"negative stop", func(f *Frame) { f.StopTokenIDs = []int32{1, -1} }, "stop token id -1 is negative"},
}

func TestFrameValidate(t *testing.T) {
	p := samplePlan()
	f := goodFrame(&p)
	if err := f.Validate(&p); err != nil {
		t.Fatal(err)
	}
	for _, tc := range frameCases {
		t.Run(tc.name, func(t *testing.T) {
			f := goodFrame(&p)
			tc.edit(&f)
			wantMalformed(t, f.Validate(&p), tc.want)
		})
	}
}

func TestParams(t *testing.T) {
	specs := []ParamSpec{{Name: "n", Type: ParamInt, Default: 1}, {Name: "f", Type: ParamFloat, Default: 0.5},
		{Name: "s", Type: ParamString, Default: ""}, {Name: "b", Type: ParamBool, Default: false}}
	ok := map[string]any{"n": int64(3136), "f": int64(2), "s": "x", "b": true}
	if err := CheckParams(specs, ok); err != nil {
		t.Fatal(err)
	}
	if err := CheckParams(specs, map[string]any{"n": 3136.0, "f": int32(7)}); err != nil {
		t.Errorf("an integral float for an int, an int for a float: %v", err)
	}
	for _, tc := range []struct {
		params map[string]any
		want   string
	}{
		{map[string]any{"m": 1}, `unknown plugin param "m" (this plugin reads [n f s b])`},
		{map[string]any{"n": 1.5}, "plugin param n: want int: 1.5 is not an integer"},
		{map[string]any{"n": float64(1 << 54)}, "plugin param n: want int: 1.8014398509481984e+16 is not an integer"},
		{map[string]any{"n": "1"}, "plugin param n: want int: 1 (string) is not an integer"},
		{map[string]any{"f": "x"}, "plugin param f: want float: x (string) is not a number"},
		{map[string]any{"f": math.Inf(-1)}, "plugin param f: want float: -Inf is not finite"},
		{map[string]any{"s": 1}, "plugin param s: want string: 1 (int) is not a string"},
		{map[string]any{"b": 1}, "plugin param b: want bool: 1 (int) is not a bool"},
	} {
		err := CheckParams(specs, tc.params)
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeInvalidParams || e.Kind != Failure || !strings.Contains(e.Message, tc.want) {
			t.Errorf("%v: got %v, want invalid_params: %s", tc.params, err, tc.want)
		}
	}
}

// viewCases break a valid plan of views (sampleViews: a 64x30 image as two 56x56 tiles cut from
// a 112x56 resize and a 56x56 thumbnail, 4 tokens each).
var viewCases = []struct {
	name string
	edit func(*Plan)
	want string
}{
	{"single-view field too", func(p *Plan) { p.Grid = Grid{T: 1, H: 4, W: 4} }, "sets single-view fields too"},
	{"single-view patches too", func(p *Plan) { p.Patches.Size = 14 }, "sets single-view fields too"},
	{"single-view crop too", func(p *Plan) { p.Crop = &Rect{Width: 1, Height: 1} }, "sets single-view fields too"},
	{"single-view resize too", func(p *Plan) { p.Resize = p.Views[2].Resize }, "sets single-view fields too"},
	{"single-view pad too", func(p *Plan) { p.Pad = &Pad{} }, "sets single-view fields too"},
	{"single-view normalize too", func(p *Plan) { p.Normalize = p.Views[0].Normalize }, "sets single-view fields too"},
	{"single-view llm grid too", func(p *Plan) { p.LLMGrid = Grid{T: 1, H: 2, W: 2} }, "sets single-view fields too"},
	{"token sum", func(p *Plan) { p.ImageTokens++ }, "image tokens 13, the views give 12"},
	{"view tokens", func(p *Plan) { p.Views[1].ImageTokens++; p.ImageTokens++ }, "view 1: malformed message: image tokens 5, the llm grid gives 4"},
	{"too many views", func(p *Plan) {
		for len(p.Views) <= MaxViews {
			p.Views = append(p.Views, p.Views[2])
			p.ImageTokens += 4
		}
	}, "65 views, at most 64"},
	{"region outside", func(p *Plan) { p.Views[1].Region.X = 57 }, "view 1: malformed message: region {X:57"},
	{"region below", func(p *Plan) { p.Views[1].Region.Y = 1 }, "view 1: malformed message: region {X:56 Y:1"},
	{"region negative", func(p *Plan) { p.Views[0].Region.Y = -1 }, "view 0: malformed message: region {X:0 Y:-1"},
	{"region negative x", func(p *Plan) { p.Views[0].Region.X = -1 }, "view 0: malformed message: region {X:-1"},
	{"region empty", func(p *Plan) { p.Views[0].Region.Width = 0 }, "view 0: malformed message: region {X:0 Y:0 Width:0"},
	{"region flat", func(p *Plan) { p.Views[0].Region.Height = 0 }, "view 0: malformed message: region {X:0 Y:0 Width:56 Height:0"},
	{"crop outside", func(p *Plan) { p.Views[2].Crop = &Rect{X: 10, Y: 0, Width: 60, Height: 30} }, "view 2: malformed message: crop {X:10"},
	{"view resize huge", func(p *Plan) { p.Views[2].Resize.Width = MaxSide + 1 }, "view 2: malformed message: resize size 32769x56"},
	{"view pad negative", func(p *Plan) { p.Views[2].Pad = &Pad{Left: -28, Right: 28} }, "view 2: malformed message: pad {Top:0 Right:28 Bottom:0 Left:-28"},
	{"tiles temporal", func(p *Plan) { p.Views[0].Patches.Temporal = 2 }, `view 0: malformed message: patch layout "tiles" needs temporal 1, got 2`},
	{"layout", func(p *Plan) { p.Views[0].Patches.Layout = "raster" }, `view 0: malformed message: patch layout "raster" is not "merge_blocks" or "tiles"`},
	{"view grid", func(p *Plan) { p.Views[2].Grid.W++ }, "view 2: malformed message: grid {T:1 H:4 W:5}"},
	{"view llm grid", func(p *Plan) { p.Views[2].LLMGrid.H-- }, "view 2: malformed message: llm grid {T:1 H:1 W:2}"},
	{"view norm", func(p *Plan) { p.Views[1].Normalize.Std[0] = 0 }, "view 1: malformed message: mean"},
	{"view canvas not a multiple", func(p *Plan) { p.Views[2].Pad = &Pad{Right: 3} }, "view 2: malformed message: canvas 59x56 is not a multiple"},
	{"huge area", func(p *Plan) {
		// 64 views of 8192² each: every one is within MaxSide, together 2^32 pixels
		big := View{Resize: &Resize{Width: 8192, Height: 8192, Filter: FilterBilinear, Flavor: FlavorPIL},
			Normalize: p.Views[0].Normalize, Patches: Patches{Size: 64, Temporal: 1, Merge: 8, Layout: LayoutTiles},
			Grid: Grid{T: 1, H: 128, W: 128}, LLMGrid: Grid{T: 1, H: 16, W: 16}, ImageTokens: 256}
		p.Views, p.ImageTokens = nil, 0
		for range MaxViews {
			p.Views = append(p.Views, big)
			p.ImageTokens += 256
		}
	}, "views 0 to 16 already make 4352 image tokens (at most 1048576) over 1140850688 canvas pixels"},
	{"tokens over the cap", func(p *Plan) {
		// two views of 8192² in 8-pixel patches, unmerged: 2^20 tokens each, the cap, 2^21 together
		big := View{Resize: &Resize{Width: 8192, Height: 8192, Filter: FilterBilinear, Flavor: FlavorPIL},
			Normalize: p.Views[0].Normalize, Patches: Patches{Size: 8, Temporal: 1, Merge: 1, Layout: LayoutTiles},
			Grid: Grid{T: 1, H: 1024, W: 1024}, LLMGrid: Grid{T: 1, H: 1024, W: 1024}, ImageTokens: 1 << 20}
		p.Views, p.ImageTokens = []View{big, big}, 2<<20
	}, "views 0 to 1 already make 2097152 image tokens"},
}

func TestViewsValidate(t *testing.T) {
	good := sampleViews()
	if err := good.Validate(good.Source); err != nil {
		t.Fatalf("sample views: %v", err)
	}
	if r, c := good.PixelShape(); r != 48 || c != 588 {
		t.Errorf("pixel shape %dx%d, want 48x588", r, c)
	}
	for _, tc := range viewCases {
		t.Run(tc.name, func(t *testing.T) {
			p := sampleViews()
			tc.edit(&p)
			wantMalformed(t, p.Validate(good.Source), tc.want)
		})
	}
	// merge_blocks views are allowed too, with any temporal
	p := sampleViews()
	p.Views[2].Patches = Patches{Size: 14, Temporal: 2, Merge: 2, Layout: LayoutMergeBlocks}
	if err := p.Validate(p.Source); err != nil {
		t.Errorf("a merge_blocks view: %v", err)
	}
}

// spanCases break a valid frame of spans (sampleSpans: 8 and 4 placeholders for sampleViews).
var spanCases = []struct {
	name string
	edit func(*Frame)
	want string
}{
	{"sum", func(f *Frame) { f.Spans[0].Count-- }, "image spans have 11 placeholders, the plan has 12 image tokens"},
	{"empty span", func(f *Frame) { f.Spans[0].Count = 0; f.Spans[1].Count = 12 }, "image span 0 has 0 placeholders"},
	{"huge span", func(f *Frame) { f.Spans[0].Count = MaxImageTokens + 1 }, "image span 0 has 1048577 placeholders"},
	{"span too", func(f *Frame) { f.Span = ImageSpan{Pad: "<p>", Count: 12} }, "a frame with spans sets span too"},
	{"no pad", func(f *Frame) { f.Spans[1].Pad = "" }, `image span 1: malformed message: image span pad token ""`},
	{"many opens", func(f *Frame) { f.Spans[1].Open = []string{"a", "b", "c", "d", "e"} }, "image span 1: malformed message: image span has 5 open"},
	{"too many spans", func(f *Frame) {
		f.Spans = nil
		for range MaxSpans + 1 {
			f.Spans = append(f.Spans, ImageSpan{Pad: "<p>", Count: 1})
		}
	}, "65 image spans, at most 64"},
}

func TestSpansValidate(t *testing.T) {
	p := sampleViews()
	good := sampleSpans()
	if err := good.Validate(&p); err != nil {
		t.Fatalf("sample spans: %v", err)
	}
	for _, tc := range spanCases {
		t.Run(tc.name, func(t *testing.T) {
			f := sampleSpans()
			tc.edit(&f)
			wantMalformed(t, f.Validate(&p), tc.want)
		})
	}
}

func sampleDescription() Description {
	return Description{ABI: 2, Minor: Minor, Family: "internvl", Tasks: []string{"vision-language-generation"},
		Params: []ParamSpec{{Name: "max_patches", Type: ParamInt, Default: int64(12)},
			{Name: "use_thumbnail", Type: ParamBool, Default: true}},
		Limits: Limits{MaxAspectRatio: 200, MinImageTokens: 256, MaxImageTokens: 3328}}
}

var descriptionCases = []struct {
	name string
	edit func(*Description)
	want string
}{
	{"abi zero", func(d *Description) { d.ABI = 0 }, "description says ABI v0, this package speaks v1 to v2"},
	{"abi from the future", func(d *Description) { d.ABI = Version + 1 }, "description says ABI v3"},
	{"family not snake_case", func(d *Description) { d.Family = "InternVL" }, `family "InternVL" is not a snake_case name`},
	{"family empty", func(d *Description) { d.Family = "" }, `family "" is not a snake_case name`},
	{"no task", func(d *Description) { d.Tasks = nil }, "family internvl declares no task"},
	{"param name", func(d *Description) { d.Params[1].Name = "use-thumbnail" }, `param name "use-thumbnail" is not a unique snake_case name`},
	{"param twice", func(d *Description) { d.Params[1].Name = "max_patches" }, `param name "max_patches" is not a unique snake_case name`},
	{"param default of the wrong type", func(d *Description) { d.Params[0].Default = "12" }, "default of param max_patches: 12 (string) is not an integer"},
	{"param of an unknown type", func(d *Description) { d.Params[1].Type = "list" }, `default of param use_thumbnail: unknown param type "list"`},
	{"min tokens negative", func(d *Description) { d.Limits.MinImageTokens = -1 }, "limits {MaxAspectRatio:200 MinImageTokens:-1"},
	{"max tokens under min", func(d *Description) { d.Limits.MaxImageTokens = 255 }, "MaxImageTokens:255}: want 0 <= min <= max image tokens"},
}

func TestDescriptionValidate(t *testing.T) {
	good := sampleDescription()
	if err := good.Validate(); err != nil {
		t.Fatalf("sample description: %v", err)
	}
	for _, tc := range descriptionCases {
		t.Run(tc.name, func(t *testing.T) {
			d := sampleDescription()
			tc.edit(&d)
			wantMalformed(t, d.Validate(), tc.want)
		})
	}
}
