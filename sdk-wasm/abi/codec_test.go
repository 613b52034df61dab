package abi

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func samplePlan() Plan {
	return Plan{
		Source: Size{Width: 640, Height: 480},
		Crop:   &Rect{X: 1, Y: 2, Width: 600, Height: 400},
		Resize: &Resize{Width: 644, Height: 476, Filter: FilterBicubic, Flavor: FlavorTorchvision, Antialias: true},
		Pad:    &Pad{Top: 0, Right: 28, Bottom: 28, Left: 0, Color: RGB{1, 2, 3}},
		Normalize: Normalize{Rescale: 1.0 / 255, Mean: [3]float64{0.48145466, 0.4578275, 0.40821073},
			Std: [3]float64{0.26862954, 0.26130258, 0.27577711}, Flavor: FlavorTorchvision},
		Patches:     Patches{Size: 14, Temporal: 2, Merge: 2, Layout: LayoutMergeBlocks},
		Grid:        Grid{T: 1, H: 36, W: 48},
		LLMGrid:     Grid{T: 1, H: 18, W: 24},
		ImageTokens: 432,
	}
}

func messages() []any {
	p := samplePlan()
	return []any{
		&PlanRequest{Image: ImageHeader{Width: 640, Height: 480, Format: "png", HasAlpha: true},
			Params: map[string]any{"min_pixels": int64(3136), "ratio": 1.5, "name": "x", "on": true}},
		&PlanRequest{Image: ImageHeader{Width: 1, Height: 1}},
		&p,
		&Plan{Source: Size{Width: 1, Height: 1}},
		&FrameRequest{Question: "What is in this image? 東京", TextFirst: true, Plan: p,
			Params: map[string]any{"system_prompt": "Be brief."}},
		&Frame{Before: "<|im_start|>user\n", Span: ImageSpan{Open: []string{"<|vision_start|>"}, Pad: "<|image_pad|>",
			Count: 432, Close: []string{"<|vision_end|>"}}, After: "q<|im_end|>\n", StopTokenIDs: []int32{151645, 151643},
			Hints: DecodeHints{SkipSpecialTokens: true}},
		&FrameRequest{Question: "q", Plan: p, System: new("Answer in French.")},
		&FrameRequest{Question: "q", Plan: p, System: new("")},
		&Description{ABI: 1, Minor: Minor, Family: "qwen2_5_vl", Tasks: []string{"vision-language-generation"},
			Params: []ParamSpec{{Name: "min_pixels", Type: ParamInt, Default: int64(3136), Doc: "d"},
				{Name: "ratio", Type: ParamFloat, Default: 0.5}},
			Limits: Limits{MaxAspectRatio: 200, MinImageTokens: 4, MaxImageTokens: 16384}},
	}
}

func newOf(v any) any { return reflect.New(reflect.TypeOf(v).Elem()).Interface() }

func TestRoundTrip(t *testing.T) {
	for _, m := range messages() {
		b, err := Encode(m)
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		got := newOf(m)
		if err := Decode(b, got); err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%T round trip:\n got %+v\nwant %+v", m, got, m)
		}
	}
}

