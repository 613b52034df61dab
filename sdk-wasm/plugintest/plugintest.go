// Package plugintest runs a family plugin's conformance cases against a [Runner]: natively
// (the plugin's Go code, through the same encode/dispatch/decode path as the wasm exports) with
// [Native], or compiled to wasm under the real host with the root module's
// core/internal/plugin/plugintest. Run both: native tests are fast to iterate on; the wasm run
// proves the compiled module behaves the same.
//
// Cases live in a family's testdata as JSON ([Suite]); plugin tests call [Suite.Run] with a
// Native runner, and the host's tests run the very same files against the .wasm.
package plugintest

import (
	"context"
	"errors"
	"fmt"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
	"github.com/iris-vlm/iris/sdk-wasm/vlm"
)

// Runner runs a plugin's operations and applies the host's checks to what comes back: refusals
// and failures are *abi.Error, results are validated against the request.
type Runner interface {
	Describe(ctx context.Context) (abi.Description, error)
	Plan(ctx context.Context, req abi.PlanRequest) (abi.Plan, error)
	Frame(ctx context.Context, req abi.FrameRequest) (abi.Frame, error)
}

// Native returns a Runner that calls p in-process through a vlm.Server, encoding requests and
// decoding responses and validating results exactly as the host does.
func Native(p vlm.Plugin) Runner { return native{vlm.NewServer(p)} }

type native struct{ s *vlm.Server }

func (n native) Describe(ctx context.Context) (abi.Description, error) {
	d, err := abi.DecodeResponse[abi.Description](n.s.Handle(abi.ExportDescribe, nil))
	if err != nil {
		return d, err
	}
	if err := d.Validate(); err != nil {
		return abi.Description{}, err
	}
	return d, nil
}

func (n native) Plan(ctx context.Context, req abi.PlanRequest) (abi.Plan, error) {
	in, err := abi.Encode(&req)
	if err != nil {
		return abi.Plan{}, err
	}
	p, err := abi.DecodeResponse[abi.Plan](n.s.Handle(abi.ExportPlan, in))
	if err != nil {
		return p, err
	}
	if err := p.Validate(abi.Size{Width: req.Image.Width, Height: req.Image.Height}); err != nil {
		return abi.Plan{}, err
	}
	// the host runs an image's views as one grid (core/internal/plugin refuses mixed ones too)
	if err := p.Uniform(); err != nil {
		return abi.Plan{}, err
	}
	return p, nil
}

func (n native) Frame(ctx context.Context, req abi.FrameRequest) (abi.Frame, error) {
	in, err := abi.Encode(&req)
	if err != nil {
		return abi.Frame{}, err
	}
	f, err := abi.DecodeResponse[abi.Frame](n.s.Handle(abi.ExportFrame, in))
	if err != nil {
		return f, err
	}
	if err := f.Validate(&req.Plan); err != nil {
		return abi.Frame{}, err
	}
	return f, nil
}

// Code returns the code of a plugin's typed error, or "" when err is nil or not an *abi.Error.
func Code(err error) string {
	var e *abi.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// errorf formats like fmt.Errorf; a tiny helper keeps the suite's messages uniform.
func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

func errorsAs(err error, target **abi.Error) bool { return errors.As(err, target) }
