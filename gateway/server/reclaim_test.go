package server

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestIdleReclaim: the reclaim runs once after the last request of a burst ends and the quiet
// lasts; not while a request is in, not again without new requests, never when disabled.
func TestIdleReclaim(t *testing.T) {
	const after = 30 * time.Millisecond
	var n atomic.Int32
	r := newIdleReclaim(after, func() { n.Add(1) })
	wait := func(want int32) {
		t.Helper()
		time.Sleep(4 * after)
		if got := n.Load(); got != want {
			t.Fatalf("reclaims %d, want %d", got, want)
		}
	}
	a, b := r.start(), r.start()
	a()
	wait(0) // b is still in
	b()
	wait(1)
	wait(1) // idle with nothing new: no second reclaim
	done := r.start()
	done()
	again := r.start() // a request starts before the timer fires: that timer does nothing
	time.Sleep(after / 3)
	again()
	wait(2)

	off := newIdleReclaim(0, func() { t.Fatal("reclaim while disabled") })
	off.start()()
	time.Sleep(2 * after)
}