// TestOlderMinor: a request written for a minor-0 plugin is the minor-0 bytes (no System field),
// decodes on both sides, and a System it cannot carry is an error, never dropped.
func TestOlderMinor(t *testing.T) {
	p := samplePlan()
	req := &FrameRequest{Question: "q", TextFirst: true, Plan: p, Params: map[string]any{"a": int64(1)}}
	old, err := EncodeAt(req, 0)
	if err != nil {
		t.Fatal(err)
	}
	m1, _ := EncodeAt(req, 1)
	cur, _ := Encode(req)
	// minor 1 adds the system presence byte, minor 2 the plan's view count
	if old[1] != 0 || m1[1] != 1 || cur[1] != Minor || len(m1) != len(old)+1 || len(cur) != len(m1)+1 {
		t.Fatalf("minor 0: %d bytes (minor %d); minor 1: %d bytes; current: %d bytes (minor %d)", len(old), old[1], len(m1), len(cur), cur[1])
	}
	var got FrameRequest
	if err := Decode(old, &got); err != nil || !reflect.DeepEqual(&got, req) {
		t.Fatalf("minor-0 request: %+v, %v", got, err)
	}
	req.System = new("s")
	if _, err := EncodeAt(req, 0); err == nil || !strings.Contains(err.Error(), "minor 1") {
		t.Fatalf("a system message encoded at minor 0: %v", err)
	}
	if _, err := EncodeAt(req, Minor+1); err == nil {
		t.Fatal("encoded at a minor from the future")
	}
	d, _ := EncodeAt(&Description{ABI: 1, Family: "f", Tasks: []string{"t"}}, 0)
	var desc Description
	if err := Decode(d, &desc); err != nil || desc.Minor != 0 {
		t.Fatalf("a minor-0 description: %+v, %v", desc, err)
	}
}

func TestDecodeIsStrict(t *testing.T) {
	good, _ := Encode(&PlanRequest{Image: ImageHeader{Width: 2, Height: 3}, Params: map[string]any{"a": int64(1)}})
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"truncated", good[:len(good)-1]},
		{"trailing", append(append([]byte{}, good...), 0)},
		{"wrong kind", append([]byte{kindPlan}, good[1:]...)},
		{"newer minor", append([]byte{good[0], Minor + 1}, good[2:]...)},
		{"bad bool", func() []byte { b, _ := Encode(&PlanRequest{}); b[len(b)-2] = 7; return b }()},
		{"huge count", []byte{kindPlanRequest, Minor, 2, 2, 0xff, 0xff, 0xff, 0xff, 0x0f}},
		{"bad utf8", []byte{kindPlanRequest, Minor, 2, 2, 1, 0xff, 0, 0}},
		{"bad param type", []byte{kindPlanRequest, Minor, 2, 2, 0, 0, 1, 1, 'a', 'x'}},
		{"unsorted params", []byte{kindPlanRequest, Minor, 2, 2, 0, 0, 2, 1, 'b', 'b', 1, 1, 'a', 'b', 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r PlanRequest
			if err := Decode(tc.b, &r); !errors.Is(err, ErrMalformed) {
				t.Fatalf("got %v, want ErrMalformed", err)
			}
		})
	}
}

func TestEncodeRejectsUnsupportedParams(t *testing.T) {
	_, err := Encode(&PlanRequest{Params: map[string]any{"sizes": []int{1, 2}}})
	if err == nil || !strings.Contains(err.Error(), "param sizes") {
		t.Fatalf("got %v", err)
	}
	if _, err := Encode(PlanRequest{}); err == nil {
		t.Fatal("a value, not a pointer, was encoded")
	}
}

func TestResponses(t *testing.T) {
	b, err := EncodeResult(samplePlan())
	if err != nil {
		t.Fatal(err)
	}
	if p, err := DecodeResponse[Plan](b); err != nil || !reflect.DeepEqual(p, samplePlan()) {
		t.Fatalf("result: %+v, %v", p, err)
	}
	if _, err := DecodeResponse[Frame](b); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a plan decoded as a frame: %v", err)
	}
	refusal := Refusef(CodeAspectRatioTooExtreme, "ratio %d", 300)
	_, err = DecodeResponse[Plan](EncodeError(refusal))
	var e *Error
	if !errors.As(err, &e) || *e != *refusal || !errors.Is(err, &Error{Kind: Refusal, Code: CodeAspectRatioTooExtreme}) {
		t.Fatalf("error: %v", err)
	}
	long := EncodeError(Failf(CodePluginError, "%s", strings.Repeat("x", 10000)))
	if _, err := DecodeResponse[Plan](long); !errors.As(err, &e) || len(e.Message) != MaxErrorMessage {
		t.Fatalf("long error: %v", err)
	}
	for _, bad := range [][]byte{nil, {'X'}, EncodeError(&Error{Kind: "maybe", Code: "x"}), EncodeError(&Error{Kind: Refusal, Code: "Bad Code"})} {
		if _, err := DecodeResponse[Plan](bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: got %v, want ErrMalformed", bad, err)
		}
	}
}

