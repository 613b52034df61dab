"""Golden statistics computed with AIPerf 0.13's own functions, for benchmark/aiperf tests.

For each sample set (stored units, e.g. nanoseconds) it records metric_result_from_array (with
the running sum AIPerf's column store keeps), the error-adjusted band of
_build_adjusted_metric_result, and both converted to display units with to_display_unit.
Run with the aiperf venv's python: golden_stats.py OUT.json
"""

import json
import math
import sys

import numpy as np
from aiperf.metrics.derived_latency import _build_adjusted_metric_result
from aiperf.metrics.display_units import to_display_unit
from aiperf.metrics.metric_dicts import metric_result_from_array
from aiperf.metrics.metric_registry import MetricRegistry

rng = np.random.default_rng(20261130)
CASES = {
    "one": ("request_latency", [52_000_123], 0),
    "two": ("request_latency", [41_500_000, 98_250_001], 0),
    "ties": ("time_to_first_token", [5, 5, 5, 7, 7, 9, 11, 11], 2),
    "tokens": ("output_sequence_length", [2, 3, 3, 4, 2, 3, 10, 3, 3, 2], 0),
    "lognormal_50": ("request_latency", [int(x) for x in rng.lognormal(18, 0.4, 50)], 3),
    "lognormal_1000": ("inter_token_latency", [float(x) for x in rng.lognormal(15, 0.7, 1000)], 17),
    "throughput": ("output_token_throughput_per_user", [float(x) for x in rng.uniform(50, 150, 37)], 0),
    "bytes": ("http_req_data_sent", [float(x) for x in rng.integers(1000, 900_000, 23)], 0),
}


def dump(res):
    out = {}
    for k in ("unit", "avg", "min", "max", "sum", "std", "count", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99"):
        v = getattr(res, k)
        if isinstance(v, float) and math.isinf(v):
            v = "inf"
        out[k] = v
    return out


golden = {}
for name, (tag, values, errors) in CASES.items():
    cls = MetricRegistry.get_class(tag)
    running = 0.0
    for v in values:
        running += v
    arr = np.array(values, dtype=np.float64)
    res = metric_result_from_array(tag, cls.header, str(cls.unit), arr.copy(), running)
    entry = {"tag": tag, "values": values, "errors": errors, "stored": dump(res), "display": dump(to_display_unit(res, MetricRegistry))}
    if errors:
        adj = _build_adjusted_metric_result(tag, cls, np.sort(arr), errors)
        entry["adjusted_stored"] = dump(adj)
        entry["adjusted_display"] = dump(to_display_unit(adj, MetricRegistry))
    golden[name] = entry

with open(sys.argv[1], "w") as f:
    json.dump(golden, f, indent=1)
    f.write("\n")
