package profile

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/iris-vlm/iris/benchmark/aiperf"
	"github.com/iris-vlm/iris/benchmark/loadgen"
	"github.com/iris-vlm/iris/benchmark/otlp"
	"github.com/iris-vlm/iris/benchmark/parity"
	"github.com/iris-vlm/iris/benchmark/provenance"
	"github.com/iris-vlm/iris/benchmark/workload"
)

// Extra artifacts Iris writes beside AIPerf's.
const (
	ParityFile     = "parity.json"
	ProvenanceFile = "provenance.json"
	SpansFile      = "spans.jsonl"
	ReportFile     = "report.md"
	PlotFile       = "latency.svg"
	LogFile        = "logs/iris-profile.log"
)

// ErrRunFailed is wrapped when the run completed but did not pass: failed requests, answers
// that differ from the native ones, spans that never came, or inputs that changed.
var ErrRunFailed = errors.New("profile run failed")

// irisInfo is the "iris" member of the summary: the tool's identity and every check.
type irisInfo struct {
	Tool        string         `json:"tool"`
	Version     string         `json:"version"`
	URL         string         `json:"url"`
	Model       string         `json:"model"`
	Name        string         `json:"name"`
	Streaming   bool           `json:"streaming"`
	Concurrency int            `json:"concurrency"`
	Warmup      int            `json:"warmup"`
	Requests    int            `json:"requests"`
	Spans       *spanInfo      `json:"spans,omitempty"`
	Parity      *parityInfo    `json:"parity,omitempty"`
	Provenance  provenanceInfo `json:"provenance"`
	Passed      bool           `json:"passed"`
	Failures    []string       `json:"failures,omitempty"`
}

type spanInfo struct {
	Listen string `json:"listen"`
	Joined int    `json:"joined"`
	Of     int    `json:"of"`
}

type parityInfo struct {
	Bundle       string                 `json:"bundle"`
	Counts       map[parity.Outcome]int `json:"counts"`
	Measured     map[parity.Outcome]int `json:"measured"`
	NativeInputs int                    `json:"native_inputs"`
	OK           bool                   `json:"ok"`
}

type provenanceInfo struct {
	Unchanged bool                  `json:"unchanged"`
	Files     int                   `json:"files"`
	GitHead   string                `json:"git_head,omitempty"`
	Tokenizer *provenance.Tokenizer `json:"tokenizer,omitempty"`
	Changes   []provenance.Change   `json:"changes,omitempty"`
}

