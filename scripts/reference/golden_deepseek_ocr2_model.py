"""Golden data for the DeepSeek-OCR-2 family end to end (core/internal/models/deepseekocr2/
model_test.go): transformers 5.17's DeepseekOcr2ForConditionalGeneration on tiny checkpoints
made from its own class with the real vocabulary (129280 rows), greedy, on the processor's
prompt (BOS, the image's placeholders, "\\n" + the question; the tokenizer of
.build/tokenizer/deepseek_ocr2) for a global view alone and with two local tiles.

Eight checkpoints (CHECKPOINTS below) vary the decoder's experts (4 to 16, top-k 1 to 3, 0 to 2
shared experts, greedy and group-limited routing, scaling factors), its dense/sparse layer mix,
widths, heads and grouped KV heads, and the vision tower's (golden_deepseek_ocr2_vision.py's
configuration, with other SAM widths, heads, depths and global layers, and other encoder heads);
each runs two images of 0 to 6 local tiles, some with the question sent first (framed as the
plugin frames it: BOS{question}\n<image>xN). Every weight is an integer formula
(weight(): one seed a tensor, a scale and offset by kind: SAM's position and relative-position
tables large enough to matter, experts' and lm_head's weights large enough for clear greedy
margins), and so are the pixels; the Go test rebuilds them from the manifest. Per case the file
records the prompt ids, the greedy tokens and, per step, the top 8 logits (ids and values) and
the gap between the first two. Writes core/internal/models/deepseekocr2/testdata/model.json.
Run with the reference stack: `just golden-deepseek-ocr2-model`.
"""

import json
import math
import pathlib
import sys

import numpy as np
import torch
import transformers
from transformers import AutoTokenizer, DeepseekOcr2Config, DeepseekOcr2ForConditionalGeneration

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from golden_deepseek_ocr2_vision import CONFIG as VISION_CONFIG  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "core/internal/models/deepseekocr2/testdata/model.json"
TOKENIZER = ROOT / ".build/tokenizer/deepseek_ocr2"
QUESTION = "Free OCR."
NEW_TOKENS = 6
TOP = 8

BASE_TEXT = dict(vocab_size=129280, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
                 num_key_value_heads=4, max_position_embeddings=8192, rms_norm_eps=1e-6,
                 rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}, bos_token_id=0, eos_token_id=1,
                 tie_word_embeddings=False)
