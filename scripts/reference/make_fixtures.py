#!/usr/bin/env python3
"""Build the engine's parity fixtures: tiny random Qwen2.5-VL checkpoints and their golden outputs.

Run with the reference stack (`just fixtures`, i.e. .build/refenv/bin/python). CI never runs this: the
outputs under core/internal/enginetest/testdata/qwen2_5_vl/ are committed and the Go tests read them
without torch.

What it writes (families.md §1.6; every file small, the repo must stay small):

  tiny-untied/    HF layout of a random Qwen2.5-VL (text hidden 32, 2 heads, 1 KV head, head_dim 16,
                  mrope [2,3,3], 2 layers; vision depth 2, hidden 64, window 112, full attention in
                  block 1), bf16 model.safetensors, config.json, generation_config.json,
                  preprocessor_config.json, chat_template.{jinja,json}, tokenizer_config.json and
                  tokenizer.json. tokenizer.json (11 MB) is a relative symlink to
                  .build/tokenizer/qwen3/tokenizer.json, which `just setup` fetches with a pinned digest.
                  model.safetensors (20 MB) is not committed: its weights are seeded (save_model).
  tiny-tied/      the same with text hidden 16 and tie_word_embeddings=True (no lm_head.weight;
                  model.safetensors 5.3 MB).
  seeded/<model>.json, seeded/<model>.safetensors.sha256
                  the weights' manifest (seed, tensor names and shapes in file order) and the
                  sha256 of model.safetensors. Every value is seeded.py's rule (the shape sweeps'),
                  rounded to bf16; scripts/unpack-fixtures.sh (`just setup`) writes the files from
                  the manifests, with Go or with numpy (seeded.py), the same bytes.
  cases/          one image (.png), its question and the processor's outputs per case: input_ids,
                  mm_token_type_ids, image_grid_thw, the reference 3-D positions and rope_delta
                  (.json), and pixel_values (.pixels.gz, see write_pixels).
  golden/<model>.json  per case: 24 greedy tokens and a subset of the first-step logits, from the
                  bf16 checkpoint loaded in fp32.

With --bench DIR it also generates the mid-size benchmark checkpoint (text like Qwen2.5-0.5B, a small
vision tower) and one case into DIR (never committed); scripts/reference/bench_baseline.py times
transformers on it.
"""

import argparse
import gzip
import hashlib
import json
import os
import shutil
import struct
import sys
import tempfile

import numpy as np
import torch
from PIL import Image, ImageDraw
from transformers import (
    AutoProcessor,
    Qwen2_5_VLConfig,
    Qwen2_5_VLForConditionalGeneration,
    Qwen2_5_VLProcessor,
    Qwen2VLImageProcessor,
    Qwen2VLVideoProcessor,
    AutoTokenizer,
)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seeded  # noqa: E402 (the seeded weight rule and the bf16 writer, shared with Go)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOKENIZER_DIR = os.path.join(ROOT, ".build", "tokenizer", "qwen3")
OUT = os.path.join(ROOT, "core", "internal", "enginetest", "testdata", "qwen2_5_vl")

MAX_NEW_TOKENS = 24
# Logits kept per case: the top TOP_K ids plus every STRIDE-th id of the vocabulary.
TOP_K = 512
STRIDE = 149

# The Qwen2.5-VL hub chat template (chat_template.json of Qwen/Qwen2.5-VL-*-Instruct).
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}"
    "Picture {{ image_count.value }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}"
    "Video {{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Hub-style preprocessor_config.json of Qwen2.5-VL (min/max pixels as the hub spells them).
PREPROCESSOR_CONFIG = {
    "min_pixels": 3136,
    "max_pixels": 12845056,
    "patch_size": 14,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_std": [0.26862954, 0.26130258, 0.27577711],
    "image_processor_type": "Qwen2VLImageProcessor",
    "processor_class": "Qwen2_5_VLProcessor",
}

# Greedy on purpose: the hub file enables sampling and a repetition penalty (families.md §0.3-6).
GENERATION_CONFIG = {
    "bos_token_id": 151643,
    "pad_token_id": 151643,
    "eos_token_id": [151645, 151643],
    "do_sample": False,
}

