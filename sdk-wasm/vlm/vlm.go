// Package vlm is the plugin author's API: describe a family, plan an image's preprocessing and
// frame its prompt with typed Go, and let the SDK own the wasm exports, the memory protocol and
// the wire encoding of sdk-wasm/abi.
//
// A family plugin is a main package that registers one [Plugin] in init and is built as a WASI
// reactor:
//
//	package main
//
//	import "github.com/iris-vlm/iris/sdk-wasm/vlm"
//
//	func init() { vlm.Register(myFamily{}) }
//
//	func main() {} // never called in a reactor; required by package main
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o myfamily.wasm .
//
// The same plugin runs natively in tests through sdk-wasm/plugintest.
//
// # Several views (ABI 2)
//
// A plugin whose family cuts one image into several pictures (InternVL's 448×448 tiles and
// thumbnail) says ABI: 2 in its [Description] and returns them as [Plan.Views], each with its own
// crop, resize, region of the resized image, pad, normalisation and patch layout (the plain
// raster [abi.LayoutTiles] or [abi.LayoutMergeBlocks]); Plan.ImageTokens is their sum. Its frame
// may put the image tokens in several adjacent spans ([Frame.Spans]). The host executes the views
// in order into one pixel tensor, resizing each distinct (crop, resize) once, and runs them as one
// image of grid {T: number of views, H, W}, so the views must share one grid and patch layout. A
// plugin that leaves ABI zero speaks ABI 1, and its views or spans are refused. See the example
// of [Plan.Views] below and docs/plugins.md ("Plan v2: several views").
//
// A view may also mask its padding ([View.Mask]: the rectangle of patches the vision encoder
// attends to, which then decides the view's tokens), be resized in float after normalisation
// ([View.FloatResize]), and the plan may count separator tokens the family's model inserts
// ([Plan.SeparatorTokens]); plugins/phi4_multimodal uses all three (docs/plugins.md, "Worked
// example: Phi-4-multimodal").
package vlm

import (
	"errors"
	"fmt"
	"maps"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
)

// Wire types, re-exported so that plugin authors import only vlm.
type (
	ImageHeader  = abi.ImageHeader
	Plan         = abi.Plan
	Size         = abi.Size
	Rect         = abi.Rect
	RGB          = abi.RGB
	Resize       = abi.Resize
	Pad          = abi.Pad
	Normalize    = abi.Normalize
	Patches      = abi.Patches
	Grid         = abi.Grid
	View         = abi.View
	FrameRequest = abi.FrameRequest
	Frame        = abi.Frame
	ImageSpan    = abi.ImageSpan
	DecodeHints  = abi.DecodeHints
	Description  = abi.Description
	ParamSpec    = abi.ParamSpec
	Limits       = abi.Limits
	Error        = abi.Error
)

// TaskVisionLanguage is the task a vision-language family frames prompts for.
const TaskVisionLanguage = "vision-language-generation"

// Plugin is one model family's preprocessing knowledge.
//
// # Notes
//
//   - Implementations must be deterministic functions of their inputs: the host pools instances
//     and may call any of them for any request.
//   - Plan and Frame return [Refuse] errors for inputs the reference processor refuses, and may
//     return any other error for bugs; the SDK reports those as failures. A panic is recovered
//     and reported as a failure too.
type Plugin interface {
	// Describe names the family and declares the parameters Plan reads, with their defaults. A
	// plugin that returns views or several image spans sets ABI to 2; zero means 1.
	Describe() Description
	// Plan decides how the host must preprocess an image of this header: one view (the
	// single-view fields) or, in ABI 2, several (Plan.Views).
	Plan(img ImageHeader, params Params) (Plan, error)
	// Frame builds the prompt around the image span (or, in ABI 2, the spans) for the plan the
	// host executed.
	Frame(req FrameRequest, params Params) (Frame, error)
}

// Refuse returns a refusal: the plugin declines the input for a reason the client can fix, e.g.
// Refuse(abi.CodeAspectRatioTooExtreme, "aspect ratio %.1f is over 200", r). Codes are snake_case.
func Refuse(code, format string, args ...any) error { return abi.Refusef(code, format, args...) }

// Fail returns a failure with a stable code: the plugin or its configuration is at fault.
func Fail(code, format string, args ...any) error { return abi.Failf(code, format, args...) }

// Params is the bundle's [plugin.params] table after the SDK checked it against the plugin's
// ParamSpecs and filled in the defaults: every declared name is present with its declared type.
type Params struct{ values map[string]any }

// NewParams checks a params table against specs and fills in the defaults, as the SDK does
// before each Plan call. Plugin unit tests use it to call Plan directly.
func NewParams(specs []ParamSpec, table map[string]any) (Params, error) {
	if err := abi.CheckParams(specs, table); err != nil {
		return Params{}, err
	}
	values := make(map[string]any, len(specs))
	for _, s := range specs {
		values[s.Name] = s.Default
	}
	maps.Copy(values, table)
	return Params{values: values}, nil
}

// get panics on an undeclared name: that is a bug in the plugin, never a property of a request,
// and the dispatcher turns the panic into a failure that the plugin's first test shows.
func (p Params) get(name string) any {
	v, ok := p.values[name]
	if !ok {
		panic(fmt.Sprintf("vlm: param %q is not declared in Describe().Params", name))
	}
	return v
}

