"""Validates a profiling artifact directory with AIPerf 0.13's own record models.

Run with the aiperf venv's python:
  check_artifacts.py DIR --requests N --warmup W [--iris [--parity]] [--streaming]

Every profile_export.jsonl line must load as MetricRecordInfo, every raw line as RawRecordInfo,
the summary as JsonExportData (schema 1.4, every metric block a JsonMetricResult), inputs.json as
InputsFile, and the CSV must have AIPerf's layout. Metric tags must be AIPerf's, with AIPerf's
display units (Iris's own are prefixed iris_ or adj_). The run must have exactly N profiling and
W warmup records and no error. With --iris the directory must also carry Iris's checks, all
passed (with --parity, every measured answer matched the native one).
"""

import argparse
import csv
import json
import sys
from pathlib import Path

from aiperf.common.constants import STAT_KEYS
from aiperf.common.models.dataset_models import InputsFile
from aiperf.common.models.export_models import JsonExportData, JsonMetricResult
from aiperf.common.models.record_models import MetricRecordInfo, RawRecordInfo
from aiperf.metrics.metric_registry import MetricRegistry

problems = []
STRICT = False


def problem(msg):
    problems.append(msg)


def display_unit(tag):
    base = tag[4:] if tag.startswith("adj_") else tag
    try:
        cls = MetricRegistry.get_class(base)
    except Exception:
        return None
    return str(cls.display_unit or cls.unit)


def check_unit(where, tag, unit):
    if tag.startswith("iris_"):
        return
    want = display_unit(tag)
    if want is None:
        # AIPerf itself writes analyzer metrics that are not in its registry; Iris must not.
        if STRICT:
            problem(f"{where}: {tag} is not an AIPerf metric")
    elif unit != want:
        problem(f"{where}: {tag} has unit {unit!r}, AIPerf uses {want!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", type=Path)
    ap.add_argument("--requests", type=int, required=True)
    ap.add_argument("--warmup", type=int, required=True)
    ap.add_argument("--iris", action="store_true", help="the directory was written by iris profile")
    ap.add_argument("--parity", action="store_true", help="every answer must have matched the native runtime (iris profile --bundle)")
    ap.add_argument("--streaming", action="store_true")
    a = ap.parse_args()
    d = a.dir
    global STRICT
    STRICT = a.iris

    phases = {"warmup": 0, "profiling": 0}
    for n, line in enumerate((d / "profile_export.jsonl").read_text().splitlines(), 1):
        rec = MetricRecordInfo.model_validate_json(line)
        phases[str(rec.metadata.benchmark_phase)] += 1
        if rec.error is not None:
            problem(f"record {n}: error {rec.error.code} {rec.error.type}: {rec.error.message[:200]}")
        if not rec.metadata.x_request_id or not rec.metadata.x_correlation_id:
            problem(f"record {n}: missing correlation ids")
        for tag, mv in rec.metrics.items():
            check_unit(f"record {n}", tag, mv.unit)
        if str(rec.metadata.benchmark_phase) == "profiling":
            for tag in ["request_latency", "output_sequence_length", "input_sequence_length"] + (["time_to_first_token"] if a.streaming else []):
                if tag not in rec.metrics:
                    problem(f"record {n}: no {tag}")
            if rec.metrics.get("input_sequence_length") and rec.metrics.get("usage_prompt_tokens"):
                if rec.metrics["input_sequence_length"].value != rec.metrics["usage_prompt_tokens"].value:
                    problem(f"record {n}: input_sequence_length differs from usage_prompt_tokens")
    if phases != {"warmup": a.warmup, "profiling": a.requests}:
        problem(f"records by phase {phases}, want warmup {a.warmup} and profiling {a.requests}")

    raw = d / "profile_export_raw.jsonl"
    if raw.exists():
        for n, line in enumerate(raw.read_text().splitlines(), 1):
            r = RawRecordInfo.model_validate_json(line)
            if not r.responses:
                problem(f"raw record {n}: no responses")
    elif a.iris:
        problem("no profile_export_raw.jsonl")

    text = (d / "profile_export_aiperf.json").read_text()
    summary = JsonExportData.model_validate_json(text)
    if summary.schema_version != "1.4":
        problem(f"schema_version {summary.schema_version!r}")
    obj = json.loads(text)
    for tag, block in obj.items():
        if isinstance(block, dict) and "unit" in block:
            JsonMetricResult.model_validate(block)
            check_unit("summary", tag, block["unit"])
    for tag, block in (obj.get("warmup_metrics") or {}).items():
        JsonMetricResult.model_validate(block)
        check_unit("warmup_metrics", tag, block["unit"])
    if summary.request_count is None or summary.request_count.avg != a.requests:
        problem(f"request_count {summary.request_count}")
    if summary.request_latency is None or summary.request_latency.count != a.requests:
        problem(f"request_latency count {summary.request_latency and summary.request_latency.count}")
    if summary.error_request_count is not None or summary.error_summary:
        problem(f"errors: {summary.error_request_count} {summary.error_summary}")
    if a.warmup and (not summary.warmup_metrics or summary.warmup_metrics["request_latency"].count != a.warmup):
        problem("warmup_metrics do not count the warmup requests")
    if a.streaming and summary.time_to_first_token is None:
        problem("no time_to_first_token")

    inputs = d / "inputs.json"
    if inputs.exists():
        f = InputsFile.model_validate_json(inputs.read_text())
        if not f.data or not all(s.payloads for s in f.data):
            problem("inputs.json has no payloads")
    elif a.iris:
        problem("no inputs.json")

    with open(d / "profile_export_aiperf.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    if rows[0] != ["Metric", *STAT_KEYS]:
        problem(f"CSV header {rows[0]}")
    if ["Metric", "Value"] not in rows:
        problem("CSV has no Metric,Value block")

    if a.iris:
        iris = obj.get("iris") or {}
        if not iris.get("passed"):
            problem(f"iris checks failed: {iris.get('failures')}")
        par = iris.get("parity") or {}
        if a.parity and (not par.get("ok") or par.get("measured", {}).get("match") != a.requests):
            problem(f"parity {par}")
        if not (iris.get("provenance") or {}).get("unchanged"):
            problem("provenance changed")
        if "aiperf_version" in obj:
            problem("an Iris summary must not claim an AIPerf version")

    if problems:
        for p in problems:
            print(f"check_artifacts: {d}: {p}", file=sys.stderr)
        sys.exit(1)
    print(f"check_artifacts: {d}: ok ({a.requests} measured + {a.warmup} warmup records, AIPerf 0.13 models)")


if __name__ == "__main__":
    main()