func TestMarkerVersion(t *testing.T) {
	for name, want := range map[string]int{"iris_abi_v1": 1, "iris_abi_v2": 2, "iris_abi_v12": 12, "iris_abi_v0": 0,
		"iris_abi_v": 0, "iris_abi_v01": 0, "iris_abi_vx": 0, "iris_alloc": 0, "iris_abi_v-1": 0} {
		got, ok := MarkerVersion(name)
		if got != want || ok != (want != 0) {
			t.Errorf("MarkerVersion(%q) = %d, %t; want %d", name, got, ok, want)
		}
	}
	if v, ok := MarkerVersion(ExportMarker); !ok || v != Version {
		t.Errorf("ExportMarker %q does not carry Version %d", ExportMarker, Version)
	}
	if p, n := Unpack(Pack(0xdeadbeef, 42)); p != 0xdeadbeef || n != 42 {
		t.Errorf("Pack/Unpack: %x %d", p, n)
	}
}

// sampleViews is an ABI-2 plan in InternVL's shape, shrunk: a 2×1 grid of tiles cut from one
// resized canvas, then a thumbnail of the whole image.
func sampleViews() Plan {
	norm := Normalize{Rescale: 1.0 / 255, Mean: [3]float64{0.485, 0.456, 0.406}, Std: [3]float64{0.229, 0.224, 0.225},
		Flavor: FlavorTorchvision}
	tile := func(resize *Resize, region *Rect) View {
		return View{Resize: resize, Region: region, Normalize: norm,
			Patches: Patches{Size: 14, Temporal: 1, Merge: 2, Layout: LayoutTiles},
			Grid:    Grid{T: 1, H: 4, W: 4}, LLMGrid: Grid{T: 1, H: 2, W: 2}, ImageTokens: 4}
	}
	canvas := &Resize{Width: 112, Height: 56, Filter: FilterBicubic, Flavor: FlavorTorchvision, Antialias: true}
	thumb := &Resize{Width: 56, Height: 56, Filter: FilterBicubic, Flavor: FlavorTorchvision, Antialias: true}
	return Plan{Source: Size{Width: 64, Height: 30}, ImageTokens: 12, Views: []View{
		tile(canvas, &Rect{X: 0, Y: 0, Width: 56, Height: 56}),
		tile(canvas, &Rect{X: 56, Y: 0, Width: 56, Height: 56}),
		tile(thumb, nil),
	}}
}

func sampleSpans() Frame {
	return Frame{Before: "<|im_start|>user\n", After: "\nq<|im_end|>\n", StopTokenIDs: []int32{151645},
		Spans: []ImageSpan{
			{Open: []string{"<img>"}, Pad: "<IMG_CONTEXT>", Count: 8, Close: []string{"</img>"}},
			{Open: []string{"<img>", "<thumb>"}, Pad: "<IMG_CONTEXT>", Count: 4},
		}}
}

// TestViewsRoundTrip: ABI-2 views and spans cross the wire at minor 2 and refuse to be written
// for an older peer (never silently dropped).
func TestViewsRoundTrip(t *testing.T) {
	p, f := sampleViews(), sampleSpans()
	req := &FrameRequest{Question: "q", Plan: p}
	for _, m := range []any{&p, &f, req} {
		b, err := Encode(m)
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		got := newOf(m)
		if err := Decode(b, got); err != nil || !reflect.DeepEqual(got, m) {
			t.Fatalf("%T round trip: %v\n got %+v\nwant %+v", m, err, got, m)
		}
		if _, err := EncodeAt(m, 1); err == nil || !strings.Contains(err.Error(), "minor 2") {
			t.Errorf("%T with views or spans encoded at minor 1: %v", m, err)
		}
	}
}

