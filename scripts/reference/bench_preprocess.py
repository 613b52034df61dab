"""Times the transformers 5.17 Qwen2.5-VL image processor (torchvision backend, CPU) on the sizes
that core/internal/pixels benchmarks, for the ratio in docs/perf.md.

Run: `just bench-preprocess-baseline` (uses .build/refenv). The input is an already decoded RGB
image, as in the Go benchmark (BenchmarkQwen25Pixels): resize + rescale/normalise + patchify.
"""
import argparse
import statistics
import time

import numpy as np
import PIL.Image
import torch
from transformers import Qwen2VLImageProcessor


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    proc = Qwen2VLImageProcessor(min_pixels=3136, max_pixels=12845056)
    rng = np.random.default_rng(0)
    print(f"transformers Qwen2VLImageProcessor ({type(proc).__name__}), torch {torch.__version__}, {args.threads} threads")
    for w, h in [(426, 320), (1024, 768), (4000, 3000)]:
        # Smooth content plus noise, like the Go benchmark's synthetic image.
        yy, xx = np.mgrid[0:h, 0:w]
        base = np.stack([(xx * 255 // max(w - 1, 1)), (yy * 255 // max(h - 1, 1)), ((xx + yy) % 256)], axis=-1)
        arr = np.clip(base + rng.integers(-12, 13, size=base.shape), 0, 255).astype(np.uint8)
        img = PIL.Image.fromarray(arr, "RGB")
        for _ in range(2):
            out = proc(images=img, return_tensors="pt")
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            out = proc(images=img, return_tensors="pt")
            times.append(time.perf_counter() - t0)
        grid = out["image_grid_thw"].tolist()[0]
        print(f"{w}x{h} -> grid {grid}: p50 {statistics.median(times) * 1e3:.2f} ms, min {min(times) * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
