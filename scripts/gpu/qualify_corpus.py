#!/usr/bin/env python3
"""The qualification's three corpora (run.sh qualify), in AIPerf's single_turn format (one text,
one data-URI image and output_length per row), as the upstream protocol asks them
(../shared/seed/upstream.md):

- photo: ten real photos, the default profiling corpus's (scripts/fetch-corpus.sh: nine from
  scikit-image 0.25.2's data, Grace Hopper from matplotlib 3.10.3, each pinned by sha256), scaled
  to Imagenette's "320" size (shorter side 320 px, Pillow bicubic) and encoded as JPEG quality 90
  (upstream used ten Imagenette validation JPEGs, which are not reachable here), with upstream's
  question "What is the main object in this image? Answer in one word." and 10 tokens;
- grounding: the same images with upstream's grounding question, "Locate a single instance that
  matches the following description: {label}." (a label naming each photo's object), 32 tokens;
- ocr: ten synthetic text crops (OCRBench's crops are not reachable: dark word-like strokes on a
  light ground, lines of 1 to 6 words, seeded sizes from 120x40 to 800x400, PNG) with upstream's
  "what is written in the image?" and 300 tokens.

  python3 scripts/gpu/qualify_corpus.py [--images .build/corpus/images] [--out .build/qualify]

Needs Pillow and numpy (the reference stack). Deterministic: the same bytes every run.
"""

import argparse
import base64
import io
import json
import os

import numpy as np
from PIL import Image

PHOTO_Q = "What is the main object in this image? Answer in one word."
GROUNDING_Q = "Locate a single instance that matches the following description: {label}."
OCR_Q = "what is written in the image?"
# the default corpus's photos (fetch-corpus.sh order) and what each shows
PHOTOS = [("astronaut.png", "the astronaut"), ("chelsea.png", "the cat"), ("coffee.png", "the coffee cup"),
          ("hubble_deep_field.jpg", "the brightest galaxy"), ("ihc.png", "the stained cells"),
          ("motorcycle_left.png", "the motorcycle"), ("motorcycle_right.png", "the motorcycle"),
          ("retina.jpg", "the optic disc"), ("rocket.jpg", "the rocket"), ("grace_hopper.jpg", "the woman")]


def uri(data, mime):
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def imagenette(path):
    im = Image.open(path).convert("RGB")
    w, h = im.size
    s = 320 / min(w, h)
    im = im.resize((max(1, round(w * s)), max(1, round(h * s))), Image.BICUBIC)
    b = io.BytesIO()
    im.save(b, "JPEG", quality=90)
    return b.getvalue(), im.size


def text_crop(i):
    rng = np.random.default_rng(300 + i)
    w, h = int(rng.integers(120, 801)), int(rng.integers(40, 401))
    bg, fg = int(rng.integers(200, 256)), int(rng.integers(0, 70))
    img = np.full((h, w, 3), bg, np.uint8)
    lines = max(1, min(int(rng.integers(1, 7)), (h - 16) // 24))
    y = int(rng.integers(6, 14))
    for _ in range(lines):
        x = int(rng.integers(6, 20))
        for _ in range(int(rng.integers(1, 7))):
            ww = int(rng.integers(12, 80))
            if x + ww > w - 6:
                break
            for k in range(0, ww, 4):  # strokes: a word of letters
                img[y:y + int(rng.integers(8, 15)), x + k:x + k + 2] = fg
            x += ww + int(rng.integers(6, 14))
        y += 24
    b = io.BytesIO()
    Image.fromarray(img, "RGB").save(b, "PNG")
    return b.getvalue(), (w, h)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", default=".build/corpus/images")
    ap.add_argument("--out", default=".build/qualify")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    photo, grounding, ocr = [], [], []
    for name, label in PHOTOS:
        data, size = imagenette(os.path.join(args.images, name))
        sid = os.path.splitext(name)[0]
        photo.append({"session_id": sid, "text": PHOTO_Q, "image": uri(data, "image/jpeg"), "output_length": 10})
        grounding.append({"session_id": sid, "text": GROUNDING_Q.format(label=label), "image": uri(data, "image/jpeg"),
                          "output_length": 32})
        print(f"{name}: {size[0]}x{size[1]}, {len(data)} bytes")
    for i in range(10):
        data, size = text_crop(i)
        ocr.append({"session_id": f"text_{i}_{size[0]}x{size[1]}", "text": OCR_Q, "image": uri(data, "image/png"),
                    "output_length": 300})
    for kind, rows in (("photo", photo), ("grounding", grounding), ("ocr", ocr)):
        with open(os.path.join(args.out, f"corpus-{kind}.jsonl"), "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    print(f"wrote {args.out}/corpus-{{photo,grounding,ocr}}.jsonl")


if __name__ == "__main__":
    main()
