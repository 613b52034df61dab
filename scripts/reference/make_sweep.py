#!/usr/bin/env python3
"""Build the engine's shape sweep goldens: transformers' outputs for tiny checkpoints of many
shapes, whose weights come from a seeded generator instead of a committed file.

One golden a family (--family): qwen2_5_vl (the default) writes
core/internal/enginetest/testdata/sweep/golden.json, qwen3_vl writes .../sweep/qwen3_vl.json, internvl
.../sweep/internvl.json, phi4_multimodal .../sweep/phi4_multimodal.json.

Run with the reference stack (`just sweep-golden`, i.e. .build/refenv/bin/python). CI never runs
this: it reads the goldens, regenerates each checkpoint with the same generator in Go
(core/internal/enginetest/fixture/seeded.go) and compares the engine with the outputs recorded here.

Why seeded: a checkpoint with the real 151936-token vocabulary is 10-100 MB, and a sweep needs a
dozen of them; the generator (seeded.py) is a few lines in both languages and bit-identical in both.

  u(name, i) = top 24 bits of splitmix64((seed ^ fnv1a64(name)) + i), mapped to [-1, 1) exactly,
  times a per-tensor scale (norm gains 1 + 0.1u, biases 0.05u, matrices u * sqrt(3 / fan_in), a
  zero-mean final norm gain, ...): seeded.py, the module shared with make_fixtures.py and
  golden_served.py, has the table and why each scale.

The sweep checkpoints store the float32 values (F32). Pixel values use the same generator under the
name "pixels/<image>" with value 0.15 + 1.95u (the range of normalised CLIP pixels): rows of
channels x frames x patch x patch values, for InternVL the rows of its 448-pixel tiles (Grid.T
tiles of 32x32 patches in raster order, 3 x 14 x 14 values a row), which the script reassembles
into the tiles' pixel_values for the reference.

InternVL's prompts are the -hf chat template's rendering (no system turn, `<IMG_CONTEXT>\n` for
the image) with the processor's expansion `<img>` + `<IMG_CONTEXT>` x 256 a tile + `</img>`; the
text between the spans is tokenized with the Qwen vocabulary (the InternVL3 -hf tokenizer's, whose
added tokens `<img>` 151665, `</img>` 151666 and `<IMG_CONTEXT>` 151667 split it the same way).

Phi-4-multimodal's images are the processor's views (the global view, then the crops row-major,
448 pixels each) with each view's patch mask and, past one crop, its place on the canvas, recorded
per image for the engine's model.Image; the reference gets them as image_pixel_values,
image_attention_mask and image_sizes. Its prompts are Phi-4's chat format with the placeholder
expanded to num_img_tokens, tokenized with .build/tokenizer/phi4; the models run eager attention
(on the default SDPA path an unpadded image's tower turns causal, families.md §11), and their
audio tower's tensors are left out of the checkpoints (the family binds none; transformers
initialises them itself, unused by image prompts).

The golden holds, per model: the config.json transformers writes, the tensor manifest (name,
shape, float64 sum and sha256 of the little-endian float32 bytes), and per case the greedy tokens
(EOS never stops), the smallest top-1/top-2 margin, the first-step argmax and a subset of the
first-step logits; per image the vision tower's output shape and sums (to tell a vision bug from
a text one). For Qwen3-VL that output is what the engine's EncodeVision returns: per image token one
row of the merger's output followed by each deepstack feature, out_hidden * (1 + deepstack) wide.

`--only a,b` regenerates some models and writes nothing; with `--check` it compares each one's
record, byte for byte, with the committed golden's (a cheap check that the script still writes
the same golden).
"""

import argparse
import hashlib
import json
import math
import os
import shutil
import struct
import sys
import tempfile
from dataclasses import dataclass

import numpy as np
import torch
from safetensors.numpy import save_file
from transformers import (
    AutoTokenizer,
    InternVLConfig,
    InternVLForConditionalGeneration,
    Phi4MultimodalConfig,
    Phi4MultimodalForCausalLM,
    Qwen2_5_VLConfig,
    Qwen2_5_VLForConditionalGeneration,
    Qwen3VLConfig,
    Qwen3VLForConditionalGeneration,
)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_preprocess import QWEN2_VL_TEMPLATE, QWEN3_VL_TEMPLATE  # noqa: E402 (the chat templates)
from seeded import seeded_pixels, seeded_tensor  # noqa: E402 (the seeded rule, shared with Go)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOKENIZER_DIR = os.path.join(ROOT, ".build", "tokenizer", "qwen3")
SWEEP_DIR = os.path.join(ROOT, "core", "internal", "enginetest", "testdata", "sweep")
OUT = os.path.join(SWEEP_DIR, "golden.json")

SEED = 20261201
MAX_NEW_TOKENS = 8
# Logits kept per case: the top TOP_K ids plus every STRIDE-th id of the vocabulary.
TOP_K = 64
STRIDE = 1499
# A case whose greedy margin is below this would make token parity a coin toss; refuse it.
MIN_MARGIN = 1e-3

IMAGE_TOKEN = "<|image_pad|>"
IMAGE_TOKEN_ID = 151655

# What the Qwen2.5-VL hub chat template renders for one user turn (make_fixtures.py CHAT_TEMPLATE).
SYSTEM = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
VISION = "<|vision_start|>" + IMAGE_TOKEN + "<|vision_end|>"

# (name, grid h, grid w) in patches of 14 px, t = 1: an extreme aspect ratio with an odd number of
# merged columns (partial windows everywhere), a small one, and one of 32x33 = 1056 image tokens.
IMAGES = [
    ("wide_4x202", 4, 202),
    ("small_4x6", 4, 6),
    ("large_64x66", 64, 66),
]
QUESTIONS = {
    "wide_4x202": "Read the text in the banner.",
    "small_4x6": "What is it?",
    "large_64x66": "List every object you can find, from left to right, with its colour. 这是什么？",
}
ORDERS = ["image_first", "question_first"]

