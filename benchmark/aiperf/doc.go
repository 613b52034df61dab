// Package aiperf reads and writes the artifacts of NVIDIA AIPerf 0.13 (per-request records, raw
// exchanges, the schema 1.4 summary JSON, the summary CSV, inputs.json and single_turn input
// files) and reproduces its statistics and per-request metric formulas, so that Iris's profiler
// and AIPerf can read each other's runs.
//
// Formulas follow aiperf 0.13.0: metrics/metric_dicts.py (percentiles by linear interpolation,
// population std), metrics/derived_latency.py (error-adjusted bands with nearest-rank
// percentiles) and metrics/types/*.py (per-record metrics computed in nanoseconds, exported in
// display units).
package aiperf