// TestViewCountCap: a count of views or spans over the cap is refused before it is allocated.
func TestViewCountCap(t *testing.T) {
	p := sampleViews()
	for len(p.Views) <= MaxViews {
		p.Views = append(p.Views, p.Views[0])
	}
	b, err := Encode(&p)
	if err != nil {
		t.Fatal(err)
	}
	if err := Decode(b, &Plan{}); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "views") {
		t.Errorf("%d views decoded: %v", len(p.Views), err)
	}
	f := sampleSpans()
	for len(f.Spans) <= MaxSpans {
		f.Spans = append(f.Spans, f.Spans[0])
	}
	b, _ = Encode(&f)
	if err := Decode(b, &Frame{}); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "spans") {
		t.Errorf("%d spans decoded: %v", len(f.Spans), err)
	}
}

// TestCodecRefusals: each of the codec's own checks (sizes, versions, an error response's
// fields) refuses with its own message.
func TestCodecRefusals(t *testing.T) {
	errorResponse := func(kind, code, msg string) []byte {
		w := &writer{b: []byte{kindError, Minor}}
		w.str(kind)
		w.str(code)
		w.str(msg)
		return w.b
	}
	for _, tc := range []struct {
		name      string
		run       func() error
		want      string
		malformed bool // the error wraps ErrMalformed (what was read is at fault, not what was written)
	}{
		{"encode at a negative minor", func() error { _, err := EncodeAt(&PlanRequest{}, -1); return err },
			fmt.Sprintf("no wire minor -1 (this side speaks up to %d)", Minor), false},
		{"encode at a future minor", func() error { _, err := EncodeAt(&PlanRequest{}, Minor+1); return err },
			fmt.Sprintf("no wire minor %d", Minor+1), false},
		{"encode over the size limit", func() error {
			_, err := Encode(&FrameRequest{Question: strings.Repeat("x", MaxMessageBytes), Plan: samplePlan()})
			return err
		}, "bytes is over the 1048576-byte message limit", false},
		{"decode over the size limit", func() error { return Decode(make([]byte, MaxMessageBytes+1), &Plan{}) },
			"1048577 bytes is over the 1048576-byte message limit", true},
		{"empty response", func() error { _, err := DecodeResponse[Plan](nil); return err }, "empty response", true},
		{"unknown response kind", func() error { _, err := DecodeResponse[Plan]([]byte{'X'}); return err },
			"response kind 0x58 is neither 'O' nor 'E'", true},
		{"truncated error response", func() error {
			b := EncodeError(Refusef(CodeImageTooSmall, "small"))
			_, err := DecodeResponse[Plan](b[:len(b)-1])
			return err
		}, "decoding an error response", true},
		{"bytes after an error response", func() error {
			_, err := DecodeResponse[Plan](append(EncodeError(Refusef(CodeImageTooSmall, "small")), 0))
			return err
		}, "1 bytes after the error", true},
		{"error kind", func() error { _, err := DecodeResponse[Plan](errorResponse("maybe", "x", "")); return err },
			`error kind "maybe" is neither "refusal" nor "failure"`, true},
		{"error code", func() error { _, err := DecodeResponse[Plan](errorResponse("refusal", "Bad Code", "")); return err },
			`error code "Bad Code" is not a snake_case code`, true},
		{"error message too long", func() error {
			_, err := DecodeResponse[Plan](errorResponse("failure", "x", strings.Repeat("m", MaxErrorMessage+1)))
			return err
		}, "error message of 4097 bytes is over 4096", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, ErrMalformed) != tc.malformed {
				t.Fatalf("got %v, want an error containing %q (wrapping ErrMalformed: %t)", err, tc.want, tc.malformed)
			}
		})
	}
}
