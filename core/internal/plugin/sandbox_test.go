package plugin_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/iris-vlm/iris/core/internal/plugin"
	"github.com/iris-vlm/iris/core/internal/plugin/plugintest"
	"github.com/iris-vlm/iris/sdk-wasm/abi"
)

// modules holds the Go test guests of testdata/, compiled once by TestMain from their sources
// (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared).
var modules = map[string][]byte{}

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "iris-plugin-test")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		// One compilation cache for every test host: under -race compiling a module takes ~20 s.
		if os.Getenv("IRIS_PLUGIN_CACHE") == "" {
			os.Setenv("IRIS_PLUGIN_CACHE", filepath.Join(dir, "cache"))
		}
		for _, name := range []string{"abuse", "raw", "views"} {
			out := filepath.Join(dir, name+".wasm")
			if err := plugintest.BuildWasm(filepath.Join("testdata", name), out); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			if modules[name], err = os.ReadFile(out); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		return m.Run()
	}())
}

func mode(m string) map[string]any { return map[string]any{"mode": m} }

var img = abi.ImageHeader{Width: 64, Height: 48, Format: "png"}

// mustPlan asserts a good call succeeds.
func mustPlan(t testing.TB, p *plugin.Plugin) {
	t.Helper()
	pl, err := p.Plan(context.Background(), img, mode("ok"))
	if err != nil || pl.ImageTokens != 1 {
		t.Fatalf("good call: %+v, %v", pl, err)
	}
}

func TestLoadRefusesIncompatibleModules(t *testing.T) {
	h := plugintest.NewHost(t, plugin.Options{})
	badSig := abiFuncs("iris_abi_v1")
	badSig[5].params = []byte{tI32}
	noInit := append(abiFuncs("iris_abi_v1")[:1], abiFuncs("iris_abi_v1")[2:]...)
	for _, tc := range []struct {
		name   string
		wasm   []byte
		digest string
		want   string
		compat bool // wraps ErrIncompatible
	}{
		{"noabi", wasmModule(nil, []wfunc{{name: "add", params: []byte{tI32, tI32}, results: []byte{tI32}}}, true), "",
			"noabi exports no iris_abi_v* marker: it is not an Iris plugin", true},
		{"abiv3", wasmModule(nil, abiFuncs("iris_abi_v3"), true), "", "plugin abiv3 speaks ABI v3, this host speaks v1 to v2", true},
		{"abiv2", wasmModule(nil, abiFuncs("iris_abi_v2"), true), "", "describe returned no response", false},
		{"badimport", wasmModule([]wimport{{"env", "connect"}}, abiFuncs("iris_abi_v1"), true), "",
			"imports env.connect; the sandbox provides only wasi_snapshot_preview1", true},
		{"badsig", wasmModule(nil, badSig, true), "",
			"exports iris_plan(i32) -> (i64), ABI v1 says iris_plan(i32, i32) -> (i64)", true},
		{"noinit", wasmModule(nil, noInit, true), "", "lacks the ABI v1 export _initialize", true},
		{"nomemory", wasmModule(nil, abiFuncs("iris_abi_v1"), false), "", "exports no memory", true},
		{"nodescription", wasmModule(nil, abiFuncs("iris_abi_v1"), true), "", "describe returned no response", false},
		{"digest", modules["raw"], strings.Repeat("0", 64), "sha256", false},
		{"garbage", []byte("\x00asm\x01\x00\x00\x00garbage"), "", "compiling", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := h.Load(context.Background(), tc.name, tc.wasm, tc.digest, plugin.Limits{})
			if err == nil {
				_ = p.Close(context.Background())
				t.Fatal("loaded")
			}
			if !strings.Contains(err.Error(), tc.want) || errors.Is(err, plugin.ErrIncompatible) != tc.compat {
				t.Fatalf("got %v, want %q (incompatible: %t)", err, tc.want, tc.compat)
			}
		})
	}
}

