package aiperf

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
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
