#!/usr/bin/env python3
"""The side-by-side attention table of `run.sh attn`: Iris's paths against torch SDPA's backends.

  python3 scripts/gpu/attn_table.py --iris attn-iris.txt --sdpa attn-sdpa.json > attn.md

--iris is the output of `cuda.test -test.bench AttentionForms` (lines
"BenchmarkAttentionForms/<shape>/<path>-N  iters  X us/call"), --sdpa the JSON of attn_sdpa.py.
One row a shape, microseconds a call: Iris's tensor-core kernels (mma), the masked forms through
cuBLAS (cublas-masks), everything through cuBLAS or the CUDA-core flash kernel (cublas), then
each SDPA backend, and the best SDPA time over Iris's (above 1: Iris is faster).
"""

import argparse
import json
import re

PATHS = ["mma", "cublas-masks", "cublas"]
SDPA = ["flash", "cudnn", "efficient", "math"]
LINE = re.compile(r"^BenchmarkAttentionForms/(.+)/([a-z-]+)(?:-\d+)?\s+\d+\s+([0-9.]+) us/call")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iris", required=True)
    ap.add_argument("--sdpa", required=True)
    args = ap.parse_args()
    iris = {}
    with open(args.iris) as f:
        for line in f:
            m = LINE.match(line.strip())
            if m:
                iris.setdefault(m.group(1), {})[m.group(2)] = float(m.group(3))
    try:
        with open(args.sdpa) as f:
            sd = json.load(f)
    except (OSError, ValueError):
        sd = {"shapes": {}}
    print(f"torch {sd.get('torch', '?')}, cuDNN {sd.get('cudnn', '?')}, {sd.get('device', '?')}; microseconds a call "
          "(best of 5 rounds of 10); '-' not run, 'n/a' refused by the backend\n")
    print("| shape | " + " | ".join("Iris " + p for p in PATHS) + " | " + " | ".join("SDPA " + b for b in SDPA) + " | best SDPA / Iris |")
    print("|---" * (2 + len(PATHS) + len(SDPA)) + "|")
    for name in list(iris) + [n for n in sd["shapes"] if n not in iris]:
        row, srow = iris.get(name, {}), sd["shapes"].get(name, {})
        cells = [f"{row[p]:.1f}" if p in row else "-" for p in PATHS]
        times = [srow[b] for b in SDPA if isinstance(srow.get(b), (int, float))]
        cells += [f"{srow[b]:.1f}" if isinstance(srow.get(b), (int, float)) else ("n/a" if b in srow else "-") for b in SDPA]
        ratio = f"{min(times) / row['mma']:.2f}" if times and "mma" in row else "-"
        print(f"| {name} | " + " | ".join(cells) + f" | {ratio} |")


if __name__ == "__main__":
    main()