# name: text (layers, heads, kv_heads, head_dim, intermediate, mrope_section, rope_theta, tied),
#       vision (depth, heads, head_dim, intermediate, window_size, fullatt_block_indexes).
# hidden = heads * head_dim; vision hidden = heads * head_dim (a multiple of 4 per head).
MODELS = [
    ("g1-h30", (2, 3, 3, 10, 45, [1, 2, 2], 1e6, False), (2, 3, 12, 50, 112, [1])),
    ("g2-h28", (2, 2, 1, 14, 75, [3, 2, 2], 1e4, True), (1, 5, 4, 37, 56, [0])),
    ("g3-h54", (1, 3, 1, 18, 99, [3, 3, 3], 1e6, False), (3, 3, 20, 90, 168, [1])),
    ("g4-h24", (2, 4, 1, 6, 57, [1, 1, 1], 1e6, True), (4, 7, 4, 43, 112, [0, 3])),
    ("g5-h70", (2, 5, 1, 14, 101, [2, 2, 3], 1e4, False), (2, 1, 36, 66, 84, [0])),
    ("g7-h42", (1, 7, 1, 6, 85, [2, 1, 0], 1e6, True), (3, 3, 12, 53, 56, [2])),
    ("g8-h48", (2, 8, 1, 6, 93, [1, 1, 1], 1e6, False), (2, 5, 12, 77, 112, [])),
    ("g1-h22", (2, 1, 1, 22, 61, [5, 3, 3], 1e4, True), (1, 1, 12, 30, 224, [])),
    ("g2-h60", (3, 6, 3, 10, 109, [2, 1, 2], 1e6, False), (4, 3, 12, 70, 112, [1, 2])),
    ("g3-h54b", (2, 9, 3, 6, 83, [1, 1, 1], 1e6, True), (2, 7, 4, 59, 168, [0])),
    ("g4-h80", (2, 8, 2, 10, 125, [1, 2, 2], 1e4, False), (3, 5, 4, 46, 56, [0, 2])),
    ("g5-h60", (2, 10, 2, 6, 95, [3, 0, 0], 1e6, True), (1, 3, 4, 27, 84, [0])),
    ("g7-h84", (2, 14, 2, 6, 131, [0, 1, 2], 1e6, False), (4, 1, 28, 41, 168, [3])),
    ("g1-h68", (1, 2, 2, 34, 63, [9, 4, 4], 1e6, True), (2, 3, 28, 63, 28, [])),
]

# Qwen3-VL (families.md §2): its own seed, images in patches of 16 px and models.
QWEN3_SEED = 20261215
# (name, grid h, grid w) in patches of 16 px, t = 1: an extreme aspect ratio with an odd number of
# merged columns (the learned 48x48 position grid stretched along w and squeezed along h), a small
# one, and one of 17x23 = 391 image tokens.
QWEN3_IMAGES = [
    ("wide_4x202", 4, 202),
    ("small_4x6", 4, 6),
    ("large_34x46", 34, 46),
]
QWEN3_QUESTIONS = {
    "wide_4x202": "Read the text in the banner.",
    "small_4x6": "What is it?",
    "large_34x46": "List every object you can find, from left to right, with its colour. 这是什么？",
}

# name: text (layers, heads, kv_heads, head_dim, hidden, intermediate, mrope_section, rope_theta, tied),
#       vision (depth, heads, head_dim, intermediate, deepstack_visual_indexes, num_position_embeddings).
# Qwen3 honours head_dim, so hidden is free of heads * head_dim; vision hidden = heads * head_dim
# (a multiple of 4 per head). mrope_section sums to head_dim / 2 with interleaved sections: h and
# w take the frequencies 1, 4, 7, ... and 2, 5, 8, ... below 3 * their section, t the rest, and
# every section here fits (3 * h - 2 and 3 * w - 1 below head_dim / 2) so no slice is cut short.
# Deepstack indexes are vision blocks (< depth), at most one per text layer; the vision tower's
# out_hidden is the text hidden.
QWEN3_MODELS = [
    ("g1-h30", (2, 3, 3, 10, 30, 45, [2, 2, 1], 5e6, False), (2, 3, 12, 50, [0, 1], 2304)),
    ("g2-h28-d16", (2, 2, 1, 16, 28, 75, [3, 3, 2], 1e6, True), (1, 5, 4, 37, [0], 2304)),
    ("g3-h54", (1, 3, 1, 18, 54, 99, [5, 2, 2], 5e6, False), (3, 3, 20, 90, [1], 2304)),
    ("g4-h44-d8", (2, 4, 1, 8, 44, 57, [2, 1, 1], 5e6, True), (4, 7, 4, 43, [1, 3], 256)),
    ("g5-h70", (2, 5, 1, 14, 70, 101, [3, 2, 2], 1e4, False), (2, 1, 36, 66, [], 2304)),
    ("g7-h42", (1, 7, 1, 6, 42, 85, [1, 1, 1], 5e6, True), (3, 2, 16, 53, [2], 2304)),
    ("g8-h52-d10", (2, 8, 1, 10, 52, 93, [3, 1, 1], 1e6, False), (2, 5, 12, 77, [0], 1024)),
    ("g1-h22", (2, 1, 1, 22, 22, 61, [4, 4, 3], 5e5, True), (1, 1, 12, 30, [0], 2304)),
    ("g2-h60-d12", (3, 6, 3, 12, 60, 109, [2, 2, 2], 5e6, False), (4, 3, 24, 70, [0, 2, 3], 2304)),
    ("g3-h54b", (2, 9, 3, 6, 54, 83, [1, 1, 1], 1e6, True), (2, 7, 4, 59, [1], 2304)),
    ("g6-h66-d20", (2, 6, 1, 20, 66, 125, [4, 3, 3], 5e6, False), (3, 5, 8, 46, [0, 2], 2304)),
]

