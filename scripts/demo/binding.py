#!/usr/bin/env python3
"""Does the demo model's language model bind a question to the shape it names? (issue 15)

"Which side is the circle on?" and "What colour is the circle?" are answered the same way: the
position that predicts the answer attends to the circle's image tokens and reads a feature off
them (its horizontal half, its colour). This draws controlled scenes that an answer read off the
whole scene gets wrong: one shape alone on one side of a wide image, the other one to three on
the other side. For each shape it asks both questions and reports

- the answers' accuracy, by whether the shape is the one alone or one of the crowd;
- per layer and head, the attention mass that the answering position puts on the named shape's
  tokens and on the other shapes' (the mean over the scenes).

  .build/refenv/bin/python scripts/demo/binding.py --model .build/models/demo
  (40 scenes: about 40 s on 2 idle cores)

Measured on run 11 (docs/demo-model.md): colour 132 of 132 right, side 78 of 132 (the crowd's
side whatever the shape: 0 of 25 for a shape alone beside two or three others); colour questions
put 0.39-0.93 of each head's attention in layers 2 and 3 on the named shape, side questions
0.00-0.18. train.py --bind-weight trains that attention for side (and colour) questions: on run
12 (run 11 with --bind-weight 0.3) and run 13 side is 132 of 132 and both kinds put 0.94-0.99 there.
"""

import argparse
import os
import random
import sys

import torch
from PIL import Image, ImageDraw

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import scenes  # noqa: E402

from transformers import AutoProcessor, Qwen2_5_VLForConditionalGeneration  # noqa: E402

IMAGE_PAD = 151655
SIZE = 40  # px a side of every shape


def layout(rng, trial):
    """A wide scene: shapes[0] alone on one side (its centre in the outer 40%), the others on the
    other side. Returns the image and [(shape, colour, side, box)]."""
    w, h = rng.randint(200, 330), rng.randint(100, 190)
    n = 2 + trial % 3
    shapes = rng.sample(scenes.SHAPES, n)
    colours = rng.sample(list(scenes.COLOURS), n)
    alone = rng.choice(["left", "right"])
    img = Image.new("RGB", (w, h), (235, 235, 230))
    d = ImageDraw.Draw(img)
    placed = []
    for k, (shape, colour) in enumerate(zip(shapes, colours)):
        side = alone if k == 0 else ("right" if alone == "left" else "left")
        for _ in range(50):
            x0 = rng.randint(2, int(0.4 * w) - SIZE // 2 - 1) if side == "left" else rng.randint(int(0.6 * w) - SIZE // 2 + 1, w - SIZE - 2)
            y0 = rng.randint(2, h - SIZE - 2)
            box = (x0, y0, x0 + SIZE, y0 + SIZE)
            if not any(scenes.overlaps(box, p[3], 3) for p in placed):
                scenes.draw_shape(d, shape, colour, box)
                placed.append((shape, colour, side, box))
                break
    return img, placed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=os.path.join(HERE, "..", "..", ".build", "models", "demo"))
    ap.add_argument("--scenes", type=int, default=40)
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    proc = AutoProcessor.from_pretrained(args.model)
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(args.model, dtype=torch.float32,
                                                               attn_implementation="eager").eval()
    rng = random.Random(args.seed)
    right, mass = {}, {}
    for trial in range(args.scenes):
        img, placed = layout(rng, trial)
        w, h = img.size
        for k, (shape, colour, side, box) in enumerate(placed):
            for typ, q, want in (("colour", f"What colour is the {shape}?", colour),
                                 ("side", f"Which side is the {shape} on?", side)):
                inp = proc(text=[scenes.prompt_text(q)], images=[img], return_tensors="pt")
                out = model.generate(**inp, max_new_tokens=4, do_sample=False)
                got = proc.tokenizer.decode(out[0, inp["input_ids"].shape[1]:], skip_special_tokens=True)
                key = (typ, "alone" if k == 0 else "crowd", len(placed))
                r = right.setdefault(key, [0, 0])
                r[0] += got == want
                r[1] += 1
                # the answering position's attention over the image tokens
                att = model(**inp, output_attentions=True).attentions
                ids = inp["input_ids"][0]
                pos = (ids == IMAGE_PAD).nonzero()[:, 0]
                gh, gw = int(inp["image_grid_thw"][0, 1]) // 2, int(inp["image_grid_thw"][0, 2]) // 2
                on, other = torch.zeros(len(pos), dtype=torch.bool), torch.zeros(len(pos), dtype=torch.bool)
                for t in range(len(pos)):
                    r_, c_ = divmod(t, gw)
                    cx, cy = (c_ + 0.5) * w / gw, (r_ + 0.5) * h / gh
                    for j, p in enumerate(placed):
                        b = p[3]
                        if b[0] - 8 <= cx <= b[2] + 8 and b[1] - 8 <= cy <= b[3] + 8:
                            (on if j == k else other)[t] = True
                for layer, a in enumerate(att):
                    a = a[0, :, -1, pos]  # heads x image tokens
                    m = mass.setdefault((typ, layer), torch.zeros(2, a.shape[0]))
                    m[0] += a[:, on].sum(-1)
                    m[1] += a[:, other & ~on].sum(-1)
    print("answers (right / asked), by whether the shape is alone on its side and the shapes in the scene:")
    for key in sorted(right):
        print(f"  {key[0]:6} {key[1]:5} {key[2]} shapes: {right[key][0]:3} / {right[key][1]}")
    print("the answering position's attention on the named shape | on the other shapes, per head:")
    for (typ, layer), m in sorted(mass.items()):
        n = sum(v[1] for k, v in right.items() if k[0] == typ)
        named = " ".join(f"{x:.2f}" for x in m[0] / n)
        others = " ".join(f"{x:.2f}" for x in m[1] / n)
        print(f"  {typ:6} layer {layer}: {named} | {others}")


if __name__ == "__main__":
    main()
