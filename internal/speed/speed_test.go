package speed

import (
	"errors"
	"math"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	thirty := make([]float64, 30)
	for i := range thirty {
		thirty[i] = float64(30 - i) // 30..1, unsorted
	}
	for _, tc := range []struct {
		name string
		v    []float64
		p    float64
		want float64
	}{
		{"empty", nil, 50, 0},
		{"one sample", []float64{7}, 95, 7},
		{"p50 of 1..10 is the 5th", []float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, 50, 5},
		{"p95 of 30 is the 29th", thirty, 95, 29},
		{"p50 of 30 is the 15th", thirty, 50, 15},
		{"p0 is the minimum", []float64{3, 1, 2}, 0, 1},
		{"p100 is the maximum", []float64{3, 1, 2}, 100, 3},
		{"nearest rank, not interpolated", []float64{1, 2, 3, 4}, 50, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.v)
			if got := Percentile(tc.v, tc.p); got != tc.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tc.v, tc.p, got, tc.want)
			}
			if !slices.Equal(in, tc.v) {
				t.Errorf("Percentile modified its input: %v, was %v", tc.v, in)
			}
		})
	}
}

func TestClosedLoop(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		c       int
		failAt  int64 // the call that fails (0: none)
		wantErr error
	}{
		{"runs until the deadline", 4, 0, nil},
		{"reports the first error", 2, 3, boom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			done, secs, err := ClosedLoop(tc.c, 50*time.Millisecond, func() error {
				n := calls.Add(1)
				if n == tc.failAt {
					return boom
				}
				time.Sleep(time.Millisecond) // a request's 1 ms: the work the closed loop times
				return nil
			})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			failed := 0
			if tc.failAt > 0 {
				failed = 1
			}
			if int64(done+failed) != calls.Load() {
				t.Errorf("done = %d with %d failed, but do ran %d times", done, failed, calls.Load())
			}
			if done == 0 || secs < 0.05 {
				t.Errorf("done = %d in %.3f s, want some requests over at least the 50 ms", done, secs)
			}
		})
	}
}

// TestRunSteady: the steady rate counts the completions inside [from, to) over its length.
func TestRunSteady(t *testing.T) {
	ms := time.Millisecond
	r := Run{Ends: []time.Duration{100 * ms, 900 * ms, 1000 * ms, 1500 * ms, 1999 * ms, 2000 * ms, 2500 * ms}}
	for _, tc := range []struct {
		from, to time.Duration
		want     float64
	}{
		{1000 * ms, 2000 * ms, 3}, // 1000, 1500, 1999 in one second
		{0, 4000 * ms, 7.0 / 4},   // all of them over four seconds
		{2600 * ms, 3600 * ms, 0}, // none
		{2000 * ms, 1000 * ms, 0}, // an empty window
		{500 * ms, 1000 * ms, 2},  // 900 ms alone, over half a second
	} {
		if got := r.Steady(tc.from, tc.to); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Steady(%v, %v) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}

// TestClosedLoopRunEnds: every completion has its time, in order, within the run.
func TestClosedLoopRunEnds(t *testing.T) {
	// each request takes 1 ms: the work the closed loop times
	r, err := ClosedLoopRun(3, 30*time.Millisecond, func() error { time.Sleep(time.Millisecond); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Ends) != r.Done || r.Done == 0 {
		t.Fatalf("%d ends for %d done", len(r.Ends), r.Done)
	}
	if !slices.IsSorted(r.Ends) || r.Ends[len(r.Ends)-1] > time.Duration(r.Seconds*float64(time.Second)) {
		t.Errorf("ends %v not in order within %.3f s", r.Ends, r.Seconds)
	}
}