# InternVL3 -hf (families.md §3): its own seed; images are tiles of 448 pixels (32x32 patches of
# 14), Grid.T of them: one tile (max_patches = 1), a few (a small max_patches) and the 13 of a 4:3
# photo with the default tiling.
INTERNVL_SEED = 20261301
INTERNVL_TILE = 32  # patches a side
INTERNVL_IMAGES = [
    ("one_tile", 1, INTERNVL_TILE, INTERNVL_TILE),
    ("three_tiles", 3, INTERNVL_TILE, INTERNVL_TILE),
    ("six_tiles", 6, INTERNVL_TILE, INTERNVL_TILE),
    ("thirteen_tiles", 13, INTERNVL_TILE, INTERNVL_TILE),
]
INTERNVL_QUESTIONS = {
    "one_tile": "What is it?",
    "three_tiles": "Read the text in the banner.",
    "six_tiles": "Describe the picture in one sentence.",
    "thirteen_tiles": "List every object you can find, from left to right, with its colour. 这是什么？",
}
# The -hf chat template (tokenizer_config.json's chat_template of OpenGVLab/InternVL3-*-hf).
INTERNVL_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n'}}{% if message['content'] is string %}"
    "{{ message['content'] }}{% else %}{% for content in message['content'] %}{% if content['type'] == 'image' %}"
    "{{ '<IMG_CONTEXT>\\n' }}{% elif content['type'] == 'video' %}{{ '<video>\\n' }}{% elif content['type'] == 'text' %}"
    "{{ content['text'] }}{% endif %}{% endfor %}{% endif %}{{'<|im_end|>\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{'<|im_start|>assistant\\n' }}{% endif %}"
)
INTERNVL_IMG, INTERNVL_IMG_END, INTERNVL_CONTEXT = 151665, 151666, 151667

# name: text (layers, heads, kv_heads, head_dim (None: hidden / heads), hidden, intermediate,
#             rope_theta, tied),
#       vision (depth, heads, head_dim, intermediate, layer_norm_eps).
# The decoder is a Qwen2 (q/k/v biases, plain 1-D RoPE; head_dim even); the tower's width is
# heads * head_dim, any whole number (no rotary in InternViT), its out width the text hidden.
INTERNVL_MODELS = [
    ("g1-h30", (2, 3, 3, None, 30, 45, 1e6, False), (2, 3, 10, 50, 1e-6)),
    ("g2-h28", (2, 2, 1, None, 28, 75, 1e4, True), (1, 5, 6, 37, 1e-6)),
    ("g3-h54", (1, 3, 1, None, 54, 99, 1e6, False), (3, 3, 14, 90, 1e-5)),
    ("g4-h44-d8", (2, 4, 1, 8, 44, 57, 1e6, True), (2, 7, 4, 43, 1e-6)),
    ("g5-h70", (2, 5, 1, None, 70, 101, 1e4, False), (2, 1, 36, 66, 1e-6)),
    ("g7-h42", (1, 7, 1, None, 42, 85, 1e6, True), (3, 2, 9, 53, 1e-6)),
    ("g8-h48", (2, 8, 1, None, 48, 93, 1e6, False), (2, 5, 6, 77, 1e-6)),
    ("g1-h22", (2, 1, 1, None, 22, 61, 1e6, True), (1, 1, 12, 30, 1e-6)),
    ("g2-h60-d12", (3, 6, 3, 12, 60, 109, 1e6, False), (2, 3, 8, 70, 1e-6)),
    ("g3-h54b", (2, 9, 3, None, 54, 83, 1e6, True), (2, 7, 4, 59, 1e-6)),
]

# Phi-4-multimodal (families.md §4): its own seed and tokenizer (.build/tokenizer/phi4). An image
# is the processor's views: the global view, then rows x cols crops row-major, each 448 pixels
# (32x32 patches of 14, 3 x 14 x 14 values a row); the crops of the last column keep last_w
# valid patch columns and those of the last row last_h valid patch rows (the padding of a canvas
# the image does not fill: masked keys, stretched positions, a pooled cell half padding when the
# count is odd). Unpadded images are included: on transformers' default SDPA path their tower
# would turn causal (families.md §11), so the goldens run eager attention.
PHI4_SEED = 20261401
PHI4_TOKENIZER_DIR = os.path.join(ROOT, ".build", "tokenizer", "phi4")
PHI4_VIEW = 32  # patches a side
PHI4_IMAGE_TOKEN = "<|image|>"
PHI4_IMAGE_TOKEN_ID = 200010
# (name, rows, cols, last_w, last_h)
PHI4_IMAGES = [
    ("one_crop_padded", 1, 1, 32, 24),
    ("one_crop_full", 1, 1, 32, 32),
    ("wide_1x3", 1, 3, 19, 32),
    ("tall_3x1", 3, 1, 32, 7),
    ("grid_2x2_full", 2, 2, 32, 32),
    ("grid_3x3", 3, 3, 13, 27),
]
PHI4_QUESTIONS = {
    "one_crop_padded": "What is it?",
    "one_crop_full": "Describe the picture in one sentence.",
    "wide_1x3": "Read the text in the banner.",
    "tall_3x1": "What colour is the tower?",
    "grid_2x2_full": "How many windows are there?",
    "grid_3x3": "List every object you can find, from left to right, with its colour. 这是什么？",
}

# name: text (layers, heads, kv_heads, hidden, intermediate, partial_rotary_factor, rope, tied),
#       vision (depth, heads, head_dim, intermediate, feature_layer).
# head_dim = hidden / heads; rotated dims = int(head_dim * partial) (even), short and long factors
# one per rotated pair. rope: None (default RoPE, no factors) or (short, long, extra keys): the
# attention factor is derived from max_position_embeddings 131072 / original 4096 (1.19024...)
# unless extra gives one, another max_position_embeddings or another original_max_position_embeddings
# (both the top level's and the rope dict's).
def _factors(n, lo, hi):
    return [round(lo + (hi - lo) * i / max(n - 1, 1), 4) for i in range(n)]


