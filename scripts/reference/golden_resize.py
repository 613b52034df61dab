"""Golden resize vectors for core/internal/pixels: torchvision's uint8 antialiased resize and
PIL's Image.resize on a grid of (input, output) sizes.

Inputs are synthetic images both sides generate from a seed (see synth below and synth in
core/internal/pixels/synth_test.go), so only the sha256 of each output is stored.

Run with the reference stack: `just golden-resize` (x86-64 CPU, as the reference runs);
`golden_resize.py --sweep FILE N` writes N random cases for `just resize-sweep` instead.
"""

import hashlib
import json
import pathlib
import random
import sys

import numpy as np
import PIL
import torch
import torchvision
from PIL import Image
from torchvision.transforms.v2 import functional as tvF

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "core/internal/pixels/testdata/resize_golden.json"


def lowbias32(x):
    x &= 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    x ^= x >> 16
    return x


def synth(w, h, seed):
    """HWC uint8: a smooth ramp plus noise, with some saturated pixels so bicubic overshoots clamp."""
    y, x, c = np.meshgrid(np.arange(h, dtype=np.uint64), np.arange(w, dtype=np.uint64),
                          np.arange(3, dtype=np.uint64), indexing="ij")
    m = np.uint64(0xFFFFFFFF)
    v = ((y * np.uint64(65536) + x) * np.uint64(3) + c + np.uint64(seed) * np.uint64(0x9E3779B1)) & m
    v ^= v >> np.uint64(16)
    v = (v * np.uint64(0x7FEB352D)) & m
    v ^= v >> np.uint64(15)
    v = (v * np.uint64(0x846CA68B)) & m
    v ^= v >> np.uint64(16)
    smooth = (x * np.uint64(255) // np.uint64(max(w, 1)) + y * np.uint64(191) // np.uint64(max(h, 1))
              + c * np.uint64(60)) % np.uint64(256)
    noise = v & np.uint64(31)
    out = (smooth + noise) % np.uint64(256)
    top = v >> np.uint64(24)
    out = np.where(top < 8, np.uint64(0), np.where(top > 247, np.uint64(255), out))
    return out.astype(np.uint8)


