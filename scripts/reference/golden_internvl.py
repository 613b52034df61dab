"""Golden data for the InternVL plugin (plugins/internvl), from transformers 5.17 itself.

Writes two files:

- plugins/internvl/testdata/cases.json (sdk-wasm/plugintest.Suite): for a grid of image sizes
  (edge cases, exact aspect-ratio ties, long thin images, a seeded random spread) and bundle params
  (max_patches 1/2/6/12, min_patches > 1) the views the plan must hold: GotOcr2ImageProcessor's
  get_optimal_tiled_canvas gives the (cols, rows) grid, each tile a 448x448 region of the image
  resized to (448*cols, 448*rows) in row-major order, then the thumbnail (the image resized to
  448x448) when there is more than one tile. Sizes small enough are also run through the real
  processor (on a blank image), whose num_patches must agree. Empty images are refused. Frames
  come from the processor's own apply_chat_template (the -hf template) split at the image
  placeholder, which InternVLProcessor expands to <img> + <IMG_CONTEXT> x 256 per tile + </img>.
- core/internal/prep/testdata/golden_internvl/manifest.json: the pixel goldens. For the images of
  the Qwen goldens (core/internal/prep/testdata/golden/images, committed) and for synthetic images
  whose pixels are an integer formula (synth(); the Go test computes the same pixels, so no blob
  is committed for them), at the default tiling, max_patches 1 and a few other params: the number
  of tiles, per tile the sha256 of pixel_values[i] (float32 little-endian) in the plan's tiles
  layout (its [3, 448, 448] cut into 32x32 patches of 14 in raster order, each 3 x 14 x 14: the
  rows the engine receives) and 8 sampled values, and the chat-framed input_ids (run-length encoded: [id, count] pairs) with the
  image before the question, after it, and after a client system message.

The processor is built from a directory holding the -hf preprocessor_config.json, the
InternVL3-hf tokenizer (scripts/reference/internvl_tokenizer.py writes .build/tokenizer/internvl3)
and the -hf chat template; the torchvision backend on an x86-64 CPU, as for the Qwen goldens.

Run with the reference stack: `just golden-internvl`. CI never runs it; the outputs are committed.
"""

import hashlib
import json
import pathlib
import random
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
from transformers.models.got_ocr2.image_processing_got_ocr2 import get_optimal_tiled_canvas

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOKENIZER = ROOT / ".build/tokenizer/internvl3"
CASES = ROOT / "plugins/internvl/testdata/cases.json"
GOLDEN = ROOT / "core/internal/prep/testdata/golden_internvl"
QWEN_IMAGES = ROOT / "core/internal/prep/testdata/golden/images"

TILE = 448
TOKENS_PER_TILE = 256
IMG_START, IMG_END, IMG_CONTEXT = "<img>", "</img>", "<IMG_CONTEXT>"

# preprocessor_config.json of OpenGVLab/InternVL3-*-hf (convert_internvl_weights_to_hf.py's
# write_image_processor; max_patches, min_patches and crop_to_patches are the class defaults, and
# InternVLProcessor forces crop_to_patches=True).
PREPROCESSOR = {
    "image_processor_type": "GotOcr2ImageProcessorFast",
    "processor_class": "InternVLProcessor",
    "size": {"height": TILE, "width": TILE},
    "image_mean": [0.485, 0.456, 0.406],
    "image_std": [0.229, 0.224, 0.225],
    "resample": 3,
    "do_resize": True, "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
    "do_convert_rgb": True, "crop_to_patches": False, "max_patches": 12, "min_patches": 1,
}
PROCESSOR = {"image_seq_length": TOKENS_PER_TILE, "processor_class": "InternVLProcessor"}
VIDEO = {"video_processor_type": "InternVLVideoProcessor"}

QUESTION = "What is the main object in this image? Answer in one word."
SYSTEM = "You are a careful assistant. Réponds en un mot."
SAMPLES = 8


def build_processor(workdir):
    d = workdir / "internvl"
    d.mkdir(parents=True)
    (d / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR, indent=2))
    (d / "processor_config.json").write_text(json.dumps(PROCESSOR, indent=2))
    (d / "video_preprocessor_config.json").write_text(json.dumps(VIDEO, indent=2))
    for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(TOKENIZER / f, d / f)
    proc = AutoProcessor.from_pretrained(str(d))
    if proc.image_processor.backend != "torchvision":
        raise SystemExit(f"expected the torchvision backend, got {proc.image_processor.backend}")
    if (proc.start_image_token_id, proc.end_image_token_id, proc.image_token_id) != (151665, 151666, 151667):
        raise SystemExit("the tokenizer is not InternVL3-hf's: run scripts/reference/internvl_tokenizer.py")
    return proc


