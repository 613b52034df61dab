package plugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/sys"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
)

// Operation names, as they appear in errors, metrics and span names.
const (
	opDescribe = "describe"
	opPlan     = "plan"
	opFrame    = "frame"
)

// Plugin is a loaded family plugin: one compiled module and a pool of its instances.
//
// # Notes
//
//   - Safe for concurrent use; each call holds one instance for its duration.
//   - Close it when its bundle is unloaded.
type Plugin struct {
	host     *Host
	name     string
	digest   string
	lim      Limits
	desc     abi.Description
	runtime  wazero.Runtime
	compiled wazero.CompiledModule
	// sem holds a token per running call (at most lim.Instances); idle holds started instances.
	sem  chan struct{}
	idle chan *instance
	// closing is closed when Close begins.
	closing   chan struct{}
	closeOnce sync.Once
}

// Name returns the name the plugin was loaded under.
func (p *Plugin) Name() string { return p.name }

// Digest returns the hex sha256 of the module.
func (p *Plugin) Digest() string { return p.digest }

// Describe returns what the plugin said about itself at load.
func (p *Plugin) Describe() abi.Description { return p.desc }

// Limits returns the sandbox bounds in force, defaults applied.
func (p *Plugin) Limits() Limits { return p.lim }

// CheckParams checks a bundle's [plugin.params] table against the parameters the plugin
// declares, so that a manifest typo fails at load instead of on the first request.
func (p *Plugin) CheckParams(params map[string]any) error {
	return abi.CheckParams(p.desc.Params, params)
}

// Plan asks the plugin how to preprocess an image with this header. A refusal (the image is
// unacceptable) or a failure the plugin reports is an *abi.Error; a host-side failure an *Error.
// The returned plan is validated against the header.
func (p *Plugin) Plan(ctx context.Context, img abi.ImageHeader, params map[string]any) (abi.Plan, error) {
	ctx, span := p.host.tracer.Start(ctx, "plugin.plan", trace.WithAttributes(p.attrs()...))
	defer span.End()
	plan, err := roundTrip[abi.Plan](ctx, p, opPlan, &abi.PlanRequest{Image: img, Params: params})
	if err == nil {
		if verr := p.checkPlan(&plan, img); verr != nil {
			err = &Error{Plugin: p.name, Op: opPlan, Code: CodeBadOutput, Err: verr}
		}
	}
	p.finish(span, opPlan, err)
	if err != nil {
		return abi.Plan{}, err
	}
	span.SetAttributes(attribute.Int("iris.image_tokens", plan.ImageTokens))
	return plan, nil
}

// Frame asks the plugin for the prompt around the image span of an executed plan. Errors are as
// for Plan. The returned frame is validated against the plan.
//
// A system message needs a plugin of wire minor 1 or later; an older one gets no call, and the
// request is refused with [abi.CodeSystemNotSupported].
func (p *Plugin) Frame(ctx context.Context, req abi.FrameRequest) (abi.Frame, error) {
	ctx, span := p.host.tracer.Start(ctx, "plugin.frame", trace.WithAttributes(p.attrs()...))
	defer span.End()
	if req.System != nil && p.desc.Minor < 1 {
		err := abi.Refusef(abi.CodeSystemNotSupported, "the %s plugin of this bundle (wire minor %d) frames no system messages; rebuild it with a newer SDK",
			p.name, p.desc.Minor)
		p.finish(span, opFrame, err)
		return abi.Frame{}, err
	}
	f, err := roundTrip[abi.Frame](ctx, p, opFrame, &req)
	if err == nil {
		verr := f.Validate(&req.Plan)
		if verr == nil && len(f.Spans) > 0 && p.desc.ABI < 2 {
			verr = fmt.Errorf("%w: an ABI v%d plugin answered with several image spans (ABI v2)", abi.ErrMalformed, p.desc.ABI)
		}
		if verr != nil {
			err = &Error{Plugin: p.name, Op: opFrame, Code: CodeBadOutput, Err: verr}
		}
	}
	p.finish(span, opFrame, err)
	if err != nil {
		return abi.Frame{}, err
	}
	return f, nil
}

