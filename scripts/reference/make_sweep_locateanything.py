"""The LocateAnything-3B shape sweep golden: the official remote code's outputs for seeded tiny checkpoints.

Writes core/internal/enginetest/testdata/sweep/locateanything.json in make_sweep.py's format (which
fixture.RunSweep reads): per model the config.json, the tensor manifest of its seeded weights
(seeded.py's rule; the Go generator, core/internal/enginetest/fixture/seeded.go, writes the same
bytes), the vision output's sums per image, and per case the greedy tokens, the smallest top-1/top-2
margin, the first-step argmax and a subset of the first-step logits.

The reference is LocateAnythingForConditionalGeneration of the remote-code export (NVlabs/Eagle
783f656d, Embodied/eaglevl/utils/locany, fetched into .build/locany by fetch_locateanything.sh) in
.build/laenv (transformers 4.57.1; `just laenv`), fp32 on the CPU, built from each config with the
classes themselves (MoonViT through its SDPA fallback: no flash-attn here; the Qwen2 decoder's
"magi" attention falls back to SDPA, a causal mask in the slow mode), its weights replaced by the
seeded ones. The tokens are those of its own generate() in generation_mode="slow" (pure
autoregressive), temperature 0 (the max of the softmax probabilities), repetition penalty 1.0, with
the stop on <|im_end|> switched off (generate's token_ids dict) so that every case runs
MAX_NEW_TOKENS steps; generate() decodes its ids with the tokenizer it is given, so it gets one
that hands the ids back. The logits are the language model's on the prompt and the tokens so far,
at each step (the margins), and the first step's recorded.

Shims and checks: processing_locateanything's decord import (video only) is stubbed; the legacy
Qwen2RotaryEmbedding keeps cos/sin in non-persistent buffers that a meta-device build loses, so
the script checks each layer's tables against a recomputation before it runs (the model is built on
the CPU, not the meta device).

Prompts: chat_template.json's rendering and the processor's replacement, `<|im_start|>system\\nYou
are a helpful assistant.<|im_end|>\\n<|im_start|>user\\n<image 1><img>` + `<IMG_CONTEXT>` x N +
`</img>{question}<|im_end|>\\n<|im_start|>assistant\\n` (the question first in the other order); the
text is tokenized with the Qwen BPE (.build/tokenizer/qwen3: the same merges as Qwen2.5's, and
<|im_start|>, <|im_end|> at the same ids), the span's ids are the checkpoint's: <img> 151666,
<IMG_CONTEXT> 151665, </img> 151667.

Images: seeded pixel rows (seeded.py's pixels rule) of grids from 2x2 (one token) to 40x50 (2000
patches), raster patches of 3 x 14 x 14 values (what the locateanything plugin hands the engine);
position tables of 64x64 (the checkpoint's), 16x12 and 6x10, so that grids are resampled down, up,
and not at all (a grid equal to the table takes it as it is).

Run: `just sweep-golden-locateanything`. CI never runs it.
"""

import argparse
import hashlib
import importlib
import json
import math
import os
import shutil
import struct
import sys
import tempfile
import types

import numpy as np
import torch
import transformers
from safetensors.torch import save_file, load_file
from transformers import AutoTokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seeded import seeded_pixels, seeded_tensor  # noqa: E402 (the seeded rule, shared with Go)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SRC = os.path.join(ROOT, ".build", "locany")
TOKENIZER_DIR = os.path.join(ROOT, ".build", "tokenizer", "qwen3")
OUT = os.path.join(ROOT, "core", "internal", "enginetest", "testdata", "sweep", "locateanything.json")

SEED = 20261401
MAX_NEW_TOKENS = 8
TOP_K = 64
STRIDE = 1499
MIN_MARGIN = 1e-3
VOCAB = 152681  # the checkpoint's embedding rows
IMG_CONTEXT, IMG_START, IMG_END, IM_END = 151665, 151666, 151667, 151645
SYSTEM = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
ORDERS = ["image_first", "question_first"]

# (name, grid h, grid w) in patches of 14.
IMAGES = [
    ("one_token_2x2", 2, 2),
    ("strip_2x100", 2, 100),
    ("small_16x12", 16, 12),
    ("photo_40x50", 40, 50),
]
QUESTIONS = {
    "one_token_2x2": "Point to: white vehicle.",
    "strip_2x100": "Locate a single instance that matches the following description: white vehicle.",
    "small_16x12": "Locate all the instances that matches the following description: cat</c>dog.",
    "photo_40x50": "Locate a single instance that matches the following description: the red car on the left. 这是什么？",
}

