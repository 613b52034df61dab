"""Golden data for the DeepSeek-OCR-2 family's table resampling (core/internal/models/deepseekocr2/
resample.go), from transformers 5.17 / torch itself:

- the absolute position table of its SAM tower resampled as DeepseekOcr2SamVisionEncoder.
  interpolate_pos_encoding does (F.interpolate bicubic, align_corners=False, antialias=True, in
  float32), from 64x64 to 48x48 (a 768 tile) and other sizes, and up;
- a relative-position table resampled as DeepseekOcr2SamVisionAttention.get_rel_pos does
  (F.interpolate linear, align_corners=False), 127 -> 95 rows (a global layer on a tile's grid)
  and other sizes, plus the rows get_rel_pos then picks for a grid of that size.

Tables are an integer formula (weight() below; the Go test computes the same values); outputs
are float32 little-endian in base64. Writes core/internal/models/deepseekocr2/testdata/resample.json.
Run with the reference stack: `just golden-deepseek-ocr2-resample`.
"""

import base64
import json
import pathlib

import numpy as np
import torch
import transformers
from transformers.models.deepseek_ocr2.configuration_deepseek_ocr2 import DeepseekOcr2SamVisionConfig
from transformers.models.deepseek_ocr2.modeling_deepseek_ocr2 import (DeepseekOcr2SamVisionAttention,
                                                                      DeepseekOcr2SamVisionEncoder)

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "core/internal/models/deepseekocr2/testdata/resample.json"
CHANNELS = 1


def weight(n, seed, scale):
    i = np.arange(n, dtype=np.int64)
    v = ((i * 7919 + seed * 104729) % 2003).astype(np.float64) / 2003.0 - 0.5
    return torch.from_numpy((v * scale).astype(np.float32))


def b64(t):
    return base64.b64encode(t.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()).decode()


def main():
    torch.set_num_threads(1)
    pos = []
    for k, (src, dst) in enumerate([(64, 48), (64, 64), (64, 16), (64, 10), (40, 30), (8, 12), (64, 63)]):
        cfg = DeepseekOcr2SamVisionConfig(hidden_size=CHANNELS * 2, num_attention_heads=1, num_hidden_layers=1,
                                          global_attn_indexes=[], output_channels=4, downsample_channels=[4, 4],
                                          image_size=src * 16, patch_size=16)
        enc = DeepseekOcr2SamVisionEncoder(cfg)
        table = weight(src * src * CHANNELS * 2, 10 + k, 2.0).view(1, src, src, CHANNELS * 2)
        with torch.no_grad():
            enc.pos_embed.copy_(table)
            out = enc.interpolate_pos_encoding(dst, dst)[0]  # (dst, dst, C)
        pos.append({"src": src, "dst": dst, "channels": CHANNELS * 2, "seed": 10 + k, "out": b64(out)})
    rel = []
    for k, (rows, size) in enumerate([(127, 48), (127, 64), (27, 14), (127, 10), (19, 12)]):
        cfg = DeepseekOcr2SamVisionConfig(hidden_size=CHANNELS * 2, num_attention_heads=1, num_hidden_layers=1,
                                          global_attn_indexes=[], use_rel_pos=True)
        attn = DeepseekOcr2SamVisionAttention(cfg, window_size=(rows + 1) // 2)
        table = weight(rows * CHANNELS * 2, 50 + k, 2.0).view(rows, CHANNELS * 2)
        with torch.no_grad():
            picked = attn.get_rel_pos(size, size, table)  # (size, size, C): row (q, k) of the resized table
        rel.append({"rows": rows, "size": size, "channels": CHANNELS * 2, "seed": 50 + k, "picked": b64(picked)})
    OUT.parent.mkdir(parents=True, exist_ok=True)
    doc = {"generator": "scripts/reference/golden_deepseek_ocr2_resample.py",
           "versions": {"transformers": transformers.__version__, "torch": torch.__version__,
                        "cpu_capability": torch.backends.cpu.get_cpu_capability()},
           "pos": pos, "rel": rel}
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{OUT.relative_to(ROOT)}: {len(pos)} position tables, {len(rel)} relative tables")


if __name__ == "__main__":
    main()
