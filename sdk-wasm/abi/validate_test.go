package abi

import (
	"errors"
	"testing"
)

func TestPlanValidate(t *testing.T) {
	good := samplePlan()
	if err := good.Validate(good.Source); err != nil {
		t.Fatalf("sample plan: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Plan)
	}{
		{"source mismatch", func(p *Plan) { p.Source.Width++ }},
		{"crop outside", func(p *Plan) { p.Crop.X = 100 }},
		{"crop negative", func(p *Plan) { p.Crop.Y = -1 }},
		{"resize zero", func(p *Plan) { p.Resize.Width = 0 }},
		{"resize huge", func(p *Plan) { p.Resize.Width = MaxSide + 1 }},
		{"filter", func(p *Plan) { p.Resize.Filter = "lanczos" }},
		{"flavor", func(p *Plan) { p.Resize.Flavor = "opencv" }},
		{"pad negative", func(p *Plan) { p.Pad.Top = -28 }},
		{"norm std zero", func(p *Plan) { p.Normalize.Std[1] = 0 }},
		{"norm rescale", func(p *Plan) { p.Normalize.Rescale = 0 }},
		{"norm flavor", func(p *Plan) { p.Normalize.Flavor = "" }},
		{"patch size", func(p *Plan) { p.Patches.Size = 0 }},
		{"layout", func(p *Plan) { p.Patches.Layout = "raster" }},
		{"canvas not a multiple", func(p *Plan) { p.Pad.Right = 27 }},
		{"grid", func(p *Plan) { p.Grid.H++ }},
		{"llm grid", func(p *Plan) { p.LLMGrid.W-- }},
		{"tokens", func(p *Plan) { p.ImageTokens++ }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := samplePlan()
			tc.edit(&p)
			if err := p.Validate(good.Source); !errors.Is(err, ErrMalformed) {
				t.Fatalf("got %v, want ErrMalformed", err)
			}
		})
	}
}

func TestFrameValidate(t *testing.T) {
	p := samplePlan()
	good := func() Frame {
		return Frame{Before: "a", Span: ImageSpan{Open: []string{"<s>"}, Pad: "<p>", Count: p.ImageTokens}, After: "b",
			StopTokenIDs: []int32{1}}
	}
	f := good()
	if err := f.Validate(&p); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Frame)
	}{
		{"count", func(f *Frame) { f.Span.Count-- }},
		{"no pad", func(f *Frame) { f.Span.Pad = "" }},
		{"long token", func(f *Frame) { f.Span.Close = []string{string(make([]byte, MaxTokenText+1))} }},
		{"bad utf8", func(f *Frame) { f.After = "\xff" }},
		{"no stop", func(f *Frame) { f.StopTokenIDs = nil }},
		{"negative stop", func(f *Frame) { f.StopTokenIDs = []int32{-1} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := good()
			tc.edit(&f)
			if err := f.Validate(&p); !errors.Is(err, ErrMalformed) {
				t.Fatalf("got %v, want ErrMalformed", err)
			}
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
	if err := CheckParams(specs, map[string]any{"n": 3136.0}); err != nil {
		t.Errorf("an integral float for an int: %v", err)
	}
	for _, bad := range []map[string]any{{"m": 1}, {"n": 1.5}, {"n": "1"}, {"f": "x"}, {"s": 1}, {"b": 1}} {
		err := CheckParams(specs, bad)
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeInvalidParams || e.Kind != Failure {
			t.Errorf("%v: got %v, want invalid_params", bad, err)
		}
	}
}

func TestViewsValidate(t *testing.T) {
	good := sampleViews()
	if err := good.Validate(good.Source); err != nil {
		t.Fatalf("sample views: %v", err)
	}
	if r, c := good.PixelShape(); r != 48 || c != 588 {
		t.Errorf("pixel shape %dx%d, want 48x588", r, c)
	}
	for _, tc := range []struct {
		name string
		edit func(*Plan)
	}{
		{"single-view field too", func(p *Plan) { p.Grid = Grid{T: 1, H: 4, W: 4} }},
		{"single-view patches too", func(p *Plan) { p.Patches.Size = 14 }},
		{"token sum", func(p *Plan) { p.ImageTokens++ }},
		{"view tokens", func(p *Plan) { p.Views[1].ImageTokens++; p.ImageTokens++ }},
		{"too many views", func(p *Plan) {
			for len(p.Views) <= MaxViews {
				p.Views = append(p.Views, p.Views[2])
				p.ImageTokens += 4
			}
		}},
		{"region outside", func(p *Plan) { p.Views[1].Region.X = 57 }},
		{"region negative", func(p *Plan) { p.Views[0].Region.Y = -1 }},
		{"region empty", func(p *Plan) { p.Views[0].Region.Width = 0 }},
		{"crop outside", func(p *Plan) { p.Views[2].Crop = &Rect{X: 10, Y: 0, Width: 60, Height: 30} }},
		{"tiles temporal", func(p *Plan) { p.Views[0].Patches.Temporal = 2 }},
		{"layout", func(p *Plan) { p.Views[0].Patches.Layout = "raster" }},
		{"view grid", func(p *Plan) { p.Views[2].Grid.W++ }},
		{"view llm grid", func(p *Plan) { p.Views[2].LLMGrid.H-- }},
		{"view norm", func(p *Plan) { p.Views[1].Normalize.Std[0] = 0 }},
		{"view resize huge", func(p *Plan) { p.Views[2].Resize.Width = MaxSide + 1 }},
		{"view canvas not a multiple", func(p *Plan) { p.Views[2].Pad = &Pad{Right: 3} }},
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
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := sampleViews()
			tc.edit(&p)
			if err := p.Validate(good.Source); !errors.Is(err, ErrMalformed) {
				t.Fatalf("got %v, want ErrMalformed", err)
			}
		})
	}
	// merge_blocks views are allowed too, with any temporal
	p := sampleViews()
	p.Views[2].Patches = Patches{Size: 14, Temporal: 2, Merge: 2, Layout: LayoutMergeBlocks}
	if err := p.Validate(p.Source); err != nil {
		t.Errorf("a merge_blocks view: %v", err)
	}
}

func TestSpansValidate(t *testing.T) {
	p := sampleViews()
	good := sampleSpans()
	if err := good.Validate(&p); err != nil {
		t.Fatalf("sample spans: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Frame)
	}{
		{"sum", func(f *Frame) { f.Spans[0].Count-- }},
		{"empty span", func(f *Frame) { f.Spans[0].Count = 0; f.Spans[1].Count = 12 }},
		{"span too", func(f *Frame) { f.Span = ImageSpan{Pad: "<p>", Count: 12} }},
		{"no pad", func(f *Frame) { f.Spans[1].Pad = "" }},
		{"many opens", func(f *Frame) { f.Spans[1].Open = []string{"a", "b", "c", "d", "e"} }},
		{"too many spans", func(f *Frame) {
			f.Spans = nil
			for range MaxSpans + 1 {
				f.Spans = append(f.Spans, ImageSpan{Pad: "<p>", Count: 1})
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := sampleSpans()
			tc.edit(&f)
			if err := f.Validate(&p); !errors.Is(err, ErrMalformed) {
				t.Fatalf("got %v, want ErrMalformed", err)
			}
		})
	}
}
