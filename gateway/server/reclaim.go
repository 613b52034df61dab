package server

import (
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/iris-vlm/iris/core"
)

// idleReclaim hands the heap the requests left behind back to the OS once the server has been
// idle for a while. Under load the heap grows to twice its live peak (GOGC=100): every waiting
// request holds its body, its decoded image and, once running, its pixels. With no allocation at
// idle, no GC runs for up to two minutes (the runtime's forced period) and the scavenger keeps
// what the last heap goal allowed, so an idle server held ~300 MB of garbage and its RSS stayed
// at the run's peak. Most of that heap is the pixel buffers pooled in sync.Pools (prep's
// pixel_values, the resize and JPEG scratch): a GC only moves a pool's contents to its victim
// cache and the next one frees them, so after 300 requests of 512x512 images at c=24 one GC
// left 260 MiB live and a second 24 MiB. reclaimHeap runs both a few seconds after the last
// request ends: a few milliseconds with a live heap of tens of MiB, once per idle period.
type idleReclaim struct {
	after   time.Duration
	reclaim func()
	// afterFunc arms the timer: time.AfterFunc (a test arms its own)
	afterFunc func(time.Duration, func())

	mu       sync.Mutex
	inflight int
	dirty    bool // a request ran since the last reclaim
	gen      int  // bumped by every start, so a timer armed before it does nothing
}

// newIdleReclaim returns nil (no reclaiming) when after is 0.
func newIdleReclaim(after time.Duration, reclaim func()) *idleReclaim {
	if after <= 0 {
		return nil
	}
	return &idleReclaim{after: after, reclaim: reclaim, afterFunc: func(d time.Duration, f func()) { time.AfterFunc(d, f) }}
}

// start counts a request in; the returned func counts it out and, when it was the last, arms
// the reclaim.
func (r *idleReclaim) start() func() {
	if r == nil {
		return func() {}
	}
	r.mu.Lock()
	r.inflight++
	r.dirty = true
	r.gen++
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.inflight--
		if r.inflight > 0 {
			return
		}
		gen := r.gen
		r.afterFunc(r.after, func() { r.fire(gen) })
	}
}

func (r *idleReclaim) fire(gen int) {
	r.mu.Lock()
	if r.inflight > 0 || r.gen != gen || !r.dirty {
		r.mu.Unlock()
		return
	}
	r.dirty = false
	r.mu.Unlock()
	r.reclaim()
}

// reclaimHeap empties the sync.Pools (two GCs: the first moves their contents to the victim
// caches, the second frees them) and hands the free heap back to the OS, the C heap's free pages
// too (glibc keeps them in per-thread malloc arenas).
func reclaimHeap() {
	runtime.GC()
	debug.FreeOSMemory()
	core.TrimNativeHeap()
}
