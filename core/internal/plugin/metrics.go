package plugin

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the host's Prometheus collectors; labels stay low-cardinality (plugin name, op,
// outcome code).
type metrics struct {
	calls     *prometheus.CounterVec
	seconds   *prometheus.HistogramVec
	instances *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iris_plugin_calls_total",
			Help: "Plugin calls by plugin, operation and outcome: ok, refused, failed (the plugin's typed errors) or a host code such as plugin_timeout.",
		}, []string{"plugin", "op", "outcome"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "iris_plugin_call_seconds",
			Help:    "Wall time of plugin calls, including waiting for and starting an instance.",
			Buckets: []float64{50e-6, 100e-6, 200e-6, 500e-6, 1e-3, 2e-3, 5e-3, 10e-3, 50e-3, 0.25, 1},
		}, []string{"plugin", "op"}),
		instances: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iris_plugin_instances_total",
			Help: "Plugin instance lifecycle events: started, recycled, discarded (after a failed call).",
		}, []string{"plugin", "event"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	m.calls, err = register(reg, m.calls)
	if err != nil {
		return nil, err
	}
	m.seconds, err = register(reg, m.seconds)
	if err != nil {
		return nil, err
	}
	m.instances, err = register(reg, m.instances)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or returns the identical collector a previous Host registered, so that
// two hosts on one registry (tests, a reload) share their series instead of failing.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}
