"""Golden preprocessing data for the Qwen2.5-VL and Qwen3-VL families.

Writes core/internal/prep/testdata/golden/: deterministic input images (images/) and
manifest.json, which records per image and family what transformers 5.17 computes on CPU:
the decoded RGB (load_image: PIL open, exif_transpose, convert("RGB")), the resized size,
image_grid_thw, pixel_values (sha256 of the float32 little-endian bytes, plus every value when
there are at most 20000, else 64 sampled ones) and the chat-framed input_ids and
mm_token_type_ids for a fixed question with the image before and after the text (and with the
image first after a client system message); for images the processor refuses, the exception;
and for a few images at several per-request pixel budgets (BUDGETS), the same outputs.

Each processor is built from a local directory holding a preprocessor_config.json, the real
Qwen tokenizer files (.build/tokenizer/qwen3) and a chat template; the configs and templates are
written next to the manifest (configs/) for the plugin tests to reuse.

Run with the reference stack on an x86-64 CPU: `just golden-preprocess`.
"""

import hashlib
import io
import json
import pathlib
import shutil
import sys
import tempfile

import numpy as np
import PIL
import torch
import torchvision
import transformers
from PIL import Image
from transformers import AutoProcessor
from transformers.image_utils import load_image

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "core/internal/prep/testdata/golden"
TOKENIZER = ROOT / ".build/tokenizer/qwen3"
QUESTION = "What is the main object in this image? Answer in one word."
# A client system message: it replaces Qwen2.5-VL's default system turn, and is Qwen3-VL's only one.
SYSTEM = "You are a careful assistant. Réponds en un mot."
FULL_LIMIT = 20000
SAMPLES = 64

# The Qwen2-VL chat template as published with Qwen2-VL / Qwen2.5-VL (chat_template.json):
# a default system turn when the conversation has none.
QWEN2_VL_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}Picture "
    "{{ image_count.value }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}Video "
    "{{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# The user/assistant part of the Qwen3-VL Instruct template: no default system turn
# (families.md §2.4); tools and reasoning branches are left out, they never render here.
QWEN3_VL_TEMPLATE = (
    "{%- set image_count = namespace(value=0) %}{%- set video_count = namespace(value=0) %}"
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message.role + '\\n' }}"
    "{%- if message.content is string %}{{- message.content }}{%- else %}"
    "{%- for content in message.content %}"
    "{%- if content.type == 'image' or 'image' in content or 'image_url' in content %}"
    "{%- set image_count.value = image_count.value + 1 %}"
    "{%- if add_vision_id %}Picture {{ image_count.value }}: {% endif -%}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{%- elif content.type == 'video' or 'video' in content %}"
    "{%- set video_count.value = video_count.value + 1 %}"
    "{%- if add_vision_id %}Video {{ video_count.value }}: {% endif -%}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{%- elif 'text' in content %}{{- content.text }}{%- endif %}{%- endfor %}{%- endif %}"
    "{{- '<|im_end|>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

# Per-request pixel budgets (Iris's image_url.detail / min_pixels / max_pixels): the processor run
# with size={"shortest_edge": min, "longest_edge": max} on a few images that scale down and up.
BUDGET_FILES = ["rgb_28x28.png", "tall_29x1000.jpg", "rgb_426x320.jpg", "large_1600x1200.jpg"]
BUDGETS = {
    "qwen2_5_vl": [(3136, 200704), (65536, 401408), (401408, 1003520)],
    "qwen3_vl": [(4096, 262144), (262144, 1048576), (65536, 131072)],
}

