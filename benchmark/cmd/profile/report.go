package profile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/iris-vlm/iris/benchmark/aiperf"
	"github.com/iris-vlm/iris/benchmark/parity"
	"github.com/iris-vlm/iris/benchmark/report"
)

// runReport implements `iris profile report DIR`.
func runReport(ctx context.Context, args []string, stdout, stderr io.Writer, native openNative) error {
	fs := flag.NewFlagSet("iris profile report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bundle := fs.String("bundle", "", "bundle directory: check every answer of profile_export_raw.jsonl natively")
	name := fs.String("name", "", "profile name in the table (default: the run's model)")
	// Accept flags after the directory too, as users type them.
	var dir string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		dir, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	if dir == "" && len(rest) > 0 {
		dir, rest = rest[0], rest[1:]
	}
	if dir == "" || len(rest) > 0 {
		return errors.New("profile report: want exactly one artifact directory")
	}
	var checked *parityInfo
	if *bundle != "" {
		raws, err := aiperf.ReadRaw(filepath.Join(dir, aiperf.RawFile))
		if err != nil {
			return fmt.Errorf("profile report: parity needs the raw exchanges (AIPerf: --export-level raw): %w", err)
		}
		checked, err = checkRaw(ctx, *bundle, raws, native, stderr)
		if err != nil {
			return fmt.Errorf("profile report: %w", err)
		}
	}
	md, err := buildReport(dir, *name, checked, false)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(stdout, md); err != nil {
		return err
	}
	if checked != nil && !checked.OK {
		return fmt.Errorf("%w: native parity failed: %v", ErrRunFailed, checked.Counts)
	}
	return nil
}

// checkRaw answers the bodies of recorded exchanges natively and checks each recorded answer.
func checkRaw(ctx context.Context, bundle string, raws []aiperf.RawRecord, native openNative, stderr io.Writer) (*parityInfo, error) {
	rt, closeRT, err := native(ctx, bundle)
	if err != nil {
		return nil, err
	}
	defer func() { _ = closeRT() }()
	var bodies [][]byte
	obs := make([]parity.Observed, len(raws))
	for i, r := range raws {
		obs[i] = observed(r, aiperf.ParseAnswer(r.Responses))
		if r.Error == nil {
			bodies = append(bodies, r.Payload)
		}
	}
	answers, err := parity.RunNative(ctx, rt, bodies)
	if err != nil {
		return nil, err
	}
	rep := parity.Check(rt, answers, obs)
	measured := map[parity.Outcome]int{}
	for _, v := range rep.Verdicts {
		if v.Phase == aiperf.PhaseProfiling {
			measured[v.Outcome]++
		}
	}
	for _, v := range rep.Failures() {
		fmt.Fprintf(stderr, "profile report: parity %s: %s %s\n", v.Outcome, v.RequestID, v.Detail)
	}
	return &parityInfo{Bundle: bundle, Counts: rep.Counts, Measured: measured, NativeInputs: rep.Inputs, OK: rep.OK()}, nil
}

// writeReport renders report.md and latency.svg into dir and prints the report.
func writeReport(dir string, stdout io.Writer) error {
	md, err := buildReport(dir, "", nil, true)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ReportFile), []byte(md), 0o644); err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	_, err = io.WriteString(stdout, md)
	return err
}

