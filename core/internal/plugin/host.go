package plugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
)

// Options configure a Host.
type Options struct {
	// CacheDir is the on-disk compilation cache (created if missing). Empty keeps compiled code
	// in memory only, so every process start compiles again (about a second per plugin).
	CacheDir string
	// Registerer receives the host's metrics; nil leaves them unregistered.
	Registerer prometheus.Registerer
	// TracerProvider makes the per-call spans; nil uses otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// Logger receives failed calls with the guest's last stderr lines; nil discards them.
	Logger *slog.Logger
}

// Limits are a plugin's sandbox bounds, taken from its bundle. Zero fields take the defaults.
type Limits struct {
	// MemoryPages caps each instance's linear memory in 64 KiB pages (default 512: 32 MiB; a
	// Go plugin starts at about 50 pages and settles near 120).
	MemoryPages uint32
	// Timeout bounds the guest's work in one call (default 1s). Waiting for a free instance is
	// bounded by the caller's context only.
	Timeout time.Duration
	// StartTimeout bounds starting an instance: the guest's _initialize (default 10s).
	StartTimeout time.Duration
	// Instances bounds the pool: at most this many calls run at once (default GOMAXPROCS).
	Instances int
	// MaxCalls recycles an instance after this many calls, bounding what a guest's heap can
	// accumulate (default 10000).
	MaxCalls int
}

// Defaults for zero Limits fields.
const (
	DefaultMemoryPages  = 512
	DefaultTimeout      = time.Second
	DefaultStartTimeout = 10 * time.Second
	DefaultMaxCalls     = 10000
)

func (l Limits) withDefaults() Limits {
	if l.MemoryPages == 0 {
		l.MemoryPages = DefaultMemoryPages
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	if l.StartTimeout <= 0 {
		l.StartTimeout = DefaultStartTimeout
	}
	if l.Instances <= 0 {
		l.Instances = runtime.GOMAXPROCS(0)
	}
	if l.MaxCalls <= 0 {
		l.MaxCalls = DefaultMaxCalls
	}
	return l
}

// Host compiles and runs plugins. Create one per process.
//
// # Notes
//
//   - Safe for concurrent use.
//   - Close it after closing its plugins; it releases the compilation cache.
type Host struct {
	cache   wazero.CompilationCache
	metrics *metrics
	tracer  trace.Tracer
	log     *slog.Logger
}

// NewHost returns a Host with the given options.
func NewHost(opts Options) (*Host, error) {
	var (
		cache wazero.CompilationCache
		err   error
	)
	if opts.CacheDir != "" {
		if cache, err = wazero.NewCompilationCacheWithDir(opts.CacheDir); err != nil {
			return nil, fmt.Errorf("opening the plugin compilation cache: %w", err)
		}
	} else {
		cache = wazero.NewCompilationCache()
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("registering plugin metrics: %w", err)
	}
	tp := opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Host{
		cache:   cache,
		metrics: m,
		tracer:  tp.Tracer("github.com/iris-vlm/iris/core/internal/plugin"),
		log:     log,
	}, nil
}

// Close releases the compilation cache. Plugins loaded by the host must be closed first.
func (h *Host) Close(ctx context.Context) error {
	if err := h.cache.Close(ctx); err != nil {
		return fmt.Errorf("closing the plugin compilation cache: %w", err)
	}
	return nil
}

// Load checks, compiles and starts a plugin module. name labels its metrics, spans and errors
// (the bundle's name or family). When wantSHA256 is not empty the module's digest must match it.
// Load starts one instance and asks it to describe itself, so a module that cannot start, speaks
// another ABI version or describes itself wrongly fails here, not on the first request.
func (h *Host) Load(ctx context.Context, name string, wasm []byte, wantSHA256 string, lim Limits) (*Plugin, error) {
	sum := sha256.Sum256(wasm)
	digest := hex.EncodeToString(sum[:])
	if wantSHA256 != "" && wantSHA256 != digest {
		return nil, fmt.Errorf("loading plugin %s: sha256 %s, the bundle says %s", name, digest, wantSHA256)
	}
	lim = lim.withDefaults()
	cfg := wazero.NewRuntimeConfig().
		WithCompilationCache(h.cache).
		WithMemoryLimitPages(lim.MemoryPages).
		WithCloseOnContextDone(true)
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	p, err := h.load(ctx, rt, name, digest, wasm, lim)
	if err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("loading plugin %s: %w", name, err)
	}
	return p, nil
}

func (h *Host) load(ctx context.Context, rt wazero.Runtime, name, digest string, wasm []byte, lim Limits) (*Plugin, error) {
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		return nil, fmt.Errorf("instantiating WASI: %w", err)
	}
	compiled, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		return nil, fmt.Errorf("compiling: %w", err)
	}
	marker, err := checkModule(name, compiled)
	if err != nil {
		return nil, err
	}
	p := &Plugin{
		host:     h,
		name:     name,
		digest:   digest,
		lim:      lim,
		runtime:  rt,
		compiled: compiled,
		sem:      make(chan struct{}, lim.Instances),
		idle:     make(chan *instance, lim.Instances),
		closing:  make(chan struct{}),
	}
	out, err := p.call(ctx, opDescribe, nil)
	if err != nil {
		return nil, err
	}
	d, err := abi.DecodeResponse[abi.Description](out)
	if err == nil {
		err = d.Validate()
	}
	if err == nil {
		err = checkVersion(&d, marker)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: describe: %w", ErrIncompatible, err)
	}
	p.desc = d
	return p, nil
}

// checkVersion refuses a description whose ABI the module's marker or wire minor cannot carry:
// an ABI-2 plugin must export a v2 marker and answer at wire minor 2 (views and spans travel
// there).
func checkVersion(d *abi.Description, marker int) error {
	if d.ABI > marker {
		return fmt.Errorf("the plugin says ABI v%d, its marker iris_abi_v%d says at most v%d", d.ABI, marker, marker)
	}
	if d.ABI >= 2 && d.Minor < 2 {
		return fmt.Errorf("the plugin says ABI v%d at wire minor %d; ABI v2 needs minor 2", d.ABI, d.Minor)
	}
	return nil
}
