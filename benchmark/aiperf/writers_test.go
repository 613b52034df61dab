package aiperf

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files of the artifact writers")

// golden compares got with testdata/golden/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden file: %v (run go test -update once)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file:\n got %s\nwant %s", name, got, want)
	}
}

func intp(i int) *int { return &i }

// writerSamples are three streamed requests (one failed) with fixed timestamps.
func writerSamples() ([]RawRecord, []Sample) {
	str := func(s string) *string { return &s }
	chunk := func(perf int64, content string) Response {
		return ParseSSE([]byte(`data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"`+content+`"}}]}`), perf)
	}
	usage := func(perf int64, p, c int) Response {
		b, _ := json.Marshal(map[string]any{"object": "chat.completion.chunk", "choices": []any{},
			"usage": map[string]int{"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}})
		return Response{PerfNS: perf, Packets: []SSEField{{Name: "data", Value: str(string(b))}}}
	}
	done := func(perf int64) Response {
		return Response{PerfNS: perf, Packets: []SSEField{{Name: "data", Value: str("[DONE]")}}}
	}
	body := json.RawMessage(`{"messages":[{"role":"user","content":[{"type":"text","text":"What?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}],"model":"demo","stream":true,"max_completion_tokens":10}`)
	meta := func(i int, phase string) Metadata {
		m := Metadata{SessionNum: i, XRequestID: "req-" + string(rune('a'+i)), XCorrelationID: "corr-" + string(rune('a'+i)),
			ConversationID: "img-000" + string(rune('0'+i)), TurnIndex: intp(0), RequestStartNS: 1_800_000_000_000_000_000 + int64(i)*100_000_000,
			RequestEndNS: 1_800_000_000_040_000_000 + int64(i)*100_000_000,
			WorkerID:     "iris-worker-0", RecordProcessorID: "iris", BenchmarkPhase: phase, WasCancelled: false}
		return m
	}
	raws := []RawRecord{
		{Metadata: meta(0, PhaseWarmup), StartPerfNS: 1_000, Status: 200, Payload: body,
			Responses: []Response{chunk(31_001_000, "Cat"), chunk(39_001_000, "."), usage(39_100_000, 80, 2), done(39_200_000)}},
		{Metadata: meta(1, PhaseProfiling), StartPerfNS: 100_001_000, Status: 200, Payload: body,
			Responses: []Response{chunk(125_001_000, "A"), chunk(133_501_000, " dog"), chunk(140_001_000, "."), usage(140_100_000, 81, 3), done(140_200_000)}},
		{Metadata: meta(2, PhaseProfiling), StartPerfNS: 200_001_000, Status: 500, Payload: body,
			Responses: []Response{}, Error: &ErrorDetails{Code: 500, Type: "Internal Server Error", Message: `{"error":{"message":"boom"}}`}},
		{Metadata: meta(3, PhaseProfiling), StartPerfNS: 300_001_000, Status: 200, Payload: body,
			Responses: []Response{chunk(322_001_000, "Car"), usage(322_100_000, 79, 1), done(322_200_000)}},
	}
	var samples []Sample
	for _, r := range raws {
		s := Sample{Phase: r.Metadata.BenchmarkPhase, StartNS: r.Metadata.RequestStartNS, Err: r.Error}
		if r.Error == nil {
			a := ParseAnswer(r.Responses)
			s.Values = RecordMetrics(r.StartPerfNS, &a, 1, true, &Transport{SendingNS: 200_000, WaitingNS: 20_000_000, ReceivingNS: 9_000_000, BytesSent: 2048, BytesReceived: 700, Reused: true})
		}
		samples = append(samples, s)
	}
	return raws, samples
}

func TestWriteRecordsGolden(t *testing.T) {
	raws, samples := writerSamples()
	var recs, rawOut bytes.Buffer
	for i, r := range raws {
		rec := Record{Metadata: r.Metadata, Metrics: Display(samples[i].Values), Error: r.Error}
		if rec.Metrics == nil {
			rec.Metrics = map[string]Value{}
		}
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		recs.Write(append(b, '\n'))
		b, err = json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		rawOut.Write(append(b, '\n'))
	}
	golden(t, RecordsFile, recs.Bytes())
	golden(t, RawFile, rawOut.Bytes())

	// What was written reads back to the same records.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, RecordsFile), recs.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	back, err := ReadRecords(filepath.Join(dir, RecordsFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 4 || back[2].Error == nil || back[0].Phase() != PhaseWarmup {
		t.Fatalf("read back %d records: %+v", len(back), back)
	}
	if v, ok := back[1].Metric("inter_token_latency"); !ok || v != 7.5 {
		t.Errorf("inter_token_latency read back as %v %v, want 7.5", v, ok)
	}
}

func TestWriteSummaryGolden(t *testing.T) {
	_, samples := writerSamples()
	results, errs := SummarizePhase(samples, PhaseProfiling, Window{StartNS: 1_800_000_000_090_000_000, EndNS: 1_800_000_000_330_000_000})
	warm, _ := SummarizePhase(samples, PhaseWarmup, Window{})
	seed := int64(0)
	s := Summary{
		BenchmarkID: "golden", Metrics: results, ErrorSummary: errs, IsComplete: true,
		RunInfo: RunInfo{BenchmarkID: "golden", RandomSeed: &seed, CLICommand: "iris profile --url http://127.0.0.1:8080"},
		Start:   time.Date(2027, 1, 2, 3, 4, 5, 6000, time.UTC), End: time.Date(2027, 1, 2, 3, 4, 6, 0, time.UTC),
		Warmup: warm, Iris: map[string]string{"tool": "iris profile"},
	}
	b, err := EncodeSummary(s)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, SummaryFile, b)
	if strings.Contains(string(b), "aiperf_version") {
		t.Error("the summary must not claim an AIPerf version")
	}
	var csvBuf bytes.Buffer
	if err := WriteCSV(&csvBuf, results); err != nil {
		t.Fatal(err)
	}
	golden(t, CSVFile, csvBuf.Bytes())
}

func TestWriteInputsGolden(t *testing.T) {
	var buf bytes.Buffer
	err := WriteInputs(&buf, []InputsEntry{{SessionID: "img-0000", Payloads: []json.RawMessage{
		json.RawMessage(`{"messages":[{"role":"user","content":[{"type":"text","text":"a<b"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}],"model":"demo","stream":false}`),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, InputsFile, buf.Bytes())
}

// readJSONL decodes a JSON Lines file into generic values.
func readJSONL(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("%s line %d: %v", path, i+1, err)
		}
		out = append(out, v)
	}
	return out
}

// percentile is numpy's default (linear) percentile of sorted values, as AIPerf reports them.
func percentile(sorted []float64, p float64) float64 {
	r := p / 100 * float64(len(sorted)-1)
	lo, hi := int(math.Floor(r)), int(math.Ceil(r))
	return sorted[lo] + (sorted[hi]-sorted[lo])*(r-float64(lo))
}

// TestGoldenArtifactsFromTheirInputs checks the committed golden artifacts against what they are
// made from, with encoding/json, encoding/csv and AIPerf's definitions written out here, none of
// the writers' code: each record's latencies and token counts recomputed from its raw record's
// timestamps and SSE packets; the summary's statistics of request latency and TTFT recomputed
// from the records (numpy's linear percentiles, the population std); the CSV's rows the same
// numbers to two decimals; the inputs file holding the payload it was given.
func TestGoldenArtifactsFromTheirInputs(t *testing.T) {
	dir := filepath.Join("testdata", "golden")
	raws := readJSONL(t, filepath.Join(dir, RawFile))
	recs := readJSONL(t, filepath.Join(dir, RecordsFile))
	if len(raws) != len(recs) {
		t.Fatalf("%d raw records, %d records", len(raws), len(recs))
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(b)) }
	num := func(v any) float64 { f, _ := v.(float64); return f }
	metric := func(rec map[string]any, tag string) (float64, bool) {
		m, ok := rec["metrics"].(map[string]any)[tag].(map[string]any)
		if !ok {
			return 0, false
		}
		return num(m["value"]), true
	}
	// the successful records' request latency and TTFT, by phase
	latency, ttft := map[string][]float64{}, map[string][]float64{}
	errorsByPhase := map[string]int{}
	for i, raw := range raws {
		rec := recs[i]
		meta, _ := json.Marshal(raw["metadata"])
		if recMeta, _ := json.Marshal(rec["metadata"]); string(meta) != string(recMeta) {
			t.Errorf("record %d: metadata %s, the raw record's %s", i, recMeta, meta)
		}
		phase := raw["metadata"].(map[string]any)["benchmark_phase"].(string)
		if raw["error"] != nil {
			if rec["error"] == nil || len(rec["metrics"].(map[string]any)) != 0 {
				t.Errorf("record %d: a failed request with error %v and metrics %v", i, rec["error"], rec["metrics"])
			}
			errorsByPhase[phase]++
			continue
		}
		// the content responses (a data packet whose first choice's delta has text) and the usage
		start := num(raw["start_perf_ns"])
		var perfs []float64
		osl := -1.0
		for _, r := range raw["responses"].([]any) {
			resp := r.(map[string]any)
			for _, p := range resp["packets"].([]any) {
				var chunk struct {
					Choices []struct {
						Delta struct{ Content string }
					}
					Usage *struct {
						CompletionTokens float64 `json:"completion_tokens"`
					}
				}
				if json.Unmarshal([]byte(p.(map[string]any)["value"].(string)), &chunk) != nil {
					continue // [DONE]
				}
				if len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
					perfs = append(perfs, num(resp["perf_ns"]))
				}
				if chunk.Usage != nil {
					osl = chunk.Usage.CompletionTokens
				}
			}
		}
		first, last := perfs[0], perfs[len(perfs)-1]
		want := map[string]float64{
			"request_latency":        (last - start) / 1e6,
			"time_to_first_token":    (first - start) / 1e6,
			"output_sequence_length": osl,
		}
		if osl >= 2 {
			want["inter_token_latency"] = (last - first) / 1e6 / (osl - 1)
		}
		for tag, w := range want {
			if got, ok := metric(rec, tag); !ok || !near(got, w) {
				t.Errorf("record %d: %s %v (present %v), want %v from the raw record", i, tag, got, ok, w)
			}
		}
		// inter-chunk latencies: one between each two content responses, none for a lone one
		icl, _ := rec["metrics"].(map[string]any)["inter_chunk_latency"].(map[string]any)
		if ics, _ := icl["value"].([]any); len(ics) != len(perfs)-1 {
			t.Errorf("record %d: %d inter-chunk latencies for %d content responses", i, len(ics), len(perfs))
		} else {
			for k, v := range ics {
				if !near(num(v), (perfs[k+1]-perfs[k])/1e6) {
					t.Errorf("record %d: inter-chunk latency %d is %v, want %v", i, k, v, (perfs[k+1]-perfs[k])/1e6)
				}
			}
		}
		latency[phase] = append(latency[phase], want["request_latency"])
		ttft[phase] = append(ttft[phase], want["time_to_first_token"])
	}

	b, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	var summary map[string]any
	if err := json.Unmarshal(b, &summary); err != nil {
		t.Fatal(err)
	}
	stats := func(vs []float64) map[string]float64 {
		s := slices.Clone(vs)
		slices.Sort(s)
		sum, sq := 0.0, 0.0
		for _, v := range s {
			sum += v
		}
		avg := sum / float64(len(s))
		for _, v := range s {
			sq += (v - avg) * (v - avg)
		}
		return map[string]float64{"avg": avg, "min": s[0], "max": s[len(s)-1], "sum": sum, "count": float64(len(s)),
			"p1": percentile(s, 1), "p50": percentile(s, 50), "p90": percentile(s, 90), "p99": percentile(s, 99),
			"std": math.Sqrt(sq / float64(len(s)))}
	}
	csvRows := map[string][]string{}
	cf, err := os.Open(filepath.Join(dir, CSVFile))
	if err != nil {
		t.Fatal(err)
	}
	defer cf.Close()
	cr := csv.NewReader(cf)
	cr.FieldsPerRecord = -1 // the record metrics' rows, then the aggregates' two-field rows
	table, err := cr.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	header := table[0]
	for _, row := range table[1:] {
		csvRows[row[0]] = row
	}
	for _, m := range []struct {
		tag, csvName string
		values       map[string][]float64
	}{{"request_latency", "Request Latency (ms)", latency}, {"time_to_first_token", "Time to First Token (ms)", ttft}} {
		for section, phase := range map[string]string{"": PhaseProfiling, "warmup_metrics": PhaseWarmup} {
			block := summary
			if section != "" {
				block = summary[section].(map[string]any)
			}
			got, _ := block[m.tag].(map[string]any)
			for k, w := range stats(m.values[phase]) {
				if !near(num(got[k]), w) {
					t.Errorf("summary %s %s %s: %v, want %v from the records", section, m.tag, k, got[k], w)
				}
			}
		}
		row := csvRows[m.csvName]
		if len(row) != len(header) {
			t.Fatalf("CSV row %q: %v under %v", m.csvName, row, header)
		}
		st := stats(m.values[PhaseProfiling])
		for c, name := range header[1:] {
			w, ok := st[name]
			if !ok {
				continue
			}
			if v, err := strconv.ParseFloat(row[c+1], 64); err != nil || math.Abs(v-w) > 0.005 {
				t.Errorf("CSV %s %s: %q, want %.2f from the records", m.csvName, name, row[c+1], w)
			}
		}
	}
	for tag, want := range map[string]float64{"request_count": float64(len(latency[PhaseProfiling])), "error_request_count": float64(errorsByPhase[PhaseProfiling])} {
		if got := num(summary[tag].(map[string]any)["avg"]); got != want {
			t.Errorf("summary %s %v, want %v from the records", tag, got, want)
		}
	}

	b, err = os.ReadFile(filepath.Join(dir, InputsFile))
	if err != nil {
		t.Fatal(err)
	}
	var inputs struct {
		Data []struct {
			SessionID string            `json:"session_id"`
			Payloads  []json.RawMessage `json:"payloads"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &inputs); err != nil {
		t.Fatal(err)
	}
	var payload, want any
	if len(inputs.Data) == 1 && len(inputs.Data[0].Payloads) == 1 {
		_ = json.Unmarshal(inputs.Data[0].Payloads[0], &payload)
	}
	_ = json.Unmarshal([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"a<b"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}],"model":"demo","stream":false}`), &want)
	if len(inputs.Data) != 1 || inputs.Data[0].SessionID != "img-0000" || !reflect.DeepEqual(payload, want) {
		t.Errorf("inputs %s: want one entry, session_id img-0000, holding the one payload written", b)
	}
}
