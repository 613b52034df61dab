#!/usr/bin/env python3
"""Synthetic scenes for the demo model (issue 15): coloured shapes, a printed sign, and questions
whose answers follow from the scene by construction.

Standard library + Pillow only. A scene is a function of (seed, index) alone: `scene(seed, i)`
draws its own random.Random from the string f"{seed}:{i}", so the same seed gives the same
scenes, the same PNG bytes and the same JSONL with the same Pillow (the sign's text is drawn with
Pillow's built-in FreeType font, `ImageFont.load_default(size)`; another Pillow or FreeType may
move its pixels).

What a scene holds:

- a pale background (one of a few tints, with a faint gradient);
- 1 to 6 shapes, never overlapping, each fully inside the image: circle, square, triangle, star,
  hexagon, diamond, cross, in one of 10 colours (red, green, blue, yellow, orange, purple, pink,
  brown, black, cyan);
- sometimes a sign: a white plate with a dark border and a word or a digit (STOP, EXIT, 7, ...).

Sizes (the qwen2_5_vl plugin's bounds, plugins/internal/qwenvl: smart_resize refuses an aspect
ratio over 200 and scales anything under min_pixels = 3136 up): mostly 96 to 336 px a side; some
small ones (24 to 55 px a side, under min_pixels, scaled up by the processor); some wide or tall
strips (3:1 to 12:1); a few extreme strips (20:1 up to exactly 200:1, 28 to 40 px across); a few
large ones (up to 640 px).

Question types (each asked only when its answer is unambiguous):

  shape   "What shape is this?"                -> "a red circle"   (exactly one shape, no sign)
  count   "How many squares are there?"        -> "3"              (any shape kind; "0" sometimes)
  colour  "What colour is the triangle?"       -> "green"          (exactly one triangle)
  side    "Which side is the circle on?"       -> "left" | "right" (exactly one circle, its centre
                                                                    in the outer 40% of the width,
                                                                    in an image wider than tall)
  sign    "What does the sign say?"            -> "STOP"           (a sign is present)
  total   "How many shapes are there?"         -> "4"              (the sign is no shape)

Each question is also rendered in the real Qwen2.5-VL chat template (the hub's, with its default
system turn; what the qwen2_5_vl plugin frames), the assistant's answer ending with <|im_end|>:

  <|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n<|im_start|>user\\n
  <|vision_start|><|image_pad|><|vision_end|>{question}<|im_end|>\\n<|im_start|>assistant\\n{answer}<|im_end|>

(one <|image_pad|>, as the template renders it; the processor expands it to the image's tokens).

CLI: python3 scripts/demo/scenes.py --seed 1 --count 100 --out DIR [--slim]
writes DIR/NNNNN.png and DIR/scenes.jsonl, one line per question: image, question, answer, type,
seed, index, width, height, prompt (the template up to the assistant turn), text (prompt + answer +
<|im_end|>), objects ([{shape, colour, box}]), sign ({text, box} or null).
"""

import argparse
import io
import json
import math
import os
import random

from PIL import Image, ImageDraw, ImageFont

SHAPES = ["circle", "square", "triangle", "star", "hexagon", "diamond", "cross"]
PLURAL = {s: s + ("es" if s.endswith("s") else "s") for s in SHAPES}
COLOURS = {
    "red": (220, 30, 30),
    "green": (30, 150, 50),
    "blue": (30, 70, 220),
    "yellow": (235, 200, 0),
    "orange": (245, 125, 15),
    "purple": (130, 40, 170),
    "pink": (245, 110, 185),
    "brown": (120, 70, 30),
    "black": (20, 20, 20),
    "cyan": (0, 190, 210),
}
WORDS = ["STOP", "EXIT", "OPEN", "GO", "PUSH", "PULL", "SALE", "EXIT", "STOP", "HELP"] + [str(d) for d in range(10)]
BACKGROUNDS = [(245, 245, 240), (235, 240, 250), (250, 240, 230), (235, 245, 235), (240, 240, 240), (250, 250, 225)]
TYPES = ["shape", "count", "colour", "side", "sign", "total"]

