#!/usr/bin/env python3
"""What the demo model's vision tower sees: linear probes on its merged tokens (issue 15).

The language model reads the tower's merged tokens; a question about "the triangle" can only be
answered when some token says "triangle". This fits one linear classifier per label of
train.token_labels (shape, colour) on the tower's output for scenes of the training seed and
reports its accuracy on held-out scenes: on every token, on the tokens of an object, and on the
token holding each object's centre, with the shape confusion matrix. A probe near the answers'
accuracy says the tower is the limit; a probe far above it says the language model is.

  .build/refenv/bin/python scripts/demo/probe.py --model .build/models/demo
  (600 + 300 scenes: about 30 s on 2 idle cores, most of it the tower in fp32)

Measured on run 5's model (docs/demo-model.md): shape 34% on object tokens (7 shapes: chance
~14%), colour 98%; `--train-scenes 250 --eval-scenes 150`: object centres by the object's width
26% (at most one merged token), 39% (1-2), 27% (2-4), 15% (wider).
"""

import argparse
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import scenes  # noqa: E402
import train  # noqa: E402

from transformers import AutoImageProcessor, Qwen2_5_VLForConditionalGeneration  # noqa: E402


def features(model, ip, seed, count):
    """The tower's merged tokens of scenes (seed, 0..count-1), their auxiliary labels and, on the
    token holding each object's centre, the object's width in merged tokens (0 elsewhere)."""
    xs, labels, widths = [], {}, []
    for i in range(count):
        sc = scenes.scene(seed, i)
        px = ip(images=[sc["image"]], return_tensors="pt")
        g = px["image_grid_thw"][0]
        with torch.no_grad():
            xs.append(model.model.visual(px["pixel_values"], grid_thw=px["image_grid_thw"]).pooler_output)
        mh, mw = int(g[1]) // 2, int(g[2]) // 2
        for k, v in train.token_labels(sc, mh, mw).items():
            labels.setdefault(k, []).append(v)
        width = torch.zeros(mh * mw)
        for o in sc["objects"]:  # the centre token as token_labels finds it
            cy, cx = train.centre_token(o["box"], sc["width"], sc["height"], mh, mw)
            width[cy * mw + cx] = (o["box"][2] - o["box"][0]) / sc["width"] * mw
        widths.append(width)
    return torch.cat(xs), {k: torch.cat(v) for k, v in labels.items()}, torch.cat(widths)


def fit(x, y, classes, mean, std, epochs=300):
    """A linear classifier on standardised features (full-batch Adam: the features fit in memory)."""
    w = torch.zeros(x.shape[1], classes, requires_grad=True)
    b = torch.zeros(classes, requires_grad=True)
    opt = torch.optim.Adam([w, b], lr=0.05)
    xn = (x - mean) / std
    for _ in range(epochs):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(xn @ w + b, y).backward()
        opt.step()
    return lambda z: ((z - mean) / std @ w + b).argmax(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(train.ROOT, ".build", "models", "demo"))
    ap.add_argument("--train-scenes", type=int, default=600, help="scenes of seed 1 to fit on")
    ap.add_argument("--eval-scenes", type=int, default=300, help="scenes of seed 2 to measure on")
    args = ap.parse_args()
    torch.manual_seed(0)
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(args.model, dtype=torch.float32,
                                                               attn_implementation="sdpa").eval()
    ip = AutoImageProcessor.from_pretrained(args.model)
    t0 = time.perf_counter()
    xtr, ytr, _ = features(model, ip, 1, args.train_scenes)
    xte, yte, wte = features(model, ip, 2, args.eval_scenes)
    print(f"{xtr.shape[0]} training and {xte.shape[0]} held-out tokens in {time.perf_counter() - t0:.0f} s; "
          f"mean token norm {xtr.norm(dim=1).mean():.1f}")
    mean, std = xtr.mean(0), xtr.std(0) + 1e-6
    centre = yte["centre"].bool()
    for name in ("shape", "colour"):
        predict = fit(xtr, ytr[name], train.AUX[name], mean, std)
        got, want = predict(xte), yte[name]
        obj = want > 0
        print(f"{name}: every token {(got == want).float().mean():.3f}, object tokens "
              f"{(got[obj] == want[obj]).float().mean():.3f} ({int(obj.sum())}), object centres "
              f"{(got[centre] == want[centre]).float().mean():.3f} ({int(centre.sum())})")
        if name == "shape":
            for lo, hi in ((0, 1), (1, 2), (2, 4), (4, float("inf"))):
                sel = (wte > lo) & (wte <= hi) & obj
                print(f"  object centres, objects {lo}-{hi} merged tokens wide: "
                      f"{(got[sel] == want[sel]).float().mean():.3f} ({int(sel.sum())})")
            cm = torch.zeros(train.AUX[name], train.AUX[name], dtype=torch.long)
            for a, b in zip(want[obj].tolist(), got[obj].tolist()):
                cm[a, b] += 1
            names = ["none"] + scenes.SHAPES
            print("shape tokens: rows the truth, columns the probe's answer")
            print("          " + " ".join(f"{n[:8]:>8}" for n in names))
            for i, n in enumerate(names[1:], 1):
                print(f"{n[:8]:>8}  " + " ".join(f"{int(v):8d}" for v in cm[i]))


if __name__ == "__main__":
    main()