# name: text (layers, heads, kv_heads, hidden, intermediate, rope_theta, tied),
#       vision (depth, heads, head_dim, intermediate, pos_emb (height, width)).
# The decoder is the remote code's Qwen2 (q/k/v biases, 1-D RoPE, head_dim = hidden / heads, even);
# the tower's width is heads * head_dim with head_dim a multiple of 4 (2-D RoPE: a quarter of each
# head a frequency of the column, a quarter of the row).
MODELS = [
    ("g1-h32", (2, 2, 2, 32, 45, 1e6, False), (2, 3, 12, 50, (64, 64))),
    ("g2-h28", (2, 2, 1, 28, 75, 1e4, False), (1, 5, 8, 37, (64, 64))),
    ("g3-h48", (1, 3, 1, 48, 99, 1e6, False), (3, 3, 20, 90, (16, 12))),
    ("g4-h48", (2, 4, 1, 48, 57, 1e6, True), (2, 7, 4, 43, (64, 64))),
    ("g5-h60", (2, 5, 1, 60, 101, 1e4, False), (2, 1, 36, 66, (6, 10))),
    ("g7-h56", (1, 7, 1, 56, 85, 1e6, False), (3, 2, 16, 53, (64, 64))),
    ("g8-h64", (2, 8, 1, 64, 93, 1e6, False), (2, 5, 12, 77, (16, 12))),
    ("g3-h72", (3, 6, 2, 72, 109, 1e6, False), (4, 3, 8, 70, (64, 64))),
]


def load_official():
    if transformers.__version__ != "4.57.1":
        raise SystemExit(f"want transformers 4.57.1 (just laenv), got {transformers.__version__}")
    if not os.path.exists(os.path.join(SRC, "modeling_locateanything.py")):
        raise SystemExit("no .build/locany: run scripts/reference/fetch_locateanything.sh")
    sys.modules.setdefault("decord", types.ModuleType("decord"))
    sys.path.insert(0, os.path.dirname(SRC))
    cfgm = importlib.import_module("locany.configuration_locateanything")
    modm = importlib.import_module("locany.modeling_locateanything")
    return cfgm, modm


def sha256_f32(a):
    return hashlib.sha256(np.ascontiguousarray(a, dtype="<f4").tobytes()).hexdigest()


def f32(v):
    return float(str(np.float32(v)))


