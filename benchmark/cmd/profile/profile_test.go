package profile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/benchmark/aiperf"
	"github.com/iris-vlm/iris/benchmark/parity"
)

type runResult struct {
	out     string
	err     error
	stdout  string
	stderr  string
	records []aiperf.Record
	summary aiperf.SummaryFileData
	info    irisInfo
}

// profileAgainst runs `iris profile` with args plus --out, the scripted native runtime and the
// given input.
func profileAgainst(t *testing.T, args ...string) runResult {
	t.Helper()
	out := filepath.Join(t.TempDir(), "run")
	var so, se bytes.Buffer
	o, err := parseFlags(append(args, "--out", out), &se)
	if err != nil {
		t.Fatal(err)
	}
	r := runResult{out: out}
	r.err = profileRun(t.Context(), o, &so, &se, nativeOpener())
	r.stdout, r.stderr = so.String(), se.String()
	if r.records, err = aiperf.ReadRecords(filepath.Join(out, aiperf.RecordsFile)); err != nil {
		t.Fatalf("records not kept: %v (run error %v)\n%s", err, r.err, r.stderr)
	}
	if r.summary, err = aiperf.ReadSummary(filepath.Join(out, aiperf.SummaryFile)); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(r.summary["iris"], &r.info); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestProfileEndToEnd(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		name := map[bool]string{false: "json", true: "streaming"}[streaming]
		t.Run(name, func(t *testing.T) {
			bundle := testBundle(t)
			otlpAddr := freeAddr(t)
			g := startGateway(t, bundle, gatewayOptions{otlp: otlpAddr})
			args := []string{"--url", g.url, "--model", "demo", "--input", writeInput(t), "--warmup", "2", "--requests", "7",
				"--concurrency", "2", "--top-k", "1", "--temperature", "0", "--bundle", bundle, "--source", gitRepo(t),
				"--otlp-listen", otlpAddr}
			if streaming {
				args = append(args, "--streaming")
			}
			r := profileAgainst(t, args...)
			if r.err != nil {
				t.Fatalf("run failed: %v\n%s", r.err, r.stderr)
			}
			// Warmup records are kept, tagged, and left out of the statistics.
			var warm, prof int
			for _, rec := range r.records {
				switch rec.Phase() {
				case aiperf.PhaseWarmup:
					warm++
				case aiperf.PhaseProfiling:
					prof++
				}
				if rec.Error != nil || rec.Iris == nil || rec.Iris.Parity != "match" || !rec.Iris.Spans {
					t.Errorf("record %s: error %v, iris %+v", rec.Metadata.XRequestID, rec.Error, rec.Iris)
				}
				if rec.Iris != nil && len(rec.Iris.ImageSHA256) != 64 {
					t.Errorf("record lacks the server's image digest: %+v", rec.Iris)
				}
			}
			if warm != 2 || prof != 7 {
				t.Fatalf("%d warmup and %d profiling records, want 2 and 7", warm, prof)
			}
			if b, ok := r.summary.Metric("request_count"); !ok || *b.Avg != 7 {
				t.Errorf("request_count %+v", b)
			}
			if b, ok := r.summary.Metric("request_latency"); !ok || *b.Count != 7 {
				t.Errorf("request_latency count %+v", b)
			}
			var warmup map[string]aiperf.Block
			if err := json.Unmarshal(r.summary["warmup_metrics"], &warmup); err != nil || warmup["request_count"].Avg == nil || *warmup["request_count"].Avg != 2 {
				t.Errorf("warmup_metrics %s", r.summary["warmup_metrics"])
			}
			for _, tag := range []string{"iris_task_latency", "iris_server_latency", "iris_stage_queue", "iris_stage_decode_image", "iris_stage_vision", "iris_stage_decode"} {
				if _, ok := r.summary.Metric(tag); !ok {
					t.Errorf("summary lacks %s", tag)
				}
			}
			_, hasTTFT := r.summary.Metric("time_to_first_token")
			if hasTTFT != streaming {
				t.Errorf("time_to_first_token present=%v when streaming=%v", hasTTFT, streaming)
			}
			if r.info.Parity == nil || r.info.Parity.Counts[parity.Match] != 9 || r.info.Parity.NativeInputs != 3 || !r.info.Passed {
				t.Errorf("iris info %+v parity %+v", r.info, r.info.Parity)
			}
			if r.info.Spans == nil || r.info.Spans.Joined != 9 {
				t.Errorf("spans %+v", r.info.Spans)
			}
			if !r.info.Provenance.Unchanged || r.info.Provenance.Files < 3 {
				t.Errorf("provenance %+v", r.info.Provenance)
			}
			for _, f := range []string{aiperf.RawFile, aiperf.CSVFile, aiperf.InputsFile, ParityFile, ProvenanceFile, SpansFile, ReportFile, PlotFile, LogFile} {
				if fi, err := os.Stat(filepath.Join(r.out, f)); err != nil || fi.Size() == 0 {
					t.Errorf("artifact %s: %v", f, err)
				}
			}
			if !strings.Contains(r.stdout, "| demo | 7/7 |") || !strings.Contains(r.stdout, "## Server stages") {
				t.Errorf("report:\n%s", r.stdout)
			}
			if strings.Contains(r.stdout, "TTFT") != streaming {
				t.Errorf("TTFT column present=%v when streaming=%v", strings.Contains(r.stdout, "TTFT"), streaming)
			}
			// The report of the directory, with parity recomputed from the raw exchanges, agrees.
			var so, se bytes.Buffer
			if err := runReport(t.Context(), []string{r.out, "--bundle", bundle}, &so, &se, nativeOpener()); err != nil {
				t.Fatalf("report: %v\n%s", err, se.String())
			}
			if !strings.Contains(so.String(), "| demo | 7/7 |") {
				t.Errorf("report:\n%s", so.String())
			}
		})
	}
}

