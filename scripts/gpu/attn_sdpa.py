#!/usr/bin/env python3
"""Time torch's SDPA backends on the attention shapes Iris's BenchmarkAttentionForms times.

  python3 scripts/gpu/attn_sdpa.py [--shapes core/internal/ml/cuda/testdata/attn_shapes.json] --out sdpa.json

Each shape of the file (the same inputs' layout: bf16, heads of hd, grouped KV heads) runs
through torch.nn.functional.scaled_dot_product_attention under each backend that takes it:
FlashAttention-2 (no masks), cuDNN's fused attention, the memory-efficient kernel, and the math
path as the floor. Masks are what transformers passes for these forms: a boolean key mask for
padded keys, the relative-position bias as an additive float mask, a boolean mask for a prefix
or a bidirectional block, is_causal for plain causal prefill; grouped KV heads through
enable_gqa. Segments of one length run as one batch. Timing as the Go benchmark: best of 5
rounds of 10 calls after a warm round, in microseconds a call (CUDA events). A backend that
refuses a shape gets its error's first line. The JSON is rewritten after each shape.
"""

import argparse
import json
import os
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "math": SDPBackend.MATH,
}


def inputs(s, dev):
    """q, k, v as (batch, heads, n, hd), and SDPA's mask arguments for shape s."""
    g = torch.Generator(device=dev).manual_seed(5)
    n, hd, heads, kvh = s["n"], s["hd"], s["heads"], s["kvh"]
    b = s.get("segs", 1) if s["kind"] == "segment" else 1

    def rnd(h):
        return torch.randn(b, h, n, hd, generator=g, device=dev, dtype=torch.bfloat16)

    q, k, v = rnd(heads), rnd(kvh), rnd(kvh)
    kw = {"enable_gqa": kvh != heads}
    if s["kind"] == "segment":
        if s.get("pad"):
            keep = torch.ones(b, 1, 1, n, dtype=torch.bool, device=dev)
            keep[0::2, :, :, n - s["pad"]:] = False  # every other segment's last keys padding
            kw["attn_mask"] = keep
        if s.get("grid"):
            gh, gw = s["grid"]
            rh = torch.randn(b, heads, n, gh, 1, generator=g, device=dev, dtype=torch.bfloat16)
            rw = torch.randn(b, heads, n, 1, gw, generator=g, device=dev, dtype=torch.bfloat16)
            kw["attn_mask"] = (rh + rw).reshape(b, heads, n, gh * gw)[..., :n]  # SAM's attn_bias
    elif s["kind"] == "prefill":
        if s.get("block"):
            lo, hi = s["block"]
            j = torch.arange(n, device=dev)
            reach = torch.where((j >= lo) & (j < hi), torch.tensor(hi, device=dev), j + 1)
            kw["attn_mask"] = (j[None, :] < reach[:, None])[None, None]
        else:
            kw["is_causal"] = True
    else:  # prefix
        j = torch.arange(n, device=dev)
        reach = torch.clamp(j + 1, min=s["prefix"])
        kw["attn_mask"] = (j[None, :] < reach[:, None])[None, None]
    return q, k, v, kw


def time_us(fn, dev, calls=10, rounds=5):
    fn()
    if dev == "cpu":  # a dry run of the script off the GPU machine
        best = float("inf")
        for _ in range(rounds):
            t = time.perf_counter()
            for _ in range(calls):
                fn()
            best = min(best, (time.perf_counter() - t) * 1e6 / calls)
        return best
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(calls):
            fn()
        b.record()
        torch.cuda.synchronize()
        best = min(best, a.elapsed_time(b) * 1e3 / calls)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--shapes", default=os.path.join(root, "core/internal/ml/cuda/testdata/attn_shapes.json"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--backends", default="flash,cudnn,efficient,math")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    with open(args.shapes) as f:
        shapes = json.load(f)["shapes"]
    dev = args.device
    name = torch.cuda.get_device_name() if dev == "cuda" else dev
    res = {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(), "device": name, "shapes": {}}
    for s in shapes:
        q, k, v, kw = inputs(s, dev)
        row = {}
        for name in args.backends.split(","):
            try:
                with sdpa_kernel([BACKENDS[name]]):
                    row[name] = round(time_us(lambda: F.scaled_dot_product_attention(q, k, v, **kw), dev), 1)
            except Exception as e:  # a backend that does not take the shape says why
                row[name] = "unsupported: " + str(e).strip().split("\n")[0][:160]
            torch.cuda.empty_cache()
        res["shapes"][s["name"]] = row
        print(s["name"], json.dumps(row), flush=True)
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