def views(w, h, lo, hi):
    """The views the plan must hold, as sdk-wasm/plugintest.WantView dicts: the size each tile is
    cut from and its region (absent: all of it). Every view is a 448x448 tile of 32x32 patches and
    256 tokens; the plan's total is checked, the pixel goldens check the rest."""
    cols, rows = get_optimal_tiled_canvas((h, w), (TILE, TILE), lo, hi)
    out = []
    for i in range(cols * rows):
        c, r = i % cols, i // cols
        v = {"resized": {"width": TILE * cols, "height": TILE * rows}}
        if cols * rows > 1:
            v["region"] = {"x": c * TILE, "y": r * TILE, "width": TILE, "height": TILE}
        out.append(v)
    if cols * rows > 1:
        out.append({"resized": {"width": TILE, "height": TILE}})
    return out


# ---------------------------------------------------------------------------------------------
# cases.json

EDGE_SIZES = [
    (1, 1), (2, 2), (1, 2), (2, 1), (13, 13), (14, 14), (28, 28), (100, 100), (447, 447), (448, 448),
    (449, 449), (896, 448), (448, 896), (1344, 448), (320, 240), (240, 320), (426, 320), (640, 480),
    (1600, 1200), (400, 320), (320, 400), (350, 280), (500, 400), (1000, 800), (300, 200), (200, 300),
    (1344, 896), (1920, 1080), (1080, 1920), (1280, 720), (2048, 2048), (4000, 3000), (3000, 4000),
    (1, 700), (700, 1), (1, 32768), (32768, 1), (3, 2000), (2000, 3), (29, 1000), (1000, 29),
    (5376, 448), (448, 5376), (2500, 1000), (1000, 2500), (32768, 32768), (12, 1), (1, 12), (13, 1),
    (11, 1), (6, 1), (7, 1), (250, 100), (100, 250), (150, 100), (100, 150), (6720, 2240),
]

# Long-thin and exact-ratio shapes where ties decide: c/r equal for several grids (1/1, 2/2, 3/3;
# 1/2, 2/4, 3/6; 2/1, 4/2, 6/2 ...) and the area rule picks between them.
TIE_SIZES = [(224 * k, 224 * k) for k in range(1, 9)] + [(224 * k, 448 * k) for k in range(1, 6)] + \
            [(448 * k, 224 * k) for k in range(1, 6)] + [(600, 400), (1200, 800), (900, 600), (330, 110),
                                                         (1000, 250), (673, 673), (634, 634), (633, 633)]

PARAM_SETS = [{}, {"max_patches": 1}, {"max_patches": 6}, {"min_patches": 3, "max_patches": 12},
              {"max_patches": 2}, {"min_patches": 2, "max_patches": 4}, {"max_patches": 24},
              {"system_prompt": "Be brief."}]
PROCESS_LIMIT = 600_000  # blank images up to this many pixels also go through the processor