// TestBodiesFollowTheSettings checks what went on the wire: the exact bodies of inputs.json, with
// the run's settings and the correlation headers.
func TestBodiesFollowTheSettings(t *testing.T) {
	bundle := testBundle(t)
	g := startGateway(t, bundle, gatewayOptions{})
	r := profileAgainst(t, "--url", g.url, "--model", "demo", "--input", writeInput(t), "--warmup", "0", "--requests", "3",
		"--max-tokens", "4", "--top-k", "1", "--seed", "7", "--streaming", "--source", "")
	if r.err != nil {
		t.Fatal(r.err)
	}
	raws, err := aiperf.ReadRaw(filepath.Join(r.out, aiperf.RawFile))
	if err != nil {
		t.Fatal(err)
	}
	var inputs struct {
		Data []aiperf.InputsEntry `json:"data"`
	}
	if err := json.Unmarshal([]byte(mustRead(t, filepath.Join(r.out, aiperf.InputsFile))), &inputs); err != nil {
		t.Fatal(err)
	}
	if len(inputs.Data) != 3 {
		t.Fatalf("inputs.json has %d sessions", len(inputs.Data))
	}
	ids := map[string]bool{}
	for i, raw := range raws {
		var want bytes.Buffer
		if err := json.Compact(&want, inputs.Data[i%3].Payloads[0]); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(raw.Payload, want.Bytes()) {
			t.Errorf("request %d body differs from inputs.json", i)
		}
		if !strings.Contains(string(raw.Payload), `"max_completion_tokens":4,"top_k":1,"seed":7,"stream_options":{"include_usage":true}`) {
			t.Errorf("body settings: %.300s", raw.Payload[len(raw.Payload)-120:])
		}
		h := raw.RequestHeaders
		if h["X-Request-ID"] == "" || h["X-Correlation-ID"] == "" || h["X-Request-ID"] == h["X-Correlation-ID"] || ids[h["X-Request-ID"]] {
			t.Errorf("headers %v", h)
		}
		ids[h["X-Request-ID"]] = true
		if raw.Metadata.XRequestID != h["X-Request-ID"] || raw.Metadata.ConversationID != inputs.Data[i%3].SessionID {
			t.Errorf("metadata %+v", raw.Metadata)
		}
	}
	if b, ok := r.summary.Metric("output_sequence_length"); !ok || *b.Max > 4 {
		t.Errorf("max tokens not honoured: %+v", b)
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestProfileFailsOnWrongAnswers(t *testing.T) {
	bundle := testBundle(t)
	g := startGateway(t, bundle, gatewayOptions{twist: true})
	r := profileAgainst(t, "--url", g.url, "--model", "demo", "--input", writeInput(t), "--requests", "6", "--bundle", bundle, "--source", "")
	if !errors.Is(r.err, ErrRunFailed) || !strings.Contains(r.err.Error(), "parity") {
		t.Fatalf("err %v", r.err)
	}
	if len(r.records) != 8 || r.info.Passed || r.info.Parity.Counts[parity.Mismatch] == 0 {
		t.Errorf("%d records, info %+v", len(r.records), r.info)
	}
	if !strings.Contains(r.stdout, "Result: FAILED") {
		t.Errorf("report:\n%s", r.stdout)
	}
}

// TestMutationsFailTheRun changes what the run depends on while it runs.
func TestMutationsFailTheRun(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(t *testing.T, bundle, repo string)
		want   string
	}{
		{"bundle byte flipped", func(t *testing.T, bundle, _ string) {
			p := filepath.Join(bundle, "model.safetensors")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Error(err)
				return
			}
			b[0] ^= 1
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Error(err)
			}
		}, "bundle:"},
		{"source file dirtied", func(t *testing.T, _, repo string) {
			if err := os.WriteFile(filepath.Join(repo, "main.go"), []byte("package main // edited\n"), 0o644); err != nil {
				t.Error(err)
			}
		}, "source:main.go"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bundle, repo := testBundle(t), gitRepo(t)
			g := startGateway(t, bundle, gatewayOptions{before: func(n int64) int {
				if n == 4 {
					tt.mutate(t, bundle, repo)
				}
				return 0
			}})
			r := profileAgainst(t, "--url", g.url, "--model", "demo", "--input", writeInput(t), "--requests", "6", "--bundle", bundle, "--source", repo)
			if !errors.Is(r.err, ErrRunFailed) || !strings.Contains(r.err.Error(), "changed during the run") {
				t.Fatalf("err %v", r.err)
			}
			if len(r.records) != 8 {
				t.Errorf("%d records kept, want 8", len(r.records))
			}
			raws, err := aiperf.ReadRaw(filepath.Join(r.out, aiperf.RawFile))
			if err != nil || len(raws) != 8 {
				t.Errorf("raw records: %d, %v", len(raws), err)
			}
			if r.info.Provenance.Unchanged || !strings.Contains(mustRead(t, filepath.Join(r.out, ProvenanceFile)), tt.want) {
				t.Errorf("provenance %+v", r.info.Provenance)
			}
		})
	}
}