// checkPlan validates a plan as untrusted (abi.Plan.Validate: sizes, grids, token counts, at most
// abi.MaxViews views) and adds what this host needs: views only from an ABI-2 plugin, and views
// that share one patch grid, patch geometry and layout, because the engine takes one grid per
// image (an image of several views is Grid {T: views, H, W}).
func (p *Plugin) checkPlan(plan *abi.Plan, img abi.ImageHeader) error {
	if err := plan.Validate(abi.Size{Width: img.Width, Height: img.Height}); err != nil {
		return err
	}
	if len(plan.Views) == 0 {
		return nil
	}
	if p.desc.ABI < 2 {
		return fmt.Errorf("%w: an ABI v%d plugin answered with views (ABI v2)", abi.ErrMalformed, p.desc.ABI)
	}
	if err := plan.Uniform(); err != nil {
		return fmt.Errorf("this host's engine takes one patch grid per image: %w", err)
	}
	return nil
}

func (p *Plugin) attrs() []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("iris.plugin", p.name),
		attribute.String("iris.plugin.digest", p.digest[:12]),
	}
}

// finish records an outcome on the span and the call counter. The counter's outcome label is
// "ok", a host code, or "refused"/"failed" for the plugin's own errors: a plugin chooses its
// codes, and a label it chose could grow without bound. The span carries the exact code.
func (p *Plugin) finish(span trace.Span, op string, err error) {
	outcome, label := "ok", "ok"
	if err != nil {
		var he *Error
		var ae *abi.Error
		switch {
		case errors.As(err, &he):
			outcome, label = he.Code, he.Code
		case errors.As(err, &ae) && ae.Kind == abi.Refusal:
			outcome, label = ae.Code, "refused"
		case errors.As(err, &ae):
			outcome, label = ae.Code, "failed"
		default:
			outcome, label = "error", "error"
		}
		span.RecordError(err)
		span.SetStatus(codes.Error, outcome)
	}
	span.SetAttributes(attribute.String("iris.outcome", outcome))
	p.host.metrics.calls.WithLabelValues(p.name, op, label).Inc()
}

// roundTrip encodes a request, runs it and decodes the response. Decoding failures are
// CodeBadOutput; a typed error from the plugin comes back as *abi.Error.
func roundTrip[T any](ctx context.Context, p *Plugin, op string, req any) (T, error) {
	var zero T
	// written at the plugin's minor, so that a plugin built with an older SDK still reads it
	in, err := abi.EncodeAt(req, min(abi.Minor, p.desc.Minor))
	if err != nil {
		// Only params can fail to encode (a value that is no int, float, string or bool).
		return zero, abi.Failf(abi.CodeInvalidParams, "plugin %s: %s: %v", p.name, op, err)
	}
	out, err := p.call(ctx, op, in)
	if err != nil {
		return zero, err
	}
	v, err := abi.DecodeResponse[T](out)
	if errors.Is(err, abi.ErrMalformed) {
		return zero, &Error{Plugin: p.name, Op: op, Code: CodeBadOutput, Err: err}
	}
	return v, err
}

// call runs op on a pooled instance: it waits for a free slot (bounded by ctx), starts an
// instance when none is idle (bounded by StartTimeout) and runs the guest (bounded by Timeout).
// The instance goes back to the pool only after a clean call; otherwise it is closed, and the
// error classified.
func (p *Plugin) call(ctx context.Context, op string, req []byte) ([]byte, error) {
	start := time.Now()
	defer func() { p.host.metrics.seconds.WithLabelValues(p.name, op).Observe(time.Since(start).Seconds()) }()

	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, p.ctxError(op, ctx.Err())
	case <-p.closing:
	}
	defer func() { <-p.sem }()
	if p.closed() {
		return nil, &Error{Plugin: p.name, Op: op, Code: CodeClosed, Err: errors.New("the plugin was closed")}
	}

	var in *instance
	select {
	case in = <-p.idle:
	default:
		sctx, cancel := context.WithTimeout(ctx, p.lim.StartTimeout)
		var err error
		in, err = newInstance(sctx, p.runtime, p.compiled)
		cancel()
		if err != nil {
			return nil, p.fail(op, nil, err)
		}
		p.host.metrics.instances.WithLabelValues(p.name, "started").Inc()
	}
	cctx, cancel := context.WithTimeout(ctx, p.lim.Timeout)
	defer cancel()
	out, err := in.call(cctx, op, req)
	if err != nil {
		return nil, p.fail(op, in, err)
	}
	p.release(ctx, in)
	return out, nil
}

