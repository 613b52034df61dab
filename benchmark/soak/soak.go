// Package soak is the mixed-request soak of a running server: distinct good requests (streamed
// and not), bad inputs and client cancellations sent at a concurrency in a seeded order, each
// good answer checked against the same request's answer alone and each bad input against the
// status it got alone, with no 5xx anywhere. It speaks only HTTP, so it soaks any
// OpenAI-compatible chat server at a base URL: TestSoak's in-process gateway and, through
// benchmark/cmd/soak, `iris serve` on the GPU machine.
package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Kind is one sort of request of the soak.
type Kind int

const (
	Good   Kind = iota // answered 200, equal to the same request alone
	Bad                // refused with the 4xx it gets alone
	Cancel             // the client gives up mid-request
)

func (k Kind) String() string {
	switch k {
	case Good:
		return "good"
	case Bad:
		return "bad"
	case Cancel:
		return "cancel"
	}
	return "kind" + strconv.Itoa(int(k))
}

// Request is one distinct request of the mix.
type Request struct {
	Name   string
	Kind   Kind
	Stream bool
	Body   []byte
	Image  string // the image's name (Mix sets it for good requests and cancellations)
	// Status and Answer are what the request got alone (Alone fills them): the answer text of a
	// 200, the body of a refusal.
	Status int
	Answer string
}

// Config is one soak: where, what and how hard.
type Config struct {
	URL    string // the server's base URL, without /v1/...
	Client *http.Client
	// Requests are the distinct requests, Alone's answers filled in.
	Requests    []*Request
	N           int     // requests sent
	Concurrency int     // clients sending at once
	Bad, Cancel float64 // the fractions of bad inputs and of cancellations (the rest are good)
	Seed        uint64  // the schedule's seed: a failure replays with the same seed and N
	// CancelWithin: a plain (not streamed) cancellation gives up 0..CancelWithin after sending
	// (default 20 ms); a streamed one after its first event.
	CancelWithin time.Duration
	// Pauses are request indices in (0, N) where Run lets every earlier request finish and
	// calls OnPause with the index before going on: where a caller waits for the server to go
	// idle and reads its memory. An error from OnPause ends the run.
	Pauses  []int
	OnPause func(ctx context.Context, done int) error
}

// MaxFailures is how many failures a Result lists; Failed counts them all.
const MaxFailures = 20

// Result is what a soak saw.
type Result struct {
	Requests    int `json:"requests"`
	Concurrency int `json:"concurrency"`
	// Counts holds the requests by kind, then outcome: good and bad "ok", "wrong" (another
	// answer), "status-<n>" (another status than alone), "error"; cancel "canceled",
	// "completed-<status>" (answered before the client gave up) or "error".
	Counts   map[string]map[string]int `json:"counts"`
	Failed   int                       `json:"failed"`
	Failures []string                  `json:"failures,omitempty"` // the first MaxFailures
	// Status5xx counts the 5xx answers the client saw (the first pass's included: none, or
	// Alone fails).
	Status5xx int           `json:"status_5xx"`
	Duration  time.Duration `json:"duration_ns"`
	// Latency is the good requests' time from sending to the whole answer; LatencyByImage the
	// same by Request.Image: whether large images wait behind small ones.
	Latency        Percentiles            `json:"latency_good"`
	LatencyByImage map[string]Percentiles `json:"latency_good_by_image,omitempty"`
}

// OK reports whether every request passed.
func (r *Result) OK() bool { return r.Failed == 0 && r.Status5xx == 0 }