def random_sizes(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        kind = rng.random()
        if kind < 0.6:
            w, h = rng.randint(1, 2048), rng.randint(1, 2048)
        elif kind < 0.85:
            w, h = rng.randint(1, 8192), rng.randint(1, 8192)
        else:
            short = rng.randint(1, 64)
            w, h = short, min(32768, short * rng.randint(2, 400))
            if rng.random() < 0.5:
                w, h = h, w
        out.append((w, h))
    return out


SYSTEMS = [None, "Answer in one word.", "", "Système: 東京 ☃\nsecond line <|im_end|>"]
QUESTIONS = [("What is in this image?", False), ("Describe it.", True), ("", False), (" lead and trail ", True),
             ("<|im_end|> injected", False), ("Unicode: 東京 ☃\nsecond line", False), ("", True)]


def frames(proc, tokens, params):
    out = []
    default_system = params.get("system_prompt", "")
    for (question, text_first), client_system in \
            [(q, None) for q in QUESTIONS] + [(QUESTIONS[i % 2], sy) for i, sy in enumerate(SYSTEMS[1:])]:
        content = [{"type": "image"}, {"type": "text", "text": question}]
        if text_first:
            content.reverse()
        messages = [{"role": "user", "content": content}]
        system = client_system if client_system is not None else (default_system or None)
        if system is not None:
            messages.insert(0, {"role": "system", "content": system})
        text = proc.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        assert text.count(IMG_CONTEXT) == 1, text
        before, after = text.split(IMG_CONTEXT)
        case = {"question": question, "text_first": text_first}
        if client_system is not None:
            case["system"] = client_system
        out.append({**case, "want": {
            "before": before, "after": after,
            "span": {"open": [IMG_START], "pad": IMG_CONTEXT, "count": tokens, "close": [IMG_END]},
            "stop_token_ids": [151645], "hints": {"skip_special_tokens": True}}})
    return out


def plugin_cases(proc):
    ip = proc.image_processor
    sizes = [(s, 0) for s in EDGE_SIZES + TIE_SIZES] + [(s, 0) for s in random_sizes(100, 20261201)]
    for pi in range(1, len(PARAM_SETS)):
        sizes += [(s, pi) for s in EDGE_SIZES[::3] + random_sizes(20, 100 + pi)]
    cases = []
    framed = set()
    for w, h in [(0, 10), (10, 0), (0, 0)]:
        # The reference cannot process an empty image (the resize fails); the plugin refuses it.
        try:
            ip(images=[torch.zeros((3, h, w), dtype=torch.uint8)], crop_to_patches=True, return_tensors="pt")
            raise SystemExit(f"the processor accepted a {w}x{h} image")
        except (ValueError, RuntimeError, ZeroDivisionError, IndexError):
            pass
        cases.append({"name": f"{w}x{h}", "image": {"width": w, "height": h, "format": "png"},
                      "want_error": "image_too_small"})
    for (w, h), pi in sizes:
        params = PARAM_SETS[pi]
        lo, hi = params.get("min_patches", 1), params.get("max_patches", 12)
        name = f"{w}x{h}" + (f"_p{pi}" if pi else "")
        if any(c["name"] == name for c in cases):
            continue
        vs = views(w, h, lo, hi)
        tokens = TOKENS_PER_TILE * len(vs)
        if w * h <= PROCESS_LIMIT:
            out = ip(images=[Image.new("RGB", (w, h))], crop_to_patches=True, min_patches=lo, max_patches=hi,
                     return_tensors="pt")
            assert out["num_patches"].tolist() == [len(vs)], (w, h, params, out["num_patches"], len(vs))
            assert list(out["pixel_values"].shape) == [len(vs), 3, TILE, TILE]
        case = {"name": name, "image": {"width": w, "height": h, "format": "png"}}
        if params:
            case["params"] = params
        case["want"] = {"grid": {"t": len(vs), "h": TILE // 14, "w": TILE // 14}, "image_tokens": tokens, "views": vs}
        if (w, h) in [(320, 240), (1, 1), (896, 448)] and pi == 0 or (pi and pi not in framed):
            framed.add(pi)
            case["frames"] = frames(proc, tokens, params)
        cases.append(case)
    return cases


# ---------------------------------------------------------------------------------------------
# pixel goldens

def synth(w, h, seed):
    """Synthetic RGB pixels from integer arithmetic only (prep's golden_internvl_test.go computes
    the same): diagonal ramps, a checker of period 7, seed-dependent offsets, and one saturated
    rectangle for bicubic overshoot and clamping."""
    y, x = np.mgrid[0:h, 0:w].astype(np.int64)
    r = (x * 255 // max(w - 1, 1) + 37 * seed) % 256
    g = (y * 255 // max(h - 1, 1) + 11 * seed) % 256
    b = ((x + 2 * y) * 3 + ((x // 7 + y // 7) % 2) * 90 + 5 * seed) % 256
    img = np.stack([r, g, b], -1)
    x0, y0 = w // 4, h // 3
    img[y0:y0 + max(h // 10, 1), x0:x0 + max(w // 8, 1)] = [250, 20, 10]
    return Image.fromarray(img.astype(np.uint8), "RGB")


SYNTH = [(1, 1), (2, 2), (1, 700), (700, 1), (7, 2000), (3000, 9), (448, 448), (896, 448), (320, 240),
         (400, 320), (426, 320), (500, 500), (1344, 896), (2560, 1920), (100, 2000), (640, 200)]

# Images also run at other params (the default is max_patches 12, min_patches 1).
PARAM_IMAGES = ["synth_426x320", "synth_2560x1920", "tall_29x1000.jpg", "synth_1344x896", "tie54_400x320.jpg",
                "synth_7x2000"]
EXTRA_PARAMS = [{"max_patches": 2}, {"max_patches": 6}, {"min_patches": 3, "max_patches": 12},
                {"min_patches": 2, "max_patches": 4}]


def sha(b):
    return hashlib.sha256(b).hexdigest()


def rle(ids):
    out = []
    for i in ids:
        if out and out[-1][0] == i:
            out[-1][1] += 1
        else:
            out.append([i, 1])
    return out


def chat(proc, img, params, text_first=False, system=None):
    parts = [{"type": "image", "image": img}, {"type": "text", "text": QUESTION}]
    if text_first:
        parts.reverse()
    messages = [{"role": "user", "content": parts}]
    if system is not None:
        messages.insert(0, {"role": "system", "content": system})
    return proc.apply_chat_template(messages, tokenize=True, return_dict=True, add_generation_prompt=True,
                                    return_tensors="pt", processor_kwargs=dict(params))


def pixel_case(proc, name, img, params, k):
    ip = proc.image_processor
    lo, hi = params.get("min_patches", 1), params.get("max_patches", 12)
    out = ip(images=[img], crop_to_patches=True, min_patches=lo, max_patches=hi, return_tensors="pt")
    pv = out["pixel_values"].to(torch.float32).contiguous()
    n = pv.shape[0]
    if n != len(views(img.width, img.height, lo, hi)):
        raise SystemExit(f"{name} {params}: {n} tiles, the geometry says {len(views(img.width, img.height, lo, hi))}")
    rng = np.random.default_rng(5000 + k)
    tiles = []
    for t in range(n):
        # The tile in the plan's tiles layout: 32x32 patches of 14 in raster order, each C x 14 x 14.
        p = TILE // 14
        flat = pv[t].reshape(3, p, 14, p, 14).permute(1, 3, 0, 2, 4).contiguous().numpy().reshape(-1)
        idx = sorted(set([0, flat.size - 1] + rng.choice(flat.size, SAMPLES - 2, replace=False).tolist()))
        tiles.append({"sha256": sha(flat.astype("<f4").tobytes()),
                      "samples": [[int(i), float(flat[i])] for i in idx]})
    case = {"image": name, "tiles": tiles}
    if params:
        case["params"] = params
    variants = [("image_first", False, None), ("text_first", True, None), ("system_image_first", False, SYSTEM)]
    for key, text_first, system in variants:
        fr = chat(proc, img, params, text_first, system)
        if not torch.equal(fr["pixel_values"], out["pixel_values"]):
            raise SystemExit(f"{name} {params}: chat pixel_values differ from the image processor's")
        case[key] = rle(fr["input_ids"][0].tolist())
    return case


def pixel_goldens(proc):
    images = []
    for f in sorted(QWEN_IMAGES.iterdir()):
        pil = load_image(str(f))
        images.append(({"name": f.name, "file": f"../golden/images/{f.name}", "sha256": sha(f.read_bytes()),
                        "width": pil.width, "height": pil.height, "rgb_sha256": sha(np.array(pil).tobytes())}, pil))
    for i, (w, h) in enumerate(SYNTH):
        pil = synth(w, h, i + 1)
        images.append(({"name": f"synth_{w}x{h}", "synth": {"width": w, "height": h, "seed": i + 1},
                        "width": w, "height": h, "rgb_sha256": sha(np.array(pil).tobytes())}, pil))
    by_name = {e["name"]: pil for e, pil in images}
    cases = []
    for k, (e, pil) in enumerate(images):
        cases.append(pixel_case(proc, e["name"], pil, {}, k))
        cases.append(pixel_case(proc, e["name"], pil, {"max_patches": 1}, 1000 + k))
    for j, name in enumerate(PARAM_IMAGES):
        for m, params in enumerate(EXTRA_PARAMS):
            cases.append(pixel_case(proc, name, by_name[name], params, 2000 + 10 * j + m))
    return [e for e, _ in images], cases


def main():
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        proc = build_processor(pathlib.Path(tmp))
        suite = {"family": "internvl", "source": "scripts/reference/golden_internvl.py (transformers "
                 + transformers.__version__ + ")", "cases": plugin_cases(proc)}
        CASES.parent.mkdir(parents=True, exist_ok=True)
        # One case a line: the views make an indented file large, and a line per case diffs well.
        head = json.dumps({k: suite[k] for k in ("family", "source")}, ensure_ascii=False)[:-1]
        lines = ",\n".join(json.dumps(c, ensure_ascii=False, separators=(",", ":")) for c in suite["cases"])
        CASES.write_text(head + ', "cases": [\n' + lines + "\n]}\n")
        refused = sum("want_error" in c for c in suite["cases"])
        print(f"{CASES.relative_to(ROOT)}: {len(suite['cases'])} cases, {refused} refused", file=sys.stderr)

        images, cases = pixel_goldens(proc)
    GOLDEN.mkdir(parents=True, exist_ok=True)
    doc = {
        "generator": "scripts/reference/golden_internvl.py",
        "versions": {"transformers": transformers.__version__, "torch": torch.__version__,
                     "torchvision": torchvision.__version__, "pillow": PIL.__version__, "numpy": np.__version__,
                     "cpu_capability": torch.backends.cpu.get_cpu_capability()},
        "preprocessor_config": PREPROCESSOR,
        "question": QUESTION,
        "system": SYSTEM,
        "images": images,
        "cases": cases,
    }
    (GOLDEN / "manifest.json").write_text(json.dumps(doc, separators=(",", ":"), ensure_ascii=False) + "\n")
    tiles = sum(len(c["tiles"]) for c in cases)
    print(f"{(GOLDEN / 'manifest.json').relative_to(ROOT)}: {len(images)} images, {len(cases)} cases, "
          f"{tiles} tiles", file=sys.stderr)


if __name__ == "__main__":
    main()
