// Package otlp is a small OTLP/HTTP trace receiver for the profiler: it accepts export requests
// in protobuf and in JSON (the OTLP/JSON mapping: hex ids, int64 as strings or numbers),
// keeps the spans in memory, and joins a request's server spans by its X-Request-ID into the
// task time and per-stage breakdown.
package otlp

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// TracesPath is the OTLP/HTTP traces endpoint.
const TracesPath = "/v1/traces"

// maxBody bounds one export request.
const maxBody = 64 << 20

// Span names and attributes Iris emits (core/runtime.go, gateway/middleware/tracing.go).
const (
	SpanGenerate   = "iris.generate"
	StagePrefix    = "iris."
	AttrRequestID  = "iris.request_id"
	AttrImageTok   = "iris.tokens.image"
	spanKindServer = 2
)

// Span is one received span.
type Span struct {
	TraceID, SpanID, ParentSpanID string
	Name                          string
	Kind                          int
	StartNS, EndNS                int64
	Attrs                         map[string]any
}

// Duration returns the span's length in nanoseconds.
func (s Span) Duration() int64 { return s.EndNS - s.StartNS }

// Receiver stores the spans it receives. It is an http.Handler for TracesPath.
type Receiver struct {
	mu      sync.Mutex
	spans   []Span
	byReq   map[string][]int // iris.request_id -> indexes of spans carrying it
	changed chan struct{}
}

// NewReceiver returns an empty receiver.
func NewReceiver() *Receiver {
	return &Receiver{byReq: map[string][]int{}, changed: make(chan struct{})}
}

// ServeHTTP accepts one OTLP/HTTP export request.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	var body io.Reader = http.MaxBytesReader(w, req.Body, maxBody)
	if strings.EqualFold(req.Header.Get("Content-Encoding"), "gzip") {
		zr, err := gzip.NewReader(body)
		if err != nil {
			http.Error(w, "bad gzip body", http.StatusBadRequest)
			return
		}
		defer zr.Close()
		body = io.LimitReader(zr, maxBody)
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	mt, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
	var spans []Span
	switch mt {
	case "application/x-protobuf", "application/protobuf":
		spans, err = DecodeProtobuf(raw)
	case "application/json":
		spans, err = DecodeJSON(raw)
	default:
		http.Error(w, "content type must be application/x-protobuf or application/json", http.StatusUnsupportedMediaType)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Add(spans)
	if mt == "application/json" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
		return
	}
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Add stores spans and wakes anyone waiting.
func (r *Receiver) Add(spans []Span) {
	if len(spans) == 0 {
		return
	}
	r.mu.Lock()
	for _, s := range spans {
		r.spans = append(r.spans, s)
		if id, ok := s.Attrs[AttrRequestID].(string); ok && id != "" {
			r.byReq[id] = append(r.byReq[id], len(r.spans)-1)
		}
	}
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// Spans returns a copy of every span received.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Breakdown is one request's server-side timing.
type Breakdown struct {
	// ServerNS is the HTTP server span (0 when absent).
	ServerNS int64
	// TaskNS is the iris.generate span: admission, image decoding and the task.
	TaskNS int64
	// Stages maps a stage (queue, decode_image, plan, ..., decode) to its span's length.
	Stages      map[string]int64
	ImageTokens int
}

// Lookup joins the spans of one request id: the iris.generate span carrying it, that span's
// children named iris.<stage>, and the server span carrying the same id.
func (r *Receiver) Lookup(requestID string) (Breakdown, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var gen *Span
	var b Breakdown
	for _, i := range r.byReq[requestID] {
		s := &r.spans[i]
		switch {
		case s.Name == SpanGenerate:
			gen = s
		case s.Kind == spanKindServer:
			b.ServerNS = s.Duration()
		}
	}
	if gen == nil {
		return Breakdown{}, false
	}
	b.TaskNS = gen.Duration()
	if v, ok := gen.Attrs[AttrImageTok].(int64); ok {
		b.ImageTokens = int(v)
	}
	b.Stages = map[string]int64{}
	for _, s := range r.spans {
		if s.TraceID == gen.TraceID && s.ParentSpanID == gen.SpanID && strings.HasPrefix(s.Name, StagePrefix) {
			b.Stages[strings.TrimPrefix(s.Name, StagePrefix)] += s.Duration()
		}
	}
	return b, true
}

// WaitFor blocks until every id has its iris.generate span and the spans have stopped changing
// for settle, or ctx ends. It reports how many ids were found.
func (r *Receiver) WaitFor(ctx context.Context, ids []string, settle time.Duration) int {
	for {
		r.mu.Lock()
		found := 0
		for _, id := range ids {
			for _, i := range r.byReq[id] {
				if r.spans[i].Name == SpanGenerate {
					found++
					break
				}
			}
		}
		changed := r.changed
		r.mu.Unlock()
		if found == len(ids) {
			// Stage spans end before their parent but may travel in a later batch.
			select {
			case <-changed:
				continue
			case <-time.After(settle):
				return found
			case <-ctx.Done():
				return found
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return found
		}
	}
}

// Server is a running receiver.
type Server struct {
	*Receiver
	// Addr is the address it listens on.
	Addr string
	srv  *http.Server
	done chan error
}

// Listen starts a receiver on addr (host:port; port 0 picks one).
func Listen(ctx context.Context, addr string) (*Server, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("otlp receiver: %w", err)
	}
	rcv := NewReceiver()
	mux := http.NewServeMux()
	mux.Handle(TracesPath, rcv)
	s := &Server{Receiver: rcv, Addr: ln.Addr().String(), srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, done: make(chan error, 1)}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server, letting in-flight exports finish.
func (s *Server) Close(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if serr := <-s.done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// DecodeProtobuf reads an ExportTraceServiceRequest in protobuf.
func DecodeProtobuf(b []byte) ([]Span, error) {
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		return nil, fmt.Errorf("decode protobuf export: %w", err)
	}
	var out []Span
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s := Span{
					TraceID: hex.EncodeToString(sp.GetTraceId()), SpanID: hex.EncodeToString(sp.GetSpanId()),
					ParentSpanID: hex.EncodeToString(sp.GetParentSpanId()), Name: sp.GetName(), Kind: int(sp.GetKind()),
					StartNS: int64(sp.GetStartTimeUnixNano()), EndNS: int64(sp.GetEndTimeUnixNano()),
					Attrs: map[string]any{},
				}
				for _, kv := range sp.GetAttributes() {
					if v, ok := protoValue(kv.GetValue()); ok {
						s.Attrs[kv.GetKey()] = v
					}
				}
				out = append(out, s)
			}
		}
	}
	return out, nil
}

