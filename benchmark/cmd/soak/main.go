// Command soak runs the mixed-request soak (benchmark/soak) against a running OpenAI-compatible
// chat server, `iris serve` on the GPU machine in issue 14's run (scripts/gpu/run.sh soak):
// distinct good requests from a set of image files (plain and streamed), bad inputs and client
// cancellations at a concurrency, checking no 5xx, every good answer equal to the same request
// alone and every bad input refused as alone; then, from the server's /metrics, the KV pool back
// to zero blocks in use, and with -pid the server's RSS at the end within 10% (plus a slack) of
// its RSS after the warm-up fifth of the requests:
//
//	soak -url http://127.0.0.1:PORT -model NAME -images DIR|GLOB [-question TEXT] [-requests 2000]
//	     [-concurrency 64] [-bad 0.10] [-cancel 0.10] [-max-tokens 10] [-seed 14] [-pid PID]
//	     [-rss-slack-mib 64] [-json FILE]
//
// It exits 1 when a check fails (each failing check on stderr), 2 on a usage error. It imports
// neither gateway/openai nor core, which bring cgo and the runtime: the binary travels to the GPU
// machine, where every megabyte of the carry counts.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/iris-vlm/iris/benchmark/soak"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options are the command's flags.
type options struct {
	url, model, images, question, jsonOut string
	requests, concurrency, maxTokens, pid int
	bad, cancel                           float64
	seed                                  uint64
	rssSlackMiB                           int64
	settle, idleWait, timeout             time.Duration
}

func parse(args []string, stderr io.Writer) (*options, error) {
	var o options
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.url, "url", "http://127.0.0.1:8080", "the server's base URL")
	fs.StringVar(&o.model, "model", "", "the model to ask (required)")
	fs.StringVar(&o.images, "images", "", "a directory or glob of JPEG/PNG files: one good request (plain and streamed) each (required)")
	fs.StringVar(&o.question, "question", "What is the main object in this image? Answer in one word.", "the question of every request")
	fs.IntVar(&o.requests, "requests", 2000, "requests sent after the first pass")
	fs.IntVar(&o.concurrency, "concurrency", 64, "clients sending at once")
	fs.Float64Var(&o.bad, "bad", 0.10, "fraction of bad inputs")
	fs.Float64Var(&o.cancel, "cancel", 0.10, "fraction of client cancellations")
	fs.IntVar(&o.maxTokens, "max-tokens", 10, "answer length of the good requests (EOS ignored)")
	fs.Uint64Var(&o.seed, "seed", 14, "the schedule's seed")
	fs.IntVar(&o.pid, "pid", 0, "the server's pid: its RSS (/proc/PID/status) after the warm-up fifth and at the end (0: no RSS check)")
	fs.Int64Var(&o.rssSlackMiB, "rss-slack-mib", 64, "absolute slack of the RSS check beside its 10%")
	fs.DurationVar(&o.settle, "settle", 3*time.Second, "wait after the server goes idle before reading its RSS (iris serve reclaims its heap 2 s after the last request)")
	fs.DurationVar(&o.idleWait, "idle-wait", 5*time.Second, "how long the KV pool may take to reach zero blocks in use once the requests are done")
	fs.DurationVar(&o.timeout, "timeout", 120*time.Second, "one request's limit")
	fs.StringVar(&o.jsonOut, "json", "", "write the result as JSON to this file")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case fs.NArg() > 0:
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	case o.model == "" || o.images == "":
		return nil, errors.New("-model and -images are required")
	case o.requests < 1 || o.concurrency < 1 || o.maxTokens < 1:
		return nil, errors.New("-requests, -concurrency and -max-tokens must be positive")
	case o.bad < 0 || o.cancel < 0 || o.bad+o.cancel > 1:
		return nil, fmt.Errorf("-bad %g and -cancel %g: want each >= 0, summing to at most 1", o.bad, o.cancel)
	}
	o.url = strings.TrimSuffix(o.url, "/")
	return &o, nil
}

