package profile

import (
	"testing"

	"github.com/iris-vlm/iris/benchmark/aiperf"
	"github.com/iris-vlm/iris/benchmark/parity"
)

// TestParityLine pins the report's parity line: it says what every count counts (the warm-up
// requests are checked too, the measured ones on their own).
func TestParityLine(t *testing.T) {
	for _, tc := range []struct {
		par  parityInfo
		want string
	}{
		{
			par: parityInfo{Bundle: ".build/bundles/demo", NativeInputs: 10,
				Counts: map[parity.Outcome]int{parity.Match: 11}, Measured: map[parity.Outcome]int{parity.Match: 10}},
			want: "- Parity against the native runtime (`.build/bundles/demo`, which answered the 10 distinct request bodies in-process): " +
				"of all 11 requests (1 warm-up + 10 measured), 11 match; of the 10 measured, 10 match.\n",
		},
		{
			par: parityInfo{Bundle: "b", NativeInputs: 3,
				Counts:   map[parity.Outcome]int{parity.Match: 6, parity.Mismatch: 2},
				Measured: map[parity.Outcome]int{parity.Match: 5, parity.Mismatch: 1}},
			want: "- Parity against the native runtime (`b`, which answered the 3 distinct request bodies in-process): " +
				"of all 8 requests (2 warm-up + 6 measured), 6 match, 2 mismatch; of the 6 measured, 5 match.\n",
		},
	} {
		if got := parityLine(&tc.par); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}

// TestSlowestLine: the slowest measured request is named with its input and image tokens; a
// slower warm-up request and a failed one are not measured requests.
func TestSlowestLine(t *testing.T) {
	rec := func(phase, input string, ms, tokens float64, failed bool) aiperf.Record {
		r := aiperf.Record{
			Metadata: aiperf.Metadata{BenchmarkPhase: phase, ConversationID: input},
			Metrics: map[string]aiperf.Value{
				"request_latency":   {Value: ms},
				"iris_image_tokens": {Value: tokens},
			},
		}
		if failed {
			r.Error = &aiperf.ErrorDetails{Code: 500, Message: "boom"}
		}
		return r
	}
	recs := []aiperf.Record{
		rec(aiperf.PhaseWarmup, "cold", 9000, 64, false),
		rec("profiling", "chelsea", 70.5, 165, false),
		rec("profiling", "retina", 1111.62, 2500, false),
		rec("profiling", "broken", 5000, 10, true),
		rec("profiling", "coffee", 80, 300, false),
	}
	want := "The slowest of the 3 measured requests took 1111.62 ms (input `retina`, 2500 image tokens): the p95 lies between it and the next slowest.\n"
	if got := slowestLine(recs); got != want {
		t.Errorf("slowestLine:\n got %q\nwant %q", got, want)
	}
	if got := slowestLine(recs[:1]); got != "" {
		t.Errorf("warm-up only: %q, want no line", got)
	}
}
