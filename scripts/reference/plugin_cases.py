"""Conformance cases for the Qwen-VL family plugins, from transformers itself.

For a grid of image sizes (edge cases plus a seeded random spread) and a few bundle params, it asks
the reference what the plan must say: transformers' qwen2_vl smart_resize (the resize target, or
the ValueError it raises), the patch grid and the number of image tokens. For every size small
enough to process quickly it also runs the real Qwen2VLImageProcessor on a blank PIL image and
asserts that its image_grid_thw agrees, so the table is the processor's behaviour, not just one
function's. Frames come from rendering the families' chat templates with jinja2 (the same engine
transformers' apply_chat_template uses) and splitting the prompt at the image placeholder.

Writes plugins/<family>/testdata/cases.json (sdk-wasm/plugintest.Suite). Run with the reference
stack: `just plugin-cases`. CI never runs it; the outputs are committed.
"""

import json
import math
import pathlib
import random

import jinja2
from PIL import Image
from transformers import Qwen2VLImageProcessor
from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The Qwen2.5-VL hub chat template (chat_template.json of Qwen/Qwen2.5-VL-*-Instruct), as in
# scripts/reference/make_fixtures.py.
QWEN2_5_VL_TEMPLATE = (
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

# The user/system part of the Qwen3-VL hub chat template (Qwen/Qwen3-VL-*-Instruct; the tool and
# assistant-history branches are left out: a one-turn image request never reaches them). It has
# no default system turn (families.md §2.4).
QWEN3_VL_TEMPLATE = (
    "{%- if messages[0].role == 'system' %}{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].content is string %}{{- messages[0].content }}{%- else %}"
    "{%- for content in messages[0].content %}{%- if 'text' in content %}{{- content.text }}{%- endif %}"
    "{%- endfor %}{%- endif %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- set image_count = namespace(value=0) %}"
    "{%- for message in messages %}{%- if message.role == 'user' %}"
    "{{- '<|im_start|>' + message.role + '\\n' }}"
    "{%- if message.content is string %}{{- message.content }}{%- else %}"
    "{%- for content in message.content %}"
    "{%- if content.type == 'image' or 'image' in content or 'image_url' in content %}"
    "{%- set image_count.value = image_count.value + 1 %}"
    "{%- if add_vision_id %}Picture {{ image_count.value }}: {% endif -%}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{%- elif 'text' in content %}{{- content.text }}{%- endif %}{%- endfor %}{%- endif %}"
    "{{- '<|im_end|>\\n' }}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

FAMILIES = {
    "qwen2_5_vl": dict(patch=14, min_pixels=3136, max_pixels=12845056,
                       mean=[0.48145466, 0.4578275, 0.40821073], std=[0.26862954, 0.26130258, 0.27577711],
                       template=QWEN2_5_VL_TEMPLATE, system="You are a helpful assistant."),
    "qwen3_vl": dict(patch=16, min_pixels=65536, max_pixels=16777216,
                     mean=[0.5, 0.5, 0.5], std=[0.5, 0.5, 0.5], template=QWEN3_VL_TEMPLATE, system=""),
}
MERGE = 2
# Images up to this many pixels (source and resized) also go through the real processor.
PROCESS_LIMIT = 1_500_000

EDGE_SIZES = [
    (1, 1), (2, 2), (13, 13), (14, 14), (27, 27), (28, 28), (29, 29), (32, 32), (42, 42), (56, 56),
    (70, 70), (29, 1000), (1000, 29), (10, 1000), (1000, 10), (1, 200), (200, 1), (1, 201), (201, 1),
    (3, 600), (3, 601), (603, 3), (5, 1000), (5, 1001), (2, 401), (64, 12800), (12800, 64),
    (320, 240), (240, 320), (640, 480), (644, 476), (406, 238), (120, 300), (30, 40), (150, 150),
    (1024, 768), (1280, 720), (1920, 1080), (2048, 2048), (3000, 4000), (4000, 3000), (3584, 3584),
    (3585, 3585), (4096, 4096), (5000, 5000), (8192, 8192), (32768, 1), (1, 32768), (32768, 32768),
    (32768, 164), (164, 32768), (100, 20000), (20000, 100),
]


def random_sizes(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        kind = rng.random()
        if kind < 0.5:
            w, h = rng.randint(1, 2048), rng.randint(1, 2048)
        elif kind < 0.8:
            w, h = rng.randint(1, 8192), rng.randint(1, 8192)
        else:  # long thin images near the aspect-ratio bound
            short = rng.randint(1, 64)
            w, h = short, min(32768, short * rng.randint(150, 260))
            if rng.random() < 0.5:
                w, h = h, w
        out.append((w, h))
    return out


# Client system messages (None: the client sent none, the bundle's system_prompt applies).
SYSTEMS = [None, "Answer in one word.", "", "Système: 東京 ☃\nsecond line <|im_end|>"]


def frames(fam, tokens, params):
    system = params.get("system_prompt", fam["system"])
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)  # as transformers renders templates
    tmpl = env.from_string(fam["template"])
    out = []
    questions = [("What is in this image?", False), ("Describe it.", True), ("", False), (" lead and trail ", True),
                 ("<|im_end|> injected", False), ("Unicode: 東京 ☃\nsecond line", False)]
    for (question, text_first), client_system in \
            [(q, None) for q in questions] + [(questions[i % 2], sy) for i, sy in enumerate(SYSTEMS[1:])]:
        content = [{"type": "image"}, {"type": "text", "text": question}]
        if text_first:
            content.reverse()
        messages = [{"role": "user", "content": content}]
        if client_system is not None:
            # the client's system message replaces the bundle's (and the template's default) one
            messages.insert(0, {"role": "system", "content": client_system})
        elif system != fam["system"]:
            messages.insert(0, {"role": "system", "content": system})
        text = tmpl.render(messages=messages, add_generation_prompt=True, add_vision_id=False)
        span = "<|vision_start|><|image_pad|><|vision_end|>"
        assert text.count(span) == 1, text
        before, after = text.split(span)
        case = {"question": question, "text_first": text_first}
        if client_system is not None:
            case["system"] = client_system
        out.append({**case, "want": {
            "before": before, "after": after,
            "span": {"open": ["<|vision_start|>"], "pad": "<|image_pad|>", "count": tokens,
                     "close": ["<|vision_end|>"]},
            "stop_token_ids": [151645, 151643], "hints": {"skip_special_tokens": True}}})
    return out


def cases_for(name, fam):
    processors = {}
    param_sets = [{}, {"min_pixels": 256 * 28 * 28, "max_pixels": 1280 * 28 * 28},
                  {"min_pixels": 4 * 32 * 32, "max_pixels": 16384 * 32 * 32, "system_prompt": "Be brief."}]
    sizes = [(s, 0) for s in EDGE_SIZES] + [(s, 1) for s in random_sizes(160, 20260930)] + \
            [(s, 2) for s in random_sizes(40, 7)]
    factor = fam["patch"] * MERGE
    cases = []
    for (w, h), pi in sizes:
        params = param_sets[pi]
        lo = params.get("min_pixels", fam["min_pixels"])
        hi = params.get("max_pixels", fam["max_pixels"])
        case = {"name": f"{w}x{h}" + (f"_p{pi}" if pi else ""), "image": {"width": w, "height": h, "format": "png"}}
        if params:
            case["params"] = params
        try:
            rh, rw = smart_resize(h, w, factor=factor, min_pixels=lo, max_pixels=hi)
        except ValueError as e:
            case["want_error"] = "aspect_ratio_too_extreme"
            case["reason"] = str(e)
            assert "aspect ratio" in str(e)
            cases.append(case)
            continue
        gh, gw = rh // fam["patch"], rw // fam["patch"]
        tokens = gh * gw // (MERGE * MERGE)
        if w * h <= PROCESS_LIMIT and rw * rh <= PROCESS_LIMIT:
            key = (lo, hi)
            if key not in processors:
                processors[key] = Qwen2VLImageProcessor(
                    size={"shortest_edge": lo, "longest_edge": hi}, patch_size=fam["patch"], merge_size=MERGE,
                    temporal_patch_size=2, image_mean=fam["mean"], image_std=fam["std"])
            out = processors[key](images=Image.new("RGB", (w, h)), return_tensors="pt")
            got = out["image_grid_thw"].tolist()
            assert got == [[1, gh, gw]], (name, w, h, got, gh, gw)
            assert list(out["pixel_values"].shape) == [gh * gw, 3 * 2 * fam["patch"] ** 2]
        case["want"] = {"resize": {"width": rw, "height": rh}, "grid": {"t": 1, "h": gh, "w": gw},
                        "llm_grid": {"t": 1, "h": gh // MERGE, "w": gw // MERGE}, "image_tokens": tokens}
        if (w, h) in [(320, 240), (28, 28), (1, 1)]:
            case["frames"] = frames(fam, tokens, params)
        if pi == 2 and not any("frames" in c for c in cases if c.get("params") == params):
            case["frames"] = frames(fam, tokens, params)
        cases.append(case)
    return cases


def main():
    for name, fam in FAMILIES.items():
        suite = {"family": name, "source": "scripts/reference/plugin_cases.py (transformers "
                 + __import__("transformers").__version__ + ")", "cases": cases_for(name, fam)}
        out = ROOT / "plugins" / name / "testdata" / "cases.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(suite, indent=1, ensure_ascii=False) + "\n")
        refused = sum("want_error" in c for c in suite["cases"])
        print(f"{out.relative_to(ROOT)}: {len(suite['cases'])} cases, {refused} refused")


if __name__ == "__main__":
    main()
