"""Golden vectors for core/internal/pixels.ResizeFloatBicubic: torch's CPU bicubic interpolate of a
normalised float32 image (align_corners=False, antialias=False), on a grid of (input, output) sizes.

That is the resize transformers' torchvision backend applies to an image that is already a float
tensor: Phi4MultimodalImageProcessor's global view (the padded, normalised canvas shrunk to
448x448). Inputs are golden_resize.py's synthetic images (the Go tests generate the same pixels),
normalised as TorchvisionBackend.rescale_and_normalize does (fused, float32) with the 0.5/0.5
statistics and CLIP's; only the sha256 of each [3, oh, ow] float32 output is stored.

Run with the reference stack: `just golden-float-resize` (x86-64 CPU: the kernel's rounding is that
of torch's AVX2/AVX512 build; the file records the capability). `--sweep FILE N` writes N random
cases for `just float-resize-sweep` instead.
"""

import hashlib
import json
import pathlib
import random
import sys

import torch
import torchvision
from torchvision.transforms.v2 import functional as tvF

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from golden_resize import synth  # noqa: E402  (the shared synthetic image)

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "core/internal/pixels/testdata/float_resize_golden.json"

NORMS = {"half": ([0.5, 0.5, 0.5], [0.5, 0.5, 0.5]),
         "clip": ([0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711])}


def cases():
    rnd = random.Random(39)
    out = []
    # Phi-4-multimodal's global views: the canvas of cols x rows crops of 448 shrunk to 448x448
    # (integer scales: taps of lambda 0 and 0.5 only).
    for cols, rows in [(1, 2), (2, 1), (2, 2), (3, 1), (1, 3), (3, 2), (2, 3), (4, 3), (6, 6), (9, 4), (36, 1), (1, 36)]:
        out.append((448 * cols, 448 * rows, 448, 448))
    # Every other scale: fractional taps, upscales, 1-pixel sides, clamped edges.
    for w, h, ow, oh in [(1, 1, 1, 1), (1, 1, 5, 3), (2, 3, 7, 11), (5, 3, 2, 1), (37, 53, 71, 19), (100, 30, 64, 77),
                         (448, 448, 301, 300), (1000, 7, 448, 448), (333, 500, 448, 448), (64, 64, 448, 448),
                         (640, 480, 448, 448), (1, 700, 14, 28)]:
        out.append((w, h, ow, oh))
    for _ in range(40):
        w, h = rnd.randint(1, 1200), rnd.randint(1, 1200)
        ow, oh = rnd.randint(1, 600), rnd.randint(1, 600)
        out.append((w, h, ow, oh))
    return out


def sweep_cases(n):
    rnd = random.Random(3939)
    return [(rnd.randint(1, 1500), rnd.randint(1, 1500), rnd.randint(1, 900), rnd.randint(1, 900)) for _ in range(n)]


def normalise(img, mean, std):
    """TorchvisionBackend.rescale_and_normalize on a uint8 HWC image: the fused float32 form."""
    x = torch.from_numpy(img).permute(2, 0, 1).contiguous().to(torch.float32)
    return tvF.normalize(x, torch.tensor(mean) * 255.0, torch.tensor(std) * 255.0)


def main():
    torch.set_num_threads(1)
    out_path, case_list = OUT, cases()
    if sys.argv[1:2] == ["--sweep"]:
        out_path, case_list = pathlib.Path(sys.argv[2]), sweep_cases(int(sys.argv[3]))
    rows = []
    for i, (w, h, ow, oh) in enumerate(case_list):
        seed = 1000 + i
        img = synth(w, h, seed)
        for name, (mean, std) in NORMS.items():
            x = normalise(img, mean, std)
            # the call transformers makes: tvF.resize of a float image, bicubic, antialias off
            r = tvF.resize(x, [oh, ow], interpolation=tvF.InterpolationMode.BICUBIC, antialias=False)
            if (oh, ow) != (h, w):
                direct = torch.nn.functional.interpolate(x[None], size=(oh, ow), mode="bicubic",
                                                         align_corners=False, antialias=False)[0]
                assert torch.equal(r, direct), (w, h, ow, oh)
            rows.append({"w": w, "h": h, "ow": ow, "oh": oh, "seed": seed, "norm": name,
                         "sha256": hashlib.sha256(r.contiguous().numpy().astype("<f4").tobytes()).hexdigest(),
                         "synth": hashlib.sha256(img.tobytes()).hexdigest()[:16]})
    doc = {"generator": "scripts/reference/golden_float_resize.py", "torch": torch.__version__,
           "torchvision": torchvision.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
           "norms": {k: {"mean": m, "std": s} for k, (m, s) in NORMS.items()}}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(doc)[:-1] + ',\n"cases": [\n' + ",\n".join(json.dumps(r, separators=(",", ":")) for r in rows)
    out_path.write_text(text + "\n]}\n")
    print(f"wrote {len(rows)} cases to {out_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
