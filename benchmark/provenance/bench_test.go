package provenance

import "testing"

// BenchmarkTakeRepo fingerprints this repository's source tree (git HEAD, status and every
// tracked and untracked file), the per-run cost paid twice by every profiling run.
func BenchmarkTakeRepo(b *testing.B) {
	var files int
	for b.Loop() {
		s, err := Take(b.Context(), Spec{Source: "../.."})
		if err != nil {
			b.Fatal(err)
		}
		files = len(s.Files)
	}
	b.ReportMetric(float64(files), "files")
}
