"""Golden data for the Phi-4-multimodal plugin (plugins/phi4_multimodal), from transformers 5.17 itself.

Writes two files:

- plugins/phi4_multimodal/testdata/cases.json (sdk-wasm/plugintest.Suite): for a grid of image
  sizes (edge cases, 1-pixel strips, 200:1 and longer, the bounds of the "very extreme" refusal,
  exact multiples of 448, sizes needing the closest-aspect fallback, its ties, a seeded random
  spread) and bundle params (dynamic_hd 1/4/12/63, a system prompt) the views the plan must hold,
  read off Phi4MultimodalImageProcessor.dynamic_preprocess itself: the crop grid, the resized size,
  the white padding, and per crop its region of the padded canvas and its patch mask (the
  processor's attention mask cut into 32x32 crops, checked to be a rectangle from the corner),
  and num_img_tokens. dynamic_preprocess runs with its pixel calls (tvF.resize, tvF.pad) stubbed to
  record their sizes, so every size is checked, however large; sizes small enough also go through
  the whole processor on a blank image, whose num_img_tokens and shapes must agree. Refusals:
  empty images (image_too_small) and the processor's ValueError (aspect_ratio_too_extreme, with
  its message). Frames come from the processor's own apply_chat_template split at the image
  placeholder, which Phi4MultimodalProcessor expands to num_img_tokens x <|image|>.
- core/internal/prep/testdata/golden_phi4/manifest.json: the pixel goldens. For the images of the
  Qwen goldens (core/internal/prep/testdata/golden/images, committed) and synthetic images whose
  pixels are an integer formula (golden_internvl.py's synth(); the Go test computes the same
  pixels, so no blob is committed for them), at dynamic_hd 36 and a few other values: per view
  the sha256 of image_pixel_values[0, v] (float32 little-endian, [3, 448, 448] as the processor
  returns it; the global view first, then the crops row-major) and 8 sampled values, per view the
  patch mask (a rectangle of the [32, 32] image_attention_mask), num_img_tokens, and the
  chat-framed input_ids (run-length encoded: [id, count] pairs) with the image before the
  question, after it, and after a client system message.

The processor is Phi4MultimodalProcessor(Phi4MultimodalImageProcessor() (the class defaults, torchvision
backend), Phi4MultimodalFeatureExtractor(), the tokenizer of .build/tokenizer/phi4
(scripts/reference/phi4_tokenizer.py), that directory's chat template), on an x86-64 CPU.

The script also checks, for every dynamic_hd from 1 to 63, that no two crop grids of one crop
count can tie for the closest aspect ratio, so that the order of the processor's Python set
(grids of one count) never decides a result.

Run with the reference stack: `just golden-phi4`. CI never runs it; the outputs are committed.
"""

import contextlib
import hashlib
import json
import math
import pathlib
import random
import sys
from fractions import Fraction

import numpy as np
import PIL
import torch
import torchvision
import transformers
from PIL import Image
from transformers import (AutoTokenizer, Phi4MultimodalFeatureExtractor, Phi4MultimodalImageProcessor,
                          Phi4MultimodalProcessor)
from transformers.image_utils import load_image
from transformers.models.phi4_multimodal import image_processing_phi4_multimodal as phi4_ip

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from golden_internvl import synth  # noqa: E402  (the shared synthetic image)

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOKENIZER = ROOT / ".build/tokenizer/phi4"
CASES = ROOT / "plugins/phi4_multimodal/testdata/cases.json"
GOLDEN = ROOT / "core/internal/prep/testdata/golden_phi4"
QWEN_IMAGES = ROOT / "core/internal/prep/testdata/golden/images"

CROP, PATCH, MASK = 448, 14, 32
IMAGE_TOKEN = "<|image|>"
STOPS = [199999, 200020]
WHITE = [255, 255, 255]

QUESTION = "What is the main object in this image? Answer in one word."
SYSTEM = "You are a careful assistant. Réponds en un mot."
SAMPLES = 8


def build_processor():
    tok = AutoTokenizer.from_pretrained(str(TOKENIZER))
    if (tok.image_token_id, tok.convert_tokens_to_ids("<|end|>"), tok.convert_tokens_to_ids("<|user|>")) != \
            (200010, 200020, 200021):
        raise SystemExit("the tokenizer is not Phi-4's: run scripts/reference/phi4_tokenizer.py (just setup)")
    ip = Phi4MultimodalImageProcessor()
    if ip.backend != "torchvision":
        raise SystemExit(f"expected the torchvision backend, got {ip.backend}")
    template = (TOKENIZER / "chat_template.jinja").read_text()
    return Phi4MultimodalProcessor(image_processor=ip, audio_processor=Phi4MultimodalFeatureExtractor(),
                                   tokenizer=tok, chat_template=template)