SYSTEM = "You are a helpful assistant."
IM_START, IM_END = "<|im_start|>", "<|im_end|>"
VISION = "<|vision_start|><|image_pad|><|vision_end|>"


def prompt_text(question):
    """The Qwen2.5-VL chat template of one user turn (image, then the question) with the default
    system turn and the generation prompt."""
    return (f"{IM_START}system\n{SYSTEM}{IM_END}\n{IM_START}user\n{VISION}{question}{IM_END}\n"
            f"{IM_START}assistant\n")


def chat_text(question, answer):
    """prompt_text plus the assistant's answer closed by <|im_end|>: what the model is trained to say."""
    return prompt_text(question) + answer + IM_END


def pick_size(rng):
    """(width, height) of a scene: regular most of the time, sometimes the plugin's extremes."""
    r = rng.random()
    if r < 0.70:  # regular
        return rng.randint(96, 336), rng.randint(96, 336)
    if r < 0.80:  # small: under min_pixels (3136), upscaled by the processor
        return rng.randint(24, 55), rng.randint(24, 55)
    if r < 0.92:  # strips, 3:1 to 12:1
        short = rng.randint(40, 96)
        long_ = min(640, int(short * rng.uniform(3, 12)))
        return (long_, short) if rng.random() < 0.5 else (short, long_)
    if r < 0.96:  # extreme strips, up to smart_resize's 200:1 bound (exactly 200 is allowed)
        short = rng.randint(28, 40)
        ratio = 200 if rng.random() < 0.25 else rng.randint(20, 199)
        long_ = short * ratio
        return (long_, short) if rng.random() < 0.5 else (short, long_)
    return rng.randint(336, 640), rng.randint(336, 480)  # large


def shape_points(shape, cx, cy, r):
    """Polygon of a shape of radius r centred at (cx, cy) (circle and square are drawn directly)."""
    if shape == "triangle":
        return [(cx, cy - r), (cx + r * 0.92, cy + r * 0.75), (cx - r * 0.92, cy + r * 0.75)]
    if shape == "diamond":
        return [(cx, cy - r), (cx + r * 0.75, cy), (cx, cy + r), (cx - r * 0.75, cy)]
    if shape == "hexagon":
        return [(cx + r * math.cos(math.pi / 3 * k), cy + r * math.sin(math.pi / 3 * k)) for k in range(6)]
    if shape == "star":
        pts = []
        for k in range(10):
            rad = r if k % 2 == 0 else r * 0.42
            a = -math.pi / 2 + math.pi / 5 * k
            pts.append((cx + rad * math.cos(a), cy + rad * math.sin(a)))
        return pts
    if shape == "cross":
        t = r * 0.34
        return [(cx - t, cy - r), (cx + t, cy - r), (cx + t, cy - t), (cx + r, cy - t), (cx + r, cy + t),
                (cx + t, cy + t), (cx + t, cy + r), (cx - t, cy + r), (cx - t, cy + t), (cx - r, cy + t),
                (cx - r, cy - t), (cx - t, cy - t)]
    raise ValueError(shape)


def draw_shape(d, shape, colour, box, fill=None):
    """Draw a shape in its colour, or in fill (train.py draws the shapes' masks with an id)."""
    x0, y0, x1, y1 = box
    cx, cy, r = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 2
    fill = COLOURS[colour] if fill is None else fill
    if shape == "circle":
        d.ellipse([x0, y0, x1 - 1, y1 - 1], fill=fill)
    elif shape == "square":
        m = r * 0.12  # a square a little smaller than its box, so it does not look bigger than the others
        d.rectangle([x0 + m, y0 + m, x1 - 1 - m, y1 - 1 - m], fill=fill)
    else:
        d.polygon(shape_points(shape, cx, cy, r), fill=fill)


def overlaps(a, b, gap):
    return not (a[2] + gap <= b[0] or b[2] + gap <= a[0] or a[3] + gap <= b[1] or b[3] + gap <= a[1])