# (name, width, height, question). Sizes cover square, tall, wide, below min_pixels (upscaled),
# banker's rounding in smart_resize, several full and partial 112-px windows.
CASES = [
    ("square_56", 56, 56, "What is in the image?"),
    ("rect_320x240", 320, 240, "Describe this picture in one sentence."),
    ("tall_120x300", 120, 300, "What colour is the top of the image?"),
    ("wide_500x90", 500, 90, "Read the text in the banner."),
    ("windows_448x336", 448, 336, "How many shapes can you see?"),
    ("partial_406x238", 406, 238, "Is there a circle? Answer yes or no."),
    ("tiny_30x40", 30, 40, "Qu'est-ce que c'est ? 这是什么？"),
    ("large_644x476", 644, 476, "List every object you can find, from left to right, with its colour."),
    ("square_150", 150, 150, "Describe the image."),
]

TIED_CASES = ["square_56", "rect_320x240", "partial_406x238"]

# The seed of each fixture model's weights (seeded.py). Chosen for healthy greedy margins: 1234 and
# 1235 (untied) and 4321 (tied) gave a case a top-1/top-2 gap of about 1e-3, 4323 (tied) an answer of
# 3 distinct tokens; with these the smallest gap is about 8e-3 (the engine's logit error is ~1e-5).
SEEDS = {"tiny-untied": 1236, "tiny-tied": 4324}
# A case whose greedy margin is below this would make token parity a coin toss (and any bf16 or
# kernel-order difference a token flip); refuse it, and pick another seed.
MIN_MARGIN = 5e-3


def tiny_config(hidden, heads, kv_heads, mrope, tie, init_range):
    return Qwen2_5_VLConfig(
        text_config=dict(
            hidden_size=hidden,
            intermediate_size=2 * hidden,
            num_hidden_layers=2,
            num_attention_heads=heads,
            num_key_value_heads=kv_heads,
            vocab_size=151936,
            rope_theta=1e6,
            rms_norm_eps=1e-6,
            max_position_embeddings=4096,
            rope_scaling={"type": "mrope", "mrope_section": mrope},
            initializer_range=init_range,
            tie_word_embeddings=tie,
        ),
        vision_config=dict(
            depth=2,
            hidden_size=64,
            intermediate_size=128,
            num_heads=4,
            out_hidden_size=hidden,
            window_size=112,
            fullatt_block_indexes=[1],
            tokens_per_second=2,
            initializer_range=init_range,
        ),
        initializer_range=init_range,
        tie_word_embeddings=tie,
    )


def mid_config():
    """Text like Qwen2.5-0.5B (hidden 896, 24 layers, 14/2 heads, 4864 MLP, tied), with a small but
    real vision tower (8 blocks of hidden 640, windows and two full-attention blocks)."""
    return Qwen2_5_VLConfig(
        text_config=dict(
            hidden_size=896,
            intermediate_size=4864,
            num_hidden_layers=24,
            num_attention_heads=14,
            num_key_value_heads=2,
            vocab_size=151936,
            rope_theta=1e6,
            rms_norm_eps=1e-6,
            max_position_embeddings=32768,
            # head_dim 64: the 32 rotary frequencies split like [16, 24, 24] scaled by half
            rope_scaling={"type": "mrope", "mrope_section": [8, 12, 12]},
            tie_word_embeddings=True,
        ),
        vision_config=dict(
            depth=8,
            hidden_size=640,
            intermediate_size=1728,
            num_heads=10,
            out_hidden_size=896,
            window_size=112,
            fullatt_block_indexes=[3, 7],
            tokens_per_second=2,
        ),
        tie_word_embeddings=True,
    )