FAMILIES = {
    "qwen2_5_vl": {
        "processor_class": "Qwen2_5_VLProcessor",
        "template": QWEN2_VL_TEMPLATE,
        "config": {
            "image_processor_type": "Qwen2VLImageProcessor",
            "min_pixels": 3136, "max_pixels": 12845056,
            "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2,
            "image_mean": [0.48145466, 0.4578275, 0.40821073],
            "image_std": [0.26862954, 0.26130258, 0.27577711],
            "do_rescale": True, "rescale_factor": 0.00392156862745098,
            "do_normalize": True, "do_resize": True, "do_convert_rgb": True, "resample": 3,
        },
    },
    "qwen3_vl": {
        "processor_class": "Qwen3VLProcessor",
        "template": QWEN3_VL_TEMPLATE,
        # Qwen3VLProcessor also loads a video processor (hub: video_preprocessor_config.json).
        "video_config": {"video_processor_type": "Qwen3VLVideoProcessor"},
        "config": {
            "image_processor_type": "Qwen2VLImageProcessorFast",
            "size": {"shortest_edge": 65536, "longest_edge": 16777216},
            "patch_size": 16, "temporal_patch_size": 2, "merge_size": 2,
            "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
            "do_rescale": True, "rescale_factor": 0.00392156862745098,
            "do_normalize": True, "do_resize": True, "do_convert_rgb": True, "resample": 3,
        },
    },
}


