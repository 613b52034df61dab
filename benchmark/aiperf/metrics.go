package aiperf

import "slices"

// Kind is how AIPerf computes a metric: per record, aggregated over records, or derived from
// other results.
type Kind int

// Metric kinds.
const (
	KindRecord Kind = iota
	KindAggregate
	KindDerived
)

// Unit conversion factors, computed the way AIPerf's unit classes compute them
// (value * other.per_second / self.per_second; bytes * self.num_bytes / other.num_bytes).
const (
	NSToMS  = 1000.0 / 1e9
	NSToSec = 1.0 / 1e9
	BToKB   = 1.0 / 1024
)

// Metric describes one AIPerf metric tag as exported.
type Metric struct {
	Tag    string
	Header string
	// Unit is the display unit written to files.
	Unit string
	// Scale converts the stored value into Unit.
	Scale float64
	Kind  Kind
	// AdjustOnError marks PERCENTILE_INCLUDES_FAILED_REQUESTS metrics, which get an adj_<tag> band
	// when requests failed.
	AdjustOnError bool
}

// metricTable lists the AIPerf 0.13 metrics the profiler computes, with AIPerf's headers and
// display units (aiperf/metrics/types/*.py). Iris's own server-side metrics are prefixed iris_.
var metricTable = []Metric{
	{"request_latency", "Request Latency", "ms", NSToMS, KindRecord, true},
	{"time_to_first_token", "Time to First Token", "ms", NSToMS, KindRecord, true},
	{"time_to_second_token", "Time to Second Token", "ms", NSToMS, KindRecord, false},
	{"time_to_first_output_token", "Time to First Output Token", "ms", NSToMS, KindRecord, false},
	{"inter_token_latency", "Inter Token Latency", "ms", NSToMS, KindRecord, true},
	{"inter_chunk_latency", "Inter Chunk Latency", "ms", NSToMS, KindRecord, false},
	{"decode_duration", "Decode Duration", "ms", NSToMS, KindRecord, true},
	{"output_token_throughput_per_user", "Output Token Throughput Per User", "tokens/sec/user", 1, KindRecord, false},
	{"prefill_throughput_per_user", "Prefill Throughput Per User", "tokens/sec/user", 1, KindRecord, false},
	{"e2e_output_token_throughput", "E2E Output Token Throughput", "tokens/sec/user", 1, KindRecord, false},
	{"input_sequence_length", "Input Sequence Length", "tokens", 1, KindRecord, false},
	{"output_sequence_length", "Output Sequence Length", "tokens", 1, KindRecord, false},
	{"output_token_count", "Output Token Count", "tokens", 1, KindRecord, false},
	{"usage_prompt_tokens", "Usage Prompt Tokens", "tokens", 1, KindRecord, false},
	{"usage_completion_tokens", "Usage Completion Tokens", "tokens", 1, KindRecord, false},
	{"usage_total_tokens", "Usage Total Tokens", "tokens", 1, KindRecord, false},
	{"num_images", "Number of Images", "images", 1, KindRecord, false},
	{"image_throughput", "Image Throughput", "images/sec", 1, KindRecord, false},
	{"image_latency", "Image Latency", "ms/image", 1, KindRecord, false},
	{"http_req_sending", "HTTP Sending", "ms", NSToMS, KindRecord, false},
	{"http_req_waiting", "HTTP Waiting (TTFB)", "ms", NSToMS, KindRecord, false},
	{"http_req_receiving", "HTTP Receiving", "ms", NSToMS, KindRecord, false},
	{"http_req_duration", "HTTP Duration (excl. conn)", "ms", NSToMS, KindRecord, false},
	{"http_req_data_sent", "HTTP Data Sent", "KB", BToKB, KindRecord, false},
	{"http_req_data_received", "HTTP Data Received", "KB", BToKB, KindRecord, false},
	{"http_req_connection_reused", "HTTP Connection Reused", "ratio", 1, KindRecord, false},

	{"request_count", "Request Count", "requests", 1, KindAggregate, false},
	{"error_request_count", "Error Request Count", "requests", 1, KindAggregate, false},
	{"completed_request_count", "Completed Requests (Success + Error)", "requests", 1, KindDerived, false},
	{"request_error_rate", "Request Error Rate", "%", 1, KindDerived, false},
	{"benchmark_duration", "Benchmark Duration", "sec", NSToSec, KindDerived, false},
	{"request_throughput", "Request Throughput", "requests/sec", 1, KindDerived, false},
	{"output_token_throughput", "Output Token Throughput", "tokens/sec", 1, KindDerived, false},
	{"input_token_throughput", "Input Token Throughput", "tokens/sec", 1, KindDerived, false},
	{"total_token_throughput", "Total Token Throughput", "tokens/sec", 1, KindDerived, false},
	{"total_isl", "Total Input Sequence Length", "tokens", 1, KindDerived, false},
	{"total_osl", "Total Output Sequence Length", "tokens", 1, KindDerived, false},
	{"total_output_tokens", "Total Output Tokens", "tokens", 1, KindDerived, false},
	{"total_usage_prompt_tokens", "Total Usage Prompt Tokens", "tokens", 1, KindDerived, false},
	{"total_usage_completion_tokens", "Total Usage Completion Tokens", "tokens", 1, KindDerived, false},
	{"total_usage_total_tokens", "Total Usage Total Tokens", "tokens", 1, KindDerived, false},

	// Iris's server-side view, joined from OTLP spans by X-Request-ID.
	{"iris_server_latency", "Iris Server Latency", "ms", NSToMS, KindRecord, false},
	{"iris_task_latency", "Iris Task Latency", "ms", NSToMS, KindRecord, false},
	{"iris_image_tokens", "Iris Image Tokens", "tokens", 1, KindRecord, false},
}

// IrisStagePrefix prefixes the per-stage metrics (iris_stage_<stage>, ms) built from the child
// spans of iris.generate.
const IrisStagePrefix = "iris_stage_"

// LookupMetric returns the description of tag. Stage metrics (iris_stage_*) are described on
// the fly.
func LookupMetric(tag string) (Metric, bool) {
	i := slices.IndexFunc(metricTable, func(m Metric) bool { return m.Tag == tag })
	if i >= 0 {
		return metricTable[i], true
	}
	if len(tag) > len(IrisStagePrefix) && tag[:len(IrisStagePrefix)] == IrisStagePrefix {
		return Metric{Tag: tag, Header: "Iris Stage " + tag[len(IrisStagePrefix):], Unit: "ms", Scale: NSToMS, Kind: KindRecord}, true
	}
	return Metric{}, false
}

// sortedTags orders metric tags as the table lists them, unknown tags last by name.
func sortedTags(m map[string]Value) []string {
	out := make([]string, 0, len(m))
	for t := range m {
		out = append(out, t)
	}
	rank := func(t string) int {
		if i := slices.IndexFunc(metricTable, func(m Metric) bool { return m.Tag == t }); i >= 0 {
			return i
		}
		return len(metricTable)
	}
	slices.SortFunc(out, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		if a < b {
			return -1
		}
		if a > b {
			return 1
		}
		return 0
	})
	return out
}
