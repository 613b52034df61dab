// Package loadgen drives an OpenAI-compatible chat endpoint with a closed loop of concurrent
// workers, a warmup phase then a profiling phase, and records every exchange the way AIPerf's
// HTTP client does: the exact body sent, each response message with its monotonic timestamp,
// and the request's correlation headers.
package loadgen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/iris-vlm/iris/benchmark/aiperf"
	"github.com/iris-vlm/iris/benchmark/sse"
)

// ChatPath is appended to a base URL that names no path, as AIPerf does for chat endpoints.
const ChatPath = "/v1/chat/completions"

// Item is one request to send: its body (sent byte for byte) and the dataset session it came
// from.
type Item struct {
	Body []byte
	// Stream must match the body's "stream" field; it selects the Accept header.
	Stream bool
	// SessionID becomes the record's conversation_id.
	SessionID string
}

// Config configures a run.
type Config struct {
	// URL is the server's base URL (http://host:port), or a full endpoint URL with a path.
	URL         string
	Concurrency int
	// Warmup and Requests count the requests of each phase; items are used in order and wrap
	// around, continuing from warmup into profiling as AIPerf does.
	Warmup, Requests int
	// Timeout bounds one request (0: no bound beyond ctx).
	Timeout time.Duration
	// UserAgent is sent as User-Agent.
	UserAgent string
	// Client sends the requests (default: a client with keep-alive and no proxy).
	Client *http.Client
	// Progress, if set, is called after every finished request.
	Progress func(phase string, done, total int)
}

// Exchange is one finished request.
type Exchange struct {
	Raw       aiperf.RawRecord
	Answer    aiperf.Answer
	Transport aiperf.Transport
	Stream    bool
	// Images counts the body's image parts.
	Images int
}

// Result is everything a run recorded, in completion order.
type Result struct {
	Exchanges []Exchange
	// Windows holds each phase's span, keyed by phase name.
	Windows map[string]aiperf.Window
}

// EndpointURL returns the chat completions URL for a base URL: http:// is assumed when the
// scheme is missing, and ChatPath is appended when the URL has no path or ends in /v1.
func EndpointURL(base string) (string, error) {
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("parse url %q: %w", base, err)
	}
	if u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("url %q: want http(s)://host:port", base)
	}
	switch p := strings.TrimSuffix(u.Path, "/"); p {
	case "":
		u.Path = ChatPath
	case "/v1":
		u.Path = ChatPath
	}
	return u.String(), nil
}

// Run sends cfg.Warmup then cfg.Requests requests built from items and returns the exchanges.
// Failed requests are recorded, not returned as errors; an error means the run could not
// proceed (bad configuration or a canceled ctx).
func Run(ctx context.Context, cfg Config, items []Item) (*Result, error) {
	if len(items) == 0 {
		return nil, errors.New("run: no items")
	}
	if cfg.Concurrency < 1 || cfg.Requests < 1 || cfg.Warmup < 0 {
		return nil, fmt.Errorf("run: concurrency %d and requests %d must be >= 1, warmup %d >= 0", cfg.Concurrency, cfg.Requests, cfg.Warmup)
	}
	endpoint, err := EndpointURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	client := cfg.Client
	if client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.Proxy = nil
		tr.MaxIdleConnsPerHost = cfg.Concurrency
		tr.DisableCompression = true // AIPerf sends no Accept-Encoding
		client = &http.Client{Transport: tr}
	}
	g := &generator{cfg: cfg, endpoint: endpoint, client: client, items: items, clock: newClock()}
	res := &Result{Windows: map[string]aiperf.Window{}}
	next := 0
	for i, ph := range []struct {
		name string
		n    int
	}{{aiperf.PhaseWarmup, cfg.Warmup}, {aiperf.PhaseProfiling, cfg.Requests}} {
		if ph.n == 0 {
			continue
		}
		ex, win, err := g.phase(ctx, ph.name, i, ph.n, next)
		res.Exchanges = append(res.Exchanges, ex...)
		res.Windows[ph.name] = win
		if err != nil {
			return res, err
		}
		next += ph.n
	}
	return res, nil
}

type generator struct {
	cfg      Config
	endpoint string
	client   *http.Client
	items    []Item
	clock    clock
}

// phase runs n requests, items first..first+n-1 (wrapping), with the configured concurrency.
func (g *generator) phase(ctx context.Context, name string, index, n, first int) ([]Exchange, aiperf.Window, error) {
	win := aiperf.Window{StartNS: g.clock.wallNS(g.clock.now())}
	var (
		mu   sync.Mutex
		out  = make([]Exchange, 0, n)
		seq  atomic.Int64
		wg   sync.WaitGroup
		done int
	)
	workers := min(g.cfg.Concurrency, n)
	for w := range workers {
		wg.Go(func() {
			for {
				k := int(seq.Add(1) - 1)
				if k >= n || ctx.Err() != nil {
					return
				}
				item := g.items[(first+k)%len(g.items)]
				md := aiperf.Metadata{
					SessionNum: k, XRequestID: uuid.NewString(), XCorrelationID: uuid.NewString(),
					ConversationID: item.SessionID, TurnIndex: ptr(0),
					WorkerID: fmt.Sprintf("iris_worker_%d", w), RecordProcessorID: "iris_profile",
					BenchmarkPhase: name, PhaseIndex: ptr(index), PhaseName: name, PhaseKind: name,
				}
				if name == aiperf.PhaseProfiling {
					md.ProfilingIndex = ptr(0)
				}
				ex := g.send(ctx, item, md)
				mu.Lock()
				out = append(out, ex)
				done++
				d := done
				mu.Unlock()
				if g.cfg.Progress != nil {
					g.cfg.Progress(name, d, n)
				}
			}
		})
	}
	wg.Wait()
	win.EndNS = g.clock.wallNS(g.clock.now())
	if err := ctx.Err(); err != nil {
		return out, win, fmt.Errorf("run %s: %w", name, err)
	}
	return out, win, nil
}