PHI4_MODELS = [
    ("g1-h48-p75", (2, 3, 3, 48, 80, 0.75, ("ramp", "long", {}), False), (2, 2, 16, 50, -2)),
    ("g2-h64-p75", (2, 4, 2, 64, 96, 0.75, ("ramp", "long", {}), True), (3, 4, 16, 72, -2)),
    ("g3-h72-p50", (1, 6, 2, 72, 101, 0.5, ("ramp", "flat", {}), False), (4, 3, 12, 60, -2)),
    ("g4-h64-full", (2, 8, 2, 64, 94, 1.0, ("ramp", "long", {}), False), (2, 1, 24, 40, -2)),
    ("g8-h128-p75", (2, 8, 1, 128, 77, 0.75, ("ramp", "long", {}), True), (3, 2, 20, 66, -2)),
    ("g2-h40-default", (2, 4, 2, 40, 72, 0.6, None, False), (2, 3, 8, 45, -2)),
    ("g2-h96-given", (2, 6, 3, 96, 110, 0.75, ("ramp", "long", {"attention_factor": 1.3}), False), (3, 2, 18, 58, -1)),
    ("g5-h80-max", (2, 5, 1, 80, 85, 0.5, ("flat", "long", {"max_position_embeddings": 32768}), True), (4, 4, 8, 70, -3)),
    ("g4-h56-p57", (3, 4, 1, 56, 90, 0.5714285714285714, ("ramp", "long", {}), False), (2, 2, 14, 33, -2)),
    # original_max_position_embeddings 512: every prompt but one_crop_padded's (484 + 8 tokens)
    # passes it, so transformers prefills and decodes those with the long factors
    ("g3-h48-o512", (2, 6, 2, 48, 70, 0.75, ("ramp", "long", {"original_max_position_embeddings": 512}), False), (2, 2, 12, 40, -2)),
]


def sha256_f32(a):
    return hashlib.sha256(np.ascontiguousarray(a, dtype="<f4").tobytes()).hexdigest()


def f32(v):
    """The shortest decimal that reads back as the same float32."""
    return float(str(np.float32(v)))


def make_config(text, vision):
    layers, heads, kv, hd, inter, mrope, theta, tie = text
    depth, vheads, vhd, vinter, window, fullatt = vision
    return Qwen2_5_VLConfig(
        text_config=dict(
            hidden_size=heads * hd,
            intermediate_size=inter,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=kv,
            vocab_size=151936,
            rope_theta=theta,
            rms_norm_eps=1e-6,
            max_position_embeddings=4096,
            rope_scaling={"type": "mrope", "mrope_section": mrope},
            tie_word_embeddings=tie,
        ),
        vision_config=dict(
            depth=depth,
            hidden_size=vheads * vhd,
            intermediate_size=vinter,
            num_heads=vheads,
            out_hidden_size=heads * hd,
            window_size=window,
            fullatt_block_indexes=fullatt,
            tokens_per_second=2,
        ),
        tie_word_embeddings=tie,
    )


def qwen3_config(text, vision):
    layers, heads, kv, hd, hidden, inter, mrope, theta, tie = text
    depth, vheads, vhd, vinter, deepstack, npos = vision
    if sum(mrope) != hd // 2 or 3 * mrope[1] - 2 >= hd // 2 or 3 * mrope[2] - 1 >= hd // 2:
        raise SystemExit(f"mrope_section {mrope}: must sum to head_dim/2 = {hd // 2} and fit it interleaved")
    if len(deepstack) > layers or any(not 0 <= b < depth for b in deepstack) or deepstack != sorted(set(deepstack)):
        raise SystemExit(f"deepstack_visual_indexes {deepstack}: sorted blocks below {depth}, at most {layers}")
    if vhd % 4 or math.isqrt(npos) ** 2 != npos:
        raise SystemExit(f"vision head_dim {vhd} (a multiple of 4), num_position_embeddings {npos} (a square)")
    return Qwen3VLConfig(
        text_config=dict(
            hidden_size=hidden,
            intermediate_size=inter,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=kv,
            head_dim=hd,
            vocab_size=151936,
            rms_norm_eps=1e-6,
            max_position_embeddings=4096,
            rope_parameters={"rope_type": "default", "rope_theta": theta, "mrope_section": mrope, "mrope_interleaved": True},
        ),
        vision_config=dict(
            depth=depth,
            hidden_size=vheads * vhd,
            intermediate_size=vinter,
            num_heads=vheads,
            out_hidden_size=hidden,
            patch_size=16,
            spatial_merge_size=2,
            temporal_patch_size=2,
            hidden_act="gelu_pytorch_tanh",
            num_position_embeddings=npos,
            deepstack_visual_indexes=deepstack,
        ),
        # Qwen3VLConfig does not forward text_config's tie_word_embeddings: the top level decides.
        tie_word_embeddings=tie,
    )


