// Package plugintest is the host half of the plugin test harness: it builds plugins from Go
// source to wasm, loads them under the real host (core/internal/plugin) and adapts them to
// sdk-wasm/plugintest's Runner, so a family's conformance suite runs against the compiled module
// exactly as it runs natively. It is imported by tests only.
package plugintest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/iris-vlm/iris/core/internal/plugin"
	"github.com/iris-vlm/iris/sdk-wasm/abi"
	sdktest "github.com/iris-vlm/iris/sdk-wasm/plugintest"
)

// RepoRoot returns the checkout's root: the nearest directory above the working directory whose
// go.mod declares github.com/iris-vlm/iris.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the repository root: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module github.com/iris-vlm/iris\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("finding the repository root: no go.mod of github.com/iris-vlm/iris above the working directory")
		}
		dir = parent
	}
}

// FamilyDir returns the source directory of a family plugin, plugins/<family>.
func FamilyDir(family string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "plugins", family), nil
}

// BuildWasm compiles the Go main package in dir to a WASI reactor at out:
// GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o out . (run in dir, so dir's own module
// and its replace directives apply).
func BuildWasm(dir, out string) error {
	// go test puts GOROOT in the test's environment; fall back to the PATH.
	gobin := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(gobin); os.Getenv("GOROOT") == "" || err != nil {
		if gobin, err = exec.LookPath("go"); err != nil {
			return fmt.Errorf("building %s: no go command: %w", dir, err)
		}
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return fmt.Errorf("building %s: %w", dir, err)
	}
	cmd := exec.CommandContext(context.Background(), gobin, "build", "-buildmode=c-shared", "-trimpath", "-o", abs, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s to wasm: %w\n%s", dir, err, b)
	}
	return nil
}

// Build compiles the plugin in dir into the test's temporary directory and returns the module.
func Build(tb testing.TB, dir string) []byte {
	tb.Helper()
	out := filepath.Join(tb.TempDir(), filepath.Base(dir)+".wasm")
	if err := BuildWasm(dir, out); err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// BuildFamily compiles plugins/<family>.
func BuildFamily(tb testing.TB, family string) []byte {
	tb.Helper()
	dir, err := FamilyDir(family)
	if err != nil {
		tb.Fatal(err)
	}
	return Build(tb, dir)
}

// NewHost returns a host for tests, closed at the end of the test. Its compilation cache lives
// in $IRIS_PLUGIN_CACHE when set (the just recipes point it at .build/wazero-cache, so repeated
// runs skip compiling) and in a temporary directory otherwise.
func NewHost(tb testing.TB, opts plugin.Options) *plugin.Host {
	tb.Helper()
	if opts.CacheDir == "" {
		opts.CacheDir = os.Getenv("IRIS_PLUGIN_CACHE")
	}
	if opts.CacheDir == "" {
		opts.CacheDir = tb.TempDir()
	}
	h, err := plugin.NewHost(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = h.Close(context.Background()) })
	return h
}

// Load loads a module under h, closed at the end of the test.
func Load(tb testing.TB, h *plugin.Host, name string, wasm []byte, lim plugin.Limits) *plugin.Plugin {
	tb.Helper()
	p, err := h.Load(context.Background(), name, wasm, "", lim)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

// Runner adapts a loaded plugin to sdk-wasm/plugintest's Runner.
func Runner(p *plugin.Plugin) sdktest.Runner { return runner{p} }

type runner struct{ p *plugin.Plugin }

func (r runner) Describe(context.Context) (abi.Description, error) { return r.p.Describe(), nil }

func (r runner) Plan(ctx context.Context, req abi.PlanRequest) (abi.Plan, error) {
	return r.p.Plan(ctx, req.Image, req.Params)
}

func (r runner) Frame(ctx context.Context, req abi.FrameRequest) (abi.Frame, error) {
	return r.p.Frame(ctx, req)
}