func ptr[T any](v T) *T { return &v }

// clock maps monotonic readings to AIPerf's two time bases: perf_ns (monotonic, for latencies)
// and wall-clock epoch ns (for metadata).
type clock struct{ base time.Time }

func newClock() clock                   { return clock{base: time.Now()} }
func (c clock) now() int64              { return int64(time.Since(c.base)) }
func (c clock) wallNS(perf int64) int64 { return c.base.UnixNano() + perf }

// send performs one exchange. It never returns an error: failures become the record's error.
func (g *generator) send(ctx context.Context, item Item, md aiperf.Metadata) Exchange {
	ex := Exchange{Stream: item.Stream}
	ex.Images, _ = aiperf.CountImages(item.Body)
	raw := &ex.Raw
	raw.Metadata = md
	raw.Payload = item.Body
	raw.Responses = []aiperf.Response{}
	accept := "application/json"
	if item.Stream {
		accept = "text/event-stream"
	}
	raw.RequestHeaders = map[string]string{
		"User-Agent": g.cfg.UserAgent, "X-Request-ID": md.XRequestID, "X-Correlation-ID": md.XCorrelationID,
		"Accept": accept, "Content-Type": "application/json",
	}
	if g.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.cfg.Timeout)
		defer cancel()
	}
	var gotConn, wrote, firstByte int64
	trace := &httptrace.ClientTrace{
		GotConn:              func(i httptrace.GotConnInfo) { gotConn = g.clock.now(); ex.Transport.Reused = i.Reused },
		WroteRequest:         func(httptrace.WroteRequestInfo) { wrote = g.clock.now() },
		GotFirstResponseByte: func() { firstByte = g.clock.now() },
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, g.endpoint, bytes.NewReader(item.Body))
	if err != nil {
		return g.fail(ex, &aiperf.ErrorDetails{Type: "RequestError", Message: err.Error()})
	}
	for k, v := range raw.RequestHeaders {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	start := g.clock.now()
	raw.StartPerfNS = start
	raw.Metadata.RequestStartNS = g.clock.wallNS(start)
	resp, err := g.client.Do(req)
	if err != nil {
		return g.fail(ex, transportError(err))
	}
	defer resp.Body.Close()
	raw.Status = resp.StatusCode
	raw.Metadata.RequestAckNS = g.clock.wallNS(g.clock.now())
	ex.Transport.BytesSent = int64(len(item.Body))
	counted := &countingReader{r: resp.Body}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		body, _ := io.ReadAll(io.LimitReader(counted, 1<<20))
		return g.fail(ex, &aiperf.ErrorDetails{Code: resp.StatusCode, Type: http.StatusText(resp.StatusCode), Message: string(body)})
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "text/event-stream" {
		err = g.readSSE(counted, raw)
	} else {
		var body []byte
		body, err = io.ReadAll(counted)
		if err == nil {
			text := string(body)
			raw.Responses = append(raw.Responses, aiperf.Response{PerfNS: g.clock.now(), Text: &text, ContentType: resp.Header.Get("Content-Type")})
		}
	}
	end := g.clock.now()
	ex.Transport.BytesReceived = counted.n
	if gotConn > 0 && wrote >= gotConn {
		ex.Transport.SendingNS = wrote - gotConn
	}
	if firstByte >= wrote && wrote > 0 {
		ex.Transport.WaitingNS = firstByte - wrote
		ex.Transport.ReceivingNS = end - firstByte
	}
	if err != nil {
		return g.fail(ex, transportError(err))
	}
	ex.Answer = aiperf.ParseAnswer(raw.Responses)
	switch {
	case ex.Answer.SSEError != "":
		return g.fail(ex, &aiperf.ErrorDetails{Code: 502, Type: "SSEResponseError", Message: ex.Answer.SSEError})
	case len(ex.Answer.Contents) == 0:
		return g.fail(ex, &aiperf.ErrorDetails{Type: "InvalidInferenceResultError", Message: "No responses with actual content were received"})
	}
	raw.Metadata.RequestEndNS = g.clock.wallNS(ex.Answer.Contents[len(ex.Answer.Contents)-1].PerfNS)
	return ex
}

func (g *generator) fail(ex Exchange, e *aiperf.ErrorDetails) Exchange {
	ex.Raw.Error = e
	ex.Raw.Metadata.RequestEndNS = g.clock.wallNS(g.clock.now())
	if ex.Raw.Metadata.RequestStartNS == 0 {
		ex.Raw.Metadata.RequestStartNS = ex.Raw.Metadata.RequestEndNS
	}
	return ex
}

func transportError(err error) *aiperf.ErrorDetails {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return &aiperf.ErrorDetails{Type: "TimeoutError", Message: err.Error()}
	case errors.Is(err, context.Canceled):
		return &aiperf.ErrorDetails{Code: 499, Type: "RequestCancellationError", Message: err.Error()}
	}
	return &aiperf.ErrorDetails{Type: "ClientConnectionError", Message: err.Error()}
}

// readSSE records the stream's messages, each stamped when its last line arrived.
func (g *generator) readSSE(r io.Reader, raw *aiperf.RawRecord) error {
	rd := sse.NewReader(r)
	for {
		msg, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		raw.Responses = append(raw.Responses, aiperf.ParseSSE(msg, g.clock.now()))
	}
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
