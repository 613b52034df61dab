package imageio

import (
	"runtime"
	"sync"
)

// inBands runs fn over [0, n) split into one contiguous band per core (fewer when there is too
// little work: minPer items at least per band). fn must not depend on the split.
func inBands(n, minPer int, fn func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), n/max(minPer, 1))
	if workers <= 1 {
		fn(0, n)
		return
	}
	step := (n + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := step; lo < n; lo += step {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			fn(lo, hi)
		}(lo, min(lo+step, n))
	}
	fn(0, min(step, n))
	wg.Wait()
}
