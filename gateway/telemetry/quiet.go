package telemetry

import (
	"context"
	"log/slog"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Back-off of a failing exporter: the first retry waits minBackoff, each further failure doubles
// the wait up to maxBackoff (short: `iris profile` starts its OTLP receiver after the server has
// already failed to export, and waits a few seconds for the spans of its requests);
// "still failing" is logged at most once per logEvery; at most maxPending spans wait for the
// collector, the oldest are dropped beyond that.
const (
	minBackoff = 250 * time.Millisecond
	maxBackoff = 2 * time.Second
	logEvery   = time.Minute
	maxPending = 4096
)

// quietExporter wraps the OTLP exporter so that a collector that is down costs one log line, not
// one per batch: the first failure is logged through the server's logger; after it, batches are
// held (up to maxPending spans) instead of sent until the back-off has passed, then sent together
// (with the next batch, or by a timer when none comes);
// a failure doubles the back-off and is logged again only once per logEvery; the first success
// after a failure is logged with the number of spans dropped. It returns nil for a held or failed
// batch, so that the SDK does not report every one through OpenTelemetry's global error handler
// (which printed one line per export in the standard log's format).
type quietExporter struct {
	next sdktrace.SpanExporter
	log  *slog.Logger
	desc string
	now  func() time.Time
	// after runs f once d has passed: the held spans are retried even if no new batch comes.
	after func(d time.Duration, f func())

	mu       sync.Mutex
	failing  bool
	backoff  time.Duration
	retryAt  time.Time // no export is tried before this while failing
	loggedAt time.Time // the last "failing" line
	pending  []sdktrace.ReadOnlySpan
	dropped  int // spans given up since the failure began
	failures int // failed attempts since the failure began
}

func newQuietExporter(next sdktrace.SpanExporter, log *slog.Logger, desc string) *quietExporter {
	if log == nil {
		log = slog.Default()
	}
	return &quietExporter{next: next, log: log, desc: desc, now: time.Now,
		after: func(d time.Duration, f func()) { time.AfterFunc(d, f) }}
}

// retry sends the held spans once the back-off has passed, when no batch came to carry them.
func (q *quietExporter) retry() {
	q.mu.Lock()
	idle := len(q.pending) == 0
	q.mu.Unlock()
	if idle {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = q.ExportSpans(ctx, nil)
}

// hold keeps spans for the next attempt (the SDK reuses its batch slice, so they are copied),
// dropping the oldest beyond maxPending. q.mu is held.
func (q *quietExporter) hold(spans []sdktrace.ReadOnlySpan) {
	q.pending = append(q.pending, spans...)
	if over := len(q.pending) - maxPending; over > 0 {
		q.dropped += over
		q.pending = append(q.pending[:0], q.pending[over:]...)
	}
}

// ExportSpans sends spans, with those held since a failure, unless the exporter is backing off.
func (q *quietExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	q.mu.Lock()
	if q.failing {
		q.hold(spans)
		if q.now().Before(q.retryAt) {
			q.mu.Unlock()
			return nil
		}
		spans, q.pending = q.pending, nil
	}
	q.mu.Unlock()

	err := q.next.ExportSpans(ctx, spans)

	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	if err == nil {
		if q.failing {
			q.log.Info("exporting spans recovered", "exporter", q.desc, "dropped_spans", q.dropped, "failed_attempts", q.failures)
			q.failing, q.backoff, q.dropped, q.failures = false, 0, 0, 0
		}
		return nil
	}
	q.failures++
	if !q.failing {
		q.failing, q.backoff, q.loggedAt = true, minBackoff, now
		q.log.Warn("exporting spans failed; retrying with back-off, logged again at most once a minute while it lasts",
			"exporter", q.desc, "err", err)
	} else {
		q.backoff = min(2*q.backoff, maxBackoff)
		if now.Sub(q.loggedAt) >= logEvery {
			q.loggedAt = now
			q.log.Warn("exporting spans still failing", "exporter", q.desc, "err", err,
				"dropped_spans", q.dropped, "failed_attempts", q.failures)
		}
	}
	q.hold(spans)
	q.retryAt = now.Add(q.backoff)
	q.after(q.backoff, q.retry)
	return nil
}

// Shutdown tries the held spans once more, back-off or not, and stops the wrapped exporter.
func (q *quietExporter) Shutdown(ctx context.Context) error {
	q.mu.Lock()
	pending := q.pending
	q.pending = nil
	q.mu.Unlock()
	if len(pending) > 0 {
		_ = q.next.ExportSpans(ctx, pending) // a collector still down was logged already
	}
	return q.next.Shutdown(ctx)
}
