package server

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestIdleReclaim: the reclaim runs once after the last request of a burst ends and the quiet
// lasts; not while a request is in, not again without new requests, never when disabled. The
// timers are the test's: it fires them itself.
func TestIdleReclaim(t *testing.T) {
	const after = 3 * time.Second
	var n atomic.Int32
	r := newIdleReclaim(after, func() { n.Add(1) })
	var armed []func()
	r.afterFunc = func(d time.Duration, f func()) {
		if d != after {
			t.Errorf("a timer of %v, want %v", d, after)
		}
		armed = append(armed, f)
	}
	check := func(what string, timers int, reclaims int32) {
		t.Helper()
		if len(armed) != timers || n.Load() != reclaims {
			t.Fatalf("%s: %d timers armed, %d reclaims; want %d and %d", what, len(armed), n.Load(), timers, reclaims)
		}
	}
	a, b := r.start(), r.start()
	a()
	check("one of two requests ended", 0, 0)
	b()
	check("the last request ended", 1, 0)
	armed[0]()
	check("its timer fired", 1, 1)
	armed[0]()
	check("idle with nothing new, a timer fires again", 1, 1)
	done := r.start()
	done()
	check("a request came and went", 2, 1)
	again := r.start()
	armed[1]() // a request started before the timer fired: that timer does nothing
	check("the timer fired while a request is in", 2, 1)
	again()
	armed[2]()
	check("that request ended and its timer fired", 3, 2)

	if off := newIdleReclaim(0, func() { t.Fatal("reclaim while disabled") }); off != nil {
		t.Fatalf("after 0 gave %+v, want nil (no reclaiming)", off)
	}
	var off *idleReclaim
	off.start()() // a nil idleReclaim counts nothing and arms nothing
}

// TestIdleReclaimTimer: with the real timer the reclaim comes once the quiet has lasted.
func TestIdleReclaimTimer(t *testing.T) {
	const after = 10 * time.Millisecond
	fired := make(chan time.Time, 1)
	r := newIdleReclaim(after, func() { fired <- time.Now() })
	ended := time.Now()
	r.start()()
	select {
	case at := <-fired:
		if quiet := at.Sub(ended); quiet < after {
			t.Errorf("reclaimed %v after the last request ended, want at least %v", quiet, after)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no reclaim within 10 s of the last request ending")
	}
}