func TestProfileWithoutSpans(t *testing.T) {
	g := startGateway(t, testBundle(t), gatewayOptions{})
	r := profileAgainst(t, "--url", g.url, "--model", "demo", "--input", writeInput(t), "--requests", "3", "--source", "")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if _, ok := r.summary.Metric("iris_task_latency"); ok {
		t.Error("task latency without spans")
	}
	if !strings.Contains(r.stdout, "| demo | – |") || strings.Contains(r.stdout, "Server stages") {
		t.Errorf("report:\n%s", r.stdout)
	}
}

func TestProfileFailsOnHTTPErrors(t *testing.T) {
	g := startGateway(t, testBundle(t), gatewayOptions{before: func(n int64) int {
		if n == 3 {
			return 500
		}
		return 0
	}})
	r := profileAgainst(t, "--url", g.url, "--model", "demo", "--input", writeInput(t), "--warmup", "0", "--requests", "4", "--source", "")
	if !errors.Is(r.err, ErrRunFailed) || !strings.Contains(r.err.Error(), "1 of 4 requests failed") {
		t.Fatalf("err %v", r.err)
	}
	var failed *aiperf.Record
	for i := range r.records {
		if r.records[i].Error != nil {
			failed = &r.records[i]
		}
	}
	if failed == nil || failed.Error.Code != 500 || failed.Error.Type != "Internal Server Error" {
		t.Fatalf("failed record %+v", failed)
	}
	if b, ok := r.summary.Metric("error_request_count"); !ok || *b.Avg != 1 {
		t.Errorf("error_request_count %+v", b)
	}
	if _, ok := r.summary.Metric("adj_request_latency"); !ok {
		t.Error("no error-adjusted latency")
	}
}

