#!/usr/bin/env python3
"""The compact result of one `run.sh vl` phase: the figures of docs/gpu.md's tables in one JSON, and
the same as a markdown table on stdout (the run's log keeps it).

  python3 scripts/gpu/summary.py --dir DIR --out summary.json [--model NAME] [--checkpoint checkpoint.json]

DIR holds what the phase wrote: parity.json (gpucheck parity), bench.json (gpucheck bench),
http.json (httpbench), baseline.json (gpu_baseline.py), ref.json (gpu_parity.py); a missing file
leaves its figures out. --also SUFFIX adds a variant's speed figures from bench<SUFFIX>.json,
http<SUFFIX>.json and baseline<SUFFIX>.json (InternVL's single tile: -t1) under "variants", with
its own table. --served: a served family's phase (run.sh served_phase): parity.json is
benchmark/cmd/accuracy's report against ref.jsonl (gpu_served.py), http-workload.json and
baseline-workload.json the profile's own workload. Only the standard library: it runs wherever
run.sh does.
"""

import argparse
import json
import os


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def parity_summary(rows):
    out = {}
    for r in rows or []:
        p = out.setdefault(r["precision"], {"cases": 0, "agree": 0, "n": 0, "teacher_forced": 0, "diverged": []})
        p["cases"] += 1
        p["agree"] += r["agree"]
        p["n"] += r["n"]
        p["teacher_forced"] += r["teacher_forced_agree"]
        if r["first_divergence"] >= 0:
            p["diverged"].append(f'{r["case"]}@{r["first_divergence"]}')
    for prec, p in out.items():
        p["verdict"] = "PASS" if prec != "fp32" or p["agree"] == p["n"] else "FAIL"
    return out


def engine_summary(b):
    if not b:
        return None
    lat = {l["new_tokens"]: l for l in b.get("latency", [])}
    s = {"device": b.get("device"), "precision": b.get("precision"), "prompt_tokens": b.get("prompt_tokens"),
         "patches": b.get("patches"), "decode_step_ms": b.get("decode_step_ms"), "stages_ms": b.get("stages_ms_per_call")}
    for n in (3, 10):
        if n in lat:
            s[f"c1_{n}tok"] = {"p50_ms": lat[n]["p50_ms"], "p95_ms": lat[n]["p95_ms"]}
    if 3 in lat:
        s["ttft_ms"] = lat[3]["ttft_p50_ms"]
    if 10 in lat:
        s["tpot_ms"] = round(lat[10]["tpot_mean_ms"], 3)
    for t in b.get("throughput", []):
        s[f'c{t["concurrency"]}_images_per_s'] = round(t["images_per_s"], 2)
    return s


def http_summary(h):
    if not h:
        return None
    s = {}
    for n in (3, 10):
        l = h.get(f"c1_{n}tok")
        if l:
            s[f"c1_{n}tok"] = {"p50_ms": round(l["p50_ms"], 2), "p95_ms": round(l["p95_ms"], 2)}
            s[f"c1_{n}tok_server_stages_p50_ms"] = {k[6:-7]: round(v, 2) for k, v in l.items() if k.startswith("stage_")}
    if "c1_3tok" in h:
        s["ttft_ms"] = round(h["c1_3tok"]["ttft_p50_ms"], 2)
    if "c1_10tok" in h:
        s["tpot_ms"] = round(h["c1_10tok"]["tpot_mean_ms"], 3)
    for k, v in h.items():
        if k.endswith("_images_per_s"):
            s[k] = round(v, 2)
    return s


def fmt(v, unit=""):
    return "-" if v is None else f"{v:.2f}{unit}"


def pair(d, key):
    v = (d or {}).get(key)
    return "-" if not v else f'{v["p50_ms"]:.2f} / {v["p95_ms"]:.2f} ms'


