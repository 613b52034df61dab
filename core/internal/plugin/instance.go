package plugin

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
)

// fixedEpoch is the wall clock every instance sees: 2024-01-01T00:00:00Z, never advancing.
const fixedEpoch = 1704067200

func fixedWalltime() (sec int64, nsec int32) { return fixedEpoch, 0 }

// instance is one started module with its exports resolved. It is used by one goroutine at a time.
type instance struct {
	mod                                 api.Module
	mem                                 api.Memory
	alloc, reset, describe, plan, frame api.Function
	stack                               [2]uint64
	out                                 *output
	calls                               int
}

// newInstance starts a module: runs _initialize (the Go runtime's init and the plugin's
// Register) under ctx, in the sandbox the package doc describes.
func newInstance(ctx context.Context, rt wazero.Runtime, compiled wazero.CompiledModule) (*instance, error) {
	out := &output{}
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(abi.ExportInitialize).
		WithStdout(out).
		WithStderr(out).
		WithWalltime(fixedWalltime, sys.ClockResolution(1)).
		WithRandSource(rand.NewChaCha8([32]byte{'i', 'r', 'i', 's'}))
	mod, err := rt.InstantiateModule(ctx, compiled, cfg)
	if err != nil {
		return nil, fmt.Errorf("starting an instance: %w%s", err, out.suffix())
	}
	return &instance{
		mod:      mod,
		mem:      mod.Memory(),
		alloc:    mod.ExportedFunction(abi.ExportAlloc),
		reset:    mod.ExportedFunction(abi.ExportReset),
		describe: mod.ExportedFunction(abi.ExportDescribe),
		plan:     mod.ExportedFunction(abi.ExportPlan),
		frame:    mod.ExportedFunction(abi.ExportFrame),
		out:      out,
	}, nil
}

// badOutput is a contract breach by the guest; call wraps it as CodeBadOutput.
type badOutput struct{ msg string }

func (e *badOutput) Error() string { return e.msg }

// call runs one operation: the request goes into a guest buffer from iris_alloc, the response is
// copied out of guest memory, then iris_reset releases both. Errors from wazero (traps, exits,
// deadline) are returned as they are; contract breaches as *badOutput.
func (in *instance) call(ctx context.Context, op string, req []byte) ([]byte, error) {
	in.calls++
	in.out.reset()
	var fn api.Function
	switch op {
	case opDescribe:
		fn = in.describe
	case opPlan:
		fn = in.plan
	case opFrame:
		fn = in.frame
	}
	s := in.stack[:]
	if op != opDescribe {
		s[0] = uint64(len(req))
		if err := in.alloc.CallWithStack(ctx, s); err != nil {
			return nil, err
		}
		ptr := uint32(s[0])
		if ptr == 0 {
			return nil, &badOutput{fmt.Sprintf("%s returned 0 for %d bytes", abi.ExportAlloc, len(req))}
		}
		if !in.mem.Write(ptr, req) {
			return nil, &badOutput{fmt.Sprintf("%s returned a buffer outside memory", abi.ExportAlloc)}
		}
		s[0], s[1] = uint64(ptr), uint64(len(req))
	}
	if err := fn.CallWithStack(ctx, s); err != nil {
		return nil, err
	}
	ptr, n := abi.Unpack(s[0])
	if ptr == 0 || n == 0 {
		return nil, &badOutput{fmt.Sprintf("%s returned no response", op)}
	}
	if n > abi.MaxMessageBytes {
		return nil, &badOutput{fmt.Sprintf("%s returned %d bytes, over the %d-byte limit", op, n, abi.MaxMessageBytes)}
	}
	view, ok := in.mem.Read(ptr, n)
	if !ok {
		return nil, &badOutput{fmt.Sprintf("%s returned [%d, +%d) outside memory", op, ptr, n)}
	}
	// Read returns a view of guest memory; copy before iris_reset lets the guest reuse it.
	resp := append([]byte(nil), view...)
	if err := in.reset.CallWithStack(ctx, s); err != nil {
		return nil, err
	}
	return resp, nil
}

func (in *instance) close(ctx context.Context) { _ = in.mod.Close(ctx) }

// output keeps the first bytes a guest writes to stdout and stderr during one call (the Go
// runtime prints the reason of a fatal error or panic first, then goroutine dumps), for error
// reports. The writes come from the goroutine running the call.
type output struct {
	buf []byte
}

const outputBytes = 512

func (o *output) Write(p []byte) (int, error) {
	if room := outputBytes - len(o.buf); room > 0 {
		o.buf = append(o.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (o *output) reset() { o.buf = o.buf[:0] }

func (o *output) String() string {
	return strings.TrimSpace(strings.ToValidUTF8(string(o.buf), "?"))
}

// suffix formats the output for an error message, or "" when the guest wrote nothing.
func (o *output) suffix() string {
	if s := o.String(); s != "" {
		return fmt.Sprintf(" (guest output: %q)", s)
	}
	return ""
}
