package aiperf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
)

// Benchmark phases as AIPerf names them.
const (
	PhaseWarmup    = "warmup"
	PhaseProfiling = "profiling"
)

// Metadata is a record's metadata (aiperf MetricRecordMetadata). Optional fields are left out
// when unset, as AIPerf writes them (exclude_none).
type Metadata struct {
	SessionNum        int    `json:"session_num"`
	XRequestID        string `json:"x_request_id,omitempty"`
	XCorrelationID    string `json:"x_correlation_id,omitempty"`
	ConversationID    string `json:"conversation_id,omitempty"`
	TurnIndex         *int   `json:"turn_index,omitempty"`
	CreditIssuedNS    int64  `json:"credit_issued_ns,omitempty"`
	RequestStartNS    int64  `json:"request_start_ns"`
	RequestAckNS      int64  `json:"request_ack_ns,omitempty"`
	RequestEndNS      int64  `json:"request_end_ns"`
	WorkerID          string `json:"worker_id"`
	RecordProcessorID string `json:"record_processor_id"`
	BenchmarkPhase    string `json:"benchmark_phase"`
	PhaseIndex        *int   `json:"phase_index,omitempty"`
	ProfilingIndex    *int   `json:"profiling_index,omitempty"`
	PhaseName         string `json:"phase_name,omitempty"`
	PhaseKind         string `json:"phase_kind,omitempty"`
	WasCancelled      bool   `json:"was_cancelled"`
}

// Value is one metric value of a record in display units: a number or a list of numbers.
type Value struct {
	Value any    `json:"value"`
	Unit  string `json:"unit"`
}

// Number returns a scalar value as float64.
func (v Value) Number() (float64, bool) {
	switch x := v.Value.(type) {
	case float64:
		return x, true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	}
	return 0, false
}

// List returns a list value as float64s.
func (v Value) List() ([]float64, bool) {
	switch x := v.Value.(type) {
	case []float64:
		return x, true
	case []any:
		out := make([]float64, 0, len(x))
		for _, e := range x {
			f, ok := Value{Value: e}.Number()
			if !ok {
				return nil, false
			}
			out = append(out, f)
		}
		return out, true
	}
	return nil, false
}

// ErrorDetails describes a failed request (aiperf ErrorDetails).
type ErrorDetails struct {
	Code    int    `json:"code,omitempty"`
	Type    string `json:"type,omitempty"`
	Message string `json:"message"`
}

// Record is one line of profile_export.jsonl (aiperf MetricRecordInfo). Iris adds an "iris"
// object, which AIPerf's models accept as an extra field.
type Record struct {
	Metadata Metadata         `json:"metadata"`
	Metrics  map[string]Value `json:"metrics"`
	Error    *ErrorDetails    `json:"error,omitempty"`
	Iris     *RecordIris      `json:"iris,omitempty"`
}

// RecordIris is what the profiler learned about a request beyond AIPerf's metrics.
type RecordIris struct {
	// ImageSHA256 is the digest the server reported for the image it received.
	ImageSHA256  string `json:"image_sha256,omitempty"`
	BundleDigest string `json:"bundle_digest,omitempty"`
	FinishReason string `json:"finish_reason,omitempty"`
	// Spans is true when the request's server spans were received and joined.
	Spans bool `json:"spans"`
	// Parity is "match", "mismatch" or "unmatched" when answers were checked natively.
	Parity string `json:"parity,omitempty"`
}

// Phase reports the record's benchmark phase.
func (r *Record) Phase() string { return r.Metadata.BenchmarkPhase }

// Metric returns a scalar metric in display units.
func (r *Record) Metric(tag string) (float64, bool) {
	v, ok := r.Metrics[tag]
	if !ok {
		return 0, false
	}
	return v.Number()
}

// MarshalJSON writes the record compactly with metric values in a stable order, NaN and Inf as
// null (as AIPerf's orjson writer does).
func (r Record) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"metadata":`)
	md, err := json.Marshal(r.Metadata)
	if err != nil {
		return nil, err
	}
	b.Write(md)
	b.WriteString(`,"metrics":{`)
	for i, tag := range sortedTags(r.Metrics) {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(tag)
		b.Write(k)
		b.WriteString(`:{"value":`)
		v := r.Metrics[tag]
		if err := writeValue(&b, v.Value); err != nil {
			return nil, fmt.Errorf("metric %s: %w", tag, err)
		}
		u, _ := json.Marshal(v.Unit)
		b.WriteString(`,"unit":`)
		b.Write(u)
		b.WriteByte('}')
	}
	b.WriteByte('}')
	if r.Error != nil {
		e, err := json.Marshal(r.Error)
		if err != nil {
			return nil, err
		}
		b.WriteString(`,"error":`)
		b.Write(e)
	}
	if r.Iris != nil {
		x, err := json.Marshal(r.Iris)
		if err != nil {
			return nil, err
		}
		b.WriteString(`,"iris":`)
		b.Write(x)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func writeValue(b *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case float64:
		writeFloat(b, x)
	case int:
		fmt.Fprintf(b, "%d", x)
	case int64:
		fmt.Fprintf(b, "%d", x)
	case []float64:
		b.WriteByte('[')
		for i, f := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeFloat(b, f)
		}
		b.WriteByte(']')
	default:
		j, err := json.Marshal(x)
		if err != nil {
			return err
		}
		b.Write(j)
	}
	return nil
}

func writeFloat(b *bytes.Buffer, f float64) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		b.WriteString("null")
		return
	}
	j, _ := json.Marshal(f)
	b.Write(j)
}