// loadImages reads the JPEG and PNG files of a directory or a glob, in name order.
func loadImages(pattern string) ([]soak.Image, error) {
	if st, err := os.Stat(pattern); err == nil && st.IsDir() {
		pattern = filepath.Join(pattern, "*")
	}
	paths, err := filepath.Glob(pattern)
	if err != nil {
		return nil, fmt.Errorf("glob %s: %w", pattern, err)
	}
	types := map[string]string{".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png"}
	var out []soak.Image
	for _, p := range paths {
		mt, ok := types[strings.ToLower(filepath.Ext(p))]
		if !ok {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read an image: %w", err)
		}
		out = append(out, soak.Image{Name: filepath.Base(p), MediaType: mt, Data: b})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no .jpg, .jpeg or .png files in %s", pattern)
	}
	return out, nil
}

// report is what the command found: the soak's result and the server-side checks.
type report struct {
	URL      string       `json:"url"`
	Model    string       `json:"model"`
	Images   int          `json:"images"`
	Distinct int          `json:"distinct_requests"`
	Seed     uint64       `json:"seed"`
	Result   *soak.Result `json:"result"`
	// RSS of the server (bytes; 0 without -pid): after the warm-up and at the end, and the limit.
	RSSWarm  int64 `json:"rss_warm_bytes,omitempty"`
	RSSEnd   int64 `json:"rss_end_bytes,omitempty"`
	RSSLimit int64 `json:"rss_limit_bytes,omitempty"`
	// KV is iris_kv_cache_utilization of the model once the requests are done (nil: not exported).
	KV *float64 `json:"kv_utilization,omitempty"`
	// EngineSeconds is iris_engine_seconds_total by phase, where the server exports it.
	EngineSeconds map[string]float64 `json:"engine_seconds,omitempty"`
	Failed        []string           `json:"failed_checks,omitempty"`
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 2
	}
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "soak:", err)
		return 2
	}
	images, err := loadImages(o.images)
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "soak:", err)
		return 2
	}
	rep, err := soakServer(ctx, o, images, stdout)
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "soak:", err)
		return 1
	}
	if o.jsonOut != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err == nil {
			err = os.WriteFile(o.jsonOut, append(b, '\n'), 0o644)
		}
		if err != nil {
			_, _ = fmt.Fprintln(stderr, "soak: write the JSON result:", err)
			return 1
		}
	}
	for _, f := range rep.Failed {
		_, _ = fmt.Fprintln(stderr, "FAIL", f)
	}
	if len(rep.Failed) > 0 {
		return 1
	}
	_, _ = fmt.Fprintln(stdout, "soak: every check passed")
	return 0
}

// soakServer runs the first pass, the soak and the server-side checks and prints the report.
// The error is for a soak that could not be run (the first pass included); failed checks are
// in the report.
func soakServer(ctx context.Context, o *options, images []soak.Image, stdout io.Writer) (*report, error) {
	client := &http.Client{
		Timeout:   o.timeout,
		Transport: &http.Transport{MaxIdleConnsPerHost: o.concurrency, IdleConnTimeout: 90 * time.Second},
	}
	reqs := soak.Mix(o.model, images, o.question, o.maxTokens)
	rep := &report{URL: o.url, Model: o.model, Images: len(images), Distinct: len(reqs), Seed: o.seed}
	start := time.Now()
	if err := soak.Alone(ctx, client, o.url, reqs); err != nil {
		return nil, fmt.Errorf("first pass (each request alone): %w", err)
	}
	_, _ = fmt.Fprintf(stdout, "first pass: %d distinct requests from %d images, each alone, in %v\n", len(reqs), len(images), time.Since(start).Round(time.Millisecond))

	fail := func(format string, a ...any) { rep.Failed = append(rep.Failed, fmt.Sprintf(format, a...)) }
	// idle waits for the KV pool to drain, then lets the server reclaim its heap, and reads RSS.
	idle := func(ctx context.Context, when string) int64 {
		kv, took, err := waitKV(ctx, client, o.url, o.model, o.idleWait)
		switch {
		case err != nil:
			fail("kv %s: %v", when, err)
		case kv == nil:
			_, _ = fmt.Fprintf(stdout, "kv %s: iris_kv_cache_utilization{model=%q} not exported; not checked\n", when, o.model)
		case *kv != 0:
			fail("kv %s: iris_kv_cache_utilization{model=%q} %g after %v; want 0 (every block back in the pool)", when, o.model, *kv, took.Round(time.Millisecond))
		default:
			_, _ = fmt.Fprintf(stdout, "kv %s: 0 blocks in use (after %v)\n", when, took.Round(time.Millisecond))
		}
		if when == "at the end" {
			rep.KV = kv
		}
		if o.pid == 0 {
			return 0
		}
		select {
		case <-ctx.Done():
		case <-time.After(o.settle):
		}
		rss, err := readRSS(o.pid)
		if err != nil {
			fail("rss %s: %v", when, err)
		}
		return rss
	}
	warm := o.requests / 5
	res, err := soak.Run(ctx, soak.Config{
		URL: o.url, Client: client, Requests: reqs,
		N: o.requests, Concurrency: o.concurrency, Bad: o.bad, Cancel: o.cancel, Seed: o.seed,
		Pauses: []int{warm},
		OnPause: func(ctx context.Context, _ int) error {
			rep.RSSWarm = idle(ctx, "after warm-up")
			return nil
		},
	})
	if err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	rep.Result = res
	rep.RSSEnd = idle(ctx, "at the end")
	if metrics, err := scrape(ctx, client, o.url); err == nil {
		rep.EngineSeconds = engineSeconds(metrics)
	}

	if res.Status5xx > 0 {
		fail("5xx: the server answered 5xx %d time(s); want none", res.Status5xx)
	}
	if res.Failed > 0 {
		fail("answers: %d request(s) got another answer or status than alone, or an error; the first: %s", res.Failed, strings.Join(res.Failures, "; "))
	}
	if o.pid != 0 && rep.RSSWarm > 0 && rep.RSSEnd > 0 {
		rep.RSSLimit = rep.RSSWarm + rep.RSSWarm/10 + o.rssSlackMiB<<20
		if rep.RSSEnd > rep.RSSLimit {
			fail("rss: the server's RSS grew from %d MiB after the warm-up to %d MiB at the end; want at most %d MiB (+10%% +%d MiB)",
				rep.RSSWarm>>20, rep.RSSEnd>>20, rep.RSSLimit>>20, o.rssSlackMiB)
		}
	}
	printReport(stdout, rep, warm)
	return rep, nil
}

