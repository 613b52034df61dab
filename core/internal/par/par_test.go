package par

import (
	"runtime"
	"sync"
	"testing"
)

// TestBands checks that every index is visited once, whatever the split, and that a range too
// small for a second band runs on the caller alone.
func TestBands(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	for _, tc := range []struct{ n, minPer, wantBands int }{
		{0, 1, 1}, {1, 1, 1}, {7, 8, 1}, {16, 8, 2}, {100, 1, 4}, {101, 25, 4}, {5, 0, 3}, // 5 over 4 cores: bands of 2
	} {
		var mu sync.Mutex
		seen := make([]int, tc.n)
		bands := 0
		Bands(tc.n, tc.minPer, func(lo, hi int) {
			mu.Lock()
			defer mu.Unlock()
			bands++
			for i := lo; i < hi; i++ {
				seen[i]++
			}
		})
		for i, c := range seen {
			if c != 1 {
				t.Fatalf("n=%d minPer=%d: index %d visited %d times", tc.n, tc.minPer, i, c)
			}
		}
		if bands != tc.wantBands {
			t.Errorf("n=%d minPer=%d: %d bands, want %d", tc.n, tc.minPer, bands, tc.wantBands)
		}
	}
}
