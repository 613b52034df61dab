package telemetry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/iris-vlm/iris/internal/poll"
)

// stubExporter fails while err is set, counts the batches it is asked to send and the spans it
// accepted.
type stubExporter struct {
	mu    sync.Mutex
	err   error
	calls int
	spans int
}

func (s *stubExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.err == nil {
		s.spans += len(spans)
	}
	return s.err
}

func (s *stubExporter) Shutdown(context.Context) error { return nil }

// TestQuietExporterBacksOff runs a collector that refuses connections for ten minutes of a fake
// clock, exporting a batch every 100 ms (the profiler's schedule): the failure is logged once at
// first and then at most once a minute, the exporter is tried with a growing back-off instead of
// per batch, the recovery is logged once with the spans dropped, and the spans held meanwhile
// (the newest maxPending) are delivered.
func TestQuietExporterBacksOff(t *testing.T) {
	var logs bytes.Buffer
	stub := &stubExporter{err: errors.New("Post \"http://127.0.0.1:1/v1/traces\": dial tcp 127.0.0.1:1: connect: connection refused")}
	q := newQuietExporter(stub, slog.New(slog.NewTextHandler(&logs, nil)), "otlp-http test")
	clock := time.Unix(0, 0)
	q.now = func() time.Time { return clock }
	var timers int
	q.after = func(time.Duration, func()) { timers++ } // batches come every tick; the timer is tested below
	batch := tracetest.SpanStubs{{Name: "a"}, {Name: "b"}}.Snapshots()
	const tick = 100 * time.Millisecond
	batches := 0
	for clock.Before(time.Unix(600, 0)) {
		if err := q.ExportSpans(context.Background(), batch); err != nil {
			t.Fatalf("ExportSpans returned %v; a failure must not reach the SDK's error handler", err)
		}
		batches++
		clock = clock.Add(tick)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if !strings.Contains(lines[0], "exporting spans failed") || !strings.Contains(lines[0], "connection refused") {
		t.Errorf("first line %q is not the failure", lines[0])
	}
	// 6000 batches in 10 minutes: one line at first, then at most one a minute.
	if len(lines) > 11 {
		t.Errorf("%d log lines for a 10-minute outage, want <= 11:\n%s", len(lines), logs.String())
	}
	// 0.25, 0.5, 1 s, then every 2 s: about 300 attempts, not 6000.
	if stub.calls > 400 || stub.calls < 100 {
		t.Errorf("the exporter was tried %d times in 10 minutes of %d batches, want a back-off (100..400)", stub.calls, batches)
	}

	// The collector comes back: the next attempt after the back-off succeeds and is logged once.
	stub.mu.Lock()
	stub.err = nil
	stub.mu.Unlock()
	logs.Reset()
	for range 1200 { // 2 minutes
		if err := q.ExportSpans(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
		clock = clock.Add(tick)
	}
	out := logs.String()
	var dropped int
	if i := strings.Index(out, "dropped_spans="); i >= 0 {
		_, _ = fmt.Sscanf(out[i:], "dropped_spans=%d", &dropped)
	}
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, "exporting spans recovered") || dropped == 0 {
		t.Errorf("after recovery the log is %q, want one recovery line with the spans dropped", out)
	}
	// Every span is either delivered or counted as dropped; the newest maxPending held in the
	// outage are delivered with the first successful attempt.
	if total := 2 * (batches + 1200); stub.spans+dropped != total || stub.spans < maxPending+2*1100 {
		t.Errorf("%d spans delivered and %d dropped of %d, want every span accounted for and the %d held delivered", stub.spans, dropped, total, maxPending)
	}
	calls := stub.calls
	if err := q.ExportSpans(context.Background(), batch); err != nil || stub.calls != calls+1 {
		t.Errorf("a recovered exporter must send every batch (err %v, calls %d -> %d)", err, calls, stub.calls)
	}

	// A new failure is logged again, once.
	stub.mu.Lock()
	stub.err = errors.New("connection refused")
	stub.mu.Unlock()
	logs.Reset()
	for range 50 {
		_ = q.ExportSpans(context.Background(), batch)
		clock = clock.Add(tick)
	}
	if n := strings.Count(logs.String(), "exporting spans failed"); n != 1 || strings.Count(logs.String(), "\n") != 1 {
		t.Errorf("a second outage logged %q, want one failure line", logs.String())
	}
}

// TestSetupQuietWithoutCollector starts the real OTLP/HTTP exporter against a port nobody listens
// on with a 10 ms batch delay: ending spans for a while logs the refusal once, in the logger's
// format.
func TestSetupQuietWithoutCollector(t *testing.T) {
	clearEnv(t)
	var (
		mu   sync.Mutex
		logs bytes.Buffer
	)
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return logs.Write(p) })
	tel, err := Setup(context.Background(), Config{
		Exporter: ExporterOTLPHTTP, Endpoint: "http://" + closedPort(t) + "/v1/traces",
		BatchDelay: 10 * time.Millisecond, Timeout: time.Second,
		Logger: slog.New(slog.NewJSONHandler(w, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	tr := tel.TracerProvider().Tracer("test")
	for range 30 {
		_, span := tr.Start(context.Background(), "request")
		span.End()
		// the load under test: a span every 10 ms for 300 ms, so that batch after batch (10 ms
		// batch delay) fails while the failure is logged once
		time.Sleep(10 * time.Millisecond)
	}
	_ = tel.Shutdown(context.Background())
	mu.Lock()
	defer mu.Unlock()
	out := logs.String()
	if n := strings.Count(out, "exporting spans failed"); n != 1 {
		t.Errorf("%d failure lines, want 1:\n%s", n, out)
	}
	if !strings.HasPrefix(out, `{"time":`) {
		t.Errorf("the failure is not in the logger's (JSON) format:\n%s", out)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// closedPort returns a loopback host:port that nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// TestQuietExporterRetriesWithoutNewBatches: spans held after a failure are sent when the
// back-off has passed even if no further batch comes (a short burst of requests, then silence).
func TestQuietExporterRetriesWithoutNewBatches(t *testing.T) {
	stub := &stubExporter{err: errors.New("connection refused")}
	q := newQuietExporter(stub, slog.New(slog.DiscardHandler), "test")
	batch := tracetest.SpanStubs{{Name: "a"}, {Name: "b"}, {Name: "c"}}.Snapshots()
	_ = q.ExportSpans(context.Background(), batch)
	stub.mu.Lock()
	stub.err = nil
	stub.mu.Unlock()
	_ = q.ExportSpans(context.Background(), batch) // within the back-off: held
	poll.Until(t, 10*time.Second, "the timer to retry the held spans (6 spans exported)", func() string {
		stub.mu.Lock()
		defer stub.mu.Unlock()
		if stub.spans == 6 {
			return ""
		}
		return fmt.Sprintf("%d calls, %d spans", stub.calls, stub.spans)
	})
}