// release returns a healthy instance to the pool, or recycles it after MaxCalls calls or when its
// memory has grown past three quarters of the cap (a heap that only grows is the known failure
// mode of long-lived Go and TinyGo guests).
func (p *Plugin) release(ctx context.Context, in *instance) {
	if in.calls >= p.lim.MaxCalls || uint64(in.mem.Size()) > uint64(p.lim.MemoryPages)*65536/4*3 {
		in.close(context.WithoutCancel(ctx))
		p.host.metrics.instances.WithLabelValues(p.name, "recycled").Inc()
		return
	}
	select {
	case p.idle <- in:
	default:
		in.close(context.WithoutCancel(ctx))
	}
}

// fail discards a failed instance and turns err into an *Error with a code.
func (p *Plugin) fail(op string, in *instance, err error) error {
	code := CodeTrap
	var exit *sys.ExitError
	var bad *badOutput
	switch {
	case errors.As(err, &bad):
		code = CodeBadOutput
	case errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeDeadlineExceeded:
		code = CodeTimeout
	case errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeContextCanceled:
		code = CodeCanceled
	}
	if in != nil {
		// The Go runtime reports a fatal error first and then dumps every goroutine through
		// fd_write; a deadline that strikes during the dump must not hide the cause.
		if out := in.out.String(); code != CodeBadOutput && out != "" {
			switch {
			case strings.Contains(out, "out of memory"):
				code = CodeOutOfMemory
			case strings.HasPrefix(out, "fatal error:") || strings.HasPrefix(out, "panic:"):
				code = CodeTrap
			}
		}
		err = fmt.Errorf("%w%s", err, in.out.suffix())
		in.close(context.Background())
		p.host.metrics.instances.WithLabelValues(p.name, "discarded").Inc()
	} else if code == CodeTrap && strings.Contains(err.Error(), "out of memory") {
		code = CodeOutOfMemory // a start-up that ran out of memory; newInstance added the output
	}
	// A client that hung up cancels its request's plugin call: routine under load (the H200 soak
	// logged one warning per cancelled request), not a plugin fault.
	level := slog.LevelWarn
	if code == CodeCanceled {
		level = slog.LevelDebug
	}
	p.host.log.Log(context.Background(), level, "plugin call failed", "plugin", p.name, "op", op, "code", code, "err", err)
	return &Error{Plugin: p.name, Op: op, Code: code, Err: err}
}

func (p *Plugin) ctxError(op string, err error) error {
	code := CodeTimeout
	if errors.Is(err, context.Canceled) {
		code = CodeCanceled
	}
	return &Error{Plugin: p.name, Op: op, Code: code, Err: fmt.Errorf("waiting for an instance: %w", err)}
}

// closed reports whether Close has begun.
func (p *Plugin) closed() bool {
	select {
	case <-p.closing:
		return true
	default:
		return false
	}
}

// Close stops accepting calls, waits for running calls to finish (or ctx to end) and releases
// the module, its instances and its runtime. Calls after Close fail with CodeClosed.
func (p *Plugin) Close(ctx context.Context) error {
	var err error
	p.closeOnce.Do(func() {
		close(p.closing)
	wait:
		for range cap(p.sem) {
			select {
			case p.sem <- struct{}{}:
			case <-ctx.Done():
				break wait
			}
		}
		for {
			select {
			case in := <-p.idle:
				in.close(ctx)
				continue
			default:
			}
			break
		}
		if cerr := p.runtime.Close(context.WithoutCancel(ctx)); cerr != nil {
			err = fmt.Errorf("closing plugin %s: %w", p.name, cerr)
		}
	})
	return err
}