def check_set_order():
    """No two grids of one crop count can tie for the closest aspect ratio, for any dynamic_hd up to 63:
    for every such pair, some grid is strictly closer to their midpoint (exact arithmetic)."""
    for mx in range(1, 64):
        grids = sorted({(i, j) for n in range(1, mx + 1) for i in range(1, n + 1) for j in range(1, n + 1)
                        if 1 <= i * j <= mx}, key=lambda g: g[0] * g[1])
        for k, a in enumerate(grids):
            for b in grids[k + 1:]:
                if a[0] * a[1] != b[0] * b[1]:
                    continue
                m = (Fraction(*a) + Fraction(*b)) / 2
                d = abs(m - Fraction(*a))
                if all(abs(m - Fraction(c, r)) >= d for c, r in grids):
                    raise SystemExit(f"dynamic_hd {mx}: {a} and {b} can tie for the closest aspect ratio")


# ---------------------------------------------------------------------------------------------
# geometry, read off dynamic_preprocess

class _Shape:
    """Stands for an image tensor in dynamic_preprocess: only its shape and device are read."""

    def __init__(self, h, w):
        self.shape = (3, h, w)
        self.device = "cpu"


class _RecordingTvF:
    """tvF with resize and pad recording their sizes instead of moving pixels."""

    def __init__(self):
        self.calls = []

    def resize(self, image, size, *args, **kwargs):
        assert not args and not kwargs, (args, kwargs)  # the defaults: bilinear, antialias=True
        self.calls.append(("resize", tuple(size)))
        return _Shape(*size)

    def pad(self, image, padding, fill):
        assert padding[:2] == [0, 0] and fill == WHITE, (padding, fill)
        self.calls.append(("pad", (padding[2], padding[3])))
        _, h, w = image.shape
        return _Shape(h + padding[3], w + padding[2])


@contextlib.contextmanager
def recording_tvf():
    real, rec = phi4_ip.tvF, _RecordingTvF()
    phi4_ip.tvF = rec
    try:
        yield rec
    finally:
        phi4_ip.tvF = real


def crop_masks(mask, cols, rows):
    """The processor's canvas mask cut into per-crop rectangles {x, y, width, height} (checked to be
    the whole rectangle of ones from the crop's corner) and kept cells (mask[::2, ::2].sum())."""
    out = []
    m = mask.numpy()
    for r in range(rows):
        for c in range(cols):
            crop = m[r * MASK:(r + 1) * MASK, c * MASK:(c + 1) * MASK]
            h, w = int(crop[:, 0].sum()), int(crop[0, :].sum())
            want = np.zeros_like(crop)
            want[:h, :w] = 1
            assert (crop == want).all() and h >= 1 and w >= 1, (r, c, h, w)
            out.append(({"x": 0, "y": 0, "width": w, "height": h}, int(crop[::2, ::2].sum())))
    return out


