// Package server is the gateway's HTTP server: the gin routes of the OpenAI-compatible API,
// the mapping between the openai wire types and the runtime (core), SSE streaming, health,
// readiness and metrics endpoints, and graceful shutdown.
//
// # Notes
//
//   - The caller sets gin's mode (gin.SetMode(gin.ReleaseMode) in main); New does not touch
//     that process-wide setting.
//   - A Server is safe for concurrent use.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/iris-vlm/iris/core"
	"github.com/iris-vlm/iris/gateway/config"
	"github.com/iris-vlm/iris/gateway/middleware"
)

// Backend is what the server needs from the runtime; *core.Runtime implements it.
//
// Generate calls emit synchronously, one event at a time, and never after it returned.
type Backend interface {
	Models() []core.ModelInfo
	Model(name string) (core.ModelInfo, bool)
	Ready() error
	Generate(ctx context.Context, req core.Request, emit core.Emit) (*core.Result, error)
	Stats() []core.Stats
}

var _ Backend = (*core.Runtime)(nil)

// Deps are the server's collaborators. Only Backend is required.
type Deps struct {
	Backend Backend
	// Registry takes the gateway's collectors and is served on /metrics; nil makes a fresh one.
	// Pass the registry the runtime registers with (core.WithRegisterer) to serve both.
	Registry *prometheus.Registry
	// Logger receives the access log and errors; nil uses slog.Default().
	Logger *slog.Logger
	// TracerProvider starts the request spans; nil uses otel's global provider.
	TracerProvider trace.TracerProvider
	// Propagator extracts the caller's trace context; nil uses W3C trace context and baggage.
	Propagator propagation.TextMapPropagator
	// Now is the clock of the responses' created field; nil uses time.Now.
	Now func() time.Time
}

// Server serves the HTTP API over a Backend.
type Server struct {
	cfg      config.Server
	backend  Backend
	log      *slog.Logger
	engine   *gin.Engine
	metrics  *modelMetrics
	fetcher  *fetcher
	now      func() time.Time
	draining atomic.Bool
	idle     *idleReclaim
}

// New builds the server and its routes. It registers the gateway's collectors with
// d.Registry, so it fails if they are already registered there.
func New(cfg config.Server, d Deps) (*Server, error) {
	if d.Backend == nil {
		return nil, errors.New("new server: no backend")
	}
	if d.Registry == nil {
		d.Registry = prometheus.NewRegistry()
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.TracerProvider == nil {
		d.TracerProvider = otel.GetTracerProvider()
	}
	if d.Propagator == nil {
		d.Propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if cfg.MaxBodyBytes <= 0 {
		return nil, errors.New("new server: max body bytes must be positive")
	}
	s := &Server{cfg: cfg, backend: d.Backend, log: d.Logger, now: d.Now, fetcher: newFetcher(cfg.RemoteImages)}
	s.idle = newIdleReclaim(cfg.IdleReclaim, reclaimHeap)
	httpMetrics, err := middleware.NewHTTPMetrics(d.Registry)
	if err != nil {
		return nil, fmt.Errorf("new server: %w", err)
	}
	if s.metrics, err = newModelMetrics(d.Registry, d.Backend); err != nil {
		return nil, fmt.Errorf("new server: %w", err)
	}

	e := gin.New()
	e.ContextWithFallback = true
	e.HandleMethodNotAllowed = true
	if err := e.SetTrustedProxies(cfg.TrustedProxies); err != nil {
		return nil, fmt.Errorf("new server: trusted proxies: %w", err)
	}
	// Outermost first: the id exists before anything logs, and the log, metrics and span see
	// the status that recovery or the body limit chose.
	e.Use(
		middleware.RequestID(),
		middleware.AccessLog(d.Logger, "/healthz", "/readyz", "/metrics"),
		httpMetrics.Handler(),
		middleware.Tracing(d.TracerProvider, d.Propagator),
		middleware.Recovery(d.Logger),
		middleware.BodyLimit(cfg.MaxBodyBytes),
	)
	e.POST("/v1/chat/completions", s.chatCompletions)
	e.GET("/v1/models", s.listModels)
	e.GET("/v1/models/:model", s.getModel)
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", gin.WrapH(promhttp.HandlerFor(d.Registry, promhttp.HandlerOpts{})))
	e.NoRoute(func(c *gin.Context) {
		middleware.Render(c, &middleware.HTTPError{Status: http.StatusNotFound, Code: "not_found", Message: "no such endpoint"})
	})
	e.NoMethod(func(c *gin.Context) {
		middleware.Render(c, &middleware.HTTPError{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed", Message: "this endpoint does not take that method"})
	})
	s.engine = e
	return s, nil
}

// Handler returns the HTTP handler of every route.
func (s *Server) Handler() http.Handler { return s.engine }

// HTTPServer returns an http.Server for the configured address, timeouts and handler. There is
// no write timeout: streamed answers are bounded per write (stream_write_timeout) and the work
// by request_timeout.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Addr:              s.cfg.Addr,
		Handler:           s.engine,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// Drain marks the server as shutting down: /readyz answers 503 from now on, so that a load
// balancer stops sending new work. Requests are still served.
func (s *Server) Drain() { s.draining.Store(true) }

// Run serves on ln until ctx is done, then shuts down gracefully: it drains, stops accepting
// connections and gives running requests up to the configured shutdown timeout to finish;
// whatever still runs then is cut off (its context canceled) and Run reports it. The caller
// closes the runtime after Run returns.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	hs := s.HTTPServer()
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	s.Drain()
	s.log.Info("shutting down", "timeout", s.cfg.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	err := hs.Shutdown(sctx)
	if err != nil {
		_ = hs.Close()
		err = fmt.Errorf("shutdown: requests still running after %s were cut off: %w", s.cfg.ShutdownTimeout, err)
	}
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		return errors.Join(err, fmt.Errorf("serve: %w", serr))
	}
	return err
}
