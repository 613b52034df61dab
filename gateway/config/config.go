// Package config reads and validates the gateway's configuration file (strict TOML: an unknown
// key is an error that names it).
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/iris-vlm/iris/core"
)

// Config is the whole gateway configuration. The zero value of any field takes the default that
// [Default] shows.
type Config struct {
	Server    Server    `toml:"server"`
	Runtime   Runtime   `toml:"runtime"`
	Log       Log       `toml:"log"`
	Telemetry Telemetry `toml:"telemetry"`
}

// Server configures the HTTP server.
type Server struct {
	// Addr is the listen address, host:port.
	Addr string `toml:"addr"`
	// MaxBodyBytes caps a request body; a larger one gets 413.
	MaxBodyBytes int64 `toml:"max_body_bytes"`
	// ReadHeaderTimeout bounds reading the request headers; ReadTimeout the whole request,
	// body included (a 32 MiB upload on a slow link needs time).
	ReadHeaderTimeout time.Duration `toml:"read_header_timeout"`
	ReadTimeout       time.Duration `toml:"read_timeout"`
	// IdleTimeout closes idle keep-alive connections.
	IdleTimeout time.Duration `toml:"idle_timeout"`
	// RequestTimeout bounds one request's work in the runtime (504 beyond it); 0 disables it.
	RequestTimeout time.Duration `toml:"request_timeout"`
	// StreamWriteTimeout bounds each write of a streamed answer, so that a client that stops
	// reading cannot hold a worker forever.
	StreamWriteTimeout time.Duration `toml:"stream_write_timeout"`
	// ShutdownTimeout is how long a graceful shutdown waits for running requests.
	ShutdownTimeout time.Duration `toml:"shutdown_timeout"`
	// IdleReclaim is how long after the last chat request ends the server runs a GC and hands
	// free heap back to the OS (debug.FreeOSMemory), so an idle server does not keep the heap
	// of its last burst; 0 disables it.
	IdleReclaim time.Duration `toml:"idle_reclaim"`
	// TrustedProxies are the proxies (IPs or CIDRs) whose X-Forwarded-For is believed for the
	// client address in logs; empty trusts none.
	TrustedProxies []string `toml:"trusted_proxies"`
	// RemoteImages allows http(s) image URLs; off unless hosts are listed.
	RemoteImages RemoteImages `toml:"remote_images"`
}

// RemoteImages configures fetching http(s) image URLs. With no AllowHosts every such URL is
// refused with 400 image_url_not_allowed.
type RemoteImages struct {
	// AllowHosts lists the hosts (exact, case-insensitive, "host" or "host:port") the gateway
	// may fetch images from.
	AllowHosts []string `toml:"allow_hosts"`
	// AllowHTTP also allows plain http URLs (https only otherwise).
	AllowHTTP bool `toml:"allow_http"`
	// MaxBytes caps a fetched image.
	MaxBytes int64 `toml:"max_bytes"`
	// Timeout bounds one fetch, connection to last byte.
	Timeout time.Duration `toml:"timeout"`
}

// Enabled reports whether any remote image may be fetched.
func (r RemoteImages) Enabled() bool { return len(r.AllowHosts) > 0 }

// Runtime configures the runtime (core) the gateway serves.
type Runtime struct {
	// Bundles are the bundle directories to load.
	Bundles []string `toml:"bundles"`
	// Workers is how many requests of one model run at once; the engine batches their passes
	// (continuous batching), so it is also the largest batch.
	Workers int `toml:"workers"`
	// BatchTokens caps the tokens of one engine pass: prefill chunks, and decodes in the room left.
	BatchTokens int `toml:"batch_tokens"`
	// KVCacheTokens sizes each model's KV-cache pool in tokens; 0 takes the engine's default
	// (the larger of one context and the smaller of 16 contexts and 1 GiB of cache).
	KVCacheTokens int `toml:"kv_cache_tokens"`
	// VisionAlone runs the vision tower on one image at a time instead of a scheduler round's
	// images in one pass (batched vision: measured on the CPU, not yet on the GPU).
	VisionAlone bool `toml:"vision_alone"`
	// VisionPatches caps the image patches of one vision-tower pass (0: the engine's default,
	// engine.SchedulerOptions.VisionPatches).
	VisionPatches int `toml:"vision_patches"`
	// DecodeApart runs decode steps in passes of their own instead of beside the prefill chunks
	// of the same round (engine.SchedulerOptions.DecodeApart).
	DecodeApart bool `toml:"decode_apart"`
	// DecodeByRequest has each decode step sent by its request once it took the token before,
	// instead of queued by the scheduler as soon as a pass gives it
	// (engine.SchedulerOptions.DecodeByRequest).
	DecodeByRequest bool `toml:"decode_by_request"`
	// DecodeHold is how long a round of decode steps alone (at least DecodeHoldRows of them, 0:
	// 32) may wait for the prompts of images in a cuda model's tower, whose prefill pass then
	// carries them (default core.DefaultDecodeHold; 0: never).
	DecodeHold     time.Duration `toml:"decode_hold"`
	DecodeHoldRows int           `toml:"decode_hold_rows"`
	// VisionSerial runs the vision tower between the decoder's passes, on one stream, instead
	// of beside them on a stream of its own (a cuda bundle; the CPU always takes turns).
	VisionSerial bool `toml:"vision_serial"`
	// VisionLanes is how many tower passes of a cuda bundle run at once beside the decoder's, a
	// stream each (0: 2): one pass's host work overlaps another's kernels.
	VisionLanes int `toml:"vision_lanes"`
	// FusedSwiGLU runs a cuda bf16 bundle's gate/up products of prefill and tower passes with
	// SwiGLU (and biases) in their epilogue (only builds with the quack tag have it; others
	// refuse to load).
	FusedSwiGLU bool `toml:"fused_swiglu"`
	// PromptHeads is how many prompt heads (the tokens before a prompt's first image: the chat
	// template's system turn) keep their KV rows for the next prompts that start with them,
	// which copy those rows instead of computing them (0: 8; negative: none).
	PromptHeads int `toml:"prompt_heads"`
	// QueueDepth is how many more may wait; beyond it requests get 429 (0 takes the runtime's
	// default, core.DefaultQueueDepth). A waiting request holds its image file's bytes.
	QueueDepth int `toml:"queue_depth"`
	// CacheDir keeps compiled plugins across restarts; empty disables the cache.
	CacheDir string `toml:"cache_dir"`
	// EmbeddingCacheBytes caps each model's image-embedding cache (vision-tower outputs of
	// recent images, on the GPU for a cuda bundle); 0 disables it.
	EmbeddingCacheBytes int64 `toml:"embedding_cache_bytes"`
}

