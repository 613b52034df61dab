"""Golden data for attention with a decomposed relative-position bias (ml.Mask.RelPos), from
transformers 5.17's SAM attention of DeepSeek-OCR-2 (DeepseekOcr2SamVisionAttention: qkv, the
bias of get_decomposed_rel_pos, softmax, proj), eager and SDPA.

Per case (heads, head size, a Height x Width grid: a window, or a whole grid whose rel-pos tables
have the grid's own size so that no resampling happens), the module's weights, its rel-pos
tables and the input are an integer formula (weight() below; core/internal/ml/cpu/attn_relpos_test.go
computes the same values), and the file records the module's output (eager) and how far SDPA
lands from it. Values are float32 little-endian in base64. Writes
core/internal/ml/cpu/testdata/relpos.json. Run with the reference stack: `just golden-relpos`.
"""

import base64
import json
import pathlib

import numpy as np
import torch
import transformers
from transformers.models.deepseek_ocr2.configuration_deepseek_ocr2 import DeepseekOcr2SamVisionConfig
from transformers.models.deepseek_ocr2.modeling_deepseek_ocr2 import (DeepseekOcr2SamVisionAttention,
                                                                      DeepseekOcr2SamVisionSdpaAttention)

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "core/internal/ml/cpu/testdata/relpos.json"

# name, heads, head size, height, width (square windows as SAM's; a 3x5 grid for the layout)
CASES = [("window_14", 2, 16, 14, 14), ("grid_6", 4, 8, 6, 6), ("grid_3x5", 3, 8, 3, 5), ("window_7_one_head", 1, 32, 7, 7)]


def weight(n, seed, scale):
    i = np.arange(n, dtype=np.int64)
    v = ((i * 7919 + seed * 104729) % 2003).astype(np.float64) / 2003.0 - 0.5
    return torch.from_numpy((v * scale).astype(np.float32))


def b64(t):
    return base64.b64encode(t.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()).decode()


def main():
    torch.set_num_threads(1)
    cases = []
    for k, (name, heads, hd, h, w) in enumerate(CASES):
        c = heads * hd
        seed = 100 + 10 * k
        cfg = DeepseekOcr2SamVisionConfig(hidden_size=c, num_attention_heads=heads, num_hidden_layers=1,
                                          global_attn_indexes=[], use_rel_pos=True, qkv_bias=True)
        outs = {}
        for kind, cls in (("eager", DeepseekOcr2SamVisionAttention), ("sdpa", DeepseekOcr2SamVisionSdpaAttention)):
            # window_size h: rel-pos tables of 2h-1 rows; a non-square grid gets its own sizes
            attn = cls(cfg, window_size=h).eval()
            with torch.no_grad():
                attn.rel_pos_h = torch.nn.Parameter(weight((2 * h - 1) * hd, seed + 1, 2.0).view(2 * h - 1, hd))
                attn.rel_pos_w = torch.nn.Parameter(weight((2 * w - 1) * hd, seed + 2, 2.0).view(2 * w - 1, hd))
                attn.qkv.weight.copy_(weight(3 * c * c, seed + 3, 1.0).view(3 * c, c))
                attn.qkv.bias.copy_(weight(3 * c, seed + 4, 0.5))
                attn.proj.weight.copy_(weight(c * c, seed + 5, 1.0).view(c, c))
                attn.proj.bias.copy_(weight(c, seed + 6, 0.5))
                x = weight(h * w * c, seed + 7, 2.0).view(1, h, w, c)
                out = attn(x)[0].reshape(h * w, c)
            outs[kind] = out
        cases.append({"name": name, "heads": heads, "head_dim": hd, "height": h, "width": w, "seed": seed,
                      "out": b64(outs["eager"]), "sdpa_max_abs_diff": float((outs["sdpa"] - outs["eager"]).abs().max())})
        print(f"{name}: sdpa vs eager max |diff| {cases[-1]['sdpa_max_abs_diff']:.3g}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    doc = {"generator": "scripts/reference/golden_relpos.py",
           "versions": {"transformers": transformers.__version__, "torch": torch.__version__}, "cases": cases}
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{OUT.relative_to(ROOT)}: {len(cases)} cases")


if __name__ == "__main__":
    main()
