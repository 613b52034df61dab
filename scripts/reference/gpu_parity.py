#!/usr/bin/env python3
"""Parity cases and transformers' greedy reference for the CUDA engine (full-size checkpoint).

  python3 scripts/reference/gpu_parity.py --model DIR --cases DIR --out ref.json [--new 32]

The family comes from the checkpoint's config.json (qwen2_5_vl, qwen3_vl, internvl: gpu_family.py).

1. Makes the image+question cases (deterministic synthetic images of several sizes, 1600x1200
   included, plus the issue's workload: a 426x320 photo JPEG, Imagenette-320 size, with the
   upstream profile's question; testdata/photo_426x320.jpg, NASA's public-domain astronaut
   portrait from scikit-image, cropped to 4:3 and resized) and runs the model's own processor (AutoProcessor: chat template, smart_resize,
   torchvision resize, patchify) on each; writes DIR/<case>.json (input ids, grid, question),
   DIR/<case>.f32 (pixel_values, little-endian float32) and the image, DIR/<case>.png (or the
   photo's original bytes as DIR/<case>.jpg; meta "image" names it). A qwen3_vl checkpoint also
   gets the text-first cases (the question before the image in the user turn, odd widths). An
   internvl checkpoint's cases use the processor's default tiling (up to 12 tiles + thumbnail)
   plus the photo with max_patches=1 (photo_426x320_t1: one 448x448 tile, upstream's geometry;
   meta "processor_kwargs"); its pixel rows are the tiles' 14x14 patches in raster order, each
   C x 14 x 14 (the engine's tile layout), and its grid is [tiles, 32, 32].
2. Runs transformers generate greedily (do_sample=False, repetition_penalty=1.0, EOS ignored) in
   float32 (TF32 off for matmuls and cuDNN, so the conv patch embedding is exact F32 too) and in
   bfloat16, SDPA attention, and records per case and precision the tokens and, per step, the
   logit margin between the top two tokens.

The Go side (core/internal/enginetest/gpucheck parity) feeds the same case files to the engine
and compares.
"""

import argparse
import json
import os
import time

import numpy as np
import torch
from PIL import Image
from transformers import AutoProcessor

import gpu_family

HERE = gpu_family.HERE

# name, width, height, question[, image file under testdata/ (its original bytes are used)]
CASES = [
    ("min_56x56", 56, 56, "What is in this image?"),
    ("rect_320x240", 320, 240, "Describe the picture in one sentence."),
    ("square_448x448", 448, 448, "What colors do you see?"),
    ("vga_640x480", 640, 480, "Is there any text in the image?"),
    ("wide_500x90", 500, 90, "Read the banner."),
    ("tall_120x300", 120, 300, "What shape is this?"),
    ("xga_1024x768", 1024, 768, "Count the objects."),
    ("uxga_1600x1200", 1600, 1200, "Describe the scene in detail."),
    ("photo_426x320", 426, 320, "What is the main object in this image? Answer in one word.", "photo_426x320.jpg"),
]
# name, width, height, question: the question comes first in the user turn (qwen3_vl's cases only,
# so the qwen2_5_vl reference keeps its 9 cases)
# name, width, height, question, image file, processor kwargs: internvl's extra cases
INTERNVL_EXTRA = [
    ("photo_426x320_t1", 426, 320, "What is the main object in this image? Answer in one word.", "photo_426x320.jpg",
     {"max_patches": 1}),
]
TEXT_FIRST = [
    ("tf_333x517", 333, 517, "Which shapes are on the left?"),
    ("tf_1000x250", 1000, 250, "Read the text on the sign."),
    ("tf_70x700", 70, 700, "What is at the top?"),
]


