package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/iris-vlm/iris/core"
	"github.com/iris-vlm/iris/gateway/config"
	"github.com/iris-vlm/iris/gateway/server"
)

// repeated collects a flag given several times.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("iris serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var bundleDirs repeated
	cfgPath := fs.String("config", "", "gateway configuration file (TOML; see configs/gateway.example.toml)")
	fs.Var(&bundleDirs, "bundle", "bundle directory to serve (repeat for several); adds to the config's runtime.bundles")
	addr := fs.String("addr", "", "listen address host:port (default 127.0.0.1:8080)")
	workers := fs.Int("workers", 0, "requests of one model running at once, batched by the engine (default 64)")
	queue := fs.Int("queue-depth", 0, fmt.Sprintf("requests of one model that may wait; beyond that 429 (default %d)", core.DefaultQueueDepth))
	cacheDir := fs.String("cache-dir", "", "directory for compiled plugins across restarts")
	logLevel := fs.String("log-level", "", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg := config.Default()
	if *cfgPath != "" {
		var err error
		if cfg, err = config.Load(*cfgPath); err != nil {
			return err
		}
	}
	cfg.Runtime.Bundles = append(cfg.Runtime.Bundles, bundleDirs...)
	if *addr != "" {
		cfg.Server.Addr = *addr
	}
	if *workers > 0 {
		cfg.Runtime.Workers = *workers
	}
	if *queue > 0 {
		cfg.Runtime.QueueDepth = *queue
	}
	if *cacheDir != "" {
		cfg.Runtime.CacheDir = *cacheDir
	}
	if *logLevel != "" {
		cfg.Log.Level = *logLevel
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if len(cfg.Runtime.Bundles) == 0 {
		fs.Usage()
		return errors.New("serve: no bundle: pass --bundle <dir> or list runtime.bundles in the config")
	}
	logger, err := newLogger(cfg.Log, stderr)
	if err != nil {
		return err
	}
	gin.SetMode(gin.ReleaseMode)

	tp, prop, shutdownTracing, err := setupTracing(ctx, cfg.Telemetry, logger)
	if err != nil {
		return err
	}
	defer func() {
		if err := shutdownTracing(context.WithoutCancel(ctx)); err != nil {
			logger.Warn("flushing traces", "err", err)
		}
	}()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	rt, err := core.Open(ctx, cfg.Runtime.Core(), core.WithRegisterer(reg), core.WithTracerProvider(tp), core.WithLogger(logger))
	if err != nil {
		return err
	}
	defer func() {
		if err := rt.Close(); err != nil {
			logger.Warn("closing the runtime", "err", err)
		}
	}()
	srv, err := server.New(cfg.Server, server.Deps{Backend: rt, Registry: reg, Logger: logger, TracerProvider: tp, Propagator: prop})
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Server.Addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	logger.Info("listening", "addr", ln.Addr().String(), "models", modelNames(rt))
	go func() {
		if err := rt.Warmup(ctx); err != nil {
			logger.Error("warm-up failed; /readyz stays 503", "err", err)
			return
		}
		logger.Info("ready", "addr", ln.Addr().String())
	}()
	return srv.Run(ctx, ln)
}

func modelNames(rt *core.Runtime) []string {
	var out []string
	for _, m := range rt.Models() {
		out = append(out, m.Name)
	}
	return out
}

func newLogger(c config.Log, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.Level)); err != nil {
		return nil, fmt.Errorf("log.level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}