func TestAbuseIsContained(t *testing.T) {
	// The loop runs into its caller's deadline; the others must end on their own (out of memory,
	// trap, typed error) well within the plugin's generous one, even under -race on a busy machine.
	const loopDeadline = 500 * time.Millisecond
	h := plugintest.NewHost(t, plugin.Options{})
	p := plugintest.Load(t, h, "abuse", modules["abuse"], plugin.Limits{Timeout: 20 * time.Second, MemoryPages: 160, Instances: 2})
	for _, tc := range []struct {
		mode string
		code string // plugin.Error code or abi.Error code
	}{
		{"loop", plugin.CodeTimeout},
		{"alloc", plugin.CodeOutOfMemory},
		{"recurse", plugin.CodeOutOfMemory},
		{"panic", abi.CodePluginPanic},
		{"exit", plugin.CodeTrap},
		{"bad_plan", plugin.CodeBadOutput},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			ctx := context.Background()
			if tc.mode == "loop" {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, loopDeadline)
				defer cancel()
			}
			start := time.Now()
			_, err := p.Plan(ctx, img, mode(tc.mode))
			if got := plugin.CodeOf(err); got != tc.code {
				t.Fatalf("got code %q (%v), want %q", got, err, tc.code)
			}
			if d := time.Since(start); tc.mode == "loop" && d > loopDeadline+2*time.Second {
				t.Errorf("took %v, the deadline is %v", d, loopDeadline)
			}
			mustPlan(t, p)
		})
	}
}

// probe runs a probing mode and returns what the guest saw.
func probe(t *testing.T, p *plugin.Plugin, m string) string {
	t.Helper()
	_, err := p.Plan(context.Background(), img, mode(m))
	var e *abi.Error
	if !errors.As(err, &e) || e.Code != "probe" {
		t.Fatalf("probe %s: %v", m, err)
	}
	return e.Message
}

func TestSandboxHasNoFilesSocketsOrEnvironment(t *testing.T) {
	h := plugintest.NewHost(t, plugin.Options{})
	p := plugintest.Load(t, h, "abuse", modules["abuse"], plugin.Limits{})
	if got, want := probe(t, p, "file"), "/etc/passwd: true; /: true; .: true; /proc/self/environ: true; create: true"; got != want {
		t.Errorf("file access: got %q, want every access to fail: %q", got, want)
	}
	for _, r := range strings.Fields(probe(t, p, "socket")) {
		if strings.HasSuffix(r, ":0") {
			t.Errorf("sock_accept succeeded on fd %s", r)
		}
	}
	if got := probe(t, p, "env"); got != `args=[] env=[]` {
		t.Errorf("environment: %s", got)
	}
}

func TestSandboxIsDeterministic(t *testing.T) {
	h := plugintest.NewHost(t, plugin.Options{})
	if got := probe(t, plugintest.Load(t, h, "abuse", modules["abuse"], plugin.Limits{}), "clock"); got != "1704067200" {
		t.Errorf("wall clock: %s, want the fixed 1704067200", got)
	}
	a := probe(t, plugintest.Load(t, h, "a", modules["abuse"], plugin.Limits{}), "random")
	b := probe(t, plugintest.Load(t, h, "b", modules["abuse"], plugin.Limits{}), "random")
	if a != b {
		t.Errorf("fresh instances drew different random bytes: %s, %s", a, b)
	}
}

func TestMalformedOutputIsRefused(t *testing.T) {
	h := plugintest.NewHost(t, plugin.Options{})
	p := plugintest.Load(t, h, "raw", modules["raw"], plugin.Limits{})
	for _, tc := range []struct{ mode, code string }{
		{"ok", ""},
		{"garbage", plugin.CodeBadOutput},
		{"truncated", plugin.CodeBadOutput},
		{"trailing", plugin.CodeBadOutput},
		{"wrong_kind", plugin.CodeBadOutput},
		{"bad_code", plugin.CodeBadOutput},
		{"bad_kind", plugin.CodeBadOutput},
		{"invalid_plan", plugin.CodeBadOutput},
		{"out_of_bounds", plugin.CodeBadOutput},
		{"huge", plugin.CodeBadOutput},
		{"zero", plugin.CodeBadOutput},
		{"raw_panic", plugin.CodeTrap},
		{"views", plugin.CodeBadOutput},
		{"unknown", "unknown_mode"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			_, err := p.Plan(context.Background(), img, mode(tc.mode))
			if got := plugin.CodeOf(err); got != tc.code {
				t.Fatalf("got %q (%v), want %q", got, err, tc.code)
			}
		})
	}
}