def make_config(cfgm, text, vision):
    layers, heads, kv, hidden, inter, theta, tie = text
    depth, vheads, vhd, vinter, (ph, pw) = vision
    if hidden % heads or (hidden // heads) % 2 or vhd % 4:
        raise SystemExit(f"head dims: text {hidden}/{heads}, vision {vhd}")
    cfg = cfgm.LocateAnythingConfig(
        vision_config=dict(model_type="moonvit", patch_size=14, init_pos_emb_height=ph, init_pos_emb_width=pw,
                           num_attention_heads=vheads, num_hidden_layers=depth, hidden_size=vheads * vhd,
                           intermediate_size=vinter, merge_kernel_size=[2, 2]),
        text_config=dict(architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=hidden,
                         intermediate_size=inter, num_hidden_layers=layers, num_attention_heads=heads,
                         num_key_value_heads=kv, vocab_size=VOCAB, rope_theta=theta, rms_norm_eps=1e-6,
                         max_position_embeddings=8192, sliding_window=8192, use_sliding_window=False,
                         tie_word_embeddings=tie, eos_token_id=IM_END, bos_token_id=151643, hidden_act="silu"),
        image_token_index=IMG_CONTEXT,
        template="qwen2-chat",
    )
    cfg.tie_word_embeddings = tie
    return cfg


def build_cases(tok):
    cases = []
    for image, h, w in IMAGES:
        n = (h // 2) * (w // 2)
        for order in ORDERS:
            q = QUESTIONS[image]
            tag = "<image 1>"
            if order == "image_first":
                before, after = SYSTEM + "<|im_start|>user\n" + tag, q + "<|im_end|>\n<|im_start|>assistant\n"
            else:
                before, after = SYSTEM + "<|im_start|>user\n" + q + tag, "<|im_end|>\n<|im_start|>assistant\n"
            tb, ta = tok(before)["input_ids"], tok(after)["input_ids"]
            if any(i >= 151643 and i not in (151644, 151645) for i in tb + ta):
                raise SystemExit(f"{image}/{order}: the text tokenized to an added token")
            ids = tb + [IMG_START] + [IMG_CONTEXT] * n + [IMG_END] + ta
            cases.append({"name": f"{image}/{order}", "image": image, "order": order, "input_ids": ids})
    return cases


class IdsTokenizer:
    """What generate() asks of a tokenizer: its length bound, and batch_decode (here the ids back)."""

    model_max_length = 1 << 20

    def batch_decode(self, ids, skip_special_tokens=False):
        return [row.tolist() for row in ids]

    def decode(self, ids, skip_special_tokens=False):
        return str(list(ids))


def check_rotary(model):
    """The legacy Qwen2RotaryEmbedding's cached cos/sin must be what its inv_freq gives (a
    meta-device build leaves them garbage)."""
    for layer in model.language_model.model.layers:
        rot = layer.self_attn.rotary_emb
        t = torch.arange(rot.max_seq_len_cached, dtype=rot.inv_freq.dtype)
        inv = 1.0 / (rot.base ** (torch.arange(0, rot.dim, 2).float() / rot.dim))
        emb = torch.cat([torch.outer(t, inv)] * 2, dim=-1)
        if not (torch.equal(rot.inv_freq, inv) and torch.equal(rot.cos_cached, emb.cos()) and torch.equal(rot.sin_cached, emb.sin())):
            raise SystemExit("the decoder's rotary tables differ from their recomputation")


def vision_rows(model, pixels, grid):
    """The engine's EncodeVision rows: mlp1 over the merged MoonViT output."""
    px = torch.from_numpy(pixels).reshape(-1, 3, 14, 14)
    hw = torch.tensor([[grid[1], grid[2]]], dtype=torch.int32)
    feats = model.extract_feature(px, hw)
    return model.mlp1(torch.cat(feats, dim=0))


def step_logits(model, ids, vit):
    out = model.language_model(input_ids=torch.tensor([ids]), visual_features=vit, image_token_index=IMG_CONTEXT,
                               use_cache=False)
    return out.logits[0, -1].float()


def run_case(model, case, pixels, grid):
    ids = torch.tensor([case["input_ids"]])
    hw = np.array([[grid[1], grid[2]]])
    saved = model.token_ids["im_end_token_id"]
    model.token_ids["im_end_token_id"] = -1  # the stop switched off: every case runs MAX_NEW_TOKENS steps
    try:
        with torch.no_grad():
            tokens = model.generate(pixel_values=torch.from_numpy(pixels).reshape(-1, 3, 14, 14), input_ids=ids,
                                    image_grid_hws=hw, tokenizer=IdsTokenizer(), use_cache=True,
                                    max_new_tokens=MAX_NEW_TOKENS, generation_mode="slow", temperature=0,
                                    repetition_penalty=1.0)
    finally:
        model.token_ids["im_end_token_id"] = saved
    if len(tokens) != MAX_NEW_TOKENS:
        raise SystemExit(f"generate returned {len(tokens)} tokens")
    margins, first = [], None
    with torch.no_grad():
        vit = vision_rows(model, pixels, grid)
        for step in range(MAX_NEW_TOKENS):
            lg = step_logits(model, case["input_ids"] + tokens[:step], vit)
            top2 = torch.topk(lg, 2)
            if int(top2.indices[0]) != tokens[step]:
                raise SystemExit(f"step {step}: generate chose {tokens[step]}, the logits' argmax is {int(top2.indices[0])}")
            margins.append(float(top2.values[0] - top2.values[1]))
            if step == 0:
                first = lg.numpy()
    order = np.argsort(-first, kind="stable")
    kept = sorted(set(order[:TOP_K].tolist()) | set(range(0, first.shape[0], STRIDE)))
    return {"case": case["name"], "tokens": tokens, "min_margin": f32(min(margins)), "argmax": int(order[0]),
            "logit_ids": kept, "logit_values": [f32(first[i]) for i in kept]}


def summary(text, vision):
    layers, heads, kv, hidden, inter, theta, tie = text
    depth, vheads, vhd, vinter, (ph, pw) = vision
    return {"layers": layers, "heads": heads, "kv_heads": kv, "head_dim": hidden // heads, "hidden": hidden,
            "intermediate": inter, "rope_theta": theta, "tied": tie, "vision_depth": depth, "vision_heads": vheads,
            "vision_hidden": vheads * vhd, "vision_intermediate": vinter, "pos_emb": [ph, pw]}


def make_model(cfgm, modm, index, name, text, vision, cases, pixels, work):
    seed = SEED + index
    config = make_config(cfgm, text, vision)
    torch.manual_seed(0)
    model = modm.LocateAnythingForConditionalGeneration(config)
    model.eval()
    state = model.state_dict()
    if text[6]:  # tied: the head is the embedding, saved once
        state.pop("language_model.lm_head.weight")
    seeded = {k: torch.from_numpy(seeded_tensor(seed, k, list(v.shape))) for k, v in sorted(state.items())}
    missing, unexpected = model.load_state_dict(seeded, strict=False)
    if unexpected or [k for k in missing if k != "language_model.lm_head.weight"]:
        raise SystemExit(f"{name}: loading the seeded weights: {missing} {unexpected}")
    if text[6]:
        model.language_model.lm_head.weight = model.language_model.model.embed_tokens.weight
    check_rotary(model)
    manifest = [{"name": k, "shape": list(v.shape), "sum": float(np.sum(v.numpy(), dtype=np.float64)),
                 "sha256": sha256_f32(v.numpy())} for k, v in seeded.items()]
    cfg_json = json.loads(config.to_json_string(use_diff=False))
    cfg_json["architectures"] = ["LocateAnythingForConditionalGeneration"]
    vision_out = []
    grids = {im: [1, h, w] for im, h, w in IMAGES}
    with torch.no_grad():
        for image, grid in grids.items():
            v = vision_rows(model, pixels[image], grid).double().numpy()
            vision_out.append({"image": image, "rows": v.shape[0], "dim": v.shape[1], "sum": float(v.sum()),
                               "sumabs": float(np.abs(v).sum())})
    results = []
    for case in cases:
        r = run_case(model, case, pixels[case["image"]], grids[case["image"]])
        if r["min_margin"] < MIN_MARGIN:
            raise SystemExit(f"{name} {case['name']}: greedy margin {r['min_margin']:.3g} below {MIN_MARGIN}")
        if len(set(r["tokens"])) == 1:
            raise SystemExit(f"{name} {case['name']}: degenerate greedy answer {r['tokens']}")
        print(f"{name} {case['name']}: margin {r['min_margin']:.3g} tokens {r['tokens']}", flush=True)
        results.append(r)
    return {"name": name, "seed": seed, "summary": summary(text, vision), "config": cfg_json, "tensors": manifest,
            "vision": vision_out, "results": results}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", help="comma-separated model names (a quick look; writes nothing)")
    args = ap.parse_args()
    cfgm, modm = load_official()
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    tok = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    cases = build_cases(tok)
    pixels, images = {}, []
    for image, h, w in IMAGES:
        px = seeded_pixels(SEED, image, h * w, 3 * 14 * 14)
        pixels[image] = px
        images.append({"name": image, "grid": [1, h, w], "sha256": sha256_f32(px)})
    only = set(args.only.split(",")) if args.only else None
    models = []
    with tempfile.TemporaryDirectory() as work:
        for i, (name, text, vision) in enumerate(MODELS):
            if only is None or name in only:
                models.append(make_model(cfgm, modm, i, name, text, vision, cases, pixels, work))
    if only is not None:
        return
    golden = {
        "meta": {"generator": "scripts/reference/make_sweep_locateanything.py", "transformers": transformers.__version__,
                 "torch": torch.__version__, "max_new_tokens": MAX_NEW_TOKENS,
                 "semantics": "fp32 reference from seeded F32 weights; the official slow mode, temperature 0, "
                              "repetition_penalty 1.0, <|im_end|> never stops",
                 "reference": "NVlabs/Eagle 783f656d Embodied/eaglevl/utils/locany"},
        "seed": SEED,
        "pixel_rule": "0.15 + 1.95u under the name pixels/<image>",
        "images": images,
        "cases": [{k: c[k] for k in ("name", "image", "order", "input_ids")} for c in cases],
        "models": models,
    }
    with open(OUT, "w") as f:
        json.dump(golden, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)")


if __name__ == "__main__":
    sys.exit(main())
