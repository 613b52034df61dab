package aiperf

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// WriteCSV writes profile_export_aiperf.csv as AIPerf's MetricsCsvExporter does: distributions
// sorted by tag under "Metric,avg,min,max,sum,p1,...,p99,std", a blank line, then single values
// under "Metric,Value"; numbers with two decimals, CRLF line ends (Python's csv module).
func WriteCSV(w io.Writer, results []Result) error {
	var dist, single []Result
	for _, r := range results {
		if r.Stats != nil {
			dist = append(dist, r)
		} else {
			single = append(single, r)
		}
	}
	byTag := func(a, b Result) int { return strings.Compare(a.Tag, b.Tag) }
	slices.SortFunc(dist, byTag)
	slices.SortFunc(single, byTag)
	cw := csv.NewWriter(w)
	cw.UseCRLF = true
	if len(dist) > 0 {
		head := []string{"Metric", "avg", "min", "max", "sum"}
		for _, q := range Quantiles {
			head = append(head, fmt.Sprintf("p%g", q))
		}
		if err := cw.Write(append(head, "std")); err != nil {
			return fmt.Errorf("write csv: %w", err)
		}
		for _, r := range dist {
			s := r.Stats
			row := []string{csvName(r), csvNum(s.Avg), csvNum(s.Min), csvNum(s.Max), csvNum(s.Sum)}
			for _, p := range s.P {
				row = append(row, csvNum(p))
			}
			std := ""
			if !s.NoStd {
				std = csvNum(s.Std)
			}
			if err := cw.Write(append(row, std)); err != nil {
				return fmt.Errorf("write csv: %w", err)
			}
		}
		if len(single) > 0 {
			if err := cw.Write(nil); err != nil {
				return fmt.Errorf("write csv: %w", err)
			}
		}
	}
	if len(single) > 0 {
		if err := cw.Write([]string{"Metric", "Value"}); err != nil {
			return fmt.Errorf("write csv: %w", err)
		}
		for _, r := range single {
			if err := cw.Write([]string{csvName(r), csvNum(r.Value)}); err != nil {
				return fmt.Errorf("write csv: %w", err)
			}
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	return nil
}

func csvName(r Result) string {
	tag, suffix := r.Tag, ""
	if base, ok := strings.CutPrefix(tag, "adj_"); ok {
		tag, suffix = base, " (error-adjusted)"
	}
	md, ok := LookupMetric(tag)
	name := tag
	if ok {
		name = md.Header
	}
	name += suffix
	if u := strings.ToLower(r.Unit); u != "" && u != "count" && u != "requests" {
		name += " (" + r.Unit + ")"
	}
	return name
}

// csvNum formats like Python's f"{x:.2f}"; a non-finite statistic (in an error-adjusted band)
// is empty, as AIPerf leaves it.
func csvNum(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return ""
	}
	return fmt.Sprintf("%.2f", f)
}