def place(rng, w, h, bw, bh, boxes, gap, tries=60):
    """A box of bw x bh inside the image clear of boxes, or None."""
    if bw > w or bh > h:
        return None
    for _ in range(tries):
        x0, y0 = rng.randint(0, w - bw), rng.randint(0, h - bh)
        b = (x0, y0, x0 + bw, y0 + bh)
        if not any(overlaps(b, o, gap) for o in boxes):
            return b
    return None


def font(size):
    return ImageFont.load_default(size=size)


SIGN_RATE = 0.35  # the share of scenes (of a short side >= 40 px) that get a sign


def scene(seed, index, sign_rate=SIGN_RATE, dense=False):
    """The scene (seed, index): a dict with the PIL image, its objects, sign and questions.
    sign_rate other than SIGN_RATE (train.py --sign-rate: more signs to read in training) changes
    which scenes have a sign, dense (see questions) the questions asked; the held-out scenes always
    use the defaults."""
    rng = random.Random(f"{seed}:{index}")
    w, h = pick_size(rng)
    short = min(w, h)
    bg = BACKGROUNDS[rng.randrange(len(BACKGROUNDS))]
    img = Image.new("RGB", (w, h), bg)
    d = ImageDraw.Draw(img)
    # a faint gradient along the long side, so the background is not flat
    steps = 8
    for k in range(steps):
        shade = tuple(max(0, c - (k * rng.randint(0, 2))) for c in bg)
        if w >= h:
            d.rectangle([k * w // steps, 0, (k + 1) * w // steps, h], fill=shade)
        else:
            d.rectangle([0, k * h // steps, w, (k + 1) * h // steps], fill=shade)

    gap = max(2, short // 24)
    # the layout first (the sign needs the most room, so it goes first), then the drawing
    sign_plan = None
    if short >= 40 and rng.random() < sign_rate:
        word = WORDS[rng.randrange(len(WORDS))]
        fsize = max(12, min(int(short * rng.uniform(0.16, 0.3)), 48))
        l, t, r, b = d.textbbox((0, 0), word, font=font(fsize))
        pad = max(3, fsize // 4)
        box = place(rng, w, h, (r - l) + 2 * pad, (b - t) + 2 * pad, [], gap)
        if box is not None:
            sign_plan = (word, fsize, pad, l, t, box)
    n = rng.choices([1, 2, 3, 4, 5, 6], weights=[4, 2, 2, 2, 1, 1])[0]
    if short < 60:  # small images: one or two large shapes
        n = min(n, 2)
        lo = max(10, int(short * 0.45))
        hi = max(lo, int(short * 0.8))
    else:
        lo = max(16, int(short * 0.18))
        hi = max(lo, int(short * (0.8 if n == 1 else 0.45)))
    shapes = []
    for _ in range(n):
        shapes.append((SHAPES[rng.randrange(len(SHAPES))], list(COLOURS)[rng.randrange(len(COLOURS))],
                       rng.randint(lo, hi)))
    for attempt in range(2):
        boxes = [sign_plan[5]] if sign_plan else []
        objects = []
        for shape, colour, s in shapes:
            box = place(rng, w, h, s, s, boxes, gap)
            if box is None and s > lo:
                box = place(rng, w, h, lo, lo, boxes, gap)
            if box is None:
                continue
            boxes.append(box)
            objects.append({"shape": shape, "colour": colour, "box": list(box)})
        if objects:
            break
        sign_plan = None  # the sign took the room: drop it and place the shapes again
    if not objects:  # cannot happen with the sizes above; a clear error if it does
        raise RuntimeError(f"scene {seed}:{index} ({w}x{h}): no room for a shape")

    sign = None
    if sign_plan:
        word, fsize, pad, l, t, box = sign_plan
        d.rectangle([box[0], box[1], box[2] - 1, box[3] - 1], fill=(255, 255, 255), outline=(40, 40, 40),
                    width=max(1, fsize // 10))
        d.text((box[0] + pad - l, box[1] + pad - t), word, font=font(fsize), fill=(20, 20, 20))
        sign = {"text": word, "box": list(box)}
    for o in objects:
        draw_shape(d, o["shape"], o["colour"], o["box"])

    return {"seed": seed, "index": index, "width": w, "height": h, "image": img, "objects": objects, "sign": sign,
            "qa": questions(rng, w, h, objects, sign, dense)}


def questions(rng, w, h, objects, sign, dense=False):
    """Every question of the scene whose answer is unambiguous: [(type, question, answer)]. A scene
    asks one count, colour and side question (a shape drawn at random); dense (train.py --dense)
    asks them of every shape that has an answer, so one scene holds questions whose answers differ
    (the circle on the left, the square on the right): an answer read off the whole scene fails."""
    counts = {s: 0 for s in SHAPES}
    for o in objects:
        counts[o["shape"]] += 1
    qa = []
    if len(objects) == 1 and sign is None:
        o = objects[0]
        qa.append(("shape", "What shape is this?", f"a {o['colour']} {o['shape']}"))
    present = [s for s in SHAPES if counts[s]]
    s = present[rng.randrange(len(present))]
    for s in present if dense else [s]:
        qa.append(("count", f"How many {PLURAL[s]} are there?", str(counts[s])))
    absent = [s for s in SHAPES if not counts[s]]
    if absent and rng.random() < 0.2:
        s = absent[rng.randrange(len(absent))]
        qa.append(("count", f"How many {PLURAL[s]} are there?", "0"))
    single = [s for s in SHAPES if counts[s] == 1]
    if single:
        s = single[rng.randrange(len(single))]
        for s in single if dense else [s]:
            o = next(o for o in objects if o["shape"] == s)
            qa.append(("colour", f"What colour is the {s}?", o["colour"]))
    if w > h:
        sides = []
        for s in single:
            o = next(o for o in objects if o["shape"] == s)
            cx = (o["box"][0] + o["box"][2]) / 2
            if cx < 0.4 * w:
                sides.append((s, "left"))
            elif cx > 0.6 * w:
                sides.append((s, "right"))
        if sides:
            s, side = sides[rng.randrange(len(sides))]
            for s, side in sides if dense else [(s, side)]:
                qa.append(("side", f"Which side is the {s} on?", side))
    if sign is not None:
        qa.append(("sign", "What does the sign say?", sign["text"]))
    if len(objects) > 1 or sign is not None:
        qa.append(("total", "How many shapes are there?", str(len(objects))))
    return qa


def png_bytes(img):
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=False, compress_level=6)
    return buf.getvalue()


def records(sc, image_name):
    """The JSONL lines of a scene, one per question."""
    out = []
    for typ, q, a in sc["qa"]:
        out.append({"image": image_name, "question": q, "answer": a, "type": typ, "seed": sc["seed"],
                    "index": sc["index"], "width": sc["width"], "height": sc["height"],
                    "prompt": prompt_text(q), "text": chat_text(q, a),
                    "objects": sc["objects"], "sign": sc["sign"]})
    return out


SLIM = ("image", "question", "answer", "type", "seed", "index", "width", "height")


def write(seed, count, out, slim=False):
    os.makedirs(out, exist_ok=True)
    lines = []
    for i in range(count):
        sc = scene(seed, i)
        name = f"{i:05d}.png"
        with open(os.path.join(out, name), "wb") as f:
            f.write(png_bytes(sc["image"]))
        lines.extend(records(sc, name))
    with open(os.path.join(out, "scenes.jsonl"), "w") as f:
        for r in lines:
            f.write(json.dumps({k: r[k] for k in SLIM} if slim else r, sort_keys=True) + "\n")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--out", required=True)
    ap.add_argument("--slim", action="store_true",
                    help=f"scenes.jsonl with {', '.join(SLIM)} only (the committed held-out set)")
    args = ap.parse_args()
    lines = write(args.seed, args.count, args.out, args.slim)
    by = {}
    for r in lines:
        by[r["type"]] = by.get(r["type"], 0) + 1
    print(json.dumps({"scenes": args.count, "questions": len(lines), "by_type": by, "out": args.out}))


if __name__ == "__main__":
    main()
