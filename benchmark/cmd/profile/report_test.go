package profile

import (
	"testing"

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