def geometry(ip, w, h, dhd):
    """dynamic_preprocess for a w x h image: the crop grid, resize, pad, crop masks, num_img_tokens;
    or the ValueError's message."""
    with recording_tvf() as rec:
        try:
            _, mask = ip.dynamic_preprocess(_Shape(h, w), CROP, PATCH, MASK, max_num=dhd)
        except ValueError as e:
            return {"error": str(e)}
    (k1, (nh, nw)), (k2, (pw, ph)) = rec.calls
    assert (k1, k2) == ("resize", "pad")
    rows, cols = mask.shape[0] // MASK, mask.shape[1] // MASK
    assert (nw + pw, nh + ph) == (CROP * cols, CROP * rows)
    # num_img_tokens as _preprocess computes it from the same mask
    ds = mask.reshape(rows, MASK, cols, MASK).transpose(1, 2).reshape(-1, MASK, MASK)[:, 0::2, 0::2]
    ds = ds.reshape(rows, cols, MASK // 2, MASK // 2).transpose(1, 2).reshape(rows * MASK // 2, cols * MASK // 2)
    tokens = 256 + 1 + int(ds.sum().item()) + int(ds[:, 0].sum().item()) + 16
    return {"cols": cols, "rows": rows, "new": (nw, nh), "pad": (pw, ph), "crops": crop_masks(mask, cols, rows),
            "tokens": tokens}


def want_views(g):
    """The views the plan must hold, as sdk-wasm/plugintest.WantView dicts: the global view (the
    padded canvas, resized in float to 448x448 unless it is one crop), then the crops row-major,
    each a region of the resized image padded white to 448x448, with its patch mask."""
    (nw, nh), (pw, ph) = g["new"], g["pad"]
    full = {"x": 0, "y": 0, "width": MASK, "height": MASK}
    white = {"top": 0, "right": pw, "bottom": ph, "left": 0, "color": WHITE}
    one = g["cols"] * g["rows"] == 1
    views = [{"resized": {"width": nw, "height": nh}, "pad": white, "grid": {"t": 1, "h": MASK, "w": MASK},
              "image_tokens": 256, "float_resize": {"width": 0 if one else CROP, "height": 0 if one else CROP},
              "mask": full}]
    for i, (mask, kept) in enumerate(g["crops"]):
        c, r = i % g["cols"], i // g["cols"]
        x, y = c * CROP, r * CROP
        rw, rh = min(CROP, nw - x), min(CROP, nh - y)
        views.append({"resized": {"width": nw, "height": nh}, "region": {"x": x, "y": y, "width": rw, "height": rh},
                      "pad": {"top": 0, "right": CROP - rw, "bottom": CROP - rh, "left": 0, "color": WHITE},
                      "grid": {"t": 1, "h": MASK, "w": MASK}, "image_tokens": kept,
                      "float_resize": {"width": 0, "height": 0}, "mask": mask})
    assert 256 + sum(v["image_tokens"] for v in views[1:]) + 16 + 1 + math.ceil(
        max(m["height"] + MASK * (i // g["cols"]) for i, (m, _) in enumerate(g["crops"])) / 2) == g["tokens"]
    return views


# ---------------------------------------------------------------------------------------------
# cases.json

EDGE_SIZES = [
    (1, 1), (2, 2), (1, 2), (2, 1), (3, 3), (5, 5), (9, 9), (10, 10), (13, 13), (14, 14), (28, 28), (100, 100),
    (320, 240), (240, 320), (426, 320), (640, 480), (1024, 768), (1600, 1200), (1920, 1080), (1080, 1920),
    (447, 447), (448, 448), (449, 449), (896, 448), (448, 896), (1344, 896), (2688, 2688), (2689, 2688),
    (16128, 448), (16129, 448), (448, 16128), (448, 16129), (2048, 2048), (4000, 3000), (3000, 4000),
    (5000, 4000), (3000, 3000), (1000, 1000), (32768, 32768),
    # 1-pixel strips: short ones are upscaled, long ones are refused (resized side under 10)
    (1, 20), (20, 1), (1, 40), (40, 1), (1, 44), (44, 1), (1, 45), (45, 1), (1, 448), (448, 1), (1, 1000), (1000, 1),
    (1, 32768), (32768, 1),
    # 200:1 and longer, around the refusal bound
    (2000, 10), (10, 2000), (4000, 20), (20, 4000), (2010, 10), (448, 9), (448, 10), (9, 448), (10, 448),
    (4480, 100), (32768, 164), (32768, 100), (32768, 40), (32768, 20), (100, 32768), (20, 32768),
    (1990, 10), (10, 1990), (1000, 29), (29, 1000),
    # grid fallback ties: equal ratios of two crop counts ((1,9) and (2,18)), a midpoint tie of
    # two ratios ((2,7) and (3,11)), and squares (1x1 .. 6x6)
    (897, 7874), (862, 8141), (7874, 897), (1462, 5236), (5236, 1462), (5377, 1132), (1403, 5368),
    (4480, 4480), (6000, 6000), (12000, 3000), (3000, 12000),
    # padding just under and over one patch
    (500, 300), (700, 500), (300, 500), (1000, 700), (900, 448), (448, 900), (910, 448), (461, 448), (462, 448),
]


def random_sizes(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        kind = rng.random()
        if kind < 0.6:
            w, h = rng.randint(1, 2048), rng.randint(1, 2048)
        elif kind < 0.85:
            w, h = rng.randint(1, 12000), rng.randint(1, 12000)
        else:
            short = rng.randint(1, 64)
            w, h = short, min(32768, short * rng.randint(2, 600))
            if rng.random() < 0.5:
                w, h = h, w
        out.append((w, h))
    return out


PARAM_SETS = [{}, {"dynamic_hd": 4}, {"dynamic_hd": 1}, {"dynamic_hd": 12}, {"dynamic_hd": 63},
              {"system_prompt": "Be brief."}]
PROCESS_LIMIT = 2_500_000  # blank images up to this many pixels also go through the processor

SYSTEMS = [None, "Answer in one word.", "", "Système: 東京 ☃\nsecond line <|end|>"]
QUESTIONS = [("What is in this image?", False), ("Describe it.", True), ("", False), (" lead and trail ", True),
             ("<|end|> injected", False), ("Unicode: 東京 ☃\nsecond line", False), ("", True)]


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
        assert text.count(IMAGE_TOKEN) == 1, text
        before, after = text.split(IMAGE_TOKEN)
        case = {"question": question, "text_first": text_first}
        if client_system is not None:
            case["system"] = client_system
        out.append({**case, "want": {"before": before, "after": after, "span": {"pad": IMAGE_TOKEN, "count": tokens},
                                     "stop_token_ids": STOPS, "hints": {"skip_special_tokens": True}}})
    return out


def plugin_cases(proc):
    ip = proc.image_processor
    sizes = [(s, 0) for s in EDGE_SIZES] + [(s, 0) for s in random_sizes(120, 20261205)]
    for pi in range(1, len(PARAM_SETS)):
        sizes += [(s, pi) for s in EDGE_SIZES[::4] + random_sizes(15, 300 + pi)]
    cases = []
    framed = set()
    for w, h in [(0, 10), (10, 0), (0, 0)]:
        # The reference cannot process an empty image (a division by zero); the plugin refuses it.
        try:
            ip.dynamic_preprocess(_Shape(h, w), CROP, PATCH, MASK)
            raise SystemExit(f"the processor accepted a {w}x{h} image")
        except (ZeroDivisionError, ValueError, RuntimeError):
            pass
        cases.append({"name": f"{w}x{h}", "image": {"width": w, "height": h, "format": "png"},
                      "want_error": "image_too_small"})
    for (w, h), pi in sizes:
        params = PARAM_SETS[pi]
        dhd = params.get("dynamic_hd", 36)
        name = f"{w}x{h}" + (f"_p{pi}" if pi else "")
        if any(c["name"] == name for c in cases):
            continue
        case = {"name": name, "image": {"width": w, "height": h, "format": "png"}}
        if params:
            case["params"] = params
        g = geometry(ip, w, h, dhd)
        if w * h <= PROCESS_LIMIT:
            try:
                out = ip(images=[Image.new("RGB", (w, h))], dynamic_hd=dhd, return_tensors="pt")
            except ValueError as e:
                assert str(e) == g.get("error"), (w, h, e, g)
            else:
                assert [int(t) for t in out["num_img_tokens"]] == [g["tokens"]], (w, h, out["num_img_tokens"], g)
                n = 1 + g["cols"] * g["rows"]
                assert list(out["image_pixel_values"].shape) == [1, n, 3, CROP, CROP]
                assert out["image_sizes"].tolist() == [[CROP * g["rows"], CROP * g["cols"]]]
        if "error" in g:
            case["want_error"], case["reason"] = "aspect_ratio_too_extreme", g["error"]
            cases.append(case)
            continue
        vs = want_views(g)
        case["want"] = {"grid": {"t": len(vs), "h": MASK, "w": MASK}, "image_tokens": g["tokens"], "views": vs}
        if (w, h) in [(320, 240), (1, 1), (896, 448)] and pi == 0 or (pi and pi not in framed):
            framed.add(pi)
            case["frames"] = frames(proc, g["tokens"], params)
        cases.append(case)
    return cases


# ---------------------------------------------------------------------------------------------
# pixel goldens

SYNTH = [(1, 1), (1, 20), (20, 1), (2000, 10), (10, 2000), (448, 448), (896, 448), (1344, 896), (320, 240),
         (447, 447), (500, 300), (300, 700), (897, 7874), (1462, 5236), (3000, 3000), (640, 200), (40, 1)]

# Images also run at other values of dynamic_hd (the default is 36).
PARAM_IMAGES = {"synth_3000x3000": [4, 1], "large_1600x1200.jpg": [4, 1], "synth_897x7874": [12],
                "rgb_426x320.jpg": [1]}


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


def chat(proc, img, dhd, text_first=False, system=None):
    parts = [{"type": "image", "image": img}, {"type": "text", "text": QUESTION}]
    if text_first:
        parts.reverse()
    messages = [{"role": "user", "content": parts}]
    if system is not None:
        messages.insert(0, {"role": "system", "content": system})
    return proc.apply_chat_template(messages, tokenize=True, return_dict=True, add_generation_prompt=True,
                                    return_tensors="pt", processor_kwargs={"dynamic_hd": dhd})


def mask_rect(m):
    m = m.numpy()
    h, w = int(m[:, 0].sum()), int(m[0, :].sum())
    want = np.zeros_like(m)
    want[:h, :w] = 1
    assert (m == want).all()
    return {"x": 0, "y": 0, "width": w, "height": h}


def pixel_case(proc, name, img, dhd, k):
    out = proc.image_processor(images=[img], dynamic_hd=dhd, return_tensors="pt")
    pv = out["image_pixel_values"][0].to(torch.float32).contiguous()
    masks = out["image_attention_mask"][0]
    g = geometry(proc.image_processor, img.width, img.height, dhd)
    if pv.shape[0] != 1 + g["cols"] * g["rows"] or [int(t) for t in out["num_img_tokens"]] != [g["tokens"]]:
        raise SystemExit(f"{name} dynamic_hd {dhd}: {pv.shape[0]} views, the geometry says {g}")
    rng = np.random.default_rng(7000 + k)
    views = []
    for v in range(pv.shape[0]):
        flat = pv[v].numpy().reshape(-1)  # [3, 448, 448], as the processor returns it
        idx = sorted(set([0, flat.size - 1] + rng.choice(flat.size, SAMPLES - 2, replace=False).tolist()))
        views.append({"sha256": sha(flat.astype("<f4").tobytes()), "mask": mask_rect(masks[v]),
                      "samples": [[int(i), float(flat[i])] for i in idx]})
    case = {"image": name, "grid": [g["cols"], g["rows"]], "resized": list(g["new"]), "pad": list(g["pad"]),
            "num_img_tokens": g["tokens"], "views": views}
    if dhd != 36:
        case["params"] = {"dynamic_hd": dhd}
    variants = [("image_first", False, None), ("text_first", True, None), ("system_image_first", False, SYSTEM)]
    for key, text_first, system in variants:
        fr = chat(proc, img, dhd, text_first, system)
        if not torch.equal(fr["image_pixel_values"], out["image_pixel_values"]):
            raise SystemExit(f"{name}: chat image_pixel_values differ from the image processor's")
        ids = fr["input_ids"][0].tolist()
        if ids.count(200010) != g["tokens"]:
            raise SystemExit(f"{name}: {ids.count(200010)} image tokens in the prompt, num_img_tokens {g['tokens']}")
        case[key] = rle(ids)
    return case


def pixel_goldens(proc):
    images = []
    for f in sorted(QWEN_IMAGES.iterdir()):
        pil = load_image(str(f))
        images.append(({"name": f.name, "file": f"../golden/images/{f.name}", "sha256": sha(f.read_bytes()),
                        "width": pil.width, "height": pil.height, "rgb_sha256": sha(np.array(pil).tobytes())}, pil))
    for i, (w, h) in enumerate(SYNTH):
        pil = synth(w, h, 40 + i)
        images.append(({"name": f"synth_{w}x{h}", "synth": {"width": w, "height": h, "seed": 40 + i},
                        "width": w, "height": h, "rgb_sha256": sha(np.array(pil).tobytes())}, pil))
    by_name = {e["name"]: pil for e, pil in images}
    cases = []
    for k, (e, pil) in enumerate(images):
        cases.append(pixel_case(proc, e["name"], pil, 36, k))
        print(f"  {e['name']}: {len(cases[-1]['views'])} views, {cases[-1]['num_img_tokens']} tokens", file=sys.stderr)
    for j, (name, values) in enumerate(PARAM_IMAGES.items()):
        for m, dhd in enumerate(values):
            cases.append(pixel_case(proc, name, by_name[name], dhd, 2000 + 10 * j + m))
    return [e for e, _ in images], cases


def main():
    torch.set_num_threads(1)
    check_set_order()
    proc = build_processor()
    suite = {"family": "phi4_multimodal", "source": "scripts/reference/golden_phi4.py (transformers "
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
        "generator": "scripts/reference/golden_phi4.py",
        "versions": {"transformers": transformers.__version__, "torch": torch.__version__,
                     "torchvision": torchvision.__version__, "pillow": PIL.__version__, "numpy": np.__version__,
                     "cpu_capability": torch.backends.cpu.get_cpu_capability()},
        "image_processor": proc.image_processor.to_dict(),
        "question": QUESTION,
        "system": SYSTEM,
        "images": images,
        "cases": cases,
    }
    (GOLDEN / "manifest.json").write_text(json.dumps(doc, separators=(",", ":"), ensure_ascii=False) + "\n")
    views = sum(len(c["views"]) for c in cases)
    print(f"{(GOLDEN / 'manifest.json').relative_to(ROOT)}: {len(images)} images, {len(cases)} cases, "
          f"{views} views", file=sys.stderr)


if __name__ == "__main__":
    main()
