"""Golden data for the LocateAnything-3B plugin (plugins/locateanything), from the official remote code.

The reference is LocateAnything-3B's remote-code export in NVlabs/Eagle at 783f656d
(Embodied/eaglevl/utils/locany/), fetched into .build/locany by
scripts/reference/fetch_locateanything.sh (sha256-checked, never committed) and imported as the
package "locany", in .build/laenv (transformers 4.57.1 and the pins of Eagle's
Embodied/pyproject.toml over the reference stack's torch 2.11; scripts/reference/
requirements-locateanything.txt), on an x86-64 CPU. Shims: processing_locateanything.py imports
decord (video only) at module level, so a stub module stands for it; its processor is not
instantiated (that needs the checkpoint's tokenizer): replace_media_placeholder, a plain function
of the processor, runs with the processor's attributes (processor_config.json's tokens) on a
namespace.

Writes two files:

- plugins/locateanything/testdata/cases.json (sdk-wasm/plugintest.Suite): for a grid of sizes
  (edge cases, 1-pixel strips, 200:1 and past, both sides of the 512-patch refusal, both sides of
  the token limit, exact multiples of 28, a seeded random spread) and bundle params
  (in_token_limit 4096, the class default, and 1; fixed_size 448) the one view the plan must hold:
  the token-limit shrink's size (pre_resize), the target size, the patch grid and the image
  tokens, read off LocateAnythingImageProcessor.rescale itself with an image object that records
  its resizes (so any size is checked); sizes up to PROCESS_LIMIT pixels also go through the whole
  processor on a blank image, whose grid and token count must agree. Refusals: empty images
  (image_too_small), the processor's "Exceed pos emb" and a shrink to an empty side
  (aspect_ratio_too_extreme). Frames: chat_template.json rendered as transformers 4.57 renders
  it, then replace_media_placeholder, split around <img> <IMG_CONTEXT>xN </img>. The suite's
  max_image_tokens is the largest image span over every image up to 32768x32768 at the default
  token limit, counted exhaustively (the plugin's Limits must say it).
- core/internal/prep/testdata/golden_locateanything/manifest.json: the pixel goldens. For the images
  of the Qwen goldens (core/internal/prep/testdata/golden/images, committed; opened as
  transformers' load_image does: EXIF transpose, convert("RGB")) and synthetic images whose pixels
  are an integer formula (golden_internvl.py's synth(); the Go test computes the same pixels), among
  them a 4000x3000 picture past the token limit: the processor's pixel_values ([N, 3, 14, 14]
  float32, raster patches: the plan's tiles rows) as a sha256 and 8 sampled values, the grid, the
  sizes of both resizes, the token count, and the framed prompt's text around the image with the
  image before the question, after it, and after a client system message. fixed_size cases resize
  to the square with PIL bicubic (what the TRTMC profile's "bicubic" 448x448 names; its own resize
  code is not in its repository) and then run the processor's to_tensor, normalize and patchify.
  The framed prompts are also tokenized (run-length encoded input_ids) with the tokenizer
  scripts/reference/locateanything_tokenizer.py writes to .build/tokenizer/locateanything.

Run: `just golden-locateanything` (fetches the code and builds .build/laenv first). CI never runs it.
"""

import hashlib
import importlib
import json
import math
import pathlib
import random
import sys
import types

import numpy as np
import PIL
import torch
import transformers
from PIL import Image, ImageOps

ROOT = pathlib.Path(__file__).resolve().parents[2]
SRC = ROOT / ".build/locany"
TOKENIZER = ROOT / ".build/tokenizer/locateanything"
CASES = ROOT / "plugins/locateanything/testdata/cases.json"
GOLDEN = ROOT / "core/internal/prep/testdata/golden_locateanything"
QWEN_IMAGES = ROOT / "core/internal/prep/testdata/golden/images"

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from golden_internvl import synth  # noqa: E402  (the shared synthetic image)

PATCH, FACTOR, LIMIT = 14, 28, 25600
IMAGE_TOKEN, IMG_OPEN, IMG_CLOSE = "<IMG_CONTEXT>", "<img>", "</img>"
STOPS = [151645]
QUESTION = "Locate a single instance that matches the following description: white vehicle."
SYSTEM = "You are a careful assistant. Réponds en un mot."
SAMPLES = 8
PROCESS_LIMIT = 2_000_000


