#!/usr/bin/env python3
"""Time transformers on the GPU: the baseline the CUDA engine is compared with.

  python3 scripts/reference/gpu_baseline.py --model DIR --cases DIR --case photo_426x320 --out baseline.json

Same checkpoint (gpu_checkpoint.py; any family of gpu_family.py, by its config.json) and
processor outputs (gpu_parity.py cases) as the engine, bf16, SDPA, greedy with EOS ignored. For
the default dynamic cache and for cache_implementation="static" (transformers compiles the decode
step; warm-up excluded) it reports:

  c=1 latency of generate() at 3 and 10 new tokens: p50, p95; TTFT = generate(1 token);
  TPOT = (p50(10) - p50(1)) / 9;
  images/s with batch 1 and batch 16 (the same request repeated), 10 new tokens;
  processor_ms: AutoProcessor on the case's image (CPU), which an HTTP server also pays.

The JSON is rewritten after each cache kind, so a run cut short keeps what it measured.
"""

import argparse
import json
import os
import statistics
import time

import numpy as np
import torch
from PIL import Image
from transformers import AutoProcessor

import gpu_family
from gpu_parity import untile_rows


def pct(v, p):
    s = sorted(v)
    return s[max(0, min(len(s) - 1, int(np.ceil(p / 100 * len(s))) - 1))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--cases", required=True)
    ap.add_argument("--case", default="photo_426x320")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--out", required=True)
    ap.add_argument("--caches", default="dynamic,static")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()

    with open(os.path.join(args.cases, args.case + ".json")) as f:
        case = json.load(f)
    pv = np.fromfile(os.path.join(args.cases, case["pixels"]), dtype="<f4").reshape(case["pixel_rows"], case["pixel_cols"])
    ids = torch.tensor([case["input_ids"]])
    grid = torch.tensor(case["image_grid_thw"])
    mt = gpu_family.model_type(args.model)
    tiles = mt == "internvl"  # pixel_values [tiles, 3, 448, 448], no grid, no mm_token_type_ids
    if tiles:
        pv = untile_rows(pv, int(grid[0][0]))
    mm = (ids == gpu_family.IMAGE_TOKEN_ID).long()  # mm_token_type_ids: 1 on <|image_pad|> (families.md §0.3-5)
    kwargs = case.get("processor_kwargs", {})
    dev = args.device
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)

    proc = AutoProcessor.from_pretrained(args.model)
    img = Image.open(os.path.join(args.cases, case.get("image", case["name"] + ".png"))).convert("RGB")
    messages = gpu_family.messages(case["question"], case.get("text_first", False))
    times = []
    for _ in range(5):
        t = time.perf_counter()
        prompt = proc.apply_chat_template(messages, add_generation_prompt=True)
        proc(text=[prompt], images=[img], return_tensors="pt", **kwargs)
        times.append((time.perf_counter() - t) * 1e3)
    out = {"model_type": mt, "case": case["name"], "prompt_tokens": ids.shape[1], "patches": case["pixel_rows"],
           "processor_ms": round(statistics.median(times), 2), "gpu": torch.cuda.get_device_name(0) if dev == "cuda" else "cpu"}

    t = time.perf_counter()
    model = gpu_family.load_model(args.model, torch.bfloat16, dev)
    out["load_s"] = round(time.perf_counter() - t, 1)
    model.generation_config.eos_token_id = None

    def inputs(batch):
        x = {
            "input_ids": ids.repeat(batch, 1).to(dev),
            "attention_mask": torch.ones(batch, ids.shape[1], dtype=torch.long, device=dev),
        }
        if tiles:
            x["pixel_values"] = torch.from_numpy(np.tile(pv, (batch, 1, 1, 1))).to(dev)
            return x
        x["mm_token_type_ids"] = mm.repeat(batch, 1).to(dev)
        x["pixel_values"] = torch.from_numpy(np.tile(pv, (batch, 1))).to(dev)
        x["image_grid_thw"] = grid.repeat(batch, 1).to(dev)
        return x

    def timed(batch, n, cache):
        x = inputs(batch)
        kw = {"cache_implementation": "static"} if cache == "static" else {}
        sync()
        t = time.perf_counter()
        with torch.no_grad():
            model.generate(**x, do_sample=False, num_beams=1, repetition_penalty=1.0, max_new_tokens=n, min_new_tokens=n,
                           pad_token_id=151643, **kw)
        sync()
        return (time.perf_counter() - t) * 1e3

    failed = []
    for cache in args.caches.split(","):
        r = {}
        try:
            measure(r, cache, timed, args.runs)
        except Exception as e:  # one cache kind failing (say, the static cache's compilation) keeps the other's figures
            r["error"] = f"{e.__class__.__name__}: {str(e)[:300]}"
            failed.append(cache)
        out[cache] = r
        print(cache, json.dumps(r), flush=True)
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    if failed:
        raise SystemExit(f"failed: {', '.join(failed)}")


def measure(r, cache, timed, runs):
    t = time.perf_counter()
    for _ in range(3):  # warm-up (static: compilation)
        timed(1, 10, cache)
    r["warmup_s"] = round(time.perf_counter() - t, 1)
    lat = {}
    for n in (1, 3, 10):
        v = [timed(1, n, cache) for _ in range(runs)]
        lat[n] = v
        if n > 1:
            r[f"c1_{n}tok"] = {"p50_ms": round(pct(v, 50), 2), "p95_ms": round(pct(v, 95), 2)}
    r["ttft_ms"] = round(pct(lat[1], 50), 2)
    r["tpot_ms"] = round((pct(lat[10], 50) - pct(lat[1], 50)) / 9, 3)
    for b in (1, 16):
        timed(b, 10, cache)
        v = [timed(b, 10, cache) for _ in range(3)]
        r[f"batch{b}_images_per_s"] = round(b / (statistics.median(v) / 1e3), 2)

if __name__ == "__main__":
    main()