# name, text overrides, vision overrides (sam_config, encoder_config), cases (tiles, question first)
CHECKPOINTS = [
    ("e8_k2_s1", dict(n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1, moe_intermediate_size=16,
                      topk_method="greedy", routed_scaling_factor=1.0, mlp_layer_types=["dense", "sparse", "sparse"]),
     {}, {}, [(0, False), (2, False)]),
    ("e16_k3_s2_group", dict(n_routed_experts=16, num_experts_per_tok=3, n_shared_experts=2, moe_intermediate_size=8,
                             topk_method="group_limited_greedy", n_group=4, topk_group=2, routed_scaling_factor=2.5,
                             mlp_layer_types=["sparse", "dense", "sparse"]),
     {}, {}, [(0, False), (2, False)]),
    ("e4_k1_s0", dict(n_routed_experts=4, num_experts_per_tok=1, n_shared_experts=0, moe_intermediate_size=24,
                      topk_method="greedy", routed_scaling_factor=1.0, mlp_layer_types=["dense", "sparse", "dense"]),
     {}, {}, [(0, True), (6, False)]),
    ("e12_k2_s1_group_gqa", dict(n_routed_experts=12, num_experts_per_tok=2, n_shared_experts=1, moe_intermediate_size=12,
                                 topk_method="group_limited_greedy", n_group=3, topk_group=1, routed_scaling_factor=1.0,
                                 num_key_value_heads=2, mlp_layer_types=["sparse", "sparse", "sparse"]),
     dict(num_attention_heads=4), dict(num_attention_heads=6, num_key_value_heads=3), [(3, False), (0, True)]),
    ("e6_k3_s2_wide", dict(n_routed_experts=6, num_experts_per_tok=3, n_shared_experts=2, moe_intermediate_size=20,
                           topk_method="greedy", routed_scaling_factor=0.75, hidden_size=48, num_attention_heads=6,
                           num_key_value_heads=6, intermediate_size=96, mlp_layer_types=["dense", "sparse", "sparse"]),
     dict(global_attn_indexes=[0, 2]), {}, [(4, True), (0, False)]),
    ("e16_k1_s1_deep", dict(n_routed_experts=16, num_experts_per_tok=1, n_shared_experts=1, moe_intermediate_size=8,
                            topk_method="greedy", routed_scaling_factor=1.0, num_hidden_layers=4,
                            mlp_layer_types=["dense", "sparse", "dense", "sparse"]),
     dict(hidden_size=48, num_attention_heads=3, mlp_dim=96), {}, [(1, False), (0, False)]),
    ("e8_k3_s0_group_scaled", dict(n_routed_experts=8, num_experts_per_tok=3, n_shared_experts=0, moe_intermediate_size=16,
                                   topk_method="group_limited_greedy", n_group=2, topk_group=1, routed_scaling_factor=16.0,
                                   num_attention_heads=2, num_key_value_heads=1, mlp_layer_types=["sparse", "dense", "sparse"]),
     {}, dict(num_attention_heads=2, num_key_value_heads=1), [(5, False), (0, True)]),
    ("e10_k2_s2_narrow", dict(n_routed_experts=10, num_experts_per_tok=2, n_shared_experts=2, moe_intermediate_size=4,
                              topk_method="greedy", routed_scaling_factor=1.0, hidden_size=24, num_attention_heads=3,
                              num_key_value_heads=3, intermediate_size=40, mlp_layer_types=["dense", "dense", "sparse"]),
     dict(num_hidden_layers=4, global_attn_indexes=[3]), {}, [(2, True), (0, False)]),
]


def splitmix(n, seed):
    """u in [-0.5, 0.5) for i < n: the top 24 bits of splitmix64((seed << 32) + i), exact in float64."""
    z = (np.uint64(seed) << np.uint64(32)) + np.arange(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(40)).astype(np.float64) / float(1 << 24) - 0.5


def weight(n, seed, scale, offset):
    """A tensor's values: splitmix's u times scale plus offset, rounded once to float32 (the
    vision golden's modular formula repeats rows of a 129280-row table, and its logits tie)."""
    return torch.from_numpy((splitmix(n, seed) * scale + offset).astype(np.float32))


def pixel(n, seed, scale):
    """golden_deepseek_ocr2_vision.py's pixels: ((i·7919 + seed·104729) mod 2003) / 2003 − 0.5."""
    i = np.arange(n, dtype=np.int64)
    v = ((i * 7919 + seed * 104729) % 2003).astype(np.float64) / 2003.0 - 0.5
    return torch.from_numpy((v * scale).astype(np.float32))


def kind(name, shape, hidden):
    if 0 in shape:  # the shared experts' MLP of n_shared_experts 0: no values
        return 0.0, 0.0
    if name.endswith("norm.weight") or "layernorm.weight" in name or "layer_norm" in name and name.endswith("weight"):
        return 0.4, 1.0
    if name.endswith("bias"):
        return 0.2, 0.0
    if name.endswith("pos_embed"):
        return 1.0, 0.0
    if "rel_pos" in name:
        return 2.0, 0.0
    if "query_" in name or name.endswith("view_separator"):
        return 2.0, 0.0
    if name.endswith("embed_tokens.weight"):
        return 2.0 * math.sqrt(3.0), 0.0
    if name == "lm_head.weight":
        return 8.0 * math.sqrt(3.0 / hidden), 0.0  # logits of std ~4: clear greedy margins
    if name.endswith("mlp.gate.weight"):
        return 4.0 * math.sqrt(3.0 / shape[1]), 0.0  # a router far from uniform
    if ".mlp.experts." in name:
        return 4.0 * math.sqrt(3.0 / shape[-1]), 0.0  # experts of twice the unit-variance scale: routing must matter
    fan_in = int(np.prod(shape[1:]))
    return 2.0 * math.sqrt(3.0 / fan_in), 0.0