// printReport writes the report's readable form.
func printReport(w io.Writer, rep *report, warm int) {
	res := rep.Result
	p := func(format string, a ...any) { _, _ = fmt.Fprintf(w, format+"\n", a...) }
	p("soak: %d requests at c=%d against %s (model %s, seed %d) in %v: %.1f requests/s",
		res.Requests, res.Concurrency, rep.URL, rep.Model, rep.Seed, res.Duration.Round(time.Millisecond), float64(res.Requests)/res.Duration.Seconds())
	for _, kind := range []string{"good", "bad", "cancel"} {
		var parts []string
		for _, outcome := range slices.Sorted(maps.Keys(res.Counts[kind])) {
			parts = append(parts, fmt.Sprintf("%s %d", outcome, res.Counts[kind][outcome]))
		}
		p("  %-6s %s", kind, strings.Join(parts, ", "))
	}
	l := res.Latency
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }
	p("  good answers' latency (n=%d): p50 %s, p90 %s, p99 %s, max %s", l.N, ms(l.P50), ms(l.P90), ms(l.P99), ms(l.Max))
	for _, im := range slices.Sorted(maps.Keys(res.LatencyByImage)) {
		l := res.LatencyByImage[im]
		p("    %-28s n=%-4d p50 %s, p99 %s, max %s", im, l.N, ms(l.P50), ms(l.P99), ms(l.Max))
	}
	p("  5xx %d, failures %d", res.Status5xx, res.Failed)
	for _, f := range res.Failures {
		p("    %s", f)
	}
	if rep.RSSLimit > 0 {
		p("  server RSS: %d MiB after the warm-up (%d requests), %d MiB at the end (limit %d MiB)", rep.RSSWarm>>20, warm, rep.RSSEnd>>20, rep.RSSLimit>>20)
	}
	if len(rep.EngineSeconds) > 0 {
		var parts []string
		for _, ph := range slices.Sorted(maps.Keys(rep.EngineSeconds)) {
			parts = append(parts, fmt.Sprintf("%s %.2f", ph, rep.EngineSeconds[ph]))
		}
		p("  iris_engine_seconds_total by phase (since the server started): %s", strings.Join(parts, ", "))
	}
}

// readRSS is VmRSS of /proc/<pid>/status, in bytes.
func readRSS(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read the server's RSS: %w", err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err != nil {
				return 0, fmt.Errorf("parse VmRSS %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