def make_image(w, h, seed):
    """A deterministic synthetic picture: smooth gradients, a few shapes, light noise."""
    rng = np.random.RandomState(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    base = np.stack(
        [
            127 + 100 * np.sin(x / (7 + seed % 5) + seed),
            127 + 100 * np.cos(y / (9 + seed % 3)),
            127 + 100 * np.sin((x + y) / 13.0),
        ],
        axis=-1,
    )
    base += rng.normal(0, 2, base.shape)
    img = Image.fromarray(np.clip(base, 0, 255).astype(np.uint8), "RGB")
    d = ImageDraw.Draw(img)
    for _ in range(3):
        x0, y0 = rng.randint(0, max(1, w - 4)), rng.randint(0, max(1, h - 4))
        x1, y1 = x0 + rng.randint(2, max(3, w // 3)), y0 + rng.randint(2, max(3, h // 3))
        colour = tuple(int(c) for c in rng.randint(0, 256, 3))
        if rng.rand() < 0.5:
            d.rectangle([x0, y0, x1, y1], fill=colour)
        else:
            d.ellipse([x0, y0, x1, y1], fill=colour)
    return img


def make_processor():
    tok = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    ip = Qwen2VLImageProcessor(
        min_pixels=PREPROCESSOR_CONFIG["min_pixels"],
        max_pixels=PREPROCESSOR_CONFIG["max_pixels"],
        patch_size=14,
        temporal_patch_size=2,
        merge_size=2,
        image_mean=PREPROCESSOR_CONFIG["image_mean"],
        image_std=PREPROCESSOR_CONFIG["image_std"],
    )
    return Qwen2_5_VLProcessor(
        image_processor=ip, tokenizer=tok, video_processor=Qwen2VLVideoProcessor(), chat_template=CHAT_TEMPLATE
    )


def write_bundle_files(model_dir):
    """The non-weight files of the HF layout, as the hub spells them."""
    with open(os.path.join(model_dir, "preprocessor_config.json"), "w") as f:
        json.dump(PREPROCESSOR_CONFIG, f, indent=2)
        f.write("\n")
    with open(os.path.join(model_dir, "generation_config.json"), "w") as f:
        json.dump(GENERATION_CONFIG, f, indent=2)
        f.write("\n")
    with open(os.path.join(model_dir, "chat_template.json"), "w") as f:
        json.dump({"chat_template": CHAT_TEMPLATE}, f, indent=2)
        f.write("\n")
    with open(os.path.join(model_dir, "chat_template.jinja"), "w") as f:
        f.write(CHAT_TEMPLATE)
    shutil.copyfile(os.path.join(TOKENIZER_DIR, "tokenizer_config.json"), os.path.join(model_dir, "tokenizer_config.json"))
    link = os.path.join(model_dir, "tokenizer.json")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(os.path.relpath(os.path.join(TOKENIZER_DIR, "tokenizer.json"), model_dir), link)


def read_header(path):
    """The safetensors file's first bytes (length and header) and its tensors [(name, shape)] in
    file order, all of them bf16."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        raw = f.read(n)
    entries = {k: v for k, v in json.loads(raw).items() if k != "__metadata__"}
    if any(v["dtype"] != "BF16" for v in entries.values()):
        raise SystemExit(f"{path}: not every tensor is BF16")
    order = sorted(entries, key=lambda k: entries[k]["data_offsets"][0])
    return struct.pack("<Q", n) + raw, [(k, entries[k]["shape"]) for k in order]


def save_model(model, model_dir, seed):
    """Save the model in bf16 in the real HF layout with seeded weights and return the fp32
    reference loaded from it.

    save_pretrained names the tensors and writes config.json; its random values are then replaced
    by the seeded ones (seeded.py: the sweep's rule, each value rounded to bf16), written by the
    same numpy writer as scripts/unpack-fixtures.sh uses. The script checks that the writer's
    header is the one save_pretrained wrote, and that transformers saves the seeded model as the
    very same bytes, before it records the manifest (seeded/<model>.json) and the sha256
    (seeded/<model>.safetensors.sha256) both writers are held to.
    """
    if os.path.isdir(model_dir):
        shutil.rmtree(model_dir)
    os.makedirs(model_dir)
    model.to(torch.bfloat16).save_pretrained(model_dir)
    for extra in ("processor_config.json",):
        p = os.path.join(model_dir, extra)
        if os.path.exists(p):
            os.remove(p)
    write_bundle_files(model_dir)

    name = os.path.basename(model_dir)
    st = os.path.join(model_dir, "model.safetensors")
    head, tensors = read_header(st)
    if seeded.safetensors_header(tensors) != head:
        raise SystemExit(f"{name}: seeded.safetensors_header differs from save_pretrained's header")
    sha = seeded.write_bf16(st, seed, tensors)
    with tempfile.TemporaryDirectory() as tmp:
        Qwen2_5_VLForConditionalGeneration.from_pretrained(model_dir, dtype=torch.bfloat16).save_pretrained(tmp)
        with open(os.path.join(tmp, "model.safetensors"), "rb") as a, open(st, "rb") as b:
            if a.read() != b.read():
                raise SystemExit(f"{name}: transformers saves the seeded weights as other bytes than seeded.py")
    os.makedirs(seeded.SEEDED, exist_ok=True)
    with open(os.path.join(seeded.SEEDED, name + ".json"), "w") as f:
        f.write(f'{{\n "model": "{name}",\n "generator": "scripts/reference/make_fixtures.py",\n')
        f.write(f' "rule": "scripts/reference/seeded.py seeded_tensor, rounded to bfloat16 (nearest, ties to even)",\n')
        f.write(f' "seed": {seed},\n "dtype": "BF16",\n "tensors": [\n')
        f.write(",\n".join(f'  {{"name": "{t}", "shape": {json.dumps(list(shape))}}}' for t, shape in tensors))
        f.write("\n ]\n}\n")
    with open(os.path.join(seeded.SEEDED, name + ".safetensors.sha256"), "w") as f:
        f.write(f"{sha}  {name}/model.safetensors\n")
    if seeded.read_manifest(name)["tensors"] != [{"name": t, "shape": list(s)} for t, s in tensors]:
        raise SystemExit(f"{name}: the manifest does not read back")

    ref = Qwen2_5_VLForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32).eval()
    return ref


def pixel_lut(processor):
    """The exact float32 each uint8 level becomes after the fused rescale+normalise (§0.3-3)."""
    ip = processor.image_processor
    mean, std, _ = ip._fuse_mean_std_and_rescale_factor(
        do_normalize=True,
        image_mean=tuple(ip.image_mean),
        image_std=tuple(ip.image_std),
        do_rescale=True,
        rescale_factor=ip.rescale_factor,
        device=torch.device("cpu"),
    )
    levels = torch.arange(256, dtype=torch.float32).view(1, 1, 256).expand(3, 1, 256).contiguous()
    return ip.normalize(levels, mean, std).view(3, 256).numpy()


def write_pixels(path, pixel_values, lut):
    """pixel_values [rows, C*T*P*P] as uint8 levels plus the per-channel lookup table, gzip'ed.

    Every value is an exact image of one uint8 level, so the file is lossless and ~4x smaller
    than float32 before compression. Layout (little-endian): "IRPX", u32 version=1, u32 rows,
    u32 cols, u32 channels, f32 lut[channels][256], u8 levels[rows*cols].
    """
    rows, cols = pixel_values.shape
    channels = lut.shape[0]
    span = cols // channels
    levels = np.empty((rows, cols), dtype=np.uint8)
    for c in range(channels):
        v = pixel_values[:, c * span : (c + 1) * span]
        idx = np.searchsorted(lut[c], v)
        idx = np.clip(idx, 0, 255)
        if not np.array_equal(lut[c][idx], v):
            raise SystemExit(f"{path}: channel {c} values are not exact normalised uint8 levels")
        levels[:, c * span : (c + 1) * span] = idx
    buf = b"IRPX" + struct.pack("<IIII", 1, rows, cols, channels) + lut.astype("<f4").tobytes() + levels.tobytes()
    with open(path, "wb") as f:
        # mtime=0 keeps the bytes reproducible.
        with gzip.GzipFile(fileobj=f, mode="wb", mtime=0, compresslevel=9) as g:
            g.write(buf)


def sha256_f32(a):
    return hashlib.sha256(np.ascontiguousarray(a, dtype="<f4").tobytes()).hexdigest()


def build_case(processor, lut, name, w, h, question, seed, out_dir, write_png=True):
    img = make_image(w, h, seed)
    if write_png:
        img.save(os.path.join(out_dir, name + ".png"), optimize=True)
    msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]}]
    text = processor.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    inputs = processor(text=[text], images=[img], return_tensors="pt")
    pv = inputs["pixel_values"].numpy()
    write_pixels(os.path.join(out_dir, name + ".pixels.gz"), pv, lut)
    case = {
        "name": name,
        "image": name + ".png",
        "width": w,
        "height": h,
        "question": question,
        "prompt": text,
        "input_ids": inputs["input_ids"][0].tolist(),
        "mm_token_type_ids": inputs["mm_token_type_ids"][0].tolist(),
        "image_grid_thw": inputs["image_grid_thw"].tolist(),
        "pixels": name + ".pixels.gz",
        "pixel_rows": int(pv.shape[0]),
        "pixel_cols": int(pv.shape[1]),
        "pixel_sha256": sha256_f32(pv),
    }
    return case, inputs


def reference_positions(model, inputs):
    pos, delta = model.model.get_rope_index(
        inputs["input_ids"], mm_token_type_ids=inputs["mm_token_type_ids"], image_grid_thw=inputs["image_grid_thw"]
    )
    return pos[:, 0, :].tolist(), int(delta.view(-1)[0])


def golden_for(model, inputs):
    """Greedy tokens (ignore-EOS semantics: EOS never stops) and the first-step logits."""
    with torch.no_grad():
        out = model(**inputs, use_cache=False)
        logits = out.logits[0, -1].float().numpy()
        vis = model.model.get_image_features(inputs["pixel_values"], inputs["image_grid_thw"]).pooler_output
        vis = torch.cat(vis, dim=0).float().numpy()
        # Ignore-EOS semantics: EOS is an ordinary token that never stops the loop. generate() fills
        # unset fields from model.generation_config, so EOS is cleared there (min_new_tokens would
        # instead mask EOS out of the argmax, which is a different rule).
        saved_eos = model.generation_config.eos_token_id
        model.generation_config.eos_token_id = None
        try:
            gen = model.generate(
                **inputs,
                do_sample=False,
                num_beams=1,
                repetition_penalty=1.0,
                max_new_tokens=MAX_NEW_TOKENS,
                pad_token_id=151643,
                output_logits=True,
                return_dict_in_generate=True,
            )
        finally:
            model.generation_config.eos_token_id = saved_eos
    n = inputs["input_ids"].shape[1]
    tokens = gen.sequences[0, n:].tolist()
    if len(tokens) != MAX_NEW_TOKENS:
        raise SystemExit(f"generate returned {len(tokens)} tokens")
    # The smallest top-1/top-2 gap over all steps says how robust greedy parity is.
    margins = []
    for step, s in enumerate(gen.logits):
        top2 = torch.topk(s[0].float(), 2)
        if int(top2.indices[0]) != tokens[step]:
            raise SystemExit(f"step {step}: generate chose {tokens[step]}, raw argmax is {int(top2.indices[0])}")
        margins.append(float(top2.values[0] - top2.values[1]))
    first = gen.logits[0][0].float().numpy()
    if not np.allclose(first, logits, atol=1e-5, rtol=0):
        raise SystemExit("generate's first scores differ from a plain forward")
    order = np.argsort(-logits, kind="stable")
    ids = sorted(set(order[:TOP_K].tolist()) | set(range(0, logits.shape[0], STRIDE)))
    return {
        "tokens": tokens,
        "min_margin": min(margins),
        "argmax": int(order[0]),
        "vocab": int(logits.shape[0]),
        "logit_ids": ids,
        "logit_values": [float(logits[i]) for i in ids],
        "logit_sum": float(np.sum(logits.astype(np.float64))),
        "logit_sumsq": float(np.sum(np.square(logits.astype(np.float64)))),
        "vision_rows": int(vis.shape[0]),
        "vision_dim": int(vis.shape[1]),
        "vision_head": [float(v) for v in vis.reshape(-1)[:64]],
        "vision_sum": float(np.sum(vis.astype(np.float64))),
        "vision_sumabs": float(np.sum(np.abs(vis.astype(np.float64)))),
    }


def checked(g, model, case):
    """The golden of one case, refused when its greedy answer is degenerate or a coin toss."""
    if g["min_margin"] < MIN_MARGIN:
        raise SystemExit(f"{model} {case}: greedy margin {g['min_margin']:.3g} below {MIN_MARGIN}")
    if len(set(g["tokens"])) < MAX_NEW_TOKENS // 3:
        raise SystemExit(f"{model} {case}: degenerate greedy answer {g['tokens']}")
    g["case"] = case
    return g


def make_tiny(processor, lut):
    cases_dir = os.path.join(OUT, "cases")
    golden_dir = os.path.join(OUT, "golden")
    # golden/ keeps its other files (golden_logprobs.py's, which `just fixtures` regenerates next).
    if os.path.isdir(cases_dir):
        shutil.rmtree(cases_dir)
    os.makedirs(cases_dir)
    os.makedirs(golden_dir, exist_ok=True)

    # The weights are seeded (save_model), so initializer_range only stays in config.json. The
    # rule's scales (matrices u * sqrt(3 / fan_in): q and k of unit-variance rows) keep attention far
    # from uniform, so positions matter: permuting the mrope sections or window-vs-full attention
    # moves the logits well above the engine's error. A tied model needs the rule's zero-mean
    # final norm gain: with a positive one every token predicts itself (families.md §0.3-8).
    untied = save_model(
        Qwen2_5_VLForConditionalGeneration(tiny_config(32, 2, 1, [2, 3, 3], False, 0.1)).eval(),
        os.path.join(OUT, "tiny-untied"),
        SEEDS["tiny-untied"],
    )
    tied = save_model(
        Qwen2_5_VLForConditionalGeneration(tiny_config(16, 2, 1, [1, 1, 2], True, 0.3)).eval(),
        os.path.join(OUT, "tiny-tied"),
        SEEDS["tiny-tied"],
    )

    # A reload through AutoProcessor must reproduce the processor built in code.
    reloaded = AutoProcessor.from_pretrained(os.path.join(OUT, "tiny-untied"))

    golden = {"tiny-untied": [], "tiny-tied": []}
    index = []
    for seed, (name, w, h, q) in enumerate(CASES):
        case, inputs = build_case(processor, lut, name, w, h, q, seed, cases_dir)
        again = reloaded(
            text=[case["prompt"]], images=[Image.open(os.path.join(cases_dir, name + ".png"))], return_tensors="pt"
        )
        if again["input_ids"].tolist() != inputs["input_ids"].tolist() or sha256_f32(
            again["pixel_values"].numpy()
        ) != case["pixel_sha256"]:
            raise SystemExit(f"{name}: reloaded processor differs (png round trip or config)")
        case["positions"], case["rope_delta"] = reference_positions(untied, inputs)
        with open(os.path.join(cases_dir, name + ".json"), "w") as f:
            json.dump(case, f, indent=1, ensure_ascii=False)
            f.write("\n")
        index.append(name)
        g = checked(golden_for(untied, inputs), "tiny-untied", name)
        golden["tiny-untied"].append(g)
        print(f"untied {name}: grid {case['image_grid_thw']} margin {g['min_margin']:.3g} tokens {g['tokens'][:8]}...")
        if name in TIED_CASES:
            g = checked(golden_for(tied, inputs), "tiny-tied", name)
            golden["tiny-tied"].append(g)
            print(f"tied   {name}: margin {g['min_margin']:.3g} tokens {g['tokens'][:8]}...")

    meta = {
        "generator": "scripts/reference/make_fixtures.py",
        "transformers": __import__("transformers").__version__,
        "torch": torch.__version__,
        "max_new_tokens": MAX_NEW_TOKENS,
        "semantics": "fp32 reference from the bf16 checkpoint; greedy, repetition_penalty 1.0, EOS never stops",
    }
    for model_name, cases in golden.items():
        with open(os.path.join(golden_dir, model_name + ".json"), "w") as f:
            json.dump({"meta": meta, "model": model_name, "cases": cases}, f, separators=(",", ":"))
            f.write("\n")
    with open(os.path.join(cases_dir, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")


def make_bench(processor, lut, out):
    """The mid-size benchmark model and one case (the same input for the engine and transformers)."""
    torch.manual_seed(99)
    model_dir = os.path.join(out, "qwen25vl-mid")
    with torch.device("cpu"):
        model = Qwen2_5_VLForConditionalGeneration(mid_config()).eval()
    if os.path.isdir(model_dir):
        shutil.rmtree(model_dir)
    os.makedirs(model_dir)
    model.to(torch.bfloat16).save_pretrained(model_dir)
    p = os.path.join(model_dir, "processor_config.json")
    if os.path.exists(p):
        os.remove(p)
    write_bundle_files(model_dir)
    del model
    cases_dir = os.path.join(out, "cases")
    os.makedirs(cases_dir, exist_ok=True)
    case, _ = build_case(
        processor, lut, "bench_448x336", 448, 336, "Describe this picture in one sentence.", 7, cases_dir
    )
    with open(os.path.join(cases_dir, "bench_448x336.json"), "w") as f:
        json.dump(case, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"bench model in {model_dir}, case grid {case['image_grid_thw']}, {len(case['input_ids'])} prompt tokens")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", metavar="DIR", help="also generate the mid-size benchmark model into DIR")
    ap.add_argument("--bench-only", action="store_true", help="skip the committed tiny fixtures")
    args = ap.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    processor = make_processor()
    lut = pixel_lut(processor)
    if not args.bench_only:
        make_tiny(processor, lut)
    if args.bench:
        make_bench(processor, lut, os.path.abspath(args.bench))


if __name__ == "__main__":
    sys.exit(main())