def table(s):
    e, h, base = s.get("engine") or {}, s.get("http") or {}, s.get("transformers") or {}
    st, dy = base.get("static") or {}, base.get("dynamic") or {}
    cols = [("Iris HTTP (`iris serve`)", h), ("Iris engine", e), ("transformers static cache", st), ("transformers dynamic cache", dy)]
    lines = ["| figure | " + " | ".join(c[0] for c in cols) + " |", "| --- |" + " --- |" * len(cols)]
    lines.append("| c=1, 3 tokens: p50 / p95 | " + " | ".join(pair(d, "c1_3tok") for _, d in cols) + " |")
    lines.append("| c=1, 10 tokens: p50 / p95 | " + " | ".join(pair(d, "c1_10tok") for _, d in cols) + " |")
    lines.append("| TTFT (p50) | " + " | ".join(fmt(d.get("ttft_ms"), " ms") for _, d in cols) + " |")
    lines.append("| TPOT | " + " | ".join(fmt(d.get("tpot_ms"), " ms") for _, d in cols) + " |")

    def ips(d):
        got = [f'c={c} {d[f"c{c}_images_per_s"]:.1f}' for c in (1, 8, 32) if f"c{c}_images_per_s" in d]
        got += [f'batch {b}: {d[f"batch{b}_images_per_s"]:.1f}' for b in (1, 16) if f"batch{b}_images_per_s" in d]
        return " · ".join(got) or "-"

    lines.append("| images/s, 10 tokens | " + " | ".join(ips(d) for _, d in cols) + " |")
    return "\n".join(lines)


def load_jsonl(path):
    try:
        with open(path) as f:
            return [json.loads(l) for l in f if l.strip()]
    except (OSError, ValueError):
        return None


def served_parity(acc, ref):
    """accuracy's report against gpu_served.py's reference: cases and tokens equal."""
    if not acc:
        return None
    o = acc["summary"]["overall"]
    n = o.get("reference_tokens", 0)
    return {"fp32": {"cases": o.get("items", 0), "same_tokens": o.get("same_tokens", 0), "agree": o.get("prefix_tokens", 0),
                     "n": n, "errors": o.get("errors", 0), "reference_cases": len(ref or []),
                     "verdict": "PASS" if n and o.get("prefix_tokens") == n and not o.get("errors") else "FAIL"}}