// Core returns the runtime settings as core takes them.
func (r Runtime) Core() core.Config {
	c := core.Config{Bundles: r.Bundles, Workers: r.Workers, BatchTokens: r.BatchTokens, KVCacheTokens: r.KVCacheTokens, VisionAlone: r.VisionAlone, VisionPatches: r.VisionPatches, DecodeApart: r.DecodeApart, DecodeByRequest: r.DecodeByRequest, VisionSerial: r.VisionSerial, VisionLanes: r.VisionLanes, FusedSwiGLU: r.FusedSwiGLU, PromptHeads: r.PromptHeads, QueueDepth: r.QueueDepth, CacheDir: r.CacheDir}
	c.EmbeddingCacheBytes = r.EmbeddingCacheBytes
	c.DecodeHold, c.DecodeHoldRows = r.DecodeHold, r.DecodeHoldRows
	if c.DecodeHold == 0 {
		c.DecodeHold = -1 // set to 0: never (core's 0 is its default)
	}
	return c
}

// Log configures the structured log.
type Log struct {
	// Level is debug, info, warn or error.
	Level string `toml:"level"`
	// Format is text or json.
	Format string `toml:"format"`
}

// Telemetry configures OpenTelemetry tracing (see gateway/telemetry.Config).
type Telemetry struct {
	// Exporter is "none", "otlp-http" or "otlp-grpc"; empty lets the standard OTEL_* variables
	// decide (and exports nothing when they are unset).
	Exporter string `toml:"exporter"`
	// Endpoint is host:port or a URL; empty takes OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT.
	Endpoint string `toml:"endpoint"`
	// Insecure sends to a host:port endpoint without TLS.
	Insecure bool `toml:"insecure"`
	// Headers go with every export (e.g. authorization).
	Headers map[string]string `toml:"headers"`
	// SampleRatio is the fraction of new traces recorded, in (0, 1]; 0 means all.
	SampleRatio float64 `toml:"sample_ratio"`
	// ServiceName names this process in traces.
	ServiceName string `toml:"service_name"`
}

// Default returns the configuration used when a file sets nothing.
func Default() Config {
	cfg := Config{
		Server: Server{
			Addr:               "127.0.0.1:8080",
			MaxBodyBytes:       32 << 20,
			ReadHeaderTimeout:  10 * time.Second,
			ReadTimeout:        2 * time.Minute,
			IdleTimeout:        2 * time.Minute,
			RequestTimeout:     10 * time.Minute,
			StreamWriteTimeout: 30 * time.Second,
			ShutdownTimeout:    30 * time.Second,
			IdleReclaim:        2 * time.Second,
			RemoteImages: RemoteImages{
				MaxBytes: 20 << 20,
				Timeout:  10 * time.Second,
			},
		},
		Runtime:   Runtime{Workers: core.DefaultWorkers, BatchTokens: core.DefaultBatchTokens, QueueDepth: core.DefaultQueueDepth},
		Log:       Log{Level: "info", Format: "text"},
		Telemetry: Telemetry{ServiceName: "iris"},
	}
	cfg.Runtime.EmbeddingCacheBytes = core.DefaultEmbeddingCacheBytes
	cfg.Runtime.DecodeHold = core.DefaultDecodeHold
	return cfg
}