// profileRun performs a run. Artifacts are written whatever happens after the requests were
// sent; the error says why the run did not pass.
func profileRun(ctx context.Context, o *options, stdout, stderr io.Writer, native openNative) error {
	tok, err := provenance.ParseTokenizer(o.tokenizer, o.tokenizerRevision)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	f, err := os.Open(o.input)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	rows, err := aiperf.ReadSingleTurn(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("profile: %s: %w", o.input, err)
	}
	settings := workload.Settings{Model: o.model, Stream: o.streaming, MaxTokens: o.maxTokens,
		Temperature: o.temperature.v, TopP: o.topP.v, IgnoreEOS: o.ignoreEOS}
	if o.topK.v != nil {
		k := int(*o.topK.v)
		settings.TopK = &k
	}
	settings.Seed = o.seed.v
	reqs, err := workload.Build(rows, settings)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	if err := prepareOut(o.out); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(o.out, LogFile))
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	defer logf.Close()
	log := func(format string, args ...any) {
		line := fmt.Sprintf("profile: "+format+"\n", args...)
		_, _ = io.WriteString(stderr, line)
		_, _ = fmt.Fprintf(logf, "%s %s", time.Now().UTC().Format(time.RFC3339Nano), line)
	}

	spec := provenance.Spec{Inputs: []string{o.input}, Tokenizer: tok, Exclude: []string{o.out}}
	if o.bundle != "" {
		spec.Bundles = []string{o.bundle}
	}
	if o.source != "" {
		spec.Source = o.source
	}
	before, err := provenance.Take(ctx, spec)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	log("fingerprinted %d files before the run", len(before.Files))

	var rcv *otlp.Server
	if o.otlpListen != "" {
		if rcv, err = otlp.Listen(ctx, o.otlpListen); err != nil {
			return fmt.Errorf("profile: %w", err)
		}
		defer func() { _ = rcv.Close(context.WithoutCancel(ctx)) }()
		log("OTLP/HTTP receiver on http://%s%s", rcv.Addr, otlp.TracesPath)
	}

	items := make([]loadgen.Item, len(reqs))
	for i, r := range reqs {
		items[i] = loadgen.Item{Body: r.Body, Stream: o.streaming, SessionID: r.SessionID}
	}
	prog := newProgress(stderr)
	log("%d rows; %d warmup + %d measured requests at concurrency %d against %s", len(rows), o.warmup, o.requests, o.concurrency, o.url)
	start := time.Now()
	res, runErr := loadgen.Run(ctx, loadgen.Config{
		URL: o.url, Concurrency: o.concurrency, Warmup: o.warmup, Requests: o.requests, Timeout: o.timeout,
		UserAgent: "iris-profile/" + version(), Progress: prog.update,
	}, items)
	end := time.Now()
	if res == nil {
		return fmt.Errorf("profile: %w", runErr)
	}
	// The raw exchanges are kept before anything else can fail.
	if err := writeJSONL(filepath.Join(o.out, aiperf.RawFile), res.Exchanges, func(e loadgen.Exchange) any { return e.Raw }); err != nil {
		return err
	}

	info := irisInfo{Tool: "iris profile", Version: version(), URL: o.url, Model: o.model, Name: o.name, Streaming: o.streaming,
		Concurrency: o.concurrency, Warmup: o.warmup, Requests: o.requests}
	var failures []string
	fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
	if runErr != nil {
		fail("the run stopped: %v", runErr)
	}

	samples := make([]aiperf.Sample, len(res.Exchanges))
	records := make([]aiperf.Record, len(res.Exchanges))
	errorsSeen := 0
	for i, ex := range res.Exchanges {
		s := aiperf.Sample{Phase: ex.Raw.Metadata.BenchmarkPhase, StartNS: ex.Raw.Metadata.RequestStartNS, Err: ex.Raw.Error}
		rec := aiperf.Record{Metadata: ex.Raw.Metadata, Error: ex.Raw.Error, Iris: &aiperf.RecordIris{}}
		if ex.Raw.Error == nil {
			tr := ex.Transport
			s.Values = aiperf.RecordMetrics(ex.Raw.StartPerfNS, &ex.Answer, ex.Images, ex.Stream, &tr)
			if a := ex.Answer.Iris; a != nil {
				if a.Image != nil {
					rec.Iris.ImageSHA256 = a.Image.SHA256
				}
				rec.Iris.BundleDigest = a.Bundle.Digest
			}
			rec.Iris.FinishReason = ex.Answer.FinishReason
		} else {
			errorsSeen++
		}
		samples[i], records[i] = s, rec
	}
	if errorsSeen > 0 {
		fail("%d of %d requests failed", errorsSeen, len(res.Exchanges))
	}

	if rcv != nil {
		info.Spans = joinSpans(ctx, rcv, o.otlpWait, res.Exchanges, samples, records, log)
		if err := writeJSONL(filepath.Join(o.out, SpansFile), rcv.Spans(), func(s otlp.Span) any { return s }); err != nil {
			return err
		}
		if info.Spans.Joined < info.Spans.Of {
			fail("server spans arrived for %d of %d successful requests", info.Spans.Joined, info.Spans.Of)
		}
	}

	if o.bundle != "" {
		pi, err := checkParity(ctx, o.bundle, res.Exchanges, records, native, o.out, log)
		if err != nil {
			fail("native parity could not run: %v", err)
		} else {
			info.Parity = pi
			if !pi.OK {
				fail("native parity failed: %v", pi.Counts)
			}
		}
	}

	after, err := provenance.Take(ctx, spec)
	var changes []provenance.Change
	if err != nil {
		fail("fingerprinting after the run failed: %v", err)
	} else {
		changes = provenance.Diff(before, after)
	}
	info.Provenance = provenanceInfo{Unchanged: err == nil && len(changes) == 0, Files: len(before.Files), GitHead: before.GitHead, Tokenizer: tok, Changes: changes}
	if len(changes) > 0 {
		fail("%d fingerprinted inputs changed during the run (first: %s)", len(changes), changes[0])
	}
	if err := writeJSON(filepath.Join(o.out, ProvenanceFile), map[string]any{"before": before, "after": after, "changes": changes}); err != nil {
		return err
	}

	info.Passed, info.Failures = len(failures) == 0, failures
	if err := writeArtifacts(o, reqs, res, samples, records, info, start, end, runErr == nil); err != nil {
		return err
	}
	if err := writeReport(o.out, stdout); err != nil {
		return err
	}
	log("artifacts in %s", o.out)
	if len(failures) > 0 {
		for _, f := range failures {
			log("FAILED: %s", f)
		}
		return fmt.Errorf("%w: %s (records kept in %s)", ErrRunFailed, strings.Join(failures, "; "), o.out)
	}
	return nil
}

