package vlm_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
	"github.com/iris-vlm/iris/sdk-wasm/vlm"
)

// fake is a plugin whose Plan behaves as its "mode" param says.
type fake struct{ badDescription bool }

func (f fake) Describe() vlm.Description {
	d := vlm.Description{Family: "fake", Tasks: []string{vlm.TaskVisionLanguage},
		Params: []vlm.ParamSpec{{Name: "mode", Type: abi.ParamString, Default: "ok"}, {Name: "n", Type: abi.ParamInt, Default: 7}}}
	if f.badDescription {
		d.Family = "Not A Family"
	}
	return d
}

func (fake) Plan(img vlm.ImageHeader, p vlm.Params) (vlm.Plan, error) {
	switch p.String("mode") {
	case "refuse":
		return vlm.Plan{}, vlm.Refuse(abi.CodeImageTooSmall, "%dx%d", img.Width, img.Height)
	case "error":
		return vlm.Plan{}, errors.New("disk on fire")
	case "panic":
		panic("boom")
	case "undeclared":
		return vlm.Plan{ImageTokens: p.Int("nope")}, nil
	}
	return vlm.Plan{ImageTokens: p.Int("n")}, nil
}

func (fake) Frame(req vlm.FrameRequest, p vlm.Params) (vlm.Frame, error) {
	return vlm.Frame{Before: req.Question, Span: vlm.ImageSpan{Pad: "<p>", Count: req.Plan.ImageTokens}}, nil
}

func plan(t *testing.T, s *vlm.Server, params map[string]any) (abi.Plan, error) {
	t.Helper()
	in, err := abi.Encode(&abi.PlanRequest{Image: abi.ImageHeader{Width: 3, Height: 4}, Params: params})
	if err != nil {
		t.Fatal(err)
	}
	return abi.DecodeResponse[abi.Plan](s.Handle(abi.ExportPlan, in))
}

func TestServer(t *testing.T) {
	s := vlm.NewServer(fake{})
	d, err := abi.DecodeResponse[abi.Description](s.Handle(abi.ExportDescribe, nil))
	if err != nil || d.ABI != 1 || d.Minor != abi.Minor || d.Family != "fake" { // says nothing: ABI 1
		t.Fatalf("describe: %+v, %v", d, err)
	}
	if p, err := plan(t, s, nil); err != nil || p.ImageTokens != 7 {
		t.Errorf("default param: %+v, %v", p, err)
	}
	if p, err := plan(t, s, map[string]any{"n": int64(9)}); err != nil || p.ImageTokens != 9 {
		t.Errorf("given param: %+v, %v", p, err)
	}
	for _, tc := range []struct {
		params  map[string]any
		kind    abi.ErrorKind
		code    string
		message string
	}{
		{map[string]any{"mode": "refuse"}, abi.Refusal, abi.CodeImageTooSmall, "3x4"},
		{map[string]any{"mode": "error"}, abi.Failure, abi.CodePluginError, "disk on fire"},
		{map[string]any{"mode": "panic"}, abi.Failure, abi.CodePluginPanic, "boom"},
		{map[string]any{"mode": "undeclared"}, abi.Failure, abi.CodePluginPanic, `param "nope" is not declared`},
		{map[string]any{"typo": 1}, abi.Failure, abi.CodeInvalidParams, `unknown plugin param "typo"`},
		{map[string]any{"n": "seven"}, abi.Failure, abi.CodeInvalidParams, "want int"},
	} {
		_, err := plan(t, s, tc.params)
		var e *abi.Error
		if !errors.As(err, &e) || e.Kind != tc.kind || e.Code != tc.code || !strings.Contains(e.Message, tc.message) {
			t.Errorf("%v: got %v, want %s %s containing %q", tc.params, err, tc.kind, tc.code, tc.message)
		}
	}
	in, _ := abi.Encode(&abi.FrameRequest{Question: "q?", Plan: abi.Plan{ImageTokens: 2}})
	if f, err := abi.DecodeResponse[abi.Frame](s.Handle(abi.ExportFrame, in)); err != nil || f.Before != "q?" || f.Span.Count != 2 {
		t.Errorf("frame: %+v, %v", f, err)
	}
}

func TestServerRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name   string
		s      *vlm.Server
		export string
		in     []byte
		code   string
	}{
		{"garbage request", vlm.NewServer(fake{}), abi.ExportPlan, []byte("junk"), abi.CodeBadRequest},
		{"unknown export", vlm.NewServer(fake{}), "iris_paint", nil, abi.CodeBadRequest},
		{"no plugin", vlm.NewServer(nil), abi.ExportDescribe, nil, abi.CodePluginError},
		{"bad description", vlm.NewServer(fake{badDescription: true}), abi.ExportDescribe, nil, abi.CodePluginError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := abi.DecodeResponse[abi.Description](tc.s.Handle(tc.export, tc.in))
			var e *abi.Error
			if !errors.As(err, &e) || e.Code != tc.code || e.Kind != abi.Failure {
				t.Fatalf("got %v, want failure %s", err, tc.code)
			}
		})
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("second Register did not panic")
		}
	}()
	vlm.Register(fake{})
	vlm.Register(fake{})
}

// v1Views is a plugin that returns views without saying ABI 2.
type v1Views struct{ tiled }

func (v1Views) Describe() vlm.Description {
	return vlm.Description{Family: "v1views", Tasks: []string{vlm.TaskVisionLanguage}}
}

// TestViewsNeedABI2: the SDK refuses to send views from a plugin that speaks ABI 1, with a
// message that says how to fix it.
func TestViewsNeedABI2(t *testing.T) {
	s := vlm.NewServer(v1Views{tiled{cols: 2, rows: 1}})
	_, err := plan(t, s, nil)
	var e *abi.Error
	if !errors.As(err, &e) || e.Code != abi.CodePluginError || !strings.Contains(e.Message, "set Description.ABI to 2") {
		t.Fatalf("views from an ABI-1 plugin: %v", err)
	}
	d, _ := abi.DecodeResponse[abi.Description](vlm.NewServer(tiled{1, 1}).Handle(abi.ExportDescribe, nil))
	if d.ABI != 2 {
		t.Errorf("a plugin that says ABI 2 describes ABI %d", d.ABI)
	}
}