def make_image(i, w, h):
    """A smooth gradient with random blocks: deterministic per case, not trivially compressible."""
    rng = np.random.default_rng(1000 + i)
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([(x * 255 // max(w - 1, 1)), (y * 255 // max(h - 1, 1)), ((x + y) * 127 // max(w + h, 1))], -1).astype(np.int32)
    for _ in range(12):
        bw, bh = rng.integers(4, max(5, w // 3)), rng.integers(4, max(5, h // 3))
        bx, by = rng.integers(0, max(1, w - bw)), rng.integers(0, max(1, h - bh))
        img[by : by + bh, bx : bx + bw] = rng.integers(0, 256, 3)
    img += rng.integers(-12, 13, img.shape)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB")


def case_list(model_dir):
    """(name, width, height, question, text_first, kwargs[, image file]) of the family's cases."""
    cases = [(*c[:4], False, {}, *c[4:]) for c in CASES]
    mt = gpu_family.model_type(model_dir)
    if mt == "qwen3_vl":
        cases += [(*c, True, {}) for c in TEXT_FIRST]
    if mt == "internvl":
        cases += [(*c[:4], False, c[5], c[4]) for c in INTERNVL_EXTRA]
    return cases


def tile_rows(pv):
    """[tiles, C, S, S] pixel_values as the engine's rows: each tile's 14x14 patches in raster
    order, each patch C x 14 x 14 (channel, then row, then column)."""
    t, c, s, _ = pv.shape
    n = s // 14
    return pv.reshape(t, c, n, 14, n, 14).transpose(0, 2, 4, 1, 3, 5).reshape(t * n * n, c * 14 * 14)


def untile_rows(rows, tiles):
    """tile_rows undone: [tiles*1024, 588] rows back to pixel_values [tiles, 3, 448, 448]."""
    n = int(round((rows.shape[0] // tiles) ** 0.5))
    c = rows.shape[1] // (14 * 14)
    return rows.reshape(tiles, n, n, c, 14, 14).transpose(0, 3, 1, 4, 2, 5).reshape(tiles, c, n * 14, n * 14)


def prepare(proc, cases_dir, cases, only=None):
    """Writes the cases (those named in only, when given) and returns their processor outputs."""
    os.makedirs(cases_dir, exist_ok=True)
    out = []
    for i, (name, w, h, q, text_first, kwargs, *src) in enumerate(cases):  # i seeds the image: the full list's index
        if only and name not in only:
            continue
        if src:
            with open(os.path.join(HERE, "testdata", src[0]), "rb") as f:
                data = f.read()
            image_file = name + os.path.splitext(src[0])[1]
            with open(os.path.join(cases_dir, image_file), "wb") as f:
                f.write(data)
            img = Image.open(os.path.join(cases_dir, image_file))
            img.load()
            assert img.size == (w, h), (name, img.size)
        else:
            img = make_image(i, w, h)
            image_file = name + ".png"
            img.save(os.path.join(cases_dir, image_file))
        prompt = proc.apply_chat_template(gpu_family.messages(q, text_first), add_generation_prompt=True)
        inputs = proc(text=[prompt], images=[img], return_tensors="pt", **kwargs)
        pv = inputs["pixel_values"].to(torch.float32).contiguous().numpy()
        if pv.ndim == 4:  # tiles (internvl): [tiles, 3, 448, 448]
            grid = [[pv.shape[0], pv.shape[2] // 14, pv.shape[3] // 14]]
            pv = tile_rows(pv)
        else:
            grid = inputs["image_grid_thw"].tolist()
        pv.astype("<f4").tofile(os.path.join(cases_dir, name + ".f32"))
        meta = {
            "name": name, "width": w, "height": h, "question": q, "text_first": text_first, "prompt": prompt,
            "input_ids": inputs["input_ids"][0].tolist(),
            "image_grid_thw": grid, "processor_kwargs": kwargs,
            "pixels": name + ".f32", "pixel_rows": pv.shape[0], "pixel_cols": pv.shape[1], "image": image_file,
        }
        with open(os.path.join(cases_dir, name + ".json"), "w") as f:
            json.dump(meta, f)
        out.append((name, inputs))
    with open(os.path.join(cases_dir, "index.json"), "w") as f:
        json.dump([c[0] for c in out], f)
    return out


def run(model_dir, dtype, cases, new, device):
    t = time.perf_counter()
    model = gpu_family.load_model(model_dir, dtype, device)
    print(f"{dtype}\tloaded in {time.perf_counter() - t:.1f} s", flush=True)
    model.generation_config.eos_token_id = None  # EOS never stops: always `new` tokens
    res = {}
    for name, inputs in cases:
        x = {k: v.to(device) for k, v in inputs.items()}
        n = x["input_ids"].shape[1]
        if device == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        with torch.no_grad():
            out = model.generate(**x, do_sample=False, num_beams=1, repetition_penalty=1.0, max_new_tokens=new,
                                 output_scores=True, return_dict_in_generate=True, pad_token_id=151643)
        if device == "cuda":
            torch.cuda.synchronize()
        ms = (time.perf_counter() - t) * 1e3
        scores = torch.stack(out.scores)[:, 0, :].float()
        top = scores.topk(2, dim=-1)
        res[name] = {
            "tokens": out.sequences[0, n:].tolist(),
            "margins": (top.values[:, 0] - top.values[:, 1]).tolist(),
            "runner_up": top.indices[:, 1].tolist(),
            "prompt_tokens": n,
            "generate_ms": round(ms, 2),
        }
        print(f"{dtype}\t{name}\tprompt {n}\t{ms:.0f} ms\tmin margin {min(res[name]['margins']):.4f}", flush=True)
    del model
    if device == "cuda":
        torch.cuda.empty_cache()
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--cases", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--only", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--prepare-only", action="store_true", help="write the case files, run no model")
    ap.add_argument("--precisions", default="fp32,bf16", help="comma-separated: fp32, bf16")
    args = ap.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    proc = AutoProcessor.from_pretrained(args.model)
    cases = prepare(proc, args.cases, case_list(args.model), set(args.only.split(",")) if args.only else None)
    if args.prepare_only:
        return
    ref = {"meta": {"transformers": __import__("transformers").__version__, "torch": torch.__version__, "new_tokens": args.new,
                    "model_type": gpu_family.model_type(args.model),
                    "semantics": "greedy, repetition_penalty 1.0, EOS ignored, sdpa; fp32 with TF32 off"}}
    for prec in args.precisions.split(","):
        ref[prec] = run(args.model, {"fp32": torch.float32, "bf16": torch.bfloat16}[prec], cases, args.new, args.device)
    with open(args.out, "w") as f:
        json.dump(ref, f)


if __name__ == "__main__":
    main()