// buildReport renders the report of an artifact directory. checked, when set, replaces the
// parity the directory records; plot writes latency.svg into dir and links it.
func buildReport(dir, name string, checked *parityInfo, plot bool) (string, error) {
	sum, err := aiperf.ReadSummary(filepath.Join(dir, aiperf.SummaryFile))
	if err != nil {
		return "", fmt.Errorf("profile report: %w", err)
	}
	var info *irisInfo
	if raw, ok := sum["iris"]; ok {
		info = &irisInfo{}
		if err := json.Unmarshal(raw, info); err != nil {
			return "", fmt.Errorf("profile report: iris summary: %w", err)
		}
	}
	recs, err := aiperf.ReadRecords(filepath.Join(dir, aiperf.RecordsFile))
	if err != nil {
		return "", fmt.Errorf("profile report: %w", err)
	}
	if name == "" {
		name = runName(dir, info)
	}
	row, stages := report.FromSummary(name, sum)
	par := checked
	if par == nil && info != nil {
		par = info.Parity
	}
	if par != nil {
		total := 0
		for _, n := range par.Measured {
			total += n
		}
		row.Parity = fmt.Sprintf("%d/%d", par.Measured[parity.Match], total)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Profile: %s\n\n", name)
	tool := "AIPerf"
	if info != nil {
		tool = info.Tool + " " + info.Version
	}
	fmt.Fprintf(&b, "Written by %s. Command:\n\n```\n%s\n```\n\n", tool, summaryCommand(sum))
	if info != nil {
		stream := "not streamed"
		if info.Streaming {
			stream = "streamed"
		}
		fmt.Fprintf(&b, "Target %s, model `%s`, %s; concurrency %d; %d warmup requests (excluded from statistics) and %d measured.\n\n",
			info.URL, info.Model, stream, info.Concurrency, info.Warmup, info.Requests)
	}
	if err := report.WriteTable(&b, []report.Row{row}); err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "\nHTTP is the client's request latency (to the last content chunk); task is the server's `iris.generate` span; images/s is over the measured phase; output tokens are the server's `usage.completion_tokens`.\n")
	if line := slowestLine(recs); line != "" {
		b.WriteString(line)
	}
	if len(stages) > 0 {
		b.WriteString("\n## Server stages (OTLP spans joined by X-Request-ID)\n\n")
		if err := report.WriteStages(&b, stages); err != nil {
			return "", err
		}
	}
	pts := report.PointsFromRecords(recs)
	if plot && len(pts) > 0 {
		var svg bytes.Buffer
		if err := report.WriteSVG(&svg, "Request latency: "+name, pts); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, PlotFile), svg.Bytes(), 0o644); err != nil {
			return "", fmt.Errorf("profile report: %w", err)
		}
		fmt.Fprintf(&b, "\n![request latency](%s)\n", PlotFile)
	}
	b.WriteString("\n## Checks\n\n")
	fmt.Fprintf(&b, "- Requests: %d measured succeeded, %d failed.\n", row.Requests, row.Errors)
	warm := 0
	for _, r := range recs {
		if r.Phase() == aiperf.PhaseWarmup {
			warm++
		}
	}
	fmt.Fprintf(&b, "- Warmup: %d records tagged `benchmark_phase: warmup`, excluded from every statistic.\n", warm)
	switch {
	case par != nil:
		b.WriteString(parityLine(par))
	default:
		b.WriteString("- Parity: not checked (no --bundle).\n")
	}
	if info != nil {
		if info.Spans != nil {
			fmt.Fprintf(&b, "- Server spans: joined for %d of %d successful requests.\n", info.Spans.Joined, info.Spans.Of)
		}
		pv := info.Provenance
		if pv.Unchanged {
			head := ""
			if pv.GitHead != "" {
				head = fmt.Sprintf(" (source tree at git HEAD %s)", pv.GitHead)
			}
			fmt.Fprintf(&b, "- Provenance: %d fingerprinted files unchanged during the run%s.\n", pv.Files, head)
		} else {
			fmt.Fprintf(&b, "- Provenance: CHANGED during the run (%d changes); see provenance.json.\n", len(pv.Changes))
		}
		if info.Passed {
			b.WriteString("- Result: passed.\n")
		} else {
			fmt.Fprintf(&b, "- Result: FAILED: %s.\n", strings.Join(info.Failures, "; "))
		}
	}
	return b.String(), nil
}

// parityLine is the report's parity check: which runtime, how many distinct bodies it answered,
// the outcome of every request (the warm-up ones are checked too) and of the measured ones.
func parityLine(par *parityInfo) string {
	all, measured := 0, 0
	for _, n := range par.Counts {
		all += n
	}
	for _, n := range par.Measured {
		measured += n
	}
	return fmt.Sprintf("- Parity against the native runtime (`%s`, which answered the %d distinct request bodies in-process): "+
		"of all %d requests (%d warm-up + %d measured), %v; of the %d measured, %d match.\n",
		par.Bundle, par.NativeInputs, all, all-measured, measured, countsString(par.Counts), measured, par.Measured[parity.Match])
}

func countsString(c map[parity.Outcome]int) string {
	var parts []string
	for _, o := range []parity.Outcome{parity.Match, parity.Mismatch, parity.Unmatched, parity.Failed} {
		if c[o] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c[o], o))
		}
	}
	if len(parts) == 0 {
		return "no records"
	}
	return strings.Join(parts, ", ")
}

func summaryCommand(sum aiperf.SummaryFileData) string {
	var ri aiperf.RunInfo
	_ = json.Unmarshal(sum["run_info"], &ri)
	if ri.CLICommand == "" {
		return "(not recorded)"
	}
	return ri.CLICommand
}

// runName is the run's model: from Iris's summary, else from the first recorded body.
func runName(dir string, info *irisInfo) string {
	if info != nil && info.Name != "" {
		return info.Name
	}
	if raws, err := aiperf.ReadRaw(filepath.Join(dir, aiperf.RawFile)); err == nil && len(raws) > 0 {
		var body struct {
			Model string `json:"model"`
		}
		if json.Unmarshal(raws[0].Payload, &body) == nil && body.Model != "" {
			return body.Model
		}
	}
	return filepath.Base(filepath.Clean(dir))
}

// slowestLine names the slowest measured request: its latency, its input (the dataset's session)
// and its image tokens, so that a p95 over a few requests reads as what it is (one large photo, a
// cold first image) rather than as a tail. Empty without a measured request.
func slowestLine(recs []aiperf.Record) string {
	var slow *aiperf.Record
	worst, n := 0.0, 0
	for i := range recs {
		r := &recs[i]
		if r.Phase() == aiperf.PhaseWarmup || r.Error != nil {
			continue
		}
		lat, ok := r.Metric("request_latency")
		if !ok {
			continue
		}
		n++
		if slow == nil || lat > worst {
			slow, worst = r, lat
		}
	}
	if slow == nil {
		return ""
	}
	input := slow.Metadata.ConversationID
	if input == "" {
		input = fmt.Sprintf("session %d", slow.Metadata.SessionNum)
	}
	detail := ""
	if tok, ok := slow.Metric("iris_image_tokens"); ok {
		detail = fmt.Sprintf(", %.0f image tokens", tok)
	}
	tail := "the p95 lies between it and the next slowest"
	if n >= 20 {
		tail = "the p95 is below it"
	}
	if n == 1 {
		tail = "the only one"
	}
	return fmt.Sprintf("The slowest of the %d measured requests took %.2f ms (input `%s`%s): %s.\n", n, worst, input, detail, tail)
}