func TestReportReadsAIPerfArtifacts(t *testing.T) {
	dir := filepath.Join("..", "..", "aiperf", "testdata", "aiperf013", "stream")
	var so, se bytes.Buffer
	if err := runReport(t.Context(), []string{dir}, &so, &se, nil); err != nil {
		t.Fatal(err)
	}
	sum, err := aiperf.ReadSummary(filepath.Join(dir, aiperf.SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	lat, _ := sum.Metric("request_latency")
	want := "| fixture | – | " + fmtPair(*lat.P50, *lat.P95) + " | – |"
	if !strings.Contains(so.String(), want) || !strings.Contains(so.String(), "TTFT") || !strings.Contains(so.String(), "Written by AIPerf") {
		t.Errorf("report lacks %q:\n%s", want, so.String())
	}
	if _, err := os.Stat(filepath.Join(dir, PlotFile)); err == nil {
		t.Error("report wrote into the artifact directory")
	}
}

func fmtPair(a, b float64) string {
	return strings.TrimSpace(strings.Join([]string{ftoa(a), ftoa(b)}, "/"))
}

func ftoa(f float64) string { return strconvFormat(f) }

func TestFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--model", "m", "--input", "x"}, "--url"},
		{[]string{"--url", "u", "--input", "x"}, "--model"},
		{[]string{"--url", "u", "--model", "m"}, "--input"},
		{[]string{"--url", "u", "--model", "m", "--input", "x", "--concurrency", "0"}, "must be >= 1"},
		{[]string{"--url", "u", "--model", "m", "--input", "x", "--temperature", "hot"}, "invalid value"},
		{[]string{"--url", "u", "--model", "m", "--input", "x", "extra"}, "unexpected argument"},
	}
	for _, tt := range tests {
		var se bytes.Buffer
		if _, err := parseFlags(tt.args, &se); err == nil || !strings.Contains(err.Error()+se.String(), tt.want) {
			t.Errorf("%v: err %v, want %q", tt.args, err, tt.want)
		}
	}
	o, err := parseFlags([]string{"--url", "u", "--model", "org/m", "--input", "x", "--concurrency", "4"}, &bytes.Buffer{})
	if err != nil || o.out != "artifacts/org_m-iris-chat-concurrency4" || o.temperature.v != nil || o.warmup != 2 {
		t.Errorf("defaults %+v %v", o, err)
	}
}

func TestRefusesUsedOutDir(t *testing.T) {
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "old.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := parseFlags([]string{"--url", "http://127.0.0.1:1", "--model", "m", "--input", writeInput(t), "--out", out, "--source", ""}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if err := profileRun(t.Context(), o, &bytes.Buffer{}, &bytes.Buffer{}, nil); err == nil || !strings.Contains(err.Error(), "already holds files") {
		t.Errorf("err %v", err)
	}
}

func TestRefusesUnpinnedTokenizer(t *testing.T) {
	o, err := parseFlags([]string{"--url", "u", "--model", "m", "--input", writeInput(t), "--tokenizer", "Qwen/Qwen2.5-VL-3B-Instruct", "--tokenizer-revision", "main"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if err := profileRun(t.Context(), o, &bytes.Buffer{}, &bytes.Buffer{}, nil); err == nil || !strings.Contains(err.Error(), "40-hex") {
		t.Errorf("err %v", err)
	}
}

func TestInterruptedRunKeepsRecords(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	g := startGateway(t, testBundle(t), gatewayOptions{before: func(n int64) int {
		if n == 3 {
			cancel()
		}
		return 0
	}})
	out := filepath.Join(t.TempDir(), "run")
	o, err := parseFlags([]string{"--url", g.url, "--model", "demo", "--input", writeInput(t), "--warmup", "0", "--requests", "50", "--source", "", "--out", out}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	err = profileRun(ctx, o, &bytes.Buffer{}, &bytes.Buffer{}, nil)
	if !errors.Is(err, ErrRunFailed) || !strings.Contains(err.Error(), "the run stopped") {
		t.Fatalf("err %v", err)
	}
	sum, err := aiperf.ReadSummary(filepath.Join(out, aiperf.SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	if string(sum["is_complete"]) != "false" || string(sum["was_cancelled"]) != "true" {
		t.Errorf("is_complete %s was_cancelled %s", sum["is_complete"], sum["was_cancelled"])
	}
	raws, err := aiperf.ReadRaw(filepath.Join(out, aiperf.RawFile))
	if err != nil || len(raws) < 2 || len(raws) >= 50 {
		t.Errorf("%d raw records kept, %v", len(raws), err)
	}
}

func TestProgressLines(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b)
	for i := 1; i <= 40; i++ {
		p.update("profiling", i, 40)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 11 || !strings.HasPrefix(lines[0], "profile: profiling 1/40") || !strings.HasPrefix(lines[10], "profile: profiling 40/40") {
		t.Errorf("%d lines:\n%s", len(lines), b.String())
	}
	if strings.Contains(b.String(), "\r") {
		t.Error("a bar drawn on a file")
	}
}

func TestReportArgs(t *testing.T) {
	dir := filepath.Join("..", "..", "aiperf", "testdata", "aiperf013", "nonstream")
	for _, args := range [][]string{{dir}, {dir, "--name", "x"}, {"--name", "x", dir}} {
		var so bytes.Buffer
		if err := runReport(t.Context(), args, &so, &bytes.Buffer{}, nil); err != nil || !strings.Contains(so.String(), "| HTTP p50/p95 ms |") {
			t.Errorf("%v: %v", args, err)
		}
	}
	for _, args := range [][]string{{}, {dir, dir}, {t.TempDir()}} {
		if err := runReport(t.Context(), args, &bytes.Buffer{}, &bytes.Buffer{}, nil); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
