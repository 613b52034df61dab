#!/usr/bin/env python3
"""The qualification's table (run.sh qualify; docs/qualification.md) in the upstream layout, with
transformers beside it and the call that measured each row.

  python3 scripts/gpu/qualify_table.py --dir DIR --tsv scripts/gpu/qualify.tsv --part 1/4 \\
      --device NAME --commit SHA --out qualify.md --json qualify.json
  python3 scripts/gpu/qualify_table.py --merge qualify-1of4.json qualify-2of4.json qualify-3of4.json qualify-4of4.json --out table.md

DIR holds one directory a profile (run.sh qualify_profile): row.json (its qualify.tsv row),
precision (the bundle's), iris/ (`iris profile`'s artifacts: report.md's table row, the summary's
"iris" member with the native parity counts and the provenance verdict), aiperf-report.md (`iris
profile report --bundle` of AIPerf's own artifacts, when AIPerf ran) and transformers.json
(gpu_served.py corpus). A profile of qualify.tsv without results is a row that says why: in
another call, or not measured in this one. --merge joins the JSON of several calls into one table,
each row from the call that measured it. Only the standard library.
"""

import argparse
import json
import os
import re
import statistics

COLUMNS = ["profile", "precision/context", "parity", "HTTP p50/p95 ms", "task p50 ms", "images/s",
           "output tokens min/median/max", "transformers task p50 ms", "call"]


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def report_row(text, name):
    """The cells of report.md's table row of the profile (iris profile or iris profile report)."""
    for line in text.splitlines():
        if line.startswith(f"| {name} |"):
            return [c.strip() for c in line.strip().strip("|").split("|")]
    return None


def tsv_rows(path):
    rows = []
    for line in open(path):
        if not line.strip() or line.startswith("#"):
            continue
        profile, family, size, context, kind, max_tokens, call = line.rstrip("\n").split("\t")
        rows.append({"profile": profile, "family": family, "size": size, "context": int(context), "corpus": kind,
                     "max_tokens": int(max_tokens), "call": call})
    return rows


def measured_row(d, row):
    """The table row of one profile's results directory, or None when it holds none."""
    summ = load(os.path.join(d, "iris", "profile_export_aiperf.json")) or {}
    iris = summ.get("iris") or {}
    cells = report_row(read(os.path.join(d, "iris", "report.md")), row["profile"])
    prec = read(os.path.join(d, "precision")).strip() or "?"
    out = {"profile": row["profile"], "precision/context": f'{prec}/{row["context"]}', "call": row["call"],
           "size": row.get("size"), "checkpoint": load(os.path.join(d, "checkpoint.json"))}
    if not cells:
        out.update({c: "–" for c in COLUMNS if c not in out})
        out["parity"] = "not measured: " + (first_failure(d) or "no iris profile report")
    else:
        _, parity, http, task, ips, tokens = cells[:6]
        par = iris.get("parity") or {}
        m = par.get("measured") or {}
        n = sum(m.values())
        parity = f'{m.get("match", 0)}/{n} native ({par.get("native_inputs", "?")} inputs)' if par else parity
        prov = (iris.get("provenance") or {}).get("unchanged")
        if prov is False:
            parity += ", provenance changed"
        elif prov is None:
            parity += ", no provenance"
        if iris.get("passed") is False:
            parity += ", FAILED"
        out.update({"parity": parity, "HTTP p50/p95 ms": http, "task p50 ms": task, "images/s": ips,
                    "output tokens min/median/max": tokens})
        aip = report_row(read(os.path.join(d, "aiperf-report.md")), row["profile"])
        if aip:
            out["aiperf"] = {"parity": aip[1], "HTTP p50/p95 ms": aip[2], "task p50 ms": aip[3], "images/s": aip[4],
                             "output tokens min/median/max": aip[5]}
    tf = load(os.path.join(d, "transformers.json"))
    if tf and tf.get("rows"):
        toks = [r["tokens"] for r in tf["rows"]]
        out["transformers task p50 ms"] = f'{tf["task_p50_ms"]:.2f} ({len(tf["rows"])} rows, {statistics.median(toks):g} tokens)'
        out["transformers"] = {k: v for k, v in tf.items() if k != "rows"}
    else:
        out["transformers task p50 ms"] = "not run"
    return out