// Percentiles of a set of durations.
type Percentiles struct {
	N   int           `json:"n"`
	P50 time.Duration `json:"p50_ns"`
	P90 time.Duration `json:"p90_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

func percentiles(d []time.Duration) Percentiles {
	if len(d) == 0 {
		return Percentiles{}
	}
	slices.Sort(d)
	at := func(q float64) time.Duration { return d[min(len(d)-1, int(q*float64(len(d))))] }
	return Percentiles{N: len(d), P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: d[len(d)-1]}
}

// Alone sends each good and bad request once, one at a time, and records its status and
// answer. A good request must get 200 and a bad one a 4xx other than 429 (the soak compares
// against these, so a wrong first answer would make every later one look right).
func Alone(ctx context.Context, client *http.Client, url string, reqs []*Request) error {
	for _, r := range reqs {
		if r.Kind == Cancel {
			continue
		}
		st, ans, err := do(ctx, client, url, r, nil)
		if err != nil {
			return fmt.Errorf("%s alone: %w", r.Name, err)
		}
		r.Status, r.Answer = st, ans
		switch {
		case r.Kind == Good && st != http.StatusOK:
			return fmt.Errorf("%s alone: status %d, want 200: %s", r.Name, st, clip(ans))
		case r.Kind == Bad && (st < 400 || st >= 500 || st == http.StatusTooManyRequests):
			return fmt.Errorf("%s alone: status %d, want a 4xx refusal: %s", r.Name, st, clip(ans))
		}
	}
	return nil
}

// schedule draws the N requests and the plain cancellations' delays.
func schedule(cfg *Config) ([]*Request, []time.Duration, error) {
	var byKind [3][]*Request
	for _, r := range cfg.Requests {
		byKind[r.Kind] = append(byKind[r.Kind], r)
	}
	if len(byKind[Good]) == 0 {
		return nil, nil, errors.New("no good requests in the mix")
	}
	if cfg.Bad > 0 && len(byKind[Bad]) == 0 || cfg.Cancel > 0 && len(byKind[Cancel]) == 0 {
		return nil, nil, errors.New("bad or cancel fraction set, but no such requests in the mix")
	}
	if cfg.Bad < 0 || cfg.Cancel < 0 || cfg.Bad+cfg.Cancel > 1 {
		return nil, nil, fmt.Errorf("fractions bad %g and cancel %g: want each >= 0, summing to at most 1", cfg.Bad, cfg.Cancel)
	}
	within := cfg.CancelWithin
	if within <= 0 {
		within = 20 * time.Millisecond
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.N)))
	sched := make([]*Request, cfg.N)
	delays := make([]time.Duration, cfg.N)
	for i := range sched {
		pick := Good
		switch u := rng.Float64(); {
		case u < cfg.Bad:
			pick = Bad
		case u < cfg.Bad+cfg.Cancel:
			pick = Cancel
		}
		sched[i] = byKind[pick][rng.IntN(len(byKind[pick]))]
		delays[i] = time.Duration(rng.Int64N(int64(within)))
	}
	return sched, delays, nil
}

// Run sends cfg.N requests drawn from cfg.Requests (Alone must have run) at cfg.Concurrency
// and checks each. The error is for a run that could not be made (a bad config, OnPause's
// error, ctx done); what the server got wrong is in the Result.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.N < 1 || cfg.Concurrency < 1 {
		return nil, fmt.Errorf("soak of %d requests at c=%d: want both positive", cfg.N, cfg.Concurrency)
	}
	sched, delays, err := schedule(&cfg)
	if err != nil {
		return nil, fmt.Errorf("draw the schedule: %w", err)
	}
	res := &Result{Requests: cfg.N, Concurrency: cfg.Concurrency, Counts: map[string]map[string]int{}}
	var mu sync.Mutex
	var lat []time.Duration
	byImage := map[string][]time.Duration{}
	segment := func(from, to int) {
		var next atomic.Int64
		next.Store(int64(from))
		var wg sync.WaitGroup
		for range cfg.Concurrency {
			wg.Go(func() {
				for ctx.Err() == nil {
					i := int(next.Add(1) - 1)
					if i >= to {
						return
					}
					r := sched[i]
					o := one(ctx, cfg.Client, cfg.URL, r, delays[i])
					mu.Lock()
					if res.Counts[r.Kind.String()] == nil {
						res.Counts[r.Kind.String()] = map[string]int{}
					}
					res.Counts[r.Kind.String()][o.outcome]++
					if o.status >= 500 {
						res.Status5xx++
					}
					if o.fail != "" {
						res.Failed++
						if len(res.Failures) < MaxFailures {
							res.Failures = append(res.Failures, fmt.Sprintf("request %d (%s): %s", i, r.Name, o.fail))
						}
					}
					if r.Kind == Good && o.fail == "" {
						lat = append(lat, o.took)
						if r.Image != "" {
							byImage[r.Image] = append(byImage[r.Image], o.took)
						}
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	start := time.Now()
	from := 0
	for _, p := range append(slices.Sorted(slices.Values(cfg.Pauses)), cfg.N) {
		if p <= from || p > cfg.N {
			continue
		}
		segment(from, p)
		from = p
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("soak at request %d: %w", p, err)
		}
		if p < cfg.N && cfg.OnPause != nil {
			if err := cfg.OnPause(ctx, p); err != nil {
				return res, fmt.Errorf("pause after %d requests: %w", p, err)
			}
		}
	}
	res.Duration = time.Since(start)
	res.Latency = percentiles(lat)
	if len(byImage) > 0 {
		res.LatencyByImage = make(map[string]Percentiles, len(byImage))
		for im, d := range byImage {
			res.LatencyByImage[im] = percentiles(d)
		}
	}
	return res, nil
}

// outcome is one request's fate.
type outcome struct {
	outcome string
	fail    string // "" when it passed
	status  int
	took    time.Duration
}

// one sends one request of the mix and checks it against its answer alone.
func one(ctx context.Context, client *http.Client, url string, r *Request, cancelAfter time.Duration) outcome {
	if r.Kind == Cancel {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var onEvent func()
		if r.Stream {
			onEvent = cancel // give up after the first event
		} else {
			t := time.AfterFunc(cancelAfter, cancel)
			defer t.Stop()
		}
		st, body, err := do(ctx, client, url, r, onEvent)
		switch {
		case err != nil && ctx.Err() != nil:
			return outcome{outcome: "canceled"}
		case err != nil:
			return outcome{outcome: "error", fail: err.Error()}
		case st >= 500:
			return outcome{outcome: "completed-" + strconv.Itoa(st), status: st, fail: fmt.Sprintf("status %d: %s", st, clip(body))}
		}
		return outcome{outcome: "completed-" + strconv.Itoa(st), status: st}
	}
	start := time.Now()
	st, ans, err := do(ctx, client, url, r, nil)
	o := outcome{status: st, took: time.Since(start)}
	switch {
	case err != nil:
		o.outcome, o.fail = "error", err.Error()
	case st != r.Status:
		o.outcome, o.fail = "status-"+strconv.Itoa(st), fmt.Sprintf("status %d, alone %d: %s", st, r.Status, clip(ans))
	case r.Kind == Good && ans != r.Answer:
		o.outcome, o.fail = "wrong", fmt.Sprintf("answer %q, alone %q", clip(ans), clip(r.Answer))
	default:
		o.outcome = "ok"
	}
	return o
}

// clip shortens a body for a message.
func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