def smooth(w, h, seed, noise=4.0):
    """Smooth colour gradients with mild noise: resampling matters, JPEG stays small."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    fx, fy = x / max(w - 1, 1), y / max(h - 1, 1)
    ph = rng.uniform(0, 6.28, 3)
    r = 128 + 90 * np.sin(6.0 * fx + 2.0 * fy + ph[0])
    g = 128 + 90 * np.cos(3.0 * fx - 5.0 * fy + ph[1])
    b = 40 + 170 * fx * fy + 30 * np.sin(11.0 * fy + ph[2])
    img = np.stack([r, g, b], -1) + rng.normal(0, noise, (h, w, 3))
    # A few hard edges so bicubic overshoot and clamping are exercised.
    img[(h // 3):(h // 3 + max(h // 10, 1)), (w // 4):(w // 4 + max(w // 8, 1))] = [250, 20, 10]
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB")


def save(im, fmt, **kw):
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def exif_orientation(o):
    e = Image.Exif()
    e[0x0112] = o
    return e.tobytes()


def images():
    """(file name, bytes, note) of the input images."""
    jpg = dict(quality=80, subsampling=2)
    yield "rgb_28x28.png", save(smooth(28, 28, 1), "PNG"), "smallest accepted size"
    yield "tall_29x1000.jpg", save(smooth(29, 1000, 2), "JPEG", **jpg), "narrow and tall"
    yield "wide_1000x29.jpg", save(smooth(1000, 29, 3), "JPEG", **jpg), "wide and short"
    yield "baseline420_320x240.jpg", save(smooth(320, 240, 4), "JPEG", quality=90, subsampling=2), \
        "baseline 4:2:0 JPEG; 4:3; Qwen3 tie (240/32 = 7.5)"
    yield "rgb_426x320.jpg", save(smooth(426, 320, 5), "JPEG", quality=85, subsampling=0), "4:4:4 JPEG"
    yield "progressive_640x480.jpg", save(smooth(640, 480, 6), "JPEG", quality=85, progressive=True), \
        "progressive JPEG"
    yield "large_1600x1200.jpg", save(smooth(1600, 1200, 7, noise=2.0), "JPEG", quality=60), "large 4:3"
    yield "large_2000x1500.jpg", save(smooth(2000, 1500, 8, noise=2.0), "JPEG", quality=60), "large 4:3"
    yield "tie43_280x210.jpg", save(smooth(280, 210, 9), "JPEG", **jpg), "4:3, 210/28 = 7.5 rounds to 8"
    yield "tie54_350x280.png", save(smooth(350, 280, 10, noise=1.0).quantize(64).convert("RGB"), "PNG"), \
        "5:4, 350/28 = 12.5 rounds to 12"
    yield "tie54_400x320.jpg", save(smooth(400, 320, 11), "JPEG", **jpg), "5:4, 400/32 = 12.5 rounds to 12"
    yield "ratio199_1990x10.png", save(smooth(1990, 10, 12, noise=1.0).quantize(32).convert("RGB"), "PNG"), \
        "aspect 199: accepted"
    yield "ratio199_10x1990.png", save(smooth(10, 1990, 13, noise=1.0).quantize(32).convert("RGB"), "PNG"), \
        "aspect 199, tall: accepted"
    yield "ratio201_2010x10.png", save(smooth(2010, 10, 14, noise=1.0).quantize(32).convert("RGB"), "PNG"), \
        "aspect 201: refused by smart_resize"
    yield "gray_300x200.png", save(smooth(300, 200, 15, noise=1.0).convert("L"), "PNG"), "grey PNG"
    rgba = smooth(256, 192, 16, noise=1.0).quantize(64).convert("RGB")
    alpha = Image.fromarray((np.arange(256)[None, :] * np.ones((192, 1))).astype(np.uint8), "L")
    yield "rgba_256x192.png", save(Image.merge("RGBA", (*rgba.split(), alpha)), "PNG"), "RGBA PNG: alpha dropped"
    yield "palette_200x150.png", save(smooth(200, 150, 17).quantize(48), "PNG"), "palette PNG"
    yield "exif6_240x180.jpg", save(smooth(240, 180, 18), "JPEG", quality=85, exif=exif_orientation(6)), \
        "EXIF orientation 6: decoded 180x240"


def sha(b):
    return hashlib.sha256(b).hexdigest()


def build_processor(family, spec, workdir):
    d = workdir / family
    d.mkdir(parents=True)
    cfg = dict(spec["config"], processor_class=spec["processor_class"])
    (d / "preprocessor_config.json").write_text(json.dumps(cfg, indent=2))
    (d / "chat_template.jinja").write_text(spec["template"])
    if "video_config" in spec:
        (d / "video_preprocessor_config.json").write_text(json.dumps(spec["video_config"], indent=2))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TOKENIZER / f, d / f)
    proc = AutoProcessor.from_pretrained(str(d))
    if proc.image_processor.backend != "torchvision":
        raise SystemExit(f"{family}: expected the torchvision backend, got {proc.image_processor.backend}")
    return proc, cfg


def frame(proc, img, text_first, system=None, size=None):
    parts = [{"type": "image", "image": img}, {"type": "text", "text": QUESTION}]
    if text_first:
        parts.reverse()
    messages = [{"role": "user", "content": parts}]
    if system is not None:
        messages.insert(0, {"role": "system", "content": system})
    kwargs = {"return_mm_token_type_ids": True}
    if size is not None:
        kwargs["size"] = size
    out = proc.apply_chat_template(messages, tokenize=True, return_dict=True,
                                   add_generation_prompt=True, return_tensors="pt",
                                   processor_kwargs=kwargs)
    return out


def sample_values(flat, rng):
    n = flat.size
    idx = sorted(set([0, n - 1] + rng.choice(n, SAMPLES - 2, replace=False).tolist()))
    return [[int(i), float(flat[i])] for i in idx]


def main():
    torch.set_num_threads(1)
    OUT.mkdir(parents=True, exist_ok=True)
    imgdir = OUT / "images"
    if imgdir.exists():
        shutil.rmtree(imgdir)
    imgdir.mkdir()
    entries = []
    for name, data, note in images():
        (imgdir / name).write_bytes(data)
        pil = load_image(str(imgdir / name))
        rgb = np.array(pil)
        # What a harness gets when it hands the processor a path or URL instead of a PIL image:
        # TorchvisionBackend.fetch_images decodes with torchvision.io (no EXIF orientation).
        tv = transformers.image_utils.load_image_as_tensor(str(imgdir / name)).permute(1, 2, 0).contiguous()
        entries.append({"file": name, "note": note, "bytes": len(data), "sha256": sha(data),
                        "width": pil.width, "height": pil.height, "rgb_sha256": sha(rgb.tobytes()),
                        "torchvision_decode_matches": bool(tv.shape == rgb.shape and
                                                           torch.equal(tv, torch.from_numpy(rgb)))})

    families = {}
    cfgdir = OUT / "configs"
    if cfgdir.exists():
        shutil.rmtree(cfgdir)
    with tempfile.TemporaryDirectory() as tmp:
        for family, spec in FAMILIES.items():
            proc, cfg = build_processor(family, spec, pathlib.Path(tmp))
            (cfgdir / family).mkdir(parents=True)
            shutil.copy(pathlib.Path(tmp) / family / "preprocessor_config.json", cfgdir / family)
            shutil.copy(pathlib.Path(tmp) / family / "chat_template.jinja", cfgdir / family)
            ip = proc.image_processor
            cases = []
            for k, e in enumerate(entries):
                pil = load_image(str(imgdir / e["file"]))
                case = {"file": e["file"]}
                try:
                    out = ip(images=[pil], return_tensors="pt")
                except Exception as ex:  # noqa: BLE001 - the refusal is the golden
                    case["error"] = {"type": type(ex).__name__, "message": str(ex)}
                    cases.append(case)
                    continue
                pv = out["pixel_values"].to(torch.float32).contiguous()
                thw = out["image_grid_thw"][0].tolist()
                flat = pv.numpy().reshape(-1)
                case.update({
                    "resized_height": thw[1] * ip.patch_size, "resized_width": thw[2] * ip.patch_size,
                    "image_grid_thw": thw, "pixel_values_shape": list(pv.shape),
                    "pixel_values_sha256": sha(flat.astype("<f4").tobytes()),
                })
                if flat.size <= FULL_LIMIT:
                    case["pixel_values"] = [float(v) for v in flat]
                else:
                    case["pixel_values_samples"] = sample_values(flat, np.random.default_rng(1000 + k))
                for key, text_first in (("image_first", False), ("text_first", True)):
                    fr = frame(proc, pil, text_first)
                    if not torch.equal(fr["pixel_values"], out["pixel_values"]):
                        raise SystemExit(f"{family}/{e['file']}: chat pixel_values differ from the image processor's")
                    case[key] = {"input_ids": fr["input_ids"][0].tolist(),
                                 "mm_token_type_ids": fr["mm_token_type_ids"][0].tolist()}
                fr = frame(proc, pil, False, SYSTEM)
                case["system_image_first"] = {"input_ids": fr["input_ids"][0].tolist(),
                                              "mm_token_type_ids": fr["mm_token_type_ids"][0].tolist()}
                cases.append(case)
            budgets = []
            for file in BUDGET_FILES:
                pil = load_image(str(imgdir / file))
                for lo, hi in BUDGETS[family]:
                    size = {"shortest_edge": lo, "longest_edge": hi}
                    out = ip(images=[pil], size=size, return_tensors="pt")
                    pv = out["pixel_values"].to(torch.float32).contiguous()
                    thw = out["image_grid_thw"][0].tolist()
                    fr = frame(proc, pil, False, size=size)
                    if not torch.equal(fr["pixel_values"], out["pixel_values"]):
                        raise SystemExit(f"{family}/{file} at {size}: chat pixel_values differ from the image processor's")
                    budgets.append({
                        "file": file, "min_pixels": lo, "max_pixels": hi,
                        "resized_height": thw[1] * ip.patch_size, "resized_width": thw[2] * ip.patch_size,
                        "image_grid_thw": thw, "pixel_values_shape": list(pv.shape),
                        "pixel_values_sha256": sha(pv.numpy().reshape(-1).astype("<f4").tobytes()),
                        "image_first": {"input_ids": fr["input_ids"][0].tolist(),
                                        "mm_token_type_ids": fr["mm_token_type_ids"][0].tolist()}})
            families[family] = {"preprocessor_config": cfg, "cases": cases, "budgets": budgets}

    doc = {
        "generator": "scripts/reference/golden_preprocess.py",
        "versions": {"transformers": transformers.__version__, "torch": torch.__version__,
                     "torchvision": torchvision.__version__, "pillow": PIL.__version__,
                     "numpy": np.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability()},
        "question": QUESTION,
        "system": SYSTEM,
        "images": entries,
        "families": families,
    }
    (OUT / "manifest.json").write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"wrote {len(entries)} images, {sum(len(f['cases']) for f in families.values())} cases, "
          f"{total} bytes to {OUT.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