def build(name):
    """The checkpoint name of CHECKPOINTS as a float32 DeepseekOcr2ForConditionalGeneration, its
    text and vision configs, and its tensors' manifest (name, shape, seed, scale, offset)."""
    _, moe, sam, enc, _ = next(c for c in CHECKPOINTS if c[0] == name)
    text = dict(BASE_TEXT, **moe)
    vision = json.loads(json.dumps(VISION_CONFIG["vision_config"]))
    vision["sam_config"].update(sam)
    vision["encoder_config"].update(enc)
    cfg = DeepseekOcr2Config(text_config=text, vision_config=vision)
    model = DeepseekOcr2ForConditionalGeneration(cfg).eval()
    tensors = []
    sd = model.state_dict()
    with torch.no_grad():
        for seed, tname in enumerate(sorted(sd)):
            shape = list(sd[tname].shape)
            scale, offset = kind(tname, shape, text["hidden_size"])
            sd[tname].copy_(weight(int(np.prod(shape)), 1000 + seed, scale, offset).view(shape))
            tensors.append({"name": tname, "shape": shape, "seed": 1000 + seed, "scale": scale, "offset": offset})
    return model, text, vision, tensors


def main():
    torch.set_num_threads(2)
    tok = AutoTokenizer.from_pretrained(str(TOKENIZER))
    # the vision golden's pixels
    pixels = {"global": pixel(3 * 1024 * 1024, 900, 2.0).view(1, 3, 1024, 1024),
              "tiles": torch.stack([pixel(3 * 768 * 768, 901 + t, 2.0).view(3, 768, 768) for t in range(6)])}
    checkpoints = []
    for name, moe, sam, enc, shapes in CHECKPOINTS:
        model, text, vision, tensors = build(name)
        cases = []
        for tiles, text_first in shapes:
            count = 256 + 144 * tiles + 1
            image = [tok.convert_tokens_to_ids("<image>")] * count
            if text_first:  # the plugin's framing of a question sent first: BOS{question}\n<image>xN
                ids = [tok.bos_token_id] + tok(QUESTION + "\n", add_special_tokens=False)["input_ids"] + image
            else:
                ids = [tok.bos_token_id] + image + tok("\n" + QUESTION, add_special_tokens=False)["input_ids"]
            local = pixels["tiles"][:tiles] if tiles else None
            with torch.no_grad():
                out = model.generate(input_ids=torch.tensor([ids]), pixel_values=pixels["global"], pixel_values_local=local,
                                     num_local_patches=[tiles], max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                                     do_sample=False, output_logits=True, return_dict_in_generate=True)
            tokens = out.sequences[0, len(ids):].tolist()
            steps = []
            for lg in out.logits:
                v, i = torch.topk(lg[0].float(), TOP)
                steps.append({"ids": i.tolist(), "logits": v.tolist(), "gap": float(v[0] - v[1])})
            cname = f"tiles{tiles}" + ("_question_first" if text_first else "")
            cases.append({"name": cname, "tiles": tiles, "input_ids": ids, "tokens": tokens, "steps": steps})
            print(f"{name}/{cname}: tokens {tokens}, smallest gap {min(s['gap'] for s in steps):.3g}")
        checkpoints.append({"name": name, "text_config": text, "vision_config": vision, "tensors": tensors, "cases": cases})
    OUT.parent.mkdir(parents=True, exist_ok=True)
    doc = {"generator": "scripts/reference/golden_deepseek_ocr2_model.py",
           "versions": {"transformers": transformers.__version__, "torch": torch.__version__},
           "pixel_seeds": {"global": 900, "tiles": [901 + t for t in range(6)], "scale": 2.0},
           "question": QUESTION, "checkpoints": checkpoints}
    OUT.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"{OUT.relative_to(ROOT)}: {len(checkpoints)} checkpoints")


if __name__ == "__main__":
    main()