def served_main(args):
    d = args.dir
    ref = load_jsonl(os.path.join(d, "ref.jsonl"))
    base, wbase = load(os.path.join(d, "baseline.json")), load(os.path.join(d, "baseline-workload.json"))
    wh = load(os.path.join(d, "http-workload.json")) or {}
    s = {"model": args.model, "checkpoint": load(args.checkpoint) if args.checkpoint else None,
         "reference": {"cases": [r["case"] for r in ref or []], "prompt_tokens": [r["prompt_tokens"] for r in ref or []],
                       "min_margin": min((r["min_margin"] for r in ref or []), default=None)},
         "parity": served_parity(load(os.path.join(d, "parity.json")), ref),
         "http": http_summary(load(os.path.join(d, "http.json"))),
         "http_workload": {k: v for k, v in wh.items() if k.startswith("c1_")} or None,
         "transformers": base, "transformers_workload": wbase}
    with open(args.out, "w") as f:
        json.dump(s, f, indent=1)
    print(f"## {args.model} (served parity)")
    p = (s["parity"] or {}).get("fp32")
    if p:
        print(f'- parity fp32: {p["verdict"]} {p["agree"]}/{p["n"]} tokens, {p["same_tokens"]}/{p["cases"]} cases identical, '
              f'{p["errors"]} errors (reference: {p["reference_cases"]} cases, smallest top-two margin {s["reference"]["min_margin"]:.3g})')
    h, b = s["http"] or {}, base or {}
    print()
    print("| figure | Iris HTTP (`iris serve`) | transformers generate() |")
    print("| --- | --- | --- |")
    print(f'| photo, c=1, 3 tokens: p50 / p95 | {pair(h, "c1_3tok")} | {pair(b, "c1_3tok")} |')
    print(f'| photo, c=1, 10 tokens: p50 / p95 | {pair(h, "c1_10tok")} | {pair(b, "c1_10tok")} |')
    print(f'| photo TTFT (p50) / TPOT | {fmt(h.get("ttft_ms"), " ms")} / {fmt(h.get("tpot_ms"), " ms")} | '
          f'{fmt(b.get("ttft_ms"), " ms")} / {fmt(b.get("tpot_ms"), " ms")} |')
    for k, v in sorted((s["http_workload"] or {}).items()):
        n = k[3:-3]
        wb = (wbase or {}).get(k)
        print(f'| workload ({(wbase or {}).get("case", "?")}), c=1, {n} tokens: p50 / p95 | {v["p50_ms"]:.2f} / {v["p95_ms"]:.2f} ms '
              f'(TTFT {v["ttft_p50_ms"]:.2f}, TPOT {v["tpot_mean_ms"]:.3f}) | {pair({"x": wb}, "x")} |')
    if "c8_images_per_s" in h or "c1_images_per_s" in h:
        print("| images/s, 10 tokens | " + " · ".join(f'c={c} {h[f"c{c}_images_per_s"]:.1f}' for c in (1, 8, 32)
                                                    if f"c{c}_images_per_s" in h) + " | - |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--served", action="store_true", help="a served family's phase (accuracy's parity, the workload)")
    ap.add_argument("--dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default="")
    ap.add_argument("--checkpoint", default="", help="gpu_checkpoint.py's JSON line")
    ap.add_argument("--also", action="append", default=[], help="suffix of a variant's speed files (repeatable)")
    args = ap.parse_args()
    if args.served:
        served_main(args)
        return
    d = args.dir
    ref = load(os.path.join(d, "ref.json")) or {}
    base = load(os.path.join(d, "baseline.json"))
    s = {"model": args.model, "checkpoint": load(args.checkpoint) if args.checkpoint else None,
         "reference": ref.get("meta"),
         "parity": parity_summary(load(os.path.join(d, "parity.json"))),
         "engine": engine_summary(load(os.path.join(d, "bench.json"))),
         "http": http_summary(load(os.path.join(d, "http.json"))),
         "transformers": {k: v for k, v in (base or {}).items()} or None}
    variants = {}
    for sfx in args.also:
        vb = load(os.path.join(d, f"baseline{sfx}.json"))
        variants[sfx] = {"engine": engine_summary(load(os.path.join(d, f"bench{sfx}.json"))),
                         "http": http_summary(load(os.path.join(d, f"http{sfx}.json"))),
                         "transformers": dict(vb) if vb else None}
    if variants:
        s["variants"] = variants
    with open(args.out, "w") as f:
        json.dump(s, f, indent=1)
    print(f"## {args.model}")
    for prec, p in (s["parity"] or {}).items():
        print(f'- parity {prec}: {p["verdict"]} {p["agree"]}/{p["n"]} tokens free-running, {p["teacher_forced"]}/{p["n"]} teacher-forced, '
              f'{p["cases"]} cases; diverged: {", ".join(p["diverged"]) or "none"}')
    e = s["engine"] or {}
    if e:
        print(f'- engine: {e.get("device")}, {e.get("precision")}, prompt {e.get("prompt_tokens")} tokens, {e.get("patches")} patches, '
              f'decode step {fmt(e.get("decode_step_ms"), " ms")}')
    if base:
        print(f'- transformers: processor {fmt(base.get("processor_ms"), " ms")} on the CPU (not in its times)')
    print()
    print(table(s))
    for sfx, v in variants.items():
        e, b = v["engine"] or {}, v["transformers"] or {}
        print(f'\n### {args.model}{sfx}: prompt {e.get("prompt_tokens") or b.get("prompt_tokens")} tokens, '
              f'{e.get("patches") or b.get("patches")} patches\n')
        print(table(v))


if __name__ == "__main__":
    main()
