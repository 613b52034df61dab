"""Golden data for the DeepSeek-OCR-2 family's vision tower (core/internal/models/deepseekocr2/
vision.go): transformers 5.17's DeepseekOcr2Model.get_image_features (SAM with windowed and
global layers, decomposed relative positions, the neck and the two stride-2 convolutions; the
Qwen2 encoder over [SAM tokens; learned queries] with its hybrid mask; the projector; the view
separator) on a tiny configuration, for a global view alone and for a global view with two
local tiles (whose 48x48 grid resamples the position table and the global layer's
relative-position tables).

Every weight is an integer formula (weight() below, one seed a tensor, a scale and offset by
kind: norms about 1, biases small, SAM's position and relative-position tables large enough to
matter, matrices of unit-variance outputs; the SAM init of std 1e-10 would test nothing of SAM),
and so are the pixels; core/internal/models/deepseekocr2/vision_test.go rebuilds them from the
manifest written here. Outputs are float32 little-endian in base64. Writes
core/internal/models/deepseekocr2/testdata/vision.json. Run with the reference stack:
`just golden-deepseek-ocr2-vision`.
"""

import base64
import json
import math
import pathlib

import numpy as np
import torch
import transformers
from transformers import DeepseekOcr2Config, DeepseekOcr2Model

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "core/internal/models/deepseekocr2/testdata/vision.json"

CONFIG = dict(
    text_config=dict(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                     num_key_value_heads=2, n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1,
                     moe_intermediate_size=8, mlp_layer_types=["dense"]),
    vision_config=dict(
        sam_config=dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=2, global_attn_indexes=[1],
                        output_channels=16, downsample_channels=[24, 48], mlp_dim=64),
        encoder_config=dict(hidden_size=48, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                            num_key_value_heads=2, rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"})))


def weight(n, seed, scale, offset):
    i = np.arange(n, dtype=np.int64)
    v = ((i * 7919 + seed * 104729) % 2003).astype(np.float64) / 2003.0 - 0.5
    return torch.from_numpy((v * scale + offset).astype(np.float32))


def b64(t):
    return base64.b64encode(t.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()).decode()


def kind(name, shape):
    """(scale, offset) of a tensor's values."""
    if name.endswith("norm.weight") or "layernorm.weight" in name or "layer_norm" in name and name.endswith("weight"):
        return 0.4, 1.0
    if name.endswith("bias"):
        return 0.2, 0.0
    if name.endswith("pos_embed"):
        return 1.0, 0.0
    if "rel_pos" in name:
        return 2.0, 0.0  # biases of up to ~1 a score: the tiles' resampled tables must matter
    if "query_" in name or name == "view_separator":
        return 2.0, 0.0
    fan_in = int(np.prod(shape[1:]))
    return 2.0 * math.sqrt(3.0 / fan_in), 0.0


def main():
    torch.set_num_threads(2)
    cfg = DeepseekOcr2Config(**CONFIG)
    model = DeepseekOcr2Model(cfg).eval()
    tensors = []
    sd = model.state_dict()
    with torch.no_grad():
        for seed, name in enumerate(sorted(k for k in sd if not k.startswith("language_model."))):
            shape = list(sd[name].shape)
            scale, offset = kind(name, shape)
            sd[name].copy_(weight(int(np.prod(shape)), seed, scale, offset).view(shape))
            tensors.append({"name": name, "shape": shape, "seed": seed, "scale": scale, "offset": offset})
    pixels = {"global": weight(3 * 1024 * 1024, 900, 2.0, 0.0).view(1, 3, 1024, 1024),
              "tiles": torch.stack([weight(3 * 768 * 768, 901 + t, 2.0, 0.0).view(3, 768, 768) for t in range(2)])}
    cases = []
    for name, local, n in [("global_only", None, None), ("two_tiles", pixels["tiles"], [2])]:
        outs = {}
        for impl in ("sdpa", "eager"):
            model.set_attn_implementation(impl)
            with torch.no_grad():
                outs[impl] = model.get_image_features(pixels["global"], local, n).pooler_output[0]
        cases.append({"name": name, "tiles": 0 if local is None else 2, "rows": outs["sdpa"].shape[0], "out": b64(outs["sdpa"]),
                      "eager_max_abs_diff": float((outs["eager"] - outs["sdpa"]).abs().max())})
        print(f"{name}: {outs['sdpa'].shape[0]} rows, eager vs sdpa max |diff| {cases[-1]['eager_max_abs_diff']:.3g}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    doc = {"generator": "scripts/reference/golden_deepseek_ocr2_vision.py",
           "versions": {"transformers": transformers.__version__, "torch": torch.__version__},
           "config": CONFIG, "pixel_seeds": {"global": 900, "tiles": [901, 902], "scale": 2.0},
           "tensors": tensors, "cases": cases}
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{OUT.relative_to(ROOT)}: {len(tensors)} tensors, {len(cases)} cases")


if __name__ == "__main__":
    main()