// Load reads a TOML file over the defaults and validates the result. An unknown key is an error
// that names it.
func Load(path string) (Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("load config: %w", err)
	}
	cfg, err := Decode(string(raw))
	if err != nil {
		return Config{}, fmt.Errorf("load config %s: %w", path, err)
	}
	return cfg, nil
}

// Decode parses TOML text over the defaults and validates the result.
func Decode(text string) (Config, error) {
	cfg := Default()
	md, err := toml.Decode(text, &cfg)
	if err != nil {
		return Config{}, err
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = fmt.Sprintf("%q", k.String())
		}
		return Config{}, fmt.Errorf("unknown key %s", strings.Join(keys, ", "))
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Validate checks every value; the error names the first bad key.
func (c *Config) Validate() error {
	s := c.Server
	if _, _, err := net.SplitHostPort(s.Addr); err != nil {
		return fmt.Errorf("server.addr: %q is not host:port", s.Addr)
	}
	positive := []struct {
		key string
		v   time.Duration
	}{
		{"server.read_header_timeout", s.ReadHeaderTimeout},
		{"server.read_timeout", s.ReadTimeout},
		{"server.idle_timeout", s.IdleTimeout},
		{"server.stream_write_timeout", s.StreamWriteTimeout},
		{"server.shutdown_timeout", s.ShutdownTimeout},
		{"server.remote_images.timeout", s.RemoteImages.Timeout},
	}
	for _, p := range positive {
		if p.v <= 0 {
			return fmt.Errorf("%s: must be positive, got %s", p.key, p.v)
		}
	}
	switch {
	case s.RequestTimeout < 0:
		return errors.New("server.request_timeout: must be >= 0 (0 disables it)")
	case s.IdleReclaim < 0:
		return errors.New("server.idle_reclaim: must be >= 0 (0 disables it)")
	case s.MaxBodyBytes < 1<<10:
		return fmt.Errorf("server.max_body_bytes: must be at least 1024, got %d", s.MaxBodyBytes)
	case s.RemoteImages.MaxBytes < 1:
		return fmt.Errorf("server.remote_images.max_bytes: must be positive, got %d", s.RemoteImages.MaxBytes)
	}
	for _, p := range s.TrustedProxies {
		if net.ParseIP(p) == nil {
			if _, _, err := net.ParseCIDR(p); err != nil {
				return fmt.Errorf("server.trusted_proxies: %q is neither an IP nor a CIDR", p)
			}
		}
	}
	for _, h := range s.RemoteImages.AllowHosts {
		if h == "" || strings.ContainsAny(h, "/@ ") {
			return fmt.Errorf("server.remote_images.allow_hosts: %q is not a host or host:port", h)
		}
	}
	r := c.Runtime
	switch {
	case r.Workers < 1:
		return fmt.Errorf("runtime.workers: must be at least 1, got %d", r.Workers)
	case r.QueueDepth < 0:
		return fmt.Errorf("runtime.queue_depth: must be >= 0, got %d", r.QueueDepth)
	case r.BatchTokens < 0:
		return fmt.Errorf("runtime.batch_tokens: must be >= 0 (0 takes the default), got %d", r.BatchTokens)
	case r.KVCacheTokens < 0:
		return fmt.Errorf("runtime.kv_cache_tokens: must be >= 0 (0 takes the engine's default), got %d", r.KVCacheTokens)
	case r.VisionPatches < 0:
		return fmt.Errorf("runtime.vision_patches: must be >= 0 (0 takes the engine's default), got %d", r.VisionPatches)
	case r.DecodeHold < 0:
		return fmt.Errorf("runtime.decode_hold: must be >= 0 (0: never), got %s", r.DecodeHold)
	case r.DecodeHoldRows < 0:
		return fmt.Errorf("runtime.decode_hold_rows: must be >= 0 (0 takes the engine's default), got %d", r.DecodeHoldRows)
	}
	if r.EmbeddingCacheBytes < 0 {
		return fmt.Errorf("runtime.embedding_cache_bytes: must be >= 0 (0 disables the cache), got %d", r.EmbeddingCacheBytes)
	}
	for _, b := range r.Bundles {
		if b == "" {
			return errors.New("runtime.bundles: empty path")
		}
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("log.level: %q is not one of debug, info, warn, error", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		return fmt.Errorf("log.format: %q is not text or json", c.Log.Format)
	}
	if c.Telemetry.ServiceName == "" {
		return errors.New("telemetry.service_name: must not be empty")
	}
	switch c.Telemetry.Exporter {
	case "", "none", "otlp-http", "otlp-grpc":
	default:
		return fmt.Errorf("telemetry.exporter: %q is not none, otlp-http or otlp-grpc", c.Telemetry.Exporter)
	}
	if r := c.Telemetry.SampleRatio; r < 0 || r > 1 {
		return fmt.Errorf("telemetry.sample_ratio: %v is outside [0, 1]", r)
	}
	return nil
}