def internvl_config(text, vision):
    layers, heads, kv, hd, hidden, inter, theta, tie = text
    depth, vheads, vhd, vinter, eps = vision
    if (hd or hidden // heads) % 2 or (hd is None and hidden % heads):
        raise SystemExit(f"text head_dim {hd} of hidden {hidden} over {heads} heads: a whole, even number")
    text_config = dict(
        model_type="qwen2",
        hidden_size=hidden,
        intermediate_size=inter,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        vocab_size=151674,
        rms_norm_eps=1e-6,
        max_position_embeddings=8192,
        rope_parameters={"rope_type": "default", "rope_theta": theta},
        tie_word_embeddings=tie,
    )
    if hd is not None:
        text_config["head_dim"] = hd
    return InternVLConfig(
        text_config=text_config,
        vision_config=dict(
            hidden_size=vheads * vhd,
            num_hidden_layers=depth,
            num_attention_heads=vheads,
            intermediate_size=vinter,
            layer_norm_eps=eps,
            attention_bias=True,
            image_size=[14 * INTERNVL_TILE] * 2,
            patch_size=[14, 14],
        ),
        # InternVLConfig ties by its top level alone (default true).
        tie_word_embeddings=tie,
    )


def phi4_config(text, vision):
    layers, heads, kv, hidden, inter, partial, rope, tie = text
    depth, vheads, vhd, vinter, feature = vision
    hd = hidden // heads
    rot = int(hd * partial)
    if hidden % heads or rot % 2 or rot <= 0:
        raise SystemExit(f"head_dim {hd} of hidden {hidden} over {heads} heads, {rot} rotated dims: whole, even")
    half = rot // 2
    params = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": partial}
    extra = {}
    if rope is not None:
        short, long, extra = rope
        params = {
            "rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": partial,
            "short_factor": _factors(half, 1.0, 2.5) if short == "ramp" else [1.25] * half,
            "long_factor": _factors(half, 1.0, 40.0) if long == "long" else [3.0] * half,
            "original_max_position_embeddings": extra.get("original_max_position_embeddings", 4096),
        }
        if "attention_factor" in extra:
            params["attention_factor"] = extra["attention_factor"]
    return Phi4MultimodalConfig(
        hidden_size=hidden,
        intermediate_size=inter,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        vocab_size=200064,
        max_position_embeddings=extra.get("max_position_embeddings", 131072),
        original_max_position_embeddings=extra.get("original_max_position_embeddings", 4096),
        rope_parameters=params,
        tie_word_embeddings=tie,
        vision_config=dict(
            hidden_size=vheads * vhd,
            intermediate_size=vinter,
            num_hidden_layers=depth,
            num_attention_heads=vheads,
            feature_layer=feature,
        ),
        # the smallest audio tower the config takes: not run (image prompts), its tensors left
        # out of the checkpoint (make_model)
        audio_config=dict(hidden_size=32, intermediate_size=64, num_blocks=1, num_attention_heads=2,
                          nemo_conv_channels=32, ext_pw_out_channel=32, depthwise_separable_out_channel=32),
    )


def phi4_views(rows, cols, last_w, last_h):
    """Each view's patch mask [x, y, w, h] (the global view first, then the crops row-major) and,
    for more than one crop, each view's place on the canvas in patches (the global view's the zero
    rectangle): what the plugin's plan gives the engine."""
    masks = [[0, 0, PHI4_VIEW, PHI4_VIEW]]
    tiles = [[0, 0, 0, 0]]
    for r in range(rows):
        for c in range(cols):
            masks.append([0, 0, last_w if c == cols - 1 else PHI4_VIEW, last_h if r == rows - 1 else PHI4_VIEW])
            tiles.append([c * PHI4_VIEW, r * PHI4_VIEW, PHI4_VIEW, PHI4_VIEW])
    return masks, (tiles if rows * cols > 1 else None)


def phi4_tokens(rows, cols, last_w, last_h):
    """num_img_tokens: 256 + 16 (the global view's rows and separators) + 1 + the stitched crops'
    kept cells with a separator after each row."""
    kept = lambda n: (n + 1) // 2  # noqa: E731  (mask[0::2, 0::2])
    h = (rows - 1) * (PHI4_VIEW // 2) + kept(last_h)
    w = (cols - 1) * (PHI4_VIEW // 2) + kept(last_w)
    side = PHI4_VIEW // 2
    return h * (w + 1) + 1 + side * (side + 1)


def phi4_inputs_of(spec, pixels):
    """The processor's image inputs for the views' pixel rows."""
    _, rows, cols, last_w, last_h = spec
    views = 1 + rows * cols
    masks, _ = phi4_views(rows, cols, last_w, last_h)
    am = torch.zeros(1, views, PHI4_VIEW, PHI4_VIEW, dtype=torch.long)
    for v, (x, y, w, h) in enumerate(masks):
        am[0, v, y : y + h, x : x + w] = 1
    pv = internvl_tiles(pixels, [views, PHI4_VIEW, PHI4_VIEW]).unsqueeze(0)
    return {
        "image_pixel_values": pv,
        "image_attention_mask": am,
        "image_sizes": torch.tensor([[448 * rows, 448 * cols]]),
    }


PHI4_SPECS = {im[0]: im for im in PHI4_IMAGES}


def phi4_inputs(ids, pixels, grid, image):
    return phi4_inputs_of(PHI4_SPECS[image], pixels)


def phi4_vision(model, pixels, grid, image):
    """The engine's EncodeVision rows: Phi4MultimodalImageEmbedding's projected rows in the
    order they fill the image's placeholders (sub-crop rows, glb_GN, global rows)."""
    spec = PHI4_SPECS[image]
    n = phi4_tokens(*spec[1:])
    emb = model.model.embed_tokens_extend.image_embed
    hidden = model.config.hidden_size
    out = emb(torch.full((1, n), PHI4_IMAGE_TOKEN_ID), torch.zeros(1, n, hidden), **phi4_inputs_of(spec, pixels))
    return out[0]


def phi4_summary(text, vision):
    layers, heads, kv, hidden, inter, partial, rope, tie = text
    depth, vheads, vhd, vinter, feature = vision
    return {
        "layers": layers, "heads": heads, "kv_heads": kv, "head_dim": hidden // heads, "hidden": hidden,
        "intermediate": inter, "partial_rotary_factor": partial, "rotated_dims": int(hidden // heads * partial),
        "rope": "default" if rope is None else {"short": rope[0], "long": rope[1], **rope[2]}, "tied": tie,
        "vision_depth": depth, "vision_heads": vheads, "vision_hidden": vheads * vhd,
        "vision_intermediate": vinter, "feature_layer": feature,
    }


def qwen25_vision(model, pixels, grid):
    v = model.model.get_image_features(torch.from_numpy(pixels), torch.tensor([grid])).pooler_output
    return torch.cat(v, dim=0)


def qwen3_vision(model, pixels, grid):
    """The engine's EncodeVision row per image token: the merger's output, then each deepstack
    feature in order."""
    out = model.model.get_image_features(torch.from_numpy(pixels), torch.tensor([grid]))
    return torch.cat([torch.cat(out.pooler_output, dim=0)] + list(out.deepstack_features), dim=1)


def internvl_tiles(pixels, grid):
    """The pixel rows (tile-major, patches in raster order, C x 14 x 14 values a row) as the
    tiles' pixel_values [tiles, 3, 448, 448]."""
    t, h, w = grid
    p = int(math.isqrt(pixels.shape[1] // 3))
    x = pixels.reshape(t, h, w, 3, p, p).transpose(0, 3, 1, 4, 2, 5)
    return torch.from_numpy(np.ascontiguousarray(x.reshape(t, 3, h * p, w * p)))


def internvl_vision(model, pixels, grid):
    """The engine's EncodeVision rows: the projector's output, tile after tile, 256 tokens each."""
    out = model.model.get_image_features(internvl_tiles(pixels, grid)).pooler_output
    return out.reshape(-1, out.shape[-1])


def qwen_inputs(ids, pixels, grid):
    return {
        "mm_token_type_ids": (ids == IMAGE_TOKEN_ID).to(torch.int32),
        "pixel_values": torch.from_numpy(pixels),
        "image_grid_thw": torch.tensor([grid]),
    }


def internvl_inputs(ids, pixels, grid):
    return {"pixel_values": internvl_tiles(pixels, grid)}


def qwen25_summary(text, vision):
    layers, heads, kv, hd, inter, mrope, theta, tie = text
    depth, vheads, vhd, vinter, window, fullatt = vision
    return {
        "layers": layers, "heads": heads, "kv_heads": kv, "head_dim": hd, "hidden": heads * hd,
        "intermediate": inter, "mrope_section": mrope, "rope_theta": theta, "tied": tie,
        "vision_depth": depth, "vision_heads": vheads, "vision_hidden": vheads * vhd,
        "vision_intermediate": vinter, "window_size": window, "fullatt_block_indexes": fullatt,
    }


def qwen3_summary(text, vision):
    layers, heads, kv, hd, hidden, inter, mrope, theta, tie = text
    depth, vheads, vhd, vinter, deepstack, npos = vision
    return {
        "layers": layers, "heads": heads, "kv_heads": kv, "head_dim": hd, "hidden": hidden,
        "intermediate": inter, "mrope_section": mrope, "rope_theta": theta, "tied": tie,
        "vision_depth": depth, "vision_heads": vheads, "vision_hidden": vheads * vhd,
        "vision_intermediate": vinter, "deepstack_visual_indexes": deepstack, "num_position_embeddings": npos,
    }


def internvl_summary(text, vision):
    layers, heads, kv, hd, hidden, inter, theta, tie = text
    depth, vheads, vhd, vinter, eps = vision
    return {
        "layers": layers, "heads": heads, "kv_heads": kv, "head_dim": hd or hidden // heads, "hidden": hidden,
        "intermediate": inter, "rope_theta": theta, "tied": tie,
        "vision_depth": depth, "vision_heads": vheads, "vision_hidden": vheads * vhd,
        "vision_intermediate": vinter, "vision_layer_norm_eps": eps,
    }


@dataclass
class Family:
    """What differs between the families' sweeps."""

    out: str
    generator: str
    seed: int
    # The turns before the user's (a default system turn), and the chat template that renders it.
    system: str
    template: str
    # (name, grid h, grid w) with t = 1, or (name, t, h, w)
    images: list
    questions: dict
    models: list
    config: callable
    model_class: type
    vision: callable
    summary: callable
    # the width of a pixel row (channels x frames x patch x patch)
    patch_dim: int = 0
    # the prompt cases (build_cases) and the model's inputs beside input_ids (qwen_inputs)
    cases: callable = None
    inputs: callable = None
    # the tokenizer's directory, generate's pad id, transformers' attention implementation
    tokenizer: str = TOKENIZER_DIR
    pad_id: int = 151643
    attn: str = None
    # per image name: its views' patch masks and tile places ([x, y, w, h] lists, None for
    # none), recorded in the golden for the engine's model.Image
    views: callable = None
    # a checkpoint tensor the sweep leaves out (names the family binds none of)
    skip: callable = None

    def grids(self):
        """(name, [t, h, w]) of every image."""
        return [(im[0], list(im[1:]) if len(im) == 4 else [1, im[1], im[2]]) for im in self.images]


FAMILIES = {
    "qwen2_5_vl": Family(
        out=OUT, generator="scripts/reference/make_sweep.py", seed=SEED,
        system=SYSTEM, template=QWEN2_VL_TEMPLATE, images=IMAGES, questions=QUESTIONS, models=MODELS,
        config=make_config, model_class=Qwen2_5_VLForConditionalGeneration, vision=lambda m, p, g, _: qwen25_vision(m, p, g),
        summary=qwen25_summary, patch_dim=3 * 2 * 14 * 14,
    ),
    # No default system turn (families.md §2.4).
    "qwen3_vl": Family(
        out=os.path.join(SWEEP_DIR, "qwen3_vl.json"), generator="scripts/reference/make_sweep.py --family qwen3_vl",
        seed=QWEN3_SEED, system="", template=QWEN3_VL_TEMPLATE, images=QWEN3_IMAGES,
        questions=QWEN3_QUESTIONS, models=QWEN3_MODELS, config=qwen3_config,
        model_class=Qwen3VLForConditionalGeneration, vision=lambda m, p, g, _: qwen3_vision(m, p, g), summary=qwen3_summary,
        patch_dim=3 * 2 * 16 * 16,
    ),
    # No system turn; tiles of 448 pixels, Conv2d patches of 14 (families.md §3).
    "internvl": Family(
        out=os.path.join(SWEEP_DIR, "internvl.json"), generator="scripts/reference/make_sweep.py --family internvl",
        seed=INTERNVL_SEED, system="", template=INTERNVL_TEMPLATE, images=INTERNVL_IMAGES,
        questions=INTERNVL_QUESTIONS, models=INTERNVL_MODELS, config=internvl_config,
        model_class=InternVLForConditionalGeneration, vision=lambda m, p, g, _: internvl_vision(m, p, g),
        summary=internvl_summary, patch_dim=3 * 14 * 14, cases=lambda fam, tok: internvl_cases(fam, tok),
        inputs=lambda ids, p, g, _: internvl_inputs(ids, p, g),
    ),
    # No system turn; the processor's views with their masks and places (families.md §4), eager
    # attention (§11), the audio tower's tensors left out.
    "phi4_multimodal": Family(
        out=os.path.join(SWEEP_DIR, "phi4_multimodal.json"),
        generator="scripts/reference/make_sweep.py --family phi4_multimodal", seed=PHI4_SEED, system="",
        template=None, images=[(im[0], 1 + im[1] * im[2], PHI4_VIEW, PHI4_VIEW) for im in PHI4_IMAGES],
        questions=PHI4_QUESTIONS, models=PHI4_MODELS, config=phi4_config, model_class=Phi4MultimodalForCausalLM,
        vision=phi4_vision, summary=phi4_summary, patch_dim=3 * 14 * 14, cases=lambda fam, tok: phi4_cases(fam, tok),
        inputs=phi4_inputs, tokenizer=PHI4_TOKENIZER_DIR, pad_id=199999, attn="eager",
        views=lambda image: phi4_views(*PHI4_SPECS[image][1:]),
        skip=lambda name: ".audio_embed." in name,
    ),
}


def read_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return {k: v["shape"] for k, v in header.items()}


def build_cases(fam, tok):
    if fam.cases is not None:
        return fam.cases(fam, tok)
    cases = []
    for image, (_, h, w) in fam.grids():
        n = (h // 2) * (w // 2)
        for order in ORDERS:
            q = fam.questions[image]
            body = VISION + q if order == "image_first" else q + VISION
            prompt = fam.system + "<|im_start|>user\n" + body + "<|im_end|>\n<|im_start|>assistant\n"
            # The family's chat template renders the same turn.
            parts = [{"type": "image"}, {"type": "text", "text": q}]
            if order != "image_first":
                parts.reverse()
            rendered = tok.apply_chat_template([{"role": "user", "content": parts}], chat_template=fam.template,
                                               tokenize=False, add_generation_prompt=True)
            if rendered != prompt:
                raise SystemExit(f"{image}/{order}: the chat template renders {rendered!r}, not {prompt!r}")
            # The processor expands the one placeholder to the grid's token count before tokenizing.
            ids = tok(prompt.replace(IMAGE_TOKEN, IMAGE_TOKEN * n))["input_ids"]
            if sum(1 for i in ids if i == IMAGE_TOKEN_ID) != n:
                raise SystemExit(f"{image}/{order}: placeholder count differs from {n}")
            cases.append({"name": f"{image}/{order}", "image": image, "order": order, "prompt": prompt, "input_ids": ids})
    return cases


def internvl_cases(fam, tok):
    """The -hf template's rendering of each turn, the image span expanded as InternVLProcessor
    does; the text between spans tokenized with the Qwen vocabulary."""
    cases = []
    for image, (t, h, w) in fam.grids():
        n = t * (h // 2) * (w // 2)
        for order in ORDERS:
            q = fam.questions[image]
            parts = [{"type": "image"}, {"type": "text", "text": q}]
            if order != "image_first":
                parts.reverse()
            rendered = tok.apply_chat_template([{"role": "user", "content": parts}], chat_template=fam.template,
                                               tokenize=False, add_generation_prompt=True)
            body = "<IMG_CONTEXT>\n" + q if order == "image_first" else q + "<IMG_CONTEXT>\n"
            prompt = "<|im_start|>user\n" + body + "<|im_end|>\n<|im_start|>assistant\n"
            if rendered != prompt:
                raise SystemExit(f"{image}/{order}: the chat template renders {rendered!r}, not {prompt!r}")
            before, after = prompt.split("<IMG_CONTEXT>")
            ids = (tok(before)["input_ids"] + [INTERNVL_IMG] + [INTERNVL_CONTEXT] * n + [INTERNVL_IMG_END]
                   + tok(after)["input_ids"])
            if any(i >= INTERNVL_IMG for i in tok(before)["input_ids"] + tok(after)["input_ids"]):
                raise SystemExit(f"{image}/{order}: the text tokenized to an id of the image span's")
            cases.append({"name": f"{image}/{order}", "image": image, "order": order, "prompt": prompt, "input_ids": ids})
    return cases


def phi4_cases(fam, tok):
    """Phi-4's chat format (the tokenizer's template: <|user|>, the parts in order, <|end|>,
    <|assistant|>), the image placeholder expanded to num_img_tokens as Phi4MultimodalProcessor
    does; the text on either side tokenized with the Phi-4 tokenizer."""
    cases = []
    for image, rows, cols, last_w, last_h in PHI4_IMAGES:
        n = phi4_tokens(rows, cols, last_w, last_h)
        for order in ORDERS:
            q = fam.questions[image]
            parts = [{"type": "image"}, {"type": "text", "text": q}]
            if order != "image_first":
                parts.reverse()
            rendered = tok.apply_chat_template([{"role": "user", "content": parts}], tokenize=False, add_generation_prompt=True)
            body = PHI4_IMAGE_TOKEN + q if order == "image_first" else q + PHI4_IMAGE_TOKEN
            prompt = "<|user|>" + body + "<|end|><|assistant|>"
            if rendered != prompt:
                raise SystemExit(f"{image}/{order}: the chat template renders {rendered!r}, not {prompt!r}")
            before, after = prompt.split(PHI4_IMAGE_TOKEN)
            text_before, text_after = tok(before)["input_ids"], tok(after)["input_ids"]
            if PHI4_IMAGE_TOKEN_ID in text_before + text_after:
                raise SystemExit(f"{image}/{order}: the text tokenized to the image placeholder")
            ids = text_before + [PHI4_IMAGE_TOKEN_ID] * n + text_after
            cases.append({"name": f"{image}/{order}", "image": image, "order": order, "prompt": prompt, "input_ids": ids})
    return cases


def run_case(fam, model, case, pixels, grid):
    ids = torch.tensor([case["input_ids"]])
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    inputs.update((fam.inputs or (lambda ids, p, g, _: qwen_inputs(ids, p, g)))(ids, pixels, grid, case["image"]))
    # Ignore-EOS semantics, as make_fixtures.py: EOS is cleared from the generation config.
    saved = model.generation_config.eos_token_id
    model.generation_config.eos_token_id = None
    try:
        with torch.no_grad():
            gen = model.generate(
                **inputs,
                do_sample=False,
                num_beams=1,
                repetition_penalty=1.0,
                max_new_tokens=MAX_NEW_TOKENS,
                pad_token_id=fam.pad_id,
                output_logits=True,
                return_dict_in_generate=True,
            )
    finally:
        model.generation_config.eos_token_id = saved
    tokens = gen.sequences[0, ids.shape[1] :].tolist()
    if len(tokens) != MAX_NEW_TOKENS:
        raise SystemExit(f"generate returned {len(tokens)} tokens")
    margins = []
    for step, s in enumerate(gen.logits):
        top2 = torch.topk(s[0].float(), 2)
        if int(top2.indices[0]) != tokens[step]:
            raise SystemExit(f"step {step}: generate chose {tokens[step]}, raw argmax is {int(top2.indices[0])}")
        margins.append(float(top2.values[0] - top2.values[1]))
    logits = gen.logits[0][0].float().numpy()
    order = np.argsort(-logits, kind="stable")
    ids_kept = sorted(set(order[:TOP_K].tolist()) | set(range(0, logits.shape[0], STRIDE)))
    return {
        "case": case["name"],
        "tokens": tokens,
        "min_margin": f32(min(margins)),
        "argmax": int(order[0]),
        "logit_ids": ids_kept,
        "logit_values": [f32(logits[i]) for i in ids_kept],
    }


def make_model(fam, index, name, text, vision, cases, pixels, work):
    seed = fam.seed + index
    config = fam.config(text, vision)
    model_dir = os.path.join(work, name)
    shutil.rmtree(model_dir, ignore_errors=True)
    # save_pretrained names the tensors as a transformers 5.17 checkpoint does; its random values
    # are then replaced by the seeded ones.
    fam.model_class(config).save_pretrained(model_dir)
    st = os.path.join(model_dir, "model.safetensors")
    shapes = read_header(st)
    skipped = sorted(n for n in shapes if fam.skip is not None and fam.skip(n))
    for n in skipped:
        del shapes[n]
    tensors, manifest = {}, []
    for tname in sorted(shapes):
        t = seeded_tensor(seed, tname, shapes[tname])
        tensors[tname] = t
        manifest.append({"name": tname, "shape": shapes[tname], "sum": float(np.sum(t, dtype=np.float64)), "sha256": sha256_f32(t)})
    save_file(tensors, st, metadata={"format": "pt"})
    del tensors
    kw = {"attn_implementation": fam.attn} if fam.attn else {}
    model, info = fam.model_class.from_pretrained(model_dir, dtype=torch.float32, output_loading_info=True, **kw)
    if sorted(info["missing_keys"]) != skipped or info["unexpected_keys"] or info["mismatched_keys"]:
        raise SystemExit(f"{name}: loading the seeded weights: {info}")
    if fam.attn:
        for mod in model.modules():
            c = getattr(mod, "config", None)
            if c is not None and c._attn_implementation != fam.attn:
                raise SystemExit(f"{name}: {type(mod).__name__} runs {c._attn_implementation} attention, not {fam.attn}")
    model.eval()
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg_json = json.load(f)

    vision_out = []
    with torch.no_grad():
        for image, grid in fam.grids():
            v = fam.vision(model, pixels[image], grid, image).double().numpy()
            vision_out.append({"image": image, "rows": v.shape[0], "dim": v.shape[1], "sum": float(v.sum()), "sumabs": float(np.abs(v).sum())})
    results = []
    grids = dict(fam.grids())
    for case in cases:
        r = run_case(fam, model, case, pixels[case["image"]], grids[case["image"]])
        if r["min_margin"] < MIN_MARGIN:
            raise SystemExit(f"{name} {case['name']}: greedy margin {r['min_margin']:.3g} below {MIN_MARGIN}")
        if len(set(r["tokens"])) == 1:
            raise SystemExit(f"{name} {case['name']}: degenerate greedy answer {r['tokens']}")
        print(f"{name} {case['name']}: margin {r['min_margin']:.3g} tokens {r['tokens']}", flush=True)
        results.append(r)
    shutil.rmtree(model_dir)
    return {
        "name": name,
        "seed": seed,
        "summary": fam.summary(text, vision),
        "config": cfg_json,
        "tensors": manifest,
        "vision": vision_out,
        "results": results,
    }


def dump(obj):
    return json.dumps(obj, separators=(",", ":"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--family", choices=sorted(FAMILIES), default="qwen2_5_vl", help="which sweep (default qwen2_5_vl)")
    ap.add_argument("--only", help="comma-separated model names (for a quick look; writes nothing)")
    ap.add_argument("--check", action="store_true", help="with --only: compare each model's record with the committed golden's")
    args = ap.parse_args()
    if args.check and not args.only:
        ap.error("--check needs --only")
    fam = FAMILIES[args.family]
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    tok = AutoTokenizer.from_pretrained(fam.tokenizer)
    cases = build_cases(fam, tok)
    pixels, images = {}, []
    for image, grid in fam.grids():
        px = seeded_pixels(fam.seed, image, grid[0] * grid[1] * grid[2], fam.patch_dim)
        pixels[image] = px
        rec = {"name": image, "grid": grid, "sha256": sha256_f32(px)}
        if fam.views is not None:
            masks, tiles = fam.views(image)
            rec["masks"] = masks
            if tiles is not None:
                rec["tiles"] = tiles
        images.append(rec)
    only = set(args.only.split(",")) if args.only else None
    if only is not None and only - {m[0] for m in fam.models}:
        raise SystemExit(f"--only: no model {sorted(only - {m[0] for m in fam.models})} in the {args.family} sweep")
    models = []
    with tempfile.TemporaryDirectory() as work:
        for i, (name, text, vision) in enumerate(fam.models):
            if only is None or name in only:
                models.append(make_model(fam, i, name, text, vision, cases, pixels, work))
    cases_out = [{k: c[k] for k in ("name", "image", "order", "input_ids")} for c in cases]
    if only is not None:
        if args.check:
            with open(fam.out) as f:
                golden = json.load(f)
            same = dump(images) == dump(golden["images"]) and dump(cases_out) == dump(golden["cases"])
            print(f"images and cases: {'identical' if same else 'DIFFER'}")
            committed = {m["name"]: m for m in golden["models"]}
            for m in models:
                ok = m["name"] in committed and dump(m) == dump(committed[m["name"]])
                same = same and ok
                print(f"{m['name']}: {'identical' if ok else 'DIFFERS'} from {os.path.relpath(fam.out, ROOT)}")
            if not same:
                return 1
        return
    golden = {
        "meta": {
            "generator": fam.generator,
            "transformers": __import__("transformers").__version__,
            "torch": torch.__version__,
            "max_new_tokens": MAX_NEW_TOKENS,
            "semantics": "fp32 reference from seeded F32 weights; greedy, repetition_penalty 1.0, EOS never stops",
            **({"attn_implementation": fam.attn} if fam.attn else {}),
        },
        "seed": fam.seed,
        "pixel_rule": "0.15 + 1.95u under the name pixels/<image>",
        "images": images,
        "cases": cases_out,
        "models": models,
    }
    os.makedirs(os.path.dirname(fam.out), exist_ok=True)
    with open(fam.out, "w") as f:
        json.dump(golden, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {fam.out} ({os.path.getsize(fam.out)} bytes)")


if __name__ == "__main__":
    sys.exit(main())
