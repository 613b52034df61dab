package pixels

import (
	"sync"

	"github.com/iris-vlm/iris/core/internal/par"
)

// minBandWork is roughly how many output bytes a goroutine must have to be worth starting: below
// it the start-up costs more than the band saves.
const minBandWork = 64 << 10

// bands runs fn over [0, n) split into contiguous bands, one per available core, each band
// at least ceil(minBandWork/unit) items. unit is the work per item in output bytes. fn must not
// depend on how the range is split.
func bands(n, unit int, fn func(lo, hi int)) {
	par.Bands(n, (minBandWork+max(unit, 1)-1)/max(unit, 1), fn)
}

// bufPool pools slices of one element type, handed out at the length asked for.
type bufPool[T any] struct{ p sync.Pool }

// get returns a pooled slice of length n; give it back with put.
func (b *bufPool[T]) get(n int) *[]T {
	v, _ := b.p.Get().(*[]T)
	if v == nil {
		v = new([]T)
	}
	if cap(*v) < n {
		*v = make([]T, n)
	}
	*v = (*v)[:n]
	return v
}

func (b *bufPool[T]) put(v *[]T) { b.p.Put(v) }

var (
	// scratch pools the intermediate image of two-pass resizes.
	scratch bufPool[byte]
	// floatScratch pools the channel planes of NormalizePatchify's bands.
	floatScratch bufPool[float32]
)