def load_official():
    if transformers.__version__ != "4.57.1":
        raise SystemExit(f"want transformers 4.57.1 (just laenv), got {transformers.__version__}")
    if not (SRC / "image_processing_locateanything.py").exists():
        raise SystemExit("no .build/locany: run scripts/reference/fetch_locateanything.sh")
    sys.modules.setdefault("decord", types.ModuleType("decord"))  # video only
    sys.path.insert(0, str(SRC.parent))
    ipm = importlib.import_module("locany.image_processing_locateanything")
    prm = importlib.import_module("locany.processing_locateanything")
    pre = json.loads((SRC / "preprocessor_config.json").read_text())
    proc_cfg = json.loads((SRC / "processor_config.json").read_text())
    template = json.loads((SRC / "chat_template.json").read_text())["chat_template"]
    assert pre["in_token_limit"] == LIMIT and pre["merge_kernel_size"] == [2, 2]
    ip = ipm.LocateAnythingImageProcessor(in_token_limit=pre["in_token_limit"], merge_kernel_size=pre["merge_kernel_size"])
    # the class default is 4096: only the json's 25600 is the checkpoint's
    assert ipm.LocateAnythingImageProcessor().in_token_limit == 4096
    proc = types.SimpleNamespace(image_processor=ip, image_placeholder=proc_cfg["image_placeholder"],
                                 video_placeholder=proc_cfg["video_placeholder"],
                                 image_start_token=proc_cfg["image_start_token"],
                                 image_end_token=proc_cfg["image_end_token"], image_token=proc_cfg["image_token"])
    assert (proc.image_start_token, proc.image_end_token, proc.image_token) == (IMG_OPEN, IMG_CLOSE, IMAGE_TOKEN)
    from transformers.utils.chat_template_utils import _compile_jinja_template
    return ipm, prm, proc, _compile_jinja_template(template)


# ---------------------------------------------------------------------------------------------
# geometry, read off rescale

class _Stub:
    """Stands for a PIL image in rescale: its size, and resizes recorded (PIL refuses empty sizes)."""

    def __init__(self, w, h, calls):
        self.size, self.calls = (w, h), calls

    def resize(self, size, resample):
        assert resample == Image.Resampling.BICUBIC
        if size[0] <= 0 or size[1] <= 0:
            raise ValueError("height and width must be > 0")
        self.calls.append(tuple(size))
        return _Stub(size[0], size[1], self.calls)


