// Package speed holds what Iris's speed tools share, so that their figures are computed alike:
// nearest-rank percentiles and a closed loop of concurrent requests. Its users are gpucheck
// bench (the CUDA engine in-process, under core) and httpbench (the same figures over HTTP,
// under benchmark). It sits at the module's root: core may not import benchmark, and Go keeps
// core/internal from benchmark.
package speed

import (
	"math"
	"slices"
	"sync"
	"time"
)

// Percentile is the p-th percentile (0-100) of v by nearest rank: the smallest sample with at
// least p% of the samples at or below it (the minimum for p <= 0). It is 0 for no samples; v is
// not modified.
func Percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// ClosedLoop runs do from c goroutines until d has passed (a closed loop: each sends its next
// request when the last is answered) and returns how many completed, the elapsed seconds and
// the first error. A goroutine stops at its first error; the others run on until d has passed.
func ClosedLoop(c int, d time.Duration, do func() error) (done int, seconds float64, err error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	deadline := time.Now().Add(d)
	start := time.Now()
	for range c {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				e := do()
				mu.Lock()
				if e != nil {
					if err == nil {
						err = e
					}
					mu.Unlock()
					return
				}
				done++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return done, time.Since(start).Seconds(), err
}