func protoValue(v *commonpb.AnyValue) (any, bool) {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue, true
	case *commonpb.AnyValue_IntValue:
		return x.IntValue, true
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue, true
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue, true
	}
	return nil, false
}

type jsonExport struct {
	ResourceSpans []struct {
		ScopeSpans []struct {
			Spans []jsonSpan `json:"spans"`
		} `json:"scopeSpans"`
	} `json:"resourceSpans"`
}

type jsonSpan struct {
	TraceID           string          `json:"traceId"`
	SpanID            string          `json:"spanId"`
	ParentSpanID      string          `json:"parentSpanId"`
	Name              string          `json:"name"`
	Kind              json.RawMessage `json:"kind"`
	StartTimeUnixNano json.RawMessage `json:"startTimeUnixNano"`
	EndTimeUnixNano   json.RawMessage `json:"endTimeUnixNano"`
	Attributes        []struct {
		Key   string `json:"key"`
		Value struct {
			StringValue *string         `json:"stringValue"`
			IntValue    json.RawMessage `json:"intValue"`
			DoubleValue *float64        `json:"doubleValue"`
			BoolValue   *bool           `json:"boolValue"`
		} `json:"value"`
	} `json:"attributes"`
}

// spanKinds maps the enum names OTLP/JSON may use instead of numbers.
var spanKinds = map[string]int{
	"SPAN_KIND_UNSPECIFIED": 0, "SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2,
	"SPAN_KIND_CLIENT": 3, "SPAN_KIND_PRODUCER": 4, "SPAN_KIND_CONSUMER": 5,
}

// DecodeJSON reads an ExportTraceServiceRequest in the OTLP/JSON encoding.
func DecodeJSON(b []byte) ([]Span, error) {
	var req jsonExport
	if err := json.Unmarshal(b, &req); err != nil {
		return nil, fmt.Errorf("decode json export: %w", err)
	}
	var out []Span
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				s := Span{TraceID: strings.ToLower(sp.TraceID), SpanID: strings.ToLower(sp.SpanID),
					ParentSpanID: strings.ToLower(sp.ParentSpanID), Name: sp.Name, Attrs: map[string]any{}}
				var err error
				if s.Kind, err = jsonKind(sp.Kind); err != nil {
					return nil, fmt.Errorf("decode json export: span %q: %w", sp.Name, err)
				}
				if s.StartNS, err = jsonInt(sp.StartTimeUnixNano); err != nil {
					return nil, fmt.Errorf("decode json export: span %q start: %w", sp.Name, err)
				}
				if s.EndNS, err = jsonInt(sp.EndTimeUnixNano); err != nil {
					return nil, fmt.Errorf("decode json export: span %q end: %w", sp.Name, err)
				}
				for _, a := range sp.Attributes {
					v := a.Value
					switch {
					case v.StringValue != nil:
						s.Attrs[a.Key] = *v.StringValue
					case len(v.IntValue) > 0:
						n, err := jsonInt(v.IntValue)
						if err != nil {
							return nil, fmt.Errorf("decode json export: attribute %s: %w", a.Key, err)
						}
						s.Attrs[a.Key] = n
					case v.DoubleValue != nil:
						s.Attrs[a.Key] = *v.DoubleValue
					case v.BoolValue != nil:
						s.Attrs[a.Key] = *v.BoolValue
					}
				}
				out = append(out, s)
			}
		}
	}
	return out, nil
}

func jsonKind(raw json.RawMessage) (int, error) {
	if len(raw) == 0 {
		return 0, nil
	}
	var name string
	if json.Unmarshal(raw, &name) == nil {
		k, ok := spanKinds[name]
		if !ok {
			return 0, fmt.Errorf("unknown span kind %q", name)
		}
		return k, nil
	}
	var n int
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, fmt.Errorf("span kind: %w", err)
	}
	return n, nil
}

// jsonInt reads a 64-bit integer written as a JSON string or number.
func jsonInt(raw json.RawMessage) (int64, error) {
	if len(raw) == 0 {
		return 0, nil
	}
	s := string(raw)
	if len(s) >= 2 && s[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, err
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		i, ierr := strconv.ParseInt(s, 10, 64)
		if ierr != nil {
			return 0, fmt.Errorf("not an integer: %s", s)
		}
		return i, nil
	}
	return int64(n), nil
}
