// Package report renders a profiling run as the upstream qualification table (HTTP p50/p95,
// task p50, images/s, output tokens min/median/max, parity; TTFT and TPOT when streamed), a
// per-stage breakdown and a latency plot, from AIPerf-format artifacts written by Iris or by
// AIPerf itself.
package report

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/iris-vlm/iris/benchmark/aiperf"
)

// Row is one line of the table. Absent values are nil and rendered as "–".
type Row struct {
	Name     string
	Parity   string
	HTTPP50  *float64
	HTTPP95  *float64
	TaskP50  *float64
	ImagesPS *float64
	// Output tokens min, median and max.
	TokMin, TokMed, TokMax *float64
	TTFTP50, TTFTP95       *float64
	// TPOTP50 is the median inter-token latency (AIPerf's inter_token_latency).
	TPOTP50  *float64
	Requests int
	Errors   int
}

// Stage is one line of the per-stage breakdown.
type Stage struct {
	Name          string
	P50, P95, Avg float64
	// Share is the stage's part of the requests' task time: its total over all requests' total
	// (a request without the stage adds nothing to the first and its task to the second), so a
	// stage never takes more than the whole, whatever share of the requests it ran in. NaN when
	// the summary lacks the counts to total either.
	Share float64
}

// FromSummary reads a row and the stage breakdown from a summary file (Iris's or AIPerf's).
func FromSummary(name string, s aiperf.SummaryFileData) (Row, []Stage) {
	r := Row{Name: name}
	get := func(tag string) (aiperf.Block, bool) { return s.Metric(tag) }
	if b, ok := get("request_latency"); ok {
		r.HTTPP50, r.HTTPP95 = b.P50, b.P95
	}
	if b, ok := get("iris_task_latency"); ok {
		r.TaskP50 = b.P50
	}
	if b, ok := get("request_throughput"); ok && b.Avg != nil {
		ips := *b.Avg
		if n, ok := get("num_images"); ok && n.Avg != nil {
			ips *= *n.Avg
		}
		r.ImagesPS = &ips
	}
	if b, ok := get("output_sequence_length"); ok {
		r.TokMin, r.TokMed, r.TokMax = b.Min, b.P50, b.Max
	}
	if b, ok := get("time_to_first_token"); ok {
		r.TTFTP50, r.TTFTP95 = b.P50, b.P95
	}
	if b, ok := get("inter_token_latency"); ok {
		r.TPOTP50 = b.P50
	}
	if b, ok := get("request_count"); ok && b.Avg != nil {
		r.Requests = int(*b.Avg)
	}
	if b, ok := get("error_request_count"); ok && b.Avg != nil {
		r.Errors = int(*b.Avg)
	}
	var stages []Stage
	task, hasTask := get("iris_task_latency")
	for key := range s {
		name, ok := strings.CutPrefix(key, aiperf.IrisStagePrefix)
		if !ok {
			continue
		}
		b, ok := get(key)
		if !ok || b.P50 == nil || b.P95 == nil || b.Avg == nil {
			continue
		}
		st := Stage{Name: name, P50: *b.P50, P95: *b.P95, Avg: *b.Avg, Share: math.NaN()}
		if hasTask {
			stage, ok1 := total(b)
			whole, ok2 := total(task)
			if ok1 && ok2 && whole > 0 {
				st.Share = stage / whole
			}
		}
		stages = append(stages, st)
	}
	slices.SortFunc(stages, func(a, b Stage) int { return stageRank(a.Name) - stageRank(b.Name) })
	return r, stages
}

// total is a metric's sum over its records: its sum, or its mean times its count.
func total(b aiperf.Block) (float64, bool) {
	switch {
	case b.Sum != nil:
		return *b.Sum, true
	case b.Avg != nil && b.Count != nil:
		return *b.Avg * float64(*b.Count), true
	}
	return 0, false
}

// stageOrder is the pipeline order of core's stages.
var stageOrder = []string{"queue", "decode_image", "plan", "pixels", "frame", "tokenize", "vision", "prefill", "decode"}

func stageRank(s string) int {
	if i := slices.Index(stageOrder, s); i >= 0 {
		return i
	}
	return len(stageOrder)
}

func num(f *float64, format string) string {
	if f == nil {
		return "–"
	}
	return fmt.Sprintf(format, *f)
}

func pair(a, b *float64) string {
	if a == nil && b == nil {
		return "–"
	}
	return num(a, "%.2f") + "/" + num(b, "%.2f")
}

// Streamed reports whether the row has streaming metrics.
func (r Row) Streamed() bool { return r.TTFTP50 != nil }

// WriteTable writes the markdown table of rows; TTFT and TPOT columns appear when any row was
// streamed.
func WriteTable(w io.Writer, rows []Row) error {
	streamed := slices.ContainsFunc(rows, Row.Streamed)
	head := "| profile | parity | HTTP p50/p95 ms | task p50 ms | images/s | output tokens min/median/max |"
	sep := "|---|---|---|---|---|---|"
	if streamed {
		head += " TTFT p50/p95 ms | TPOT p50 ms |"
		sep += "---|---|"
	}
	var b strings.Builder
	b.WriteString(head + "\n" + sep + "\n")
	for _, r := range rows {
		parity := r.Parity
		if parity == "" {
			parity = "–"
		}
		tokens := "–"
		if r.TokMin != nil {
			tokens = fmt.Sprintf("%s/%s/%s", num(r.TokMin, "%g"), num(r.TokMed, "%g"), num(r.TokMax, "%g"))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |", r.Name, parity, pair(r.HTTPP50, r.HTTPP95),
			num(r.TaskP50, "%.2f"), num(r.ImagesPS, "%.3f"), tokens)
		if streamed {
			fmt.Fprintf(&b, " %s | %s |", pair(r.TTFTP50, r.TTFTP95), num(r.TPOTP50, "%.2f"))
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteStages writes the per-stage breakdown table.
func WriteStages(w io.Writer, stages []Stage) error {
	var b strings.Builder
	b.WriteString("| stage | p50 ms | p95 ms | mean ms | share of task time |\n|---|---|---|---|---|\n")
	for _, s := range stages {
		share := "–"
		if !math.IsNaN(s.Share) {
			share = fmt.Sprintf("%.1f%%", 100*s.Share)
		}
		fmt.Fprintf(&b, "| %s | %.2f | %.2f | %.2f | %s |\n", s.Name, s.P50, s.P95, s.Avg, share)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