def first_failure(d):
    for name in ("profile.log", "bundle.log"):
        for line in read(os.path.join(d, name)).splitlines():
            if re.search(r"error|FAIL", line, re.I):
                return line.strip()[:120]
    return None


def markdown(rows, meta):
    lines = [f"Measured on {meta.get('device', '?')}, commit {meta.get('commit', '?')}, {meta.get('date', '?')}; "
             f"`{meta.get('command', 'run.sh qualify')}`.", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        lines.append("| " + " | ".join(str(r.get(c, "–")) for c in COLUMNS) + " |")
    aip = [r for r in rows if r.get("aiperf")]
    if aip:
        lines += ["", "AIPerf 0.13.0's own runs of the same profiles (its artifacts, `iris profile report --bundle`):", "",
                  "| profile | parity | HTTP p50/p95 ms | task p50 ms | images/s | output tokens min/median/max |",
                  "|---|---|---|---|---|---|"]
        for r in aip:
            a = r["aiperf"]
            lines.append(f'| {r["profile"]} | {a["parity"]} | {a["HTTP p50/p95 ms"]} | {a["task p50 ms"]} | {a["images/s"]} | '
                         f'{a["output tokens min/median/max"]} |')
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir")
    ap.add_argument("--tsv")
    ap.add_argument("--part", default="all")
    ap.add_argument("--device", default="?")
    ap.add_argument("--commit", default="?")
    ap.add_argument("--command", default="")
    ap.add_argument("--merge", nargs="*", help="qualify JSON files of several calls")
    ap.add_argument("--out", required=True)
    ap.add_argument("--json")
    args = ap.parse_args()
    import datetime
    if args.merge:
        docs = [load(p) for p in args.merge]
        rows, metas = {}, []
        for doc in docs:
            metas.append(doc["meta"])
            for r in doc["rows"]:
                k = r.get("key", r["profile"])
                own = doc["meta"].get("part") == r.get("call")  # the call the row belongs to says why it is empty
                if k not in rows or (r.get("measured_here") and not rows[k].get("measured_here")) or (
                        own and not rows[k].get("measured_here")):
                    rows[k] = r
        order = [r.get("key", r["profile"]) for r in docs[0]["rows"]]
        meta = {"device": ", ".join(sorted({m["device"] for m in metas})), "commit": ", ".join(sorted({m["commit"] for m in metas})),
                "date": ", ".join(sorted({m["date"] for m in metas})),
                "command": "; ".join(m["command"] for m in metas)}
        text = markdown([rows[p] for p in order], meta)
    else:
        meta = {"device": args.device, "commit": args.commit, "date": datetime.date.today().isoformat(),
                "command": args.command or f"bash scripts/gpu/run.sh qualify {args.part}", "part": args.part}
        rows = []
        for row in tsv_rows(args.tsv):
            d = os.path.join(args.dir, row["profile"])
            if os.path.isdir(d):
                row = dict(row, **(load(os.path.join(d, "row.json")) or {}))
                r = measured_row(d, row)
                if row.get("size") == "tiny":  # the CPU dry run: the family's tiny config under the profile's name
                    r["profile"] += " (tiny)"
                r["measured_here"] = True
                r["key"] = row["profile"]
                r["call"] = row["call"] if args.part == "all" else args.part
            else:
                why = "not measured on the H200 yet" if args.part == "all" else (
                    f'call {row["call"]}' if row["call"] != args.part else "not reached in this call (its budget)")
                r = {"profile": row["profile"], "key": row["profile"], "precision/context": f'bf16/{row["context"]}',
                     "parity": why, "call": row["call"], "measured_here": False}
            rows.append(r)
        text = markdown(rows, meta)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"meta": meta, "rows": rows}, f, indent=1)
    with open(args.out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
