package aiperf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// SchemaVersion is the summary JSON schema AIPerf 0.13 writes.
const SchemaVersion = "1.4"

// Sample is one finished request as the summary sees it.
type Sample struct {
	Phase string
	// StartNS is the wall-clock start (request_start_ns).
	StartNS int64
	// Values are the record's metrics in stored units (see [RecordMetrics]); nil for a failure.
	Values map[string]any
	// Err is set for a failed request.
	Err *ErrorDetails
}

// Result is one metric of the summary in display units: a distribution (Stats) or a single
// value (Value, for aggregate and derived metrics).
type Result struct {
	Tag   string
	Unit  string
	Stats *Stats
	Value float64
}

// ErrorCount counts the failures that share code, type and message.
type ErrorCount struct {
	ErrorDetails ErrorDetails `json:"error_details"`
	Count        int          `json:"count"`
}

// Window is a phase's wall-clock span: from the moment it began issuing requests to the moment
// its last request finished.
type Window struct{ StartNS, EndNS int64 }

// SummarizePhase computes the summary metrics of the samples of one phase, as AIPerf's accumulator
// does: record metrics over successful requests only; benchmark_duration from the first request
// start to the last content response; run-level rates (requests/s, tokens/s) over the phase
// window when one is given (AIPerf divides by the phase's span), else over the benchmark
// duration; and an error-adjusted band per latency metric when requests failed.
func SummarizePhase(samples []Sample, phase string, win Window) ([]Result, []ErrorCount) {
	cols := map[string][]float64{}
	var ok, failed int
	var errs []ErrorCount
	minStart, maxEnd := int64(math.MaxInt64), int64(math.MinInt64)
	for _, s := range samples {
		if s.Phase != phase {
			continue
		}
		if s.Err != nil {
			failed++
			i := slices.IndexFunc(errs, func(e ErrorCount) bool { return e.ErrorDetails == *s.Err })
			if i < 0 {
				errs = append(errs, ErrorCount{ErrorDetails: *s.Err})
				i = len(errs) - 1
			}
			errs[i].Count++
			continue
		}
		ok++
		for tag, v := range s.Values {
			cols[tag] = append(cols[tag], storedFloats(v)...)
		}
		if lat, has := s.Values["request_latency"]; has {
			minStart = min(minStart, s.StartNS)
			maxEnd = max(maxEnd, s.StartNS+int64(storedFloats(lat)[0]))
		}
	}
	var out []Result
	tags := make([]string, 0, len(cols))
	for t := range cols {
		tags = append(tags, t)
	}
	slices.SortFunc(tags, compareTags)
	for _, tag := range tags {
		md, known := LookupMetric(tag)
		if !known || md.Kind != KindRecord {
			continue
		}
		var st Stats
		if tag == "inter_chunk_latency" {
			st, _ = SummarizeList(cols[tag])
		} else {
			st, _ = Summarize(cols[tag])
		}
		d := st.Scale(md.Scale)
		out = append(out, Result{Tag: tag, Unit: md.Unit, Stats: &d})
		if adj, has := Adjusted(cols[tag], failed); has && md.AdjustOnError {
			a := adj.Scale(md.Scale)
			out = append(out, Result{Tag: "adj_" + tag, Unit: md.Unit, Stats: &a})
		}
	}
	scalar := func(tag string, v float64) {
		md, _ := LookupMetric(tag)
		out = append(out, Result{Tag: tag, Unit: md.Unit, Value: v})
	}
	sum := func(tag string) (float64, bool) {
		c, has := cols[tag]
		var s float64
		for _, x := range c {
			s += x
		}
		return s, has
	}
	if ok+failed == 0 {
		return out, errs
	}
	scalar("request_count", float64(ok))
	if failed > 0 {
		scalar("error_request_count", float64(failed))
	}
	scalar("completed_request_count", float64(ok+failed))
	scalar("request_error_rate", float64(failed)/float64(ok+failed)*100)
	if maxEnd > minStart {
		durNS := maxEnd - minStart
		scalar("benchmark_duration", float64(durNS)*NSToSec)
		if win.EndNS > win.StartNS {
			durNS = win.EndNS - win.StartNS
		}
		sec := float64(durNS) * NSToSec
		scalar("request_throughput", float64(ok)/sec)
		isl, hasISL := sum("input_sequence_length")
		osl, hasOSL := sum("output_sequence_length")
		if hasOSL {
			scalar("output_token_throughput", osl/sec)
		}
		if hasISL {
			scalar("input_token_throughput", isl/sec)
		}
		if hasISL && hasOSL {
			scalar("total_token_throughput", (isl+osl)/sec)
		}
	}
	for _, p := range [][2]string{
		{"input_sequence_length", "total_isl"}, {"output_sequence_length", "total_osl"},
		{"output_token_count", "total_output_tokens"}, {"usage_prompt_tokens", "total_usage_prompt_tokens"},
		{"usage_completion_tokens", "total_usage_completion_tokens"}, {"usage_total_tokens", "total_usage_total_tokens"},
	} {
		if s, has := sum(p[0]); has {
			scalar(p[1], s)
		}
	}
	return out, errs
}

