package server

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iris-vlm/iris/core"
)

// modelMetrics are the per-bundle collectors fed from finished results. Their bundle label
// comes from the runtime's result, never from the request, so its values are bounded by the
// loaded bundles.
type modelMetrics struct {
	stage       *prometheus.HistogramVec
	ttft        *prometheus.HistogramVec
	tokens      *prometheus.CounterVec
	imageTokens *prometheus.HistogramVec
}

// newModelMetrics registers:
//
//   - iris_stage_duration_seconds{bundle,stage}: each pipeline stage of each finished request
//   - iris_time_to_first_token_seconds{bundle}: request arrival to the first answer text
//   - iris_tokens_total{bundle,kind}: prompt, completion and image tokens
//   - iris_request_image_tokens{bundle}: image tokens per image request
//   - iris_queue_requests{model}, iris_queue_capacity{model}: admitted requests (running plus
//     waiting) and the most that may be admitted, read from the runtime at scrape time
//   - iris_requests_queued{model}, iris_requests_running{model}, iris_kv_cache_utilization{model}:
//     the gauges an inference gateway's endpoint picker routes on (the Gateway API Inference
//     Extension's TotalQueuedRequests, TotalRunningRequests and KVCacheUtilization), also read
//     at scrape time; the KV gauge only for a model whose engine has a KV pool
//   - iris_prompt_heads{model}, iris_prompt_head_hits_total{model}: the prompt heads an engine
//     keeps and the prompts that copied one (runtime.prompt_heads), for an engine that keeps them
func newModelMetrics(reg prometheus.Registerer, b Backend) (*modelMetrics, error) {
	m := &modelMetrics{
		stage: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "iris_stage_duration_seconds",
			Help:    "Wall time of each pipeline stage of finished requests.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 16), // 0.1 ms .. 93 s
		}, []string{"bundle", "stage"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "iris_time_to_first_token_seconds",
			Help:    "Time from request arrival to the first answer text.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16), // 5 ms .. 164 s
		}, []string{"bundle"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iris_tokens_total",
			Help: "Tokens of finished requests by kind: prompt (image tokens included), completion, image.",
		}, []string{"bundle", "kind"}),
		imageTokens: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "iris_request_image_tokens",
			Help:    "Image tokens per finished image request.",
			Buckets: prometheus.ExponentialBuckets(16, 2, 12), // 16 .. 32768
		}, []string{"bundle"}),
	}
	q := &queueCollector{
		backend:  b,
		inside:   prometheus.NewDesc("iris_queue_requests", "Requests admitted for a model: running plus waiting.", []string{"model"}, nil),
		capacity: prometheus.NewDesc("iris_queue_capacity", "The most requests a model admits at once; beyond it requests get 429.", []string{"model"}, nil),
		queued: prometheus.NewDesc("iris_requests_queued",
			"Requests admitted for a model and waiting for a worker (TotalQueuedRequests; vLLM's vllm:num_requests_waiting).", []string{"model"}, nil),
		running: prometheus.NewDesc("iris_requests_running",
			"Requests of a model holding a worker, being served (TotalRunningRequests; vLLM's vllm:num_requests_running).", []string{"model"}, nil),
		kv: prometheus.NewDesc("iris_kv_cache_utilization",
			"Fraction of a model's KV-cache blocks in use, 0 to 1 (KVCacheUtilization; vLLM's vllm:kv_cache_usage_perc); absent for a model without a KV pool.", []string{"model"}, nil),
		heads: prometheus.NewDesc("iris_prompt_heads",
			"Prompt heads (the tokens before a prompt's image) whose KV rows a model's engine keeps for reuse.", []string{"model"}, nil),
		headHits: prometheus.NewDesc("iris_prompt_head_hits_total",
			"Prompts that copied a kept prompt head's KV rows instead of computing them.", []string{"model"}, nil),
	}
	for _, c := range []prometheus.Collector{m.stage, m.ttft, m.tokens, m.imageTokens, q} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register model metrics: %w", err)
		}
	}
	return m, nil
}

func (m *modelMetrics) observe(res *core.Result, a *answer) {
	b := res.Bundle.Name
	for _, t := range res.Timings {
		m.stage.WithLabelValues(b, t.Stage).Observe(t.Duration.Seconds())
	}
	if !a.firstToken.IsZero() {
		m.ttft.WithLabelValues(b).Observe(a.firstToken.Sub(a.start).Seconds())
	}
	m.tokens.WithLabelValues(b, "prompt").Add(float64(res.Usage.PromptTokens))
	m.tokens.WithLabelValues(b, "completion").Add(float64(res.Usage.CompletionTokens))
	m.tokens.WithLabelValues(b, "image").Add(float64(res.Usage.ImageTokens))
	if res.Image != nil {
		m.imageTokens.WithLabelValues(b).Observe(float64(res.Usage.ImageTokens))
	}
}

// queueCollector reads the runtime's load when scraped.
type queueCollector struct {
	backend  Backend
	inside   *prometheus.Desc
	capacity *prometheus.Desc
	queued   *prometheus.Desc
	running  *prometheus.Desc
	kv       *prometheus.Desc
	heads    *prometheus.Desc
	headHits *prometheus.Desc
}

func (q *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{q.inside, q.capacity, q.queued, q.running, q.kv, q.heads, q.headHits} {
		ch <- d
	}
}

func (q *queueCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range q.backend.Stats() {
		ch <- prometheus.MustNewConstMetric(q.inside, prometheus.GaugeValue, float64(s.Inside), s.Model)
		ch <- prometheus.MustNewConstMetric(q.capacity, prometheus.GaugeValue, float64(s.Capacity), s.Model)
		ch <- prometheus.MustNewConstMetric(q.queued, prometheus.GaugeValue, float64(s.Queued), s.Model)
		ch <- prometheus.MustNewConstMetric(q.running, prometheus.GaugeValue, float64(s.Running), s.Model)
		if s.KVTotal > 0 {
			ch <- prometheus.MustNewConstMetric(q.kv, prometheus.GaugeValue, kvUtilization(s), s.Model)
		}
		if s.HeadCache {
			ch <- prometheus.MustNewConstMetric(q.heads, prometheus.GaugeValue, float64(s.PromptHeads), s.Model)
			ch <- prometheus.MustNewConstMetric(q.headHits, prometheus.CounterValue, float64(s.PromptHeadHits), s.Model)
		}
	}
}

// kvUtilization is the fraction of the KV pool's blocks in use, within [0, 1].
func kvUtilization(s core.Stats) float64 {
	return min(max(float64(s.KVUsed)/float64(s.KVTotal), 0), 1)
}
