package aiperf

// Transport is what the HTTP client measured about one exchange beyond its responses, in
// nanoseconds and bytes. A nil Transport adds no http_req_* metrics.
type Transport struct {
	SendingNS, WaitingNS, ReceivingNS int64
	BytesSent, BytesReceived          int64
	Reused                            bool
}

// RecordMetrics computes the AIPerf metrics of one successful exchange in stored units
// (nanoseconds, bytes, tokens; see [Display]), as
// aiperf/metrics/types computes them with --use-server-token-count: token counts come from the
// server's usage, streaming-only metrics exist only when stream is true, and every time is
// measured from startPerfNS (just before the request was sent) to the content responses.
func RecordMetrics(startPerfNS int64, ans *Answer, images int, stream bool, tr *Transport) map[string]any {
	m := map[string]any{}
	put := func(tag string, v any) { m[tag] = v }
	if len(ans.Contents) == 0 {
		return m
	}
	first, last := ans.Contents[0].PerfNS, ans.Contents[len(ans.Contents)-1].PerfNS
	latency := last - startPerfNS
	put("request_latency", latency)

	isl, osl, haveUsage := 0, 0, ans.Usage != nil
	if haveUsage {
		isl, osl = ans.Usage.PromptTokens, ans.Usage.CompletionTokens
		put("input_sequence_length", isl)
		put("output_sequence_length", osl)
		put("output_token_count", osl)
		put("usage_prompt_tokens", ans.Usage.PromptTokens)
		put("usage_completion_tokens", ans.Usage.CompletionTokens)
		put("usage_total_tokens", ans.Usage.TotalTokens)
		if latency > 0 {
			put("e2e_output_token_throughput", float64(osl)/(float64(latency)*NSToSec))
		}
	}
	if stream {
		ttft := first - startPerfNS
		put("time_to_first_token", ttft)
		put("time_to_first_output_token", ttft)
		if len(ans.Contents) >= 2 {
			put("time_to_second_token", ans.Contents[1].PerfNS-first)
			gaps := make([]float64, 0, len(ans.Contents)-1)
			for i := 1; i < len(ans.Contents); i++ {
				gaps = append(gaps, float64(ans.Contents[i].PerfNS-ans.Contents[i-1].PerfNS))
			}
			put("inter_chunk_latency", gaps)
		}
		put("decode_duration", latency-ttft)
		if haveUsage && osl >= 2 {
			itl := float64(latency-ttft) / float64(osl-1)
			put("inter_token_latency", itl)
			if itl > 0 {
				put("output_token_throughput_per_user", 1/(itl*NSToSec))
			}
		}
		if haveUsage && ttft > 0 {
			put("prefill_throughput_per_user", float64(isl)/(float64(ttft)*NSToSec))
		}
	}
	if images > 0 {
		put("num_images", images)
		if latency > 0 {
			put("image_throughput", float64(images)/(float64(latency)*NSToSec))
		}
		put("image_latency", float64(latency)*NSToMS/float64(images))
	}
	if tr != nil {
		put("http_req_sending", tr.SendingNS)
		put("http_req_waiting", tr.WaitingNS)
		put("http_req_receiving", tr.ReceivingNS)
		put("http_req_duration", tr.SendingNS+tr.WaitingNS+tr.ReceivingNS)
		put("http_req_data_sent", float64(tr.BytesSent))
		put("http_req_data_received", float64(tr.BytesReceived))
		reused := 0
		if tr.Reused {
			reused = 1
		}
		put("http_req_connection_reused", reused)
	}
	return m
}

// Display converts stored values into a record's display values, as AIPerf's to_display_dict
// does (value * unit ratio). Tags this package does not know are dropped.
func Display(stored map[string]any) map[string]Value {
	out := make(map[string]Value, len(stored))
	for tag, v := range stored {
		md, ok := LookupMetric(tag)
		if !ok {
			continue
		}
		switch x := v.(type) {
		case float64:
			v = x * md.Scale
		case int64:
			if md.Scale != 1 {
				v = float64(x) * md.Scale
			}
		case int:
			if md.Scale != 1 {
				v = float64(x) * md.Scale
			}
		case []float64:
			l := make([]float64, len(x))
			for i, f := range x {
				l[i] = f * md.Scale
			}
			v = l
		}
		out[tag] = Value{Value: v, Unit: md.Unit}
	}
	return out
}

// storedFloats returns a stored value as samples: one for a scalar, several for a list.
func storedFloats(v any) []float64 {
	switch x := v.(type) {
	case float64:
		return []float64{x}
	case int64:
		return []float64{float64(x)}
	case int:
		return []float64{float64(x)}
	case []float64:
		return x
	}
	return nil
}
