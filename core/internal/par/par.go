// Package par runs a loop's iterations in contiguous bands over the cores: the one fork-join the
// image decoder, the pixel kernels and the CUDA engine's staging copies share.
package par

import (
	"runtime"
	"sync"
)

// Bands runs fn over [0, n) split into one contiguous band per core, fewer when there is too
// little work: each band holds at least minPer items. The calling goroutine takes the first
// band. fn must not depend on how the range is split.
func Bands(n, minPer int, fn func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), n/max(minPer, 1))
	if workers <= 1 {
		fn(0, n)
		return
	}
	step := (n + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := step; lo < n; lo += step {
		hi := min(lo+step, n)
		wg.Go(func() { fn(lo, hi) })
	}
	fn(0, min(step, n))
	wg.Wait()
}