// Int returns a declared int parameter.
func (p Params) Int(name string) int {
	i, err := abi.ParamInt64(p.get(name))
	if err != nil {
		panic(fmt.Sprintf("vlm: param %q: %v", name, err))
	}
	return int(i)
}

// Float returns a declared float parameter.
func (p Params) Float(name string) float64 {
	f, err := abi.ParamFloat64(p.get(name))
	if err != nil {
		panic(fmt.Sprintf("vlm: param %q: %v", name, err))
	}
	return f
}

// String returns a declared string parameter.
func (p Params) String(name string) string {
	s, ok := p.get(name).(string)
	if !ok {
		panic(fmt.Sprintf("vlm: param %q is not a string", name))
	}
	return s
}

// Bool returns a declared bool parameter.
func (p Params) Bool(name string) bool {
	b, ok := p.get(name).(bool)
	if !ok {
		panic(fmt.Sprintf("vlm: param %q is not a bool", name))
	}
	return b
}

// Server answers the ABI operations for one plugin exactly as the wasm exports do: it decodes
// the request, checks the params, calls the plugin and encodes the response (a result or a typed
// error, never a panic). The exports and sdk-wasm/plugintest's native runner use it; plugin
// authors don't need it.
//
// The plugin's description is taken once, when the Server is made: Describe must not depend on
// anything but the plugin's constants.
type Server struct {
	p    Plugin
	desc Description
	err  *abi.Error
}

// NewServer returns a Server for p.
func NewServer(p Plugin) *Server {
	s := &Server{p: p}
	if p == nil {
		s.err = abi.Failf(abi.CodePluginError, "no plugin registered: call vlm.Register in init")
		return s
	}
	s.err = s.catch(func() error {
		s.desc = p.Describe()
		if s.desc.ABI == 0 {
			s.desc.ABI = 1 // a plugin written before ABI 2 says nothing and speaks 1
		}
		s.desc.Minor = abi.Minor
		if err := s.desc.Validate(); err != nil {
			return abi.Failf(abi.CodePluginError, "invalid description: %v", err)
		}
		return nil
	})
	return s
}

// Handle runs one operation: export is abi.ExportDescribe, ExportPlan or ExportFrame.
//
// The results are not validated here: the host validates every plan and frame against the
// request (and plugintest's native runner does the same), so a plugin bug surfaces in its tests.
func (s *Server) Handle(export string, request []byte) []byte {
	if s.err != nil {
		return abi.EncodeError(s.err)
	}
	var out []byte
	err := s.catch(func() (err error) {
		switch export {
		case abi.ExportDescribe:
			out, err = abi.EncodeResult(s.desc)
		case abi.ExportPlan:
			out, err = s.plan(request)
		case abi.ExportFrame:
			out, err = s.frame(request)
		default:
			err = abi.Failf(abi.CodeBadRequest, "unknown operation %q", export)
		}
		return err
	})
	if err != nil {
		return abi.EncodeError(err)
	}
	return out
}

// catch runs fn and turns its error or panic into a typed error.
func (s *Server) catch(fn func() error) (e *abi.Error) {
	defer func() {
		if r := recover(); r != nil {
			msg := fmt.Sprint(r)
			if len(msg) > 1024 {
				msg = msg[:1024]
			}
			e = abi.Failf(abi.CodePluginPanic, "plugin panicked: %s", msg)
		}
	}()
	if err := fn(); err != nil {
		return asError(err)
	}
	return nil
}

func (s *Server) plan(request []byte) ([]byte, error) {
	var req abi.PlanRequest
	if err := abi.Decode(request, &req); err != nil {
		return nil, abi.Failf(abi.CodeBadRequest, "%v", err)
	}
	params, err := NewParams(s.desc.Params, req.Params)
	if err != nil {
		return nil, err
	}
	pl, err := s.p.Plan(req.Image, params)
	if err != nil {
		return nil, err
	}
	if len(pl.Views) > 0 && s.desc.ABI < 2 {
		return nil, abi.Failf(abi.CodePluginError, "the plan has views, which need ABI 2; set Description.ABI to 2")
	}
	return abi.EncodeResult(pl)
}

func (s *Server) frame(request []byte) ([]byte, error) {
	var req abi.FrameRequest
	if err := abi.Decode(request, &req); err != nil {
		return nil, abi.Failf(abi.CodeBadRequest, "%v", err)
	}
	params, err := NewParams(s.desc.Params, req.Params)
	if err != nil {
		return nil, err
	}
	f, err := s.p.Frame(req, params)
	if err != nil {
		return nil, err
	}
	if len(f.Spans) > 0 && s.desc.ABI < 2 {
		return nil, abi.Failf(abi.CodePluginError, "the frame has several image spans, which need ABI 2; set Description.ABI to 2")
	}
	return abi.EncodeResult(f)
}

func asError(err error) *abi.Error {
	var e *abi.Error
	if errors.As(err, &e) {
		return e
	}
	return abi.Failf(abi.CodePluginError, "%v", err)
}