def sweep_cases(n):
    """n random (input, output) sizes for the uncommitted sweep."""
    rnd = random.Random(4321)
    out = []
    for _ in range(n):
        w, h = rnd.randint(1, 1500), rnd.randint(1, 1500)
        k = rnd.random()
        if k < 0.4:  # mild rescale, the common case
            ow, oh = max(1, int(w * rnd.uniform(0.5, 1.5))), max(1, int(h * rnd.uniform(0.5, 1.5)))
        elif k < 0.8:  # strong downscale
            ow, oh = max(1, w // rnd.randint(2, 40)), max(1, h // rnd.randint(2, 40))
        else:
            ow, oh = rnd.randint(1, 1500), rnd.randint(1, 1500)
        out.append((w, h, ow, oh))
    return out


def cases():
    rnd = random.Random(1234)
    sizes = [1, 2, 3, 4, 5, 7, 8, 13, 28, 29, 56, 63, 100, 224, 252, 308, 320, 448, 641, 1000]
    seen = set()
    out = []

    def add(w, h, ow, oh):
        if (w, h, ow, oh) not in seen:
            seen.add((w, h, ow, oh))
            out.append((w, h, ow, oh))

    for _ in range(160):
        add(rnd.choice(sizes), rnd.choice(sizes), rnd.choice(sizes), rnd.choice(sizes))
    # Qwen-style targets and exact ratios.
    for w, h, ow, oh in [(320, 240, 308, 252), (320, 240, 320, 256), (426, 320, 420, 308),
                         (640, 480, 644, 476), (1024, 768, 1036, 756), (1600, 1200, 1596, 1204),
                         (2000, 1500, 2016, 1512), (28, 28, 56, 56), (29, 1000, 28, 1008),
                         (1000, 29, 1008, 28), (1990, 10, 1988, 28), (10, 1990, 28, 1988),
                         (1, 500, 28, 504), (500, 1, 504, 28), (1, 1, 5, 3), (7, 7, 1, 1),
                         (448, 448, 448, 448), (448, 300, 448, 224), (300, 448, 224, 448),
                         (1000, 1000, 3, 3), (3, 3, 1000, 1000), (2000, 20, 20, 2000),
                         (640, 480, 320, 240), (640, 480, 160, 120), (400, 400, 200, 100)]:
        add(w, h, ow, oh)
    return out


def main():
    torch.set_num_threads(1)
    out_path, case_list = OUT, cases()
    if sys.argv[1:2] == ["--sweep"]:
        out_path, case_list = pathlib.Path(sys.argv[2]), sweep_cases(int(sys.argv[3]))
    rows = []
    for i, (w, h, ow, oh) in enumerate(case_list):
        seed = i + 1
        img = synth(w, h, seed)
        t = torch.from_numpy(img).permute(2, 0, 1).contiguous()
        pil = Image.fromarray(img, "RGB")
        for name, interp, resample in [("bicubic", tvF.InterpolationMode.BICUBIC, Image.Resampling.BICUBIC),
                                       ("bilinear", tvF.InterpolationMode.BILINEAR, Image.Resampling.BILINEAR)]:
            try:
                r = tvF.resize(t, [oh, ow], interpolation=interp, antialias=True)
                torch_sha = hashlib.sha256(r.permute(1, 2, 0).contiguous().numpy().tobytes()).hexdigest()
            except RuntimeError as e:
                # torch asserts on some degenerate shapes (a 1-pixel side makes the tensor look
                # channels-last): the reference itself has no answer there.
                torch_sha = "error: " + str(e).splitlines()[0][:80]
            rp = np.asarray(pil.resize((ow, oh), resample=resample)).tobytes()
            rows.append({"w": w, "h": h, "ow": ow, "oh": oh, "seed": seed, "filter": name,
                         "torch": torch_sha, "pil": hashlib.sha256(rp).hexdigest(),
                         "synth": hashlib.sha256(img.tobytes()).hexdigest()[:16]})
    norms = []
    for name, mean, std in [("clip", [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]),
                            ("half", [0.5, 0.5, 0.5], [0.5, 0.5, 0.5]),
                            ("imagenet", [0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]:
        rescale = 1 / 255
        x = torch.arange(256, dtype=torch.uint8).repeat(3, 1).reshape(1, 3, 16, 16)
        # transformers' TorchvisionBackend.rescale_and_normalize (fused), on CPU.
        m = torch.tensor(mean) * (1.0 / rescale)
        sd = torch.tensor(std) * (1.0 / rescale)
        tv = tvF.normalize(x.to(torch.float32), m, sd).reshape(3, 256)
        # transformers' PilBackend: float64 rescale to float32, then (x - mean) / std in float32.
        xs = np.arange(256, dtype=np.uint8)[None, :].repeat(3, 0)
        pl = (xs.astype(np.float64) * rescale).astype(np.float32)
        pl = (pl - np.array(mean, dtype=np.float32)[:, None]) / np.array(std, dtype=np.float32)[:, None]
        norms.append({"name": name, "mean": mean, "std": std, "rescale": rescale,
                      # sha256 of the [3][256] float32 table, little-endian.
                      "torch": hashlib.sha256(tv.numpy().astype("<f4").tobytes()).hexdigest(),
                      "pil": hashlib.sha256(pl.astype("<f4").tobytes()).hexdigest(),
                      "torch_at_0": float(tv[0, 0]), "pil_at_0": float(pl[0, 0])})
    doc = {
        "generator": "scripts/reference/golden_resize.py",
        "torch": torch.__version__, "torchvision": torchvision.__version__, "pillow": PIL.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "norms": norms,
        "cases": rows,
    }
    out_path.parent.mkdir(parents=True, exist_ok=True)
    head = {k: v for k, v in doc.items() if k not in ("cases", "norms")}
    text = json.dumps(head)[:-1] + ',\n"norms": ' + json.dumps(norms, separators=(",", ":"))
    text += ',\n"cases": [\n' + ",\n".join(json.dumps(r, separators=(",", ":")) for r in rows) + "\n]}\n"
    out_path.write_text(text)
    print(f"wrote {len(rows)} cases to {out_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
