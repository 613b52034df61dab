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