def geometry(ip, w, h):
    """rescale's resizes for a w x h image: (shrunk, target) sizes, or the ValueError's message."""
    calls = []
    try:
        out = ip.rescale(_Stub(w, h, calls), ip.merge_kernel_size)
    except ValueError as e:
        return {"error": str(e), "calls": calls}
    target = out.size
    patches = (w // PATCH) * (h // PATCH)
    if patches > ip.in_token_limit:
        shrunk = calls[0]
        assert len(calls) in (1, 2)
    else:
        shrunk = (w, h)
        assert len(calls) <= 1
    assert len(calls) == (shrunk != (w, h)) + (target != shrunk)
    gh, gw = target[1] // PATCH, target[0] // PATCH
    return {"shrunk": shrunk, "target": target, "grid": (gh, gw), "tokens": gh * gw // 4}


def max_tokens(limit):
    """The largest image span over every w x h up to 32768, exhaustively (numpy, float64 as Python)."""
    hs = np.arange(1, 32769, dtype=np.int64)
    best = 0
    for w in range(1, 32769):
        p = (w // PATCH) * (hs // PATCH)
        shrink = p > limit
        scale = np.sqrt(limit / np.where(shrink, p, 1).astype(np.float64))
        nw = np.where(shrink, np.floor(w * scale).astype(np.int64), w)
        nh = np.where(shrink, np.floor(hs * scale).astype(np.int64), hs)
        ok = (nw > 0) & (nh > 0)
        tw, th = -(-nw // FACTOR) * FACTOR, -(-nh // FACTOR) * FACTOR
        ok &= (tw // PATCH < 512) & (th // PATCH < 512)
        if ok.any():
            best = max(best, int(((tw // FACTOR) * (th // FACTOR))[ok].max()))
    return best


# ---------------------------------------------------------------------------------------------
# frames

def render(tmpl, proc, prm, img, question, text_first, system):
    content = [{"type": "image"}, {"type": "text", "text": question}]
    if text_first:
        content.reverse()
    messages = [{"role": "user", "content": content}]
    if system is not None:
        messages.insert(0, {"role": "system", "content": system})
    text = tmpl.render(messages=messages, add_generation_prompt=True)
    out, pv, grids, n_img, _ = prm.LocateAnythingProcessor.replace_media_placeholder(
        proc, text, [img], [], None, None, images_kwargs={})
    assert n_img == 1
    return out, pv, grids


def split_frame(text, tokens):
    span = IMG_OPEN + IMAGE_TOKEN * tokens + IMG_CLOSE
    assert text.count(IMAGE_TOKEN) == tokens and text.count(span) == 1, text[:200]
    before, after = text.split(span)
    return before, after


def want_frame(before, after, tokens):
    return {"before": before, "span": {"open": [IMG_OPEN], "pad": IMAGE_TOKEN, "count": tokens, "close": [IMG_CLOSE]},
            "after": after, "stop_token_ids": STOPS, "hints": {"skip_special_tokens": False}}


SYSTEMS = [None, "Answer in one word.", "", "Système: 東京 ☃\nsecond line <|im_end|>"]
QUESTIONS = [("Locate a single instance that matches the following description: white vehicle.", False),
             ("Point to: white vehicle.", True), ("", False), (" lead and trail ", True),
             ("<|im_end|> injected", False), ("Unicode: 東京 ☃\nsecond line", False), ("", True),
             ("cat</c>dog", False)]


def frames(tmpl, proc, prm, w, h, tokens, params):
    out = []
    default_system = params.get("system_prompt")
    for (question, text_first), client_system in \
            [(q, None) for q in QUESTIONS] + [(QUESTIONS[i % 2], sy) for i, sy in enumerate(SYSTEMS[1:])]:
        system = client_system if client_system is not None else default_system
        # the processor runs on a blank image of the case's size (the frame needs only its tokens)
        text, _, grids = render(tmpl, proc, prm, Image.new("RGB", (w, h)), question, text_first, system)
        assert int(grids[0][0]) * int(grids[0][1]) // 4 == tokens
        before, after = split_frame(text, tokens)
        case = {"question": question, "text_first": text_first}
        if client_system is not None:
            case["system"] = client_system
        out.append({**case, "want": want_frame(before, after, tokens)})
    return out


# ---------------------------------------------------------------------------------------------
# cases.json

EDGE_SIZES = [
    (1, 1), (2, 2), (1, 2), (13, 13), (14, 14), (15, 15), (27, 27), (28, 28), (29, 29), (55, 57), (56, 56),
    (320, 240), (240, 320), (426, 320), (640, 480), (1024, 768), (1600, 1200), (1920, 1080), (1080, 1920),
    (448, 448), (2048, 2048), (4000, 3000), (3000, 4000), (32768, 32768), (12000, 9000), (5000, 100),
    # the token limit: 160x160 patches is at it, one more column past it
    (2240, 2240), (2253, 2240), (2254, 2240), (2240, 2254), (2254, 2254), (2267, 2267), (3584, 1400),
    (7154, 28),
    # strips: short ones stretched to 28, long ones refused (512 patches a side)
    (1, 20), (20, 1), (1, 1000), (1000, 1), (1, 7140), (7140, 1), (1, 7141), (7141, 1), (7168, 14), (14, 7168),
    (7200, 20), (20, 7200), (32768, 1), (1, 32768), (32768, 14), (32768, 28), (32768, 164), (164, 32768),
    (2000, 10), (10, 2000), (2010, 10), (1990, 10), (10, 1990), (1000, 29), (29, 1000),
    # shrunk strips and near-strips
    (32768, 400), (400, 32768), (20000, 200), (8000, 800), (7140, 1000), (7168, 1000), (30000, 3000),
]


def random_sizes(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        kind = rng.random()
        if kind < 0.5:
            w, h = rng.randint(1, 2400), rng.randint(1, 2400)
        elif kind < 0.8:
            w, h = rng.randint(1, 16000), rng.randint(1, 16000)
        else:
            short = rng.randint(1, 64)
            w, h = short, min(32768, short * rng.randint(2, 600))
            if rng.random() < 0.5:
                w, h = h, w
        out.append((w, h))
    return out


PARAM_SETS = [{}, {"in_token_limit": 4096}, {"in_token_limit": 1}, {"fixed_size": 448},
              {"system_prompt": "Be brief."}]


def fixed_geometry(size):
    gh = gw = size // PATCH
    return {"shrunk": None, "target": (size, size), "grid": (gh, gw), "tokens": gh * gw // 4}


def plugin_cases(ipm, prm, proc, tmpl):
    sizes = [(s, 0) for s in EDGE_SIZES] + [(s, 0) for s in random_sizes(150, 20261205)]
    for pi in range(1, len(PARAM_SETS)):
        sizes += [(s, pi) for s in EDGE_SIZES[::3] + random_sizes(20, 400 + pi)]
    cases = []
    framed = set()
    for w, h in [(0, 10), (10, 0), (0, 0)]:
        cases.append({"name": f"{w}x{h}", "image": {"width": w, "height": h, "format": "png"},
                      "want_error": "image_too_small"})
    for (w, h), pi in sizes:
        params = PARAM_SETS[pi]
        name = f"{w}x{h}" + (f"_p{pi}" if pi else "")
        if any(c["name"] == name for c in cases):
            continue
        case = {"name": name, "image": {"width": w, "height": h, "format": "png"}}
        if params:
            case["params"] = params
        if "fixed_size" in params:
            g = fixed_geometry(params["fixed_size"])
            view = {"resized": {"width": g["target"][0], "height": g["target"][1]}, "pre_resize": {"width": 0, "height": 0},
                    "grid": {"t": 1, "h": g["grid"][0], "w": g["grid"][1]}, "image_tokens": g["tokens"]}
        else:
            ip = ipm.LocateAnythingImageProcessor(in_token_limit=params.get("in_token_limit", LIMIT))
            g = geometry(ip, w, h)
            if w * h <= PROCESS_LIMIT:
                try:
                    out = ip.preprocess([Image.new("RGB", (w, h))], return_tensors="pt")
                except ValueError as e:
                    assert str(e) == g.get("error"), (w, h, e, g)
                else:
                    assert out["image_grid_hws"].tolist() == [list(g["grid"])], (w, h, out["image_grid_hws"], g)
                    assert list(out["pixel_values"].shape) == [g["grid"][0] * g["grid"][1], 3, PATCH, PATCH]
            if "error" in g:
                case["want_error"] = "aspect_ratio_too_extreme"
                cases.append(case)
                continue
            shrink = (w // PATCH) * (h // PATCH) > ip.in_token_limit
            g["shrink"] = shrink
            tw, th = g["target"]
            sw, sh = g["shrunk"]
            view = {"resized": {"width": tw, "height": th},
                    "pre_resize": {"width": sw, "height": sh} if shrink and (sw, sh) != (tw, th) else {"width": 0, "height": 0},
                    "grid": {"t": 1, "h": g["grid"][0], "w": g["grid"][1]}, "image_tokens": g["tokens"]}
        case["want"] = {"grid": {"t": 1, "h": g["grid"][0], "w": g["grid"][1]}, "image_tokens": g["tokens"], "views": [view]}
        if (w, h) in [(320, 240), (1, 1), (4000, 3000)] and pi == 0 or (pi and pi not in framed and "fixed_size" not in params):
            framed.add(pi)
            fw, fh = (w, h) if w * h <= PROCESS_LIMIT else (g["target"])
            case["frames"] = frames(tmpl, proc, prm, fw, fh, g["tokens"], params)
        cases.append(case)
    return cases


# ---------------------------------------------------------------------------------------------
# pixel goldens

SYNTH = [(1, 1), (13, 27), (28, 28), (1, 20), (20, 1), (2000, 10), (10, 2000), (7140, 9), (448, 448), (320, 240),
         (2240, 2240), (2254, 2240), (4000, 3000), (3000, 4000), (5000, 120), (641, 479)]

# Images also run at other params.
PARAM_IMAGES = {"large_1600x1200.jpg": [{"in_token_limit": 4096}, {"fixed_size": 448}],
                "synth_4000x3000": [{"fixed_size": 448}, {"in_token_limit": 4096}],
                "rgb_426x320.jpg": [{"fixed_size": 448}], "synth_1x20": [{"fixed_size": 448}]}


def sha(b):
    return hashlib.sha256(b).hexdigest()


def load_file(path):
    im = Image.open(path)
    im = ImageOps.exif_transpose(im)
    return im.convert("RGB")


def process(ipm, img, params):
    """pixel_values and grid as the processor makes them; fixed_size: PIL bicubic to the square, then
    the processor's own tensor steps."""
    if "fixed_size" in params:
        ip = ipm.LocateAnythingImageProcessor(in_token_limit=LIMIT)
        s = params["fixed_size"]
        t = ip.normalize(ip.to_tensor(img.resize((s, s), Image.Resampling.BICUBIC)))
        pv, grid = ip.patchify(t)
        return pv, grid, None
    ip = ipm.LocateAnythingImageProcessor(in_token_limit=params.get("in_token_limit", LIMIT))
    out = ip.preprocess([img], return_tensors="pt")
    g = geometry(ip, img.width, img.height)
    return out["pixel_values"], tuple(out["image_grid_hws"][0].tolist()), g


def rle(ids):
    out = []
    for i in ids:
        if out and out[-1][0] == i:
            out[-1][1] += 1
        else:
            out.append([i, 1])
    return out


def pixel_case(ipm, prm, proc, tmpl, tok, name, img, params, k):
    pv, grid, g = process(ipm, img, params)
    tokens = grid[0] * grid[1] // 4
    flat = pv.to(torch.float32).contiguous().numpy().reshape(-1)
    rng = np.random.default_rng(9000 + k)
    idx = sorted(set([0, flat.size - 1] + rng.choice(flat.size, SAMPLES - 2, replace=False).tolist()))
    case = {"image": name, "grid": list(grid), "tokens": tokens, "sha256": sha(flat.astype("<f4").tobytes()),
            "samples": [[int(i), float(flat[i])] for i in idx]}
    if g is not None:
        case["shrunk"], case["target"] = list(g["shrunk"]), list(g["target"])
    if params:
        case["params"] = params
        return case
    for key, text_first, system in [("image_first", False, None), ("text_first", True, None),
                                    ("system_image_first", False, SYSTEM)]:
        text, fpv, _ = render(tmpl, proc, prm, img, QUESTION, text_first, system)
        if not torch.equal(fpv, pv):
            raise SystemExit(f"{name}: the framed pixel_values differ from the image processor's")
        before, after = split_frame(text, tokens)
        ids = tok(text, add_special_tokens=False)["input_ids"]
        if ids.count(151665) != tokens:
            raise SystemExit(f"{name}: {ids.count(151665)} <IMG_CONTEXT> ids, {tokens} image tokens")
        case[key] = {"before": before, "after": after, "input_ids": rle(ids)}
    return case


def pixel_goldens(ipm, prm, proc, tmpl, tok):
    qwen = json.loads((QWEN_IMAGES.parent / "manifest.json").read_text())
    images, cases = [], []
    k = 0
    for im in qwen["images"]:
        img = load_file(QWEN_IMAGES / im["file"])
        rgb = sha(np.asarray(img).tobytes())
        if rgb != im["rgb_sha256"]:
            raise SystemExit(f"{im['file']}: PIL's RGB differs from the Qwen manifest's")
        images.append({"name": im["file"], "file": "../golden/images/" + im["file"], "sha256": im["sha256"],
                       "rgb_sha256": rgb})
        cases.append(pixel_case(ipm, prm, proc, tmpl, tok, im["file"], img, {}, k))
        k += 1
        for params in PARAM_IMAGES.get(im["file"], []):
            cases.append(pixel_case(ipm, prm, proc, tmpl, tok, im["file"], img, params, k))
            k += 1
    for w, h in SYNTH:
        seed = (w * 31 + h) % 97
        img = synth(w, h, seed)
        name = f"synth_{w}x{h}"
        images.append({"name": name, "synth": {"width": w, "height": h, "seed": seed},
                       "rgb_sha256": sha(np.asarray(img).tobytes())})
        cases.append(pixel_case(ipm, prm, proc, tmpl, tok, name, img, {}, k))
        k += 1
        for params in PARAM_IMAGES.get(name, []):
            cases.append(pixel_case(ipm, prm, proc, tmpl, tok, name, img, params, k))
            k += 1
    return {"question": QUESTION, "system": SYSTEM, "images": images, "cases": cases}


def main():
    ipm, prm, proc, tmpl = load_official()
    source = (f"scripts/reference/golden_locateanything.py: NVlabs/Eagle 783f656d Embodied/eaglevl/utils/locany "
              f"(transformers {transformers.__version__}, torch {torch.__version__}, Pillow {PIL.__version__})")
    cases = plugin_cases(ipm, prm, proc, tmpl)
    suite = {"family": "locateanything", "source": source, "max_image_tokens": max_tokens(LIMIT), "cases": cases}
    CASES.parent.mkdir(parents=True, exist_ok=True)
    CASES.write_text(json.dumps(suite, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {CASES}: {len(cases)} cases, max_image_tokens {suite['max_image_tokens']}")
    from transformers import AutoTokenizer
    if not (TOKENIZER / "tokenizer.json").exists():
        raise SystemExit("no .build/tokenizer/locateanything: run scripts/reference/locateanything_tokenizer.py (just setup)")
    tok = AutoTokenizer.from_pretrained(str(TOKENIZER))
    if tok.convert_tokens_to_ids(["<IMG_CONTEXT>", "<img>", "</img>", "<0>"]) != [151665, 151666, 151667, 151677]:
        raise SystemExit("the tokenizer is not LocateAnything's")
    golden = pixel_goldens(ipm, prm, proc, tmpl, tok)
    golden["source"] = source
    GOLDEN.mkdir(parents=True, exist_ok=True)
    (GOLDEN / "manifest.json").write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {GOLDEN / 'manifest.json'}: {len(golden['images'])} images, {len(golden['cases'])} cases")


if __name__ == "__main__":
    main()
