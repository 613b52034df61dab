package pixels

import (
	"runtime"
	"sync"
)

// minBandWork is roughly how many output bytes a goroutine must have to be worth starting: below
// it the start-up costs more than the band saves.
const minBandWork = 64 << 10

// bands runs fn over [0, n) split into contiguous bands, one per available core, each band
// at least ceil(minBandWork/unit) items. unit is the work per item in output bytes. fn must not
// depend on how the range is split.
func bands(n, unit int, fn func(lo, hi int)) {
	workers := runtime.GOMAXPROCS(0)
	if unit < 1 {
		unit = 1
	}
	if most := n * unit / minBandWork; most < workers {
		workers = most
	}
	if workers <= 1 || n < 2 {
		fn(0, n)
		return
	}
	if workers > n {
		workers = n
	}
	var wg sync.WaitGroup
	step := (n + workers - 1) / workers
	for lo := step; lo < n; lo += step {
		hi := min(lo+step, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(lo, hi)
		}()
	}
	fn(0, min(step, n))
	wg.Wait()
}

// scratch pools the intermediate image of two-pass resizes.
var scratch = sync.Pool{New: func() any { return new([]byte) }}

// getScratch returns a pooled buffer of length n; give it back with putScratch.
func getScratch(n int) *[]byte {
	b := scratch.Get().(*[]byte)
	if cap(*b) < n {
		*b = make([]byte, n)
	}
	*b = (*b)[:n]
	return b
}

func putScratch(b *[]byte) { scratch.Put(b) }

// floatScratch pools the channel planes of NormalizePatchify's bands.
var floatScratch = sync.Pool{New: func() any { return new([]float32) }}

// getFloatScratch returns a pooled buffer of length n; give it back with putFloatScratch.
func getFloatScratch(n int) *[]float32 {
	b := floatScratch.Get().(*[]float32)
	if cap(*b) < n {
		*b = make([]float32, n)
	}
	*b = (*b)[:n]
	return b
}

func putFloatScratch(b *[]float32) { floatScratch.Put(b) }
