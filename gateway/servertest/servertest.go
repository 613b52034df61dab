// Package servertest serves bundles through the real runtime and gateway for tests: the
// plugin, the tokenizer and the engine, as `iris serve` runs them, on a handler or an httptest
// server. It is for tests only (it takes a testing.TB); shipped code never imports it.
package servertest

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iris-vlm/iris/core"
	"github.com/iris-vlm/iris/gateway/config"
	"github.com/iris-vlm/iris/gateway/server"
)

// Server is a warmed-up runtime and the gateway over it.
type Server struct {
	Runtime  *core.Runtime
	Registry *prometheus.Registry // the runtime's and the gateway's metrics
	Handler  http.Handler
}

// New opens the runtime on cfg (its bundles), warms it up and builds the gateway on it with
// the default server settings; the runtime closes at the test's cleanup. Nothing is logged:
// the benchmarks built on it time the answer, which the client has before it is logged.
func New(t testing.TB, cfg core.Config) *Server {
	t.Helper()
	reg := prometheus.NewRegistry()
	logger := slog.New(slog.DiscardHandler)
	rt, err := core.Open(t.Context(), cfg, core.WithRegisterer(reg), core.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	if err := rt.Warmup(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(config.Default().Server, server.Deps{Backend: rt, Registry: reg, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	return &Server{Runtime: rt, Registry: reg, Handler: srv.Handler()}
}

// Start serves the bundle directories (core's defaults otherwise) on an httptest server,
// closed at the test's cleanup.
func Start(t testing.TB, bundles ...string) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(New(t, core.Config{Bundles: bundles}).Handler)
	t.Cleanup(ts.Close)
	return ts
}
