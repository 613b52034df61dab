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
	r, err := ClosedLoopRun(c, d, do)
	return r.Done, r.Seconds, err
}

// Run is one closed loop's outcome.
type Run struct {
	// Done requests completed in Seconds: from the start to the last answer, the requests sent
	// before the deadline included (the ramp-up, with none answered yet, and the drain after
	// the deadline, with fewer and fewer in flight, count in it).
	Done    int
	Seconds float64
	// Ends are the completions' times from the start, in order.
	Ends []time.Duration
}

// Steady is the completions' rate between from and to (from the start): the load's steady
// state when from is past the ramp-up (the first answers, which under c requests take about as
// long as c over the rate) and to is the deadline (after it the loop drains). 0 when to <= from.
func (r Run) Steady(from, to time.Duration) float64 {
	if to <= from {
		return 0
	}
	lo, _ := slices.BinarySearch(r.Ends, from)
	hi, _ := slices.BinarySearch(r.Ends, to)
	return float64(hi-lo) / (to - from).Seconds()
}

// ClosedLoopRun is ClosedLoop with each completion's time (Run.Ends).
func ClosedLoopRun(c int, d time.Duration, do func() error) (Run, error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var r Run
	var err error
	start := time.Now()
	deadline := start.Add(d)
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
				r.Done++
				r.Ends = append(r.Ends, time.Since(start))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	r.Seconds = time.Since(start).Seconds()
	return r, err
}
