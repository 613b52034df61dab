"""Golden data for the DeepSeek-OCR-2 family's row plans (core/internal/models/deepseekocr2/plans.go):

- windows: DeepseekOcr2SamVisionLayer.window_partition (transformers 5.17) applied to a map whose
  position p holds p + 1 (0 marks the padding), for the 64x64 map of a 1024 view, the 48x48 of a
  768 tile (both padded to whole windows of 14) and other sizes;
- convolutions: F.conv2d (float32) of maps and weights of an integer formula (weight() below; the
  Go test computes the same values), for SAM's neck (3x3, stride 1, padding 1; 1x1) and its two
  downsampling convolutions (3x3, stride 2, padding 1) at both views' sizes and odd ones; the
  output in raster order, one row a position (float32 little-endian, base64).

Writes core/internal/models/deepseekocr2/testdata/plans.json. Run with the reference stack:
`just golden-deepseek-ocr2-plans`.
"""

import base64
import json
import pathlib

import numpy as np
import torch
import transformers
from transformers.models.deepseek_ocr2.modeling_deepseek_ocr2 import DeepseekOcr2SamVisionLayer

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "core/internal/models/deepseekocr2/testdata/plans.json"


def weight(n, seed, scale):
    i = np.arange(n, dtype=np.int64)
    v = ((i * 7919 + seed * 104729) % 2003).astype(np.float64) / 2003.0 - 0.5
    return torch.from_numpy((v * scale).astype(np.float32))


def b64(t):
    return base64.b64encode(t.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()).decode()


def main():
    torch.set_num_threads(1)
    windows = []
    for h, w, side in [(64, 64, 14), (48, 48, 14), (10, 7, 4), (14, 14, 14), (5, 9, 3)]:
        m = (torch.arange(h * w, dtype=torch.float32) + 1).view(1, h, w, 1)
        parts, (ph, pw) = DeepseekOcr2SamVisionLayer.window_partition(None, m, side)
        back = DeepseekOcr2SamVisionLayer.window_unpartition(None, parts, side, (ph, pw), (h, w))
        assert torch.equal(back, m)
        windows.append({"h": h, "w": w, "side": side, "padded": [ph, pw],
                        "rows": [int(v) for v in parts.reshape(-1).tolist()]})
    convs = []
    for k, (h, w, cin, cout, kernel, stride, pad) in enumerate(
            [(64, 64, 4, 3, 3, 1, 1), (64, 64, 6, 3, 3, 2, 1), (32, 32, 5, 4, 3, 2, 1), (48, 48, 5, 7, 3, 2, 1),
             (24, 24, 7, 3, 3, 2, 1), (13, 7, 4, 3, 3, 2, 1), (12, 12, 4, 4, 1, 1, 0), (9, 11, 3, 5, 3, 1, 1)]):
        seed = 200 + 10 * k
        x = weight(h * w * cin, seed, 2.0).view(1, h, w, cin).permute(0, 3, 1, 2)
        wt = weight(cout * cin * kernel * kernel, seed + 1, 1.0).view(cout, cin, kernel, kernel)
        y = torch.nn.functional.conv2d(x, wt, stride=stride, padding=pad)  # (1, cout, oh, ow)
        convs.append({"h": h, "w": w, "cin": cin, "cout": cout, "kernel": kernel, "stride": stride, "pad": pad,
                      "seed": seed, "out_h": y.shape[2], "out_w": y.shape[3],
                      "out": b64(y[0].permute(1, 2, 0).reshape(-1, cout))})
    OUT.parent.mkdir(parents=True, exist_ok=True)
    doc = {"generator": "scripts/reference/golden_deepseek_ocr2_plans.py",
           "versions": {"transformers": transformers.__version__, "torch": torch.__version__},
           "windows": windows, "convs": convs}
    OUT.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"{OUT.relative_to(ROOT)}: {len(windows)} window partitions, {len(convs)} convolutions")


if __name__ == "__main__":
    main()