func compareTags(a, b string) int {
	ia := slices.IndexFunc(metricTable, func(m Metric) bool { return m.Tag == a })
	ib := slices.IndexFunc(metricTable, func(m Metric) bool { return m.Tag == b })
	if ia < 0 {
		ia = len(metricTable)
	}
	if ib < 0 {
		ib = len(metricTable)
	}
	if ia != ib {
		return ia - ib
	}
	return strings.Compare(a, b)
}

// RunInfo identifies a run (aiperf RunInfo).
type RunInfo struct {
	BenchmarkID string `json:"benchmark_id,omitempty"`
	RandomSeed  *int64 `json:"random_seed,omitempty"`
	CLICommand  string `json:"cli_command,omitempty"`
}

// Summary is profile_export_aiperf.json. It carries no aiperf_version: the file was not
// written by AIPerf, and Iris says so under its own key.
type Summary struct {
	BenchmarkID  string
	Metrics      []Result
	RunInfo      RunInfo
	WasCancelled bool
	IsComplete   bool
	ErrorSummary []ErrorCount
	Start, End   time.Time
	Warmup       []Result
	// Iris is written under the "iris" key: the tool's identity and its checks.
	Iris any
}

// naiveISO is how AIPerf writes datetimes (Python isoformat of a naive local time).
const naiveISO = "2006-01-02T15:04:05.000000"

// MarshalJSON writes the summary in AIPerf's key order: schema fields, metric blocks, run
// information, then warmup metrics.
func (s Summary) MarshalJSON() ([]byte, error) {
	var o objectWriter
	o.field("schema_version", SchemaVersion)
	o.field("benchmark_id", s.BenchmarkID)
	for _, r := range s.Metrics {
		o.field(r.Tag, r)
	}
	o.field("run_info", s.RunInfo)
	o.field("was_cancelled", s.WasCancelled)
	o.field("is_complete", s.IsComplete)
	errs := s.ErrorSummary
	if errs == nil {
		errs = []ErrorCount{}
	}
	o.field("error_summary", errs)
	if !s.Start.IsZero() {
		o.field("start_time", s.Start.Format(naiveISO))
		o.field("end_time", s.End.Format(naiveISO))
	}
	if len(s.Warmup) > 0 {
		var w objectWriter
		for _, r := range s.Warmup {
			w.field(r.Tag, r)
		}
		o.raw("warmup_metrics", w.bytes())
	}
	if s.Iris != nil {
		o.field("iris", s.Iris)
	}
	if o.err != nil {
		return nil, o.err
	}
	return o.bytes(), nil
}

// MarshalJSON writes one metric block: unit and avg for scalars; unit, avg, p1..p99, min, max,
// std, count and sum for distributions. Like AIPerf (exclude_none after infinities become
// None), non-finite statistics and the std of an error-adjusted band are left out.
func (r Result) MarshalJSON() ([]byte, error) {
	var o objectWriter
	o.field("unit", r.Unit)
	if r.Stats == nil {
		o.num("avg", r.Value)
		return o.bytes(), o.err
	}
	st := r.Stats
	o.num("avg", st.Avg)
	for i, q := range Quantiles {
		o.num(fmt.Sprintf("p%g", q), st.P[i])
	}
	o.num("min", st.Min)
	o.num("max", st.Max)
	if !st.NoStd {
		o.num("std", st.Std)
	}
	o.field("count", st.Count)
	o.num("sum", st.Sum)
	return o.bytes(), o.err
}

// objectWriter builds a JSON object with keys in insertion order.
type objectWriter struct {
	b   bytes.Buffer
	n   int
	err error
}

func (o *objectWriter) raw(key string, v []byte) {
	if o.n == 0 {
		o.b.WriteByte('{')
	} else {
		o.b.WriteByte(',')
	}
	o.n++
	k, _ := json.Marshal(key)
	o.b.Write(k)
	o.b.WriteByte(':')
	o.b.Write(v)
}

func (o *objectWriter) field(key string, v any) {
	j, err := json.Marshal(v)
	if err != nil && o.err == nil {
		o.err = fmt.Errorf("write %s: %w", key, err)
	}
	o.raw(key, j)
}

func (o *objectWriter) num(key string, f float64) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return
	}
	var b bytes.Buffer
	writeFloat(&b, f)
	o.raw(key, b.Bytes())
}

func (o *objectWriter) bytes() []byte {
	if o.n == 0 {
		return []byte("{}")
	}
	return append(bytes.Clone(o.b.Bytes()), '}')
}

// EncodeSummary writes s indented by two spaces, as AIPerf writes the file.
func EncodeSummary(s Summary) ([]byte, error) {
	compact, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, compact, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}
