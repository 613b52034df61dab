package poll

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB that records a failure instead of ending the test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

func TestUntil(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 5 {
			n.Add(1)
		}
	}()
	r := &recorder{TB: t}
	Until(r, 10*time.Second, "five increments", func() string {
		if got := n.Load(); got != 5 {
			return fmt.Sprintf("%d so far", got)
		}
		return ""
	})
	if r.failed != "" {
		t.Fatalf("a state reached within the deadline failed the test: %s", r.failed)
	}
	Until(r, 20*time.Millisecond, "six increments", func() string { return fmt.Sprintf("%d so far", n.Load()) })
	if want := "waited 20ms for six increments; 5 so far"; r.failed != want {
		t.Fatalf("failure %q, want %q", r.failed, want)
	}
	r.failed = ""
	Until(r, 10*time.Millisecond, "a condition", True(func() bool { return false }))
	if !strings.HasSuffix(r.failed, "a condition; not yet") {
		t.Fatalf("failure %q", r.failed)
	}
}
