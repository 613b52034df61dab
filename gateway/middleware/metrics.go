package middleware

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
)

// HTTPMetrics are the request-level Prometheus collectors.
type HTTPMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
}

// NewHTTPMetrics registers the request collectors with reg:
//
//   - iris_http_requests_total{route,method,status,code}: code is the error code, "ok" on success
//   - iris_http_request_duration_seconds{route,method}: wall time to the end of the response
//   - iris_http_requests_in_flight
func NewHTTPMetrics(reg prometheus.Registerer) (*HTTPMetrics, error) {
	m := &HTTPMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iris_http_requests_total",
			Help: "HTTP requests by route, method, status and error code (ok on success).",
		}, []string{"route", "method", "status", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "iris_http_request_duration_seconds",
			Help:    "HTTP request duration to the end of the response.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 18), // 1 ms .. 131 s
		}, []string{"route", "method"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "iris_http_requests_in_flight",
			Help: "HTTP requests being served.",
		}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.inFlight} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register http metrics: %w", err)
		}
	}
	return m, nil
}

// Handler counts and times every request.
func (m *HTTPMetrics) Handler() gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		m.inFlight.Inc()
		defer m.inFlight.Dec()
		c.Next()
		route := c.FullPath()
		if route == "" {
			route = "unmatched"
		}
		code := ErrorCode(c)
		if code == "" {
			code = "ok"
		}
		method := methodLabel(c.Request.Method)
		m.requests.WithLabelValues(route, method, strconv.Itoa(c.Writer.Status()), code).Inc()
		m.duration.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
	}
}

// methodLabel keeps the label set bounded: clients choose the method.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}