// prepareOut creates the artifact directory, which must not hold files already: a stale
// artifact must never pass for a new one.
func prepareOut(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case err == nil && len(entries) > 0:
		return fmt.Errorf("profile: %s already holds files; choose another --out or remove it", dir)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("profile: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	return nil
}

// joinSpans waits for the server's spans and adds each request's task time and stages.
func joinSpans(ctx context.Context, rcv *otlp.Server, wait time.Duration, exs []loadgen.Exchange, samples []aiperf.Sample, records []aiperf.Record, log func(string, ...any)) *spanInfo {
	var ids []string
	for _, ex := range exs {
		if ex.Raw.Error == nil {
			ids = append(ids, ex.Raw.Metadata.XRequestID)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	found := rcv.WaitFor(wctx, ids, 500*time.Millisecond)
	log("server spans joined for %d of %d requests", found, len(ids))
	for i, ex := range exs {
		if ex.Raw.Error != nil {
			continue
		}
		b, ok := rcv.Lookup(ex.Raw.Metadata.XRequestID)
		if !ok {
			continue
		}
		records[i].Iris.Spans = true
		v := samples[i].Values
		v["iris_task_latency"] = b.TaskNS
		if b.ServerNS > 0 {
			v["iris_server_latency"] = b.ServerNS
		}
		if b.ImageTokens > 0 {
			v["iris_image_tokens"] = b.ImageTokens
		}
		for st, ns := range b.Stages {
			v[aiperf.IrisStagePrefix+st] = ns
		}
	}
	return &spanInfo{Listen: rcv.Addr, Joined: found, Of: len(ids)}
}

// checkParity answers every input natively and checks each HTTP record against it.
func checkParity(ctx context.Context, bundle string, exs []loadgen.Exchange, records []aiperf.Record, native openNative, out string, log func(string, ...any)) (*parityInfo, error) {
	rt, closeRT, err := native(ctx, bundle)
	if err != nil {
		return nil, err
	}
	defer func() { _ = closeRT() }()
	// Every body that got an answer, once (failed requests fail the run on their own).
	var bodies [][]byte
	seen := map[string]bool{}
	for _, ex := range exs {
		if k := string(ex.Raw.Payload); ex.Raw.Error == nil && !seen[k] {
			seen[k] = true
			bodies = append(bodies, ex.Raw.Payload)
		}
	}
	log("answering %d distinct requests natively with %s", len(bodies), bundle)
	answers, err := parity.RunNative(ctx, rt, bodies)
	if err != nil {
		return nil, err
	}
	obs := make([]parity.Observed, len(exs))
	for i, ex := range exs {
		obs[i] = observed(ex.Raw, ex.Answer)
	}
	rep := parity.Check(rt, answers, obs)
	measured := map[parity.Outcome]int{}
	for i, v := range rep.Verdicts {
		records[i].Iris.Parity = string(v.Outcome)
		if v.Phase == "profiling" {
			measured[v.Outcome]++
		}
	}
	if err := writeJSON(filepath.Join(out, ParityFile), rep); err != nil {
		return nil, err
	}
	for _, v := range rep.Failures() {
		log("parity %s: %s %s", v.Outcome, v.RequestID, v.Detail)
	}
	return &parityInfo{Bundle: bundle, Counts: rep.Counts, Measured: measured, NativeInputs: rep.Inputs, OK: rep.OK()}, nil
}

// observed turns one raw exchange into what parity checks.
func observed(raw aiperf.RawRecord, ans aiperf.Answer) parity.Observed {
	o := parity.Observed{RequestID: raw.Metadata.XRequestID, Phase: raw.Metadata.BenchmarkPhase, Body: raw.Payload,
		Text: ans.Text(), CompletionTokens: -1, Failed: raw.Error != nil}
	if ans.Usage != nil {
		o.CompletionTokens = ans.Usage.CompletionTokens
	}
	if ans.Iris != nil && ans.Iris.Image != nil {
		o.ImageSHA256 = ans.Iris.Image.SHA256
	}
	return o
}

func writeArtifacts(o *options, reqs []workload.Request, res *loadgen.Result, samples []aiperf.Sample, records []aiperf.Record, info irisInfo, start, end time.Time, complete bool) error {
	for i := range records {
		if samples[i].Values != nil {
			records[i].Metrics = aiperf.Display(samples[i].Values)
		} else {
			records[i].Metrics = map[string]aiperf.Value{}
		}
	}
	if err := writeJSONL(filepath.Join(o.out, aiperf.RecordsFile), records, func(r aiperf.Record) any { return r }); err != nil {
		return err
	}
	results, errs := aiperf.SummarizePhase(samples, aiperf.PhaseProfiling, res.Windows[aiperf.PhaseProfiling])
	warm, _ := aiperf.SummarizePhase(samples, aiperf.PhaseWarmup, res.Windows[aiperf.PhaseWarmup])
	id := fmt.Sprintf("%x", start.UnixNano())
	var seed *int64
	if o.seed.v != nil {
		seed = o.seed.v
	}
	sum := aiperf.Summary{
		BenchmarkID: id, Metrics: results, ErrorSummary: errs, IsComplete: complete, WasCancelled: !complete,
		RunInfo: aiperf.RunInfo{BenchmarkID: id, RandomSeed: seed, CLICommand: "iris profile " + shellJoin(o.args)},
		Start:   start, End: end, Warmup: warm, Iris: info,
	}
	b, err := aiperf.EncodeSummary(sum)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	if err := os.WriteFile(filepath.Join(o.out, aiperf.SummaryFile), b, 0o644); err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	cf, err := os.Create(filepath.Join(o.out, aiperf.CSVFile))
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	if err := aiperf.WriteCSV(cf, results); err != nil {
		cf.Close()
		return fmt.Errorf("profile: %w", err)
	}
	if err := cf.Close(); err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	entries := make([]aiperf.InputsEntry, len(reqs))
	for i, r := range reqs {
		entries[i] = aiperf.InputsEntry{SessionID: r.SessionID, Payloads: []json.RawMessage{r.Body}}
	}
	inf, err := os.Create(filepath.Join(o.out, aiperf.InputsFile))
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	if err := aiperf.WriteInputs(inf, entries); err != nil {
		inf.Close()
		return fmt.Errorf("profile: %w", err)
	}
	return inf.Close()
}

func writeJSONL[T any](path string, items []T, view func(T) any) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, it := range items {
		if err := enc.Encode(view(it)); err != nil {
			f.Close()
			return fmt.Errorf("profile: write %s: %w", path, err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("profile: write %s: %w", path, err)
	}
	return f.Close()
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("profile: write %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	return nil
}

// shellJoin quotes args the way a shell would need them.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a != "" && !strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#~") {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}
