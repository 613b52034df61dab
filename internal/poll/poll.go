// Package poll waits, in a test, for a state that another goroutine brings about and that
// nothing signals: every millisecond it asks, and when the deadline passes first it fails the
// test, naming what it waited for and the state it last saw. Where the code under test can
// signal (a channel, a hook), a test waits on that instead.
package poll

import (
	"testing"
	"time"
)

// Until calls state every millisecond until it returns "" (the state waited for), for at most
// timeout; then it fails the test with "waited <timeout> for <what>; <state's last answer>".
// It must be called from the test's goroutine (it calls tb.Fatalf).
func Until(tb testing.TB, timeout time.Duration, what string, state func() string) {
	tb.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		last := state()
		if last == "" {
			return
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			if last = state(); last == "" {
				return
			}
			tb.Fatalf("waited %v for %s; %s", timeout, what, last)
			return
		}
	}
}

// True adapts a condition to Until: "" when cond holds, else "not yet".
func True(cond func() bool) func() string {
	return func() string {
		if cond() {
			return ""
		}
		return "not yet"
	}
}