// TestOlderMinorPlugin: a plugin built with a minor-0 SDK (raw describes itself so) gets its
// requests written at minor 0 and still serves; a system message is refused before any call.
func TestOlderMinorPlugin(t *testing.T) {
	h := plugintest.NewHost(t, plugin.Options{})
	p := plugintest.Load(t, h, "raw", modules["raw"], plugin.Limits{})
	if m := p.Describe().Minor; m != 0 {
		t.Fatalf("raw describes minor %d, want 0", m)
	}
	pl, err := p.Plan(context.Background(), img, mode("ok"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := p.Frame(context.Background(), abi.FrameRequest{Question: "q", Plan: pl, Params: mode("ok")})
	if err != nil || f.Before != "minor 0" {
		t.Fatalf("frame without a system message: %+v, %v", f, err)
	}
	sys := "Be brief."
	_, err = p.Frame(context.Background(), abi.FrameRequest{Question: "q", Plan: pl, Params: mode("ok"), System: &sys})
	var ae *abi.Error
	if !errors.As(err, &ae) || ae.Kind != abi.Refusal || ae.Code != abi.CodeSystemNotSupported {
		t.Fatalf("a system message to a minor-0 plugin: %v, want the refusal %s", err, abi.CodeSystemNotSupported)
	}
}

func TestDeadlinesAndCancellation(t *testing.T) {
	var logs bytes.Buffer // the calls below run one at a time: no lock needed
	h := plugintest.NewHost(t, plugin.Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	p := plugintest.Load(t, h, "abuse", modules["abuse"], plugin.Limits{Timeout: 100 * time.Millisecond})
	if _, err := p.Plan(context.Background(), img, mode("loop")); plugin.CodeOf(err) != plugin.CodeTimeout {
		t.Errorf("bundle timeout: %v", err)
	}
	p = plugintest.Load(t, h, "abuse2", modules["abuse"], plugin.Limits{Timeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := p.Plan(ctx, img, mode("loop")); plugin.CodeOf(err) != plugin.CodeTimeout {
		t.Errorf("caller deadline: %v", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := p.Plan(ctx, img, mode("loop")); plugin.CodeOf(err) != plugin.CodeCanceled {
		t.Errorf("caller cancel: %v", err)
	}
	mustPlan(t, p)
	// a timeout is worth a warning; a caller that hung up is routine (debug)
	levels := map[string]string{}
	for line := range strings.Lines(logs.String()) {
		if !strings.Contains(line, "plugin call failed") {
			continue
		}
		for _, code := range []string{plugin.CodeTimeout, plugin.CodeCanceled} {
			if strings.Contains(line, "code="+code) {
				levels[code] = strings.Fields(strings.SplitN(line, "level=", 2)[1])[0]
			}
		}
	}
	if levels[plugin.CodeTimeout] != "WARN" || levels[plugin.CodeCanceled] != "DEBUG" {
		t.Errorf("log levels by code %v, want %s WARN and %s DEBUG\n%s", levels, plugin.CodeTimeout, plugin.CodeCanceled, logs.String())
	}
}

// TestHammer keeps concurrent good calls succeeding while other goroutines throw every attack at
// the same plugin and pool. Under load (-race on two cores) an attack may run out of its own
// deadline before it gets an instance or finishes starting one; that is containment too.
func TestHammer(t *testing.T) {
	h := plugintest.NewHost(t, plugin.Options{})
	p := plugintest.Load(t, h, "abuse", modules["abuse"], plugin.Limits{Timeout: time.Minute, MemoryPages: 256, Instances: 4})
	const good, rounds = 6, 40
	attacks := map[string]string{
		"loop":  plugin.CodeTimeout,
		"alloc": plugin.CodeOutOfMemory,
		"panic": abi.CodePluginPanic,
		"exit":  plugin.CodeTrap,
	}
	var (
		wg, bad  sync.WaitGroup
		mu       sync.Mutex
		outcomes = map[string]int{}
	)
	errs := make(chan error, good*rounds)
	done := make(chan struct{})
	for range good {
		wg.Go(func() {
			for range rounds {
				if pl, err := p.Plan(context.Background(), img, mode("ok")); err != nil || pl.ImageTokens != 1 {
					errs <- fmt.Errorf("good call failed: %w", err)
				}
			}
		})
	}
	for m, want := range attacks {
		bad.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, err := p.Plan(ctx, img, mode(m))
				cancel()
				got := plugin.CodeOf(err)
				if got != want && got != plugin.CodeTimeout {
					t.Errorf("attack %s: got %q (%v), want %q", m, got, err, want)
				}
				mu.Lock()
				outcomes[m+"/"+got]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(done)
	bad.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("attack outcomes: %v", outcomes)
	mustPlan(t, p)
}

func TestCloseFailsLaterCalls(t *testing.T) {
	h := plugintest.NewHost(t, plugin.Options{})
	p, err := h.Load(context.Background(), "abuse", modules["abuse"], "", plugin.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	mustPlan(t, p)
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Plan(context.Background(), img, mode("ok")); plugin.CodeOf(err) != plugin.CodeClosed {
		t.Errorf("after close: %v", err)
	}
}

func TestMetricsAndSpans(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	h := plugintest.NewHost(t, plugin.Options{Registerer: reg, TracerProvider: tp})
	p := plugintest.Load(t, h, "abuse", modules["abuse"], plugin.Limits{MaxCalls: 2, Timeout: 2 * time.Second})
	mustPlan(t, p)
	mustPlan(t, p)
	_, _ = p.Plan(context.Background(), img, mode("loop"))
	_, _ = p.Plan(context.Background(), img, mode("env")) // a refusal with the plugin's own code
	if _, err := p.Frame(context.Background(), abi.FrameRequest{Question: "q", Plan: okPlan(t, p)}); err != nil {
		t.Fatal(err)
	}
	// A second host on the same registry shares the collectors instead of failing.
	plugintest.NewHost(t, plugin.Options{Registerer: reg})

	for _, tc := range []struct {
		op, outcome string
		want        float64
	}{
		{"plan", "ok", 3},
		{"plan", plugin.CodeTimeout, 1},
		{"plan", "refused", 1},
		{"plan", "probe", 0},
		{"frame", "ok", 1},
	} {
		if got := counter(t, reg, "iris_plugin_calls_total", "abuse", tc.op, tc.outcome); got != tc.want {
			t.Errorf("calls{%s, %s}: %v, want %v", tc.op, tc.outcome, got, tc.want)
		}
	}
	// MaxCalls 2: the instance that made two good calls was recycled; the timed-out one discarded.
	if got := counter(t, reg, "iris_plugin_instances_total", "abuse", "recycled"); got < 1 {
		t.Errorf("recycled instances: %v", got)
	}
	if got := counter(t, reg, "iris_plugin_instances_total", "abuse", "discarded"); got != 1 {
		t.Errorf("discarded instances: %v, want 1", got)
	}
	var plans, failed int
	for _, s := range rec.Ended() {
		if s.Name() == "plugin.plan" {
			plans++
			if s.Status().Description == plugin.CodeTimeout {
				failed++
			}
		}
	}
	if plans != 5 || failed != 1 {
		t.Errorf("spans: %d plan spans, %d timed out; want 5 and 1", plans, failed)
	}
}

// counter returns the value of the series of a counter family with the plugin label pl and the
// other label's value (op's outcome, or an instance event) among values.
func counter(t *testing.T, reg *prometheus.Registry, name, pl string, values ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := map[string]bool{}
			for _, l := range m.GetLabel() {
				if l.GetName() == "plugin" && l.GetValue() != pl {
					got = nil
					break
				}
				got[l.GetValue()] = true
			}
			match := got != nil
			for _, v := range values {
				match = match && got[v]
			}
			if match {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func okPlan(t *testing.T, p *plugin.Plugin) abi.Plan {
	t.Helper()
	pl, err := p.Plan(context.Background(), img, mode("ok"))
	if err != nil {
		t.Fatal(err)
	}
	return pl
}
