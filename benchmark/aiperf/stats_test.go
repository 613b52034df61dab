package aiperf

import (
	"encoding/json"
	"math"
	"os"
	"testing"
)

// goldenStats is testdata/stats_golden.json, written by scripts/aiperf/golden_stats.py with
// AIPerf 0.13's own metric_result_from_array, adjusted-band builder and display conversion.
type goldenStats struct {
	Tag             string         `json:"tag"`
	Values          []float64      `json:"values"`
	Errors          int            `json:"errors"`
	Stored          map[string]any `json:"stored"`
	Display         map[string]any `json:"display"`
	AdjustedStored  map[string]any `json:"adjusted_stored"`
	AdjustedDisplay map[string]any `json:"adjusted_display"`
}

func loadGoldenStats(t *testing.T) map[string]goldenStats {
	t.Helper()
	b, err := os.ReadFile("testdata/stats_golden.json")
	if err != nil {
		t.Fatalf("golden file: %v", err)
	}
	var g map[string]goldenStats
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g) == 0 {
		t.Fatal("golden file has no cases")
	}
	return g
}

func statsFields(s Stats) map[string]float64 {
	m := map[string]float64{"avg": s.Avg, "min": s.Min, "max": s.Max, "sum": s.Sum, "count": float64(s.Count)}
	if !s.NoStd {
		m["std"] = s.Std
	}
	for i, q := range Quantiles {
		m["p"+fmtQ(q)] = s.P[i]
	}
	return m
}

func fmtQ(q float64) string { b, _ := json.Marshal(q); return string(b) }

func wantFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case string:
		if x == "inf" {
			return math.Inf(1), true
		}
	}
	return 0, false
}

// ulps is the distance between a and b in units of the last place.
func ulps(a, b float64) uint64 {
	if a == b {
		return 0
	}
	ia, ib := math.Float64bits(a), math.Float64bits(b)
	if ia > ib {
		return ia - ib
	}
	return ib - ia
}

func compareStats(t *testing.T, what string, got Stats, want map[string]any) {
	t.Helper()
	fields := statsFields(got)
	for k, wv := range want {
		if k == "unit" {
			continue
		}
		if wv == nil {
			if _, has := fields[k]; has {
				t.Errorf("%s %s: got %v, want null", what, k, fields[k])
			}
			continue
		}
		w, ok := wantFloat(wv)
		if !ok {
			t.Fatalf("%s %s: bad golden value %v", what, k, wv)
		}
		g, has := fields[k]
		if !has {
			t.Errorf("%s %s: missing, want %v", what, k, w)
			continue
		}
		if d := ulps(g, w); d != 0 {
			t.Errorf("%s %s: got %.17g, want %.17g (%d ulp)", what, k, g, w, d)
		}
	}
}

func TestStatsMatchAIPerf(t *testing.T) {
	for name, g := range loadGoldenStats(t) {
		t.Run(name, func(t *testing.T) {
			md, ok := LookupMetric(g.Tag)
			if !ok {
				t.Fatalf("unknown tag %s", g.Tag)
			}
			st, ok := Summarize(g.Values)
			if !ok {
				t.Fatal("no stats")
			}
			// Every statistic matches AIPerf's bit for bit, in stored and in display units.
			compareStats(t, "stored", st, g.Stored)
			if md.Unit != g.Display["unit"] {
				t.Errorf("display unit %s, want %v", md.Unit, g.Display["unit"])
			}
			compareStats(t, "display", st.Scale(md.Scale), g.Display)
			adj, has := Adjusted(g.Values, g.Errors)
			if has != (g.Errors > 0) {
				t.Fatalf("adjusted band present=%v with %d errors", has, g.Errors)
			}
			if has {
				compareStats(t, "adjusted", adj, g.AdjustedStored)
				compareStats(t, "adjusted display", adj.Scale(md.Scale), g.AdjustedDisplay)
			}
		})
	}
}

func TestPercentileEdges(t *testing.T) {
	tests := []struct {
		name string
		xs   []float64
		q    float64
		want float64
	}{
		{"single", []float64{3}, 99, 3},
		{"min", []float64{1, 2, 3, 4}, 0, 1},
		{"max", []float64{1, 2, 3, 4}, 100, 4},
		{"median even", []float64{1, 2, 3, 4}, 50, 2.5},
		{"p90 of 11", []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 90, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.xs, tt.q); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	if !math.IsNaN(Percentile(nil, 50)) {
		t.Error("percentile of nothing must be NaN")
	}
	if _, ok := Summarize(nil); ok {
		t.Error("summary of nothing must report false")
	}
}
