package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape reads the server's /metrics.
func scrape(ctx context.Context, client *http.Client, url string) ([]sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("build the /metrics request: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape /metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read /metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape /metrics: status %d", resp.StatusCode)
	}
	return parseMetrics(string(raw)), nil
}

// parseMetrics reads the samples of the Prometheus text format; a line it cannot read is
// skipped (only a few known series matter here).
func parseMetrics(text string) []sample {
	var out []sample
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		s := sample{labels: map[string]string{}}
		var rest string
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				continue
			}
			s.name, rest = line[:i], line[j+1:]
			for pair := range strings.SplitSeq(line[i+1:j], ",") {
				k, v, ok := strings.Cut(pair, "=")
				if !ok {
					continue
				}
				if uq, err := strconv.Unquote(v); err == nil {
					v = uq
				}
				s.labels[strings.TrimSpace(k)] = v
			}
		} else {
			var ok bool
			if s.name, rest, ok = strings.Cut(line, " "); !ok {
				continue
			}
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		s.value = v
		out = append(out, s)
	}
	return out
}

// kvUtilization is iris_kv_cache_utilization of model; nil where it is not exported.
func kvUtilization(samples []sample, model string) *float64 {
	for _, s := range samples {
		if s.name == "iris_kv_cache_utilization" && s.labels["model"] == model {
			return &s.value
		}
	}
	return nil
}

// engineSeconds sums iris_engine_seconds_total by phase (over models, where there are several).
func engineSeconds(samples []sample) map[string]float64 {
	out := map[string]float64{}
	for _, s := range samples {
		if s.name == "iris_engine_seconds_total" {
			out[s.labels["phase"]] += s.value
		}
	}
	return out
}

// waitKV polls /metrics until the model's KV utilization is 0 or within has passed (a
// cancelled request frees its blocks after the engine's pass in flight). It returns the last
// value (nil when the server does not export it) and how long it waited.
func waitKV(ctx context.Context, client *http.Client, url, model string, within time.Duration) (*float64, time.Duration, error) {
	start := time.Now()
	for {
		samples, err := scrape(ctx, client, url)
		if err != nil {
			return nil, time.Since(start), err
		}
		kv := kvUtilization(samples, model)
		if kv == nil || *kv == 0 || time.Since(start) > within {
			return kv, time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return kv, time.Since(start), fmt.Errorf("wait for the KV pool to drain: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
