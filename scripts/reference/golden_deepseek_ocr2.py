"""Golden data for the DeepSeek-OCR-2 plugin (plugins/deepseek_ocr2), from transformers 5.17 itself.

Writes two files:

- plugins/deepseek_ocr2/testdata/cases.json (sdk-wasm/plugintest.Suite): for a grid of image sizes
  (tiny, 1-pixel strips up to the refusal bound, exactly 768 and 769 px, 1024, page-like, every
  tile grid, the canvas search's ties, a seeded random spread) and bundle params (min_tiles /
  max_tiles) the views the plan must hold, read off DeepseekOcr2ImageProcessor._preprocess itself
  run on meta tensors, its resize and pad recording their sizes (so every size is covered,
  however large): the local canvas and each tile's region of it (row-major), the global view's
  scaled size and its centred grey padding, the tokens (DeepseekOcr2Processor._expand_image_tokens:
  256 + 144 x tiles + 1). Sizes small enough also go through the whole processor on a blank image,
  whose shapes and tile count must agree. Refusals: empty images (image_too_small) and the
  processor's failure when a global side rounds to 0 pixels (aspect_ratio_too_extreme). Frames:
  the processor's own expansion of "<image>\\n{question}" (and "{question}\\n<image>" for a
  question sent first) split at the placeholder run, with the BOS the tokenizer adds.
- core/internal/prep/testdata/golden_deepseek_ocr2/manifest.json: the pixel goldens. For the
  images of the Qwen goldens (core/internal/prep/testdata/golden/images, committed) and synthetic
  images whose pixels are an integer formula (golden_internvl.py's synth(); the Go test computes
  the same pixels), at the default tiles and a few other params: per view the sha256 of its
  float32 pixels ([3, 768, 768] for a tile, pixel_values_local[t]; [3, 1024, 1024] for the
  global view, pixel_values[0]) and 8 sampled values, the tile count, and input_ids (run-length
  encoded) of the processor with the image before the question and after it.

The processor is DeepseekOcr2Processor(DeepseekOcr2ImageProcessor() (the class defaults,
torchvision backend), the tokenizer of .build/tokenizer/deepseek_ocr2
(scripts/reference/deepseek_ocr2_tokenizer.py)), on an x86-64 CPU.

Run with the reference stack: `just golden-deepseek-ocr2`. CI never runs it; the outputs are committed.
"""

import hashlib
import json
import pathlib
import random
import sys
from fractions import Fraction

import numpy as np
import PIL
import torch
import torchvision
import transformers
from transformers import AutoTokenizer, DeepseekOcr2ImageProcessor, DeepseekOcr2Processor
from transformers.image_utils import SizeDict, load_image
from transformers.models.deepseek_ocr2 import image_processing_deepseek_ocr2 as ds_ip

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from golden_internvl import synth  # noqa: E402  (the shared synthetic image)

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOKENIZER = ROOT / ".build/tokenizer/deepseek_ocr2"
CASES = ROOT / "plugins/deepseek_ocr2/testdata/cases.json"
GOLDEN = ROOT / "core/internal/prep/testdata/golden_deepseek_ocr2"
QWEN_IMAGES = ROOT / "core/internal/prep/testdata/golden/images"

GLOBAL, TILE, PATCH, DOWN = 1024, 768, 16, 4
GSIDE, TSIDE = GLOBAL // PATCH, TILE // PATCH
IMAGE_TOKEN, IMAGE_ID = "<image>", 128815
STOPS = [1]
GREY = [127, 127, 127]

QUESTION = "Free OCR."
SAMPLES = 8


def build_processor():
    tok = AutoTokenizer.from_pretrained(str(TOKENIZER))
    if (tok.image_token, tok.convert_tokens_to_ids(IMAGE_TOKEN), tok.bos_token_id, tok.eos_token_id) != \
            (IMAGE_TOKEN, IMAGE_ID, 0, 1):
        raise SystemExit("the tokenizer is not DeepSeek-OCR-2's: run scripts/reference/deepseek_ocr2_tokenizer.py "
                         "(just setup)")
    ip = DeepseekOcr2ImageProcessor()
    if ip.backend != "torchvision":
        raise SystemExit(f"expected the torchvision backend, got {ip.backend}")
    proc = DeepseekOcr2Processor(image_processor=ip, tokenizer=tok)
    if proc.image_token_id != IMAGE_ID:
        raise SystemExit(f"the processor's image token id is {proc.image_token_id}")
    return proc


# ---------------------------------------------------------------------------------------------
# geometry, read off _preprocess on meta tensors

class _Recorder:
    """Stands for the processor's resize and for tvF.pad, recording the sizes they are asked for
    and returning meta tensors of the result's shape."""

    def __init__(self, real_resize):
        self.calls = []
        self.real_resize = real_resize

    def resize(self, images, size, resample=None, **kwargs):
        assert not kwargs and resample == ds_ip.PILImageResampling.BICUBIC, (resample, kwargs)
        self.calls.append(("resize", tuple(images.shape[-2:]), (size.height, size.width)))
        if not (size.height and size.width):
            # the reference's own failure for a zero side
            return self.real_resize(torch.zeros(1, 3, 1, 1, dtype=torch.uint8), size, resample=resample)
        return torch.empty(*images.shape[:-2], size.height, size.width, dtype=images.dtype, device="meta")

    def pad(self, images, padding, fill):
        self.calls.append(("pad", tuple(padding), tuple(fill)))
        left, top, right, bottom = padding
        return torch.empty(*images.shape[:-2], images.shape[-2] + top + bottom, images.shape[-1] + left + right,
                           dtype=images.dtype, device="meta")


def geometry(ip, w, h, lo, hi):
    """_preprocess for one w x h image: the local canvas (or none), the tile count, the global
    view's scaled size and padding; or the error."""
    rec = _Recorder(ip.resize)
    real_tvf = ds_ip.tvF
    ip.resize, ds_ip.tvF = rec.resize, rec  # an instance attribute over the class's method
    try:
        out = ip._preprocess([torch.empty(3, h, w, dtype=torch.uint8, device="meta")],
                             size=SizeDict(height=GLOBAL, width=GLOBAL), crop_to_patches=True, min_patches=lo,
                             max_patches=hi, tile_size=TILE, resample=ds_ip.PILImageResampling.BICUBIC,
                             do_rescale=True, rescale_factor=1 / 255, do_normalize=True, image_mean=ip.image_mean,
                             image_std=ip.image_std, disable_grouping=None, return_tensors=None)
    except ValueError as e:
        return {"error": str(e)}
    finally:
        del ip.resize
        ds_ip.tvF = real_tvf
    n = out["num_local_patches"][0]
    calls = list(rec.calls)
    g = {"tiles": n}
    if n:
        kind, src, (ch, cw) = calls.pop(0)
        assert kind == "resize" and src == (h, w) and ch % TILE == 0 and cw % TILE == 0, calls
        g["canvas"] = (cw, ch)
        cols, rows = cw // TILE, ch // TILE
        assert cols * rows == n and len(out["pixel_values_local"]) == n
        assert (cols, rows) == ds_ip.get_optimal_tiled_canvas((h, w), (TILE, TILE), lo, hi)
    else:
        assert "pixel_values_local" not in out and max(w, h) <= TILE
    kind, src, (gh, gw) = calls.pop(0)
    assert kind == "resize" and src == (h, w), calls
    g["global"] = (gw, gh)
    g["pad"] = (0, 0, 0, 0)
    if calls:
        kind, pad, fill = calls.pop(0)
        assert kind == "pad" and list(fill) == GREY, (kind, pad, fill)
        g["pad"] = pad  # left, top, right, bottom
    assert not calls and tuple(out["pixel_values"][0].shape) == (3, GLOBAL, GLOBAL)
    assert gw + g["pad"][0] + g["pad"][2] == GLOBAL and gh + g["pad"][1] + g["pad"][3] == GLOBAL
    return g


def tokens(proc, n):
    """The processor's expansion count for an image of n tiles."""
    text = proc._expand_image_tokens([IMAGE_TOKEN], [n])[0]
    return text.count(IMAGE_TOKEN)


def want_views(g, ntok):
    """The views the plan must hold (sdk-wasm/plugintest.WantView): the tiles row-major (each its
    768x768 region of the canvas, padded to the 1024 canvas with a 48x48 patch mask), then the
    global view."""
    views = []
    full = {"x": 0, "y": 0, "width": GSIDE, "height": GSIDE}
    if g["tiles"]:
        cw, ch = g["canvas"]
        cols = cw // TILE
        for i in range(g["tiles"]):
            views.append({"resized": {"width": cw, "height": ch},
                          "region": {"x": i % cols * TILE, "y": i // cols * TILE, "width": TILE, "height": TILE},
                          "pad": {"top": 0, "right": GLOBAL - TILE, "bottom": GLOBAL - TILE, "left": 0, "color": GREY},
                          "grid": {"t": 1, "h": GSIDE, "w": GSIDE},
                          "image_tokens": (TSIDE // DOWN) ** 2, "float_resize": {"width": 0, "height": 0},
                          "mask": {"x": 0, "y": 0, "width": TSIDE, "height": TSIDE}})
    (gw, gh), (left, top, right, bottom) = g["global"], g["pad"]
    views.append({"resized": {"width": gw, "height": gh},
                  "pad": {"top": top, "right": right, "bottom": bottom, "left": left, "color": GREY},
                  "grid": {"t": 1, "h": GSIDE, "w": GSIDE}, "image_tokens": (GSIDE // DOWN) ** 2,
                  "float_resize": {"width": 0, "height": 0}, "mask": full})
    assert sum(v["image_tokens"] for v in views) + 1 == ntok
    return views


# ---------------------------------------------------------------------------------------------
# cases.json

EDGE_SIZES = [
    (1, 1), (2, 2), (1, 2), (2, 1), (3, 3), (16, 16), (100, 100), (320, 240), (240, 320), (426, 320),
    (640, 480), (767, 767), (768, 768), (769, 768), (768, 769), (769, 769), (768, 10), (769, 10), (10, 769),
    (1024, 1024), (1024, 768), (768, 1024), (1023, 1025), (1536, 768), (768, 1536), (2304, 1536), (1700, 2200),
    (2200, 1700), (1600, 1200), (1920, 1080), (1080, 1920), (2480, 3508), (4000, 3000), (32768, 32768),
    (32768, 1), (1, 32768),
    # 1-pixel strips around the refusal bound: a short side of 1 survives while 1024/long > 0.5
    (1, 2047), (2047, 1), (1, 2048), (2048, 1), (1, 2049), (3, 6143), (3, 6144), (6144, 3), (2, 4095), (2, 4096),
    (5, 10240), (5, 10241), (1, 1000), (1000, 1), (1, 768), (768, 1),
    # global rounding: h·1024/w exactly .5 (banker's rounding) and just off it
    (2048, 3), (2048, 5), (2048, 7), (4096, 6), (4096, 10), (2048, 1001), (2048, 1003), (1366, 768),
    # canvas search: every grid of 2..6 tiles, exact ratios and ties (square: 1x2/2x1 tie, then 2x2)
    (1536, 1536), (1537, 1537), (2304, 768), (768, 2304), (3072, 768), (3840, 768), (4608, 768), (768, 4608),
    (2304, 1537), (1000, 1000), (1086, 1086), (1087, 1087), (3000, 1000), (1000, 3000), (1200, 800), (800, 1200),
    (5000, 1000), (8000, 1000), (1000, 8000),
]


def tie_sizes():
    """Sizes whose aspect ratio lies exactly (in float64) midway between two grid ratios of 2..6
    tiles: per midpoint the smallest such size past 768 px, and the smallest whose area exceeds
    half the later grid's, where get_optimal_tiled_canvas's tie rule picks the later grid."""
    grids = ds_ip.get_all_supported_aspect_ratios(2, 6)
    ratios = sorted(set(Fraction(c, r) for c, r in grids))
    out = []
    for a, b in zip(ratios, ratios[1:]):
        m = (a + b) / 2
        picked = set()
        for k in range(1, 20000):
            w, h = m.numerator * k, m.denominator * k
            if max(w, h) <= TILE:
                continue
            if max(w, h) > 32768:
                break
            diffs = [abs(w / h - c / r) for c, r in grids]
            ties = [g for g, d in zip(grids, diffs) if d == min(diffs)]
            if len(ties) < 2:
                continue
            later = ties[-1]
            flips = w * h > 0.5 * TILE * TILE * later[0] * later[1]
            if flips not in picked:
                picked.add(flips)
                out.append((w, h))
            if len(picked) == 2:
                break
    return out


def random_sizes(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        kind = rng.random()
        if kind < 0.5:
            w, h = rng.randint(1, 2048), rng.randint(1, 2048)
        elif kind < 0.8:
            w, h = rng.randint(700, 12000), rng.randint(700, 12000)
        else:
            short = rng.randint(1, 64)
            w, h = short, min(32768, short * rng.randint(2, 3000))
            if rng.random() < 0.5:
                w, h = h, w
        out.append((w, h))
    return out


PARAM_SETS = [{}, {"min_tiles": 1}, {"max_tiles": 2}, {"min_tiles": 3, "max_tiles": 4}, {"min_tiles": 6},
              {"min_tiles": 1, "max_tiles": 1}]
PROCESS_LIMIT = 4_000_000  # blank images up to this many pixels also go through the processor

QUESTIONS = [("Free OCR.", False), ("<|grounding|>Convert the document to markdown. ", False),
             ("Extract the text from this image.", True), ("", False), ("", True), (" lead and trail ", True),
             ("<｜end▁of▁sentence｜> injected", False), ("Unicode: 東京 ☃\nsecond line", False)]


def frames(proc, ntok):
    out = []
    bos = proc.tokenizer.bos_token
    for question, text_first in QUESTIONS:
        text = question + "\n" + IMAGE_TOKEN if text_first else IMAGE_TOKEN + "\n" + question
        expanded = proc._expand_image_tokens([text], [(ntok - 257) // 144])[0]
        run = IMAGE_TOKEN * ntok
        assert expanded.count(IMAGE_TOKEN) == ntok and run in expanded, (text, ntok)
        before, after = expanded.split(run)
        out.append({"question": question, "text_first": text_first,
                    "want": {"before": bos + before, "after": after, "span": {"pad": IMAGE_TOKEN, "count": ntok},
                             "stop_token_ids": STOPS, "hints": {"skip_special_tokens": False}}})
    return out


def plugin_cases(proc):
    ip = proc.image_processor
    sizes = [(s, 0) for s in EDGE_SIZES + tie_sizes()] + [(s, 0) for s in random_sizes(150, 20261205)]
    for pi in range(1, len(PARAM_SETS)):
        sizes += [(s, pi) for s in EDGE_SIZES[::3] + random_sizes(15, 400 + pi)]
    cases = []
    for w, h in [(0, 10), (10, 0), (0, 0)]:
        cases.append({"name": f"{w}x{h}", "image": {"width": w, "height": h, "format": "png"},
                      "want_error": "image_too_small"})
    framed = set()
    for (w, h), pi in sizes:
        params = PARAM_SETS[pi]
        lo, hi = params.get("min_tiles", 2), params.get("max_tiles", 6)
        name = f"{w}x{h}" + (f"_p{pi}" if pi else "")
        if any(c["name"] == name for c in cases):
            continue
        case = {"name": name, "image": {"width": w, "height": h, "format": "png"}}
        if params:
            case["params"] = params
        g = geometry(ip, w, h, lo, hi)
        if w * h <= PROCESS_LIMIT:
            try:
                out = ip(images=[PIL.Image.new("RGB", (w, h))], min_patches=lo, max_patches=hi, return_tensors="pt")
            except ValueError as e:
                assert str(e) == g.get("error"), (w, h, e, g)
            else:
                assert "error" not in g, (w, h, g)
                assert out["num_local_patches"].tolist() == [g["tiles"]], (w, h, out["num_local_patches"], g)
                assert list(out["pixel_values"].shape) == [1, 3, GLOBAL, GLOBAL]
                if g["tiles"]:
                    assert list(out["pixel_values_local"].shape) == [g["tiles"], 3, TILE, TILE]
        if "error" in g:
            case["want_error"] = "aspect_ratio_too_extreme"
            cases.append(case)
            continue
        ntok = tokens(proc, g["tiles"])
        vs = want_views(g, ntok)
        case["want"] = {"grid": {"t": len(vs), "h": GSIDE, "w": GSIDE}, "image_tokens": ntok, "views": vs}
        if (w, h) in [(320, 240), (1700, 2200), (769, 768)] and pi == 0 or (pi and pi not in framed):
            framed.add(pi)
            case["frames"] = frames(proc, ntok)
        cases.append(case)
    return cases


# ---------------------------------------------------------------------------------------------
# pixel goldens

SYNTH = [(1, 1), (2, 2), (1, 2000), (2000, 1), (320, 240), (768, 768), (769, 768), (768, 769), (767, 1),
         (1024, 1024), (1024, 768), (1536, 768), (1700, 2200), (2200, 1700), (1600, 1200), (3000, 200),
         (200, 3000), (1366, 768), (2048, 5), (1087, 1087), (4608, 768), (500, 1500)]

# Images also run at other params (the default is min_tiles 2, max_tiles 6).
PARAM_IMAGES = {"synth_1700x2200": [{"max_tiles": 2}, {"min_tiles": 1, "max_tiles": 1}],
                "synth_1087x1087": [{"min_tiles": 1}], "large_1600x1200.jpg": [{"min_tiles": 3, "max_tiles": 4}]}


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


def view_entry(chw, rng):
    flat = chw.numpy().reshape(-1)
    idx = sorted(set([0, flat.size - 1] + rng.choice(flat.size, SAMPLES - 2, replace=False).tolist()))
    return {"sha256": sha(flat.astype("<f4").tobytes()), "samples": [[int(i), float(flat[i])] for i in idx]}


def pixel_case(proc, name, img, params, k):
    lo, hi = params.get("min_tiles", 2), params.get("max_tiles", 6)
    g = geometry(proc.image_processor, img.width, img.height, lo, hi)
    if "error" in g:
        raise SystemExit(f"{name}: refused ({g['error']})")
    kw = {"min_patches": lo, "max_patches": hi}
    rng = np.random.default_rng(9000 + k)
    case = {"image": name, "tiles": g["tiles"], "global": list(g["global"]), "pad": list(g["pad"]),
            "image_tokens": tokens(proc, g["tiles"])}
    if g["tiles"]:
        case["canvas"] = list(g["canvas"])
    if params:
        case["params"] = params
    for key, text in [("image_first", IMAGE_TOKEN + "\n" + QUESTION), ("text_first", QUESTION + "\n" + IMAGE_TOKEN)]:
        out = proc(images=[img], text=text, return_tensors="pt", **kw)
        ids = out["input_ids"][0].tolist()
        if ids.count(IMAGE_ID) != case["image_tokens"] or ids[0] != 0:
            raise SystemExit(f"{name}: {ids.count(IMAGE_ID)} image tokens, want {case['image_tokens']}")
        case[key] = rle(ids)
        if key == "image_first":
            views = []
            if g["tiles"]:
                local = out["pixel_values_local"].to(torch.float32).contiguous()
                assert local.shape[0] == g["tiles"]
                views = [view_entry(local[t], rng) for t in range(g["tiles"])]
            views.append(view_entry(out["pixel_values"][0].to(torch.float32).contiguous(), rng))
            case["views"] = views
    return case


def pixel_goldens(proc):
    images = []
    for f in sorted(QWEN_IMAGES.iterdir()):
        pil = load_image(str(f))
        images.append(({"name": f.name, "file": f"../golden/images/{f.name}", "sha256": sha(f.read_bytes()),
                        "width": pil.width, "height": pil.height, "rgb_sha256": sha(np.array(pil).tobytes())}, pil))
    for i, (w, h) in enumerate(SYNTH):
        pil = synth(w, h, 60 + i)
        images.append(({"name": f"synth_{w}x{h}", "synth": {"width": w, "height": h, "seed": 60 + i},
                        "width": w, "height": h, "rgb_sha256": sha(np.array(pil).tobytes())}, pil))
    by_name = {e["name"]: pil for e, pil in images}
    cases = []
    for k, (e, pil) in enumerate(images):
        lo_hi = geometry(proc.image_processor, pil.width, pil.height, 2, 6)
        if "error" in lo_hi:
            print(f"  {e['name']}: refused, no pixel case", file=sys.stderr)
            continue
        cases.append(pixel_case(proc, e["name"], pil, {}, k))
        print(f"  {e['name']}: {cases[-1]['tiles']} tiles, {cases[-1]['image_tokens']} tokens", file=sys.stderr)
    for j, (name, sets) in enumerate(PARAM_IMAGES.items()):
        for m, params in enumerate(sets):
            cases.append(pixel_case(proc, name, by_name[name], params, 2000 + 10 * j + m))
    return [e for e, _ in images], cases


def main():
    torch.set_num_threads(1)
    proc = build_processor()
    suite = {"family": "deepseek_ocr2", "source": "scripts/reference/golden_deepseek_ocr2.py (transformers "
             + transformers.__version__ + ")", "cases": plugin_cases(proc)}
    CASES.parent.mkdir(parents=True, exist_ok=True)
    head = json.dumps({k: suite[k] for k in ("family", "source")}, ensure_ascii=False)[:-1]
    lines = ",\n".join(json.dumps(c, ensure_ascii=False, separators=(",", ":")) for c in suite["cases"])
    CASES.write_text(head + ', "cases": [\n' + lines + "\n]}\n")
    refused = sum("want_error" in c for c in suite["cases"])
    print(f"{CASES.relative_to(ROOT)}: {len(suite['cases'])} cases, {refused} refused", file=sys.stderr)

    images, cases = pixel_goldens(proc)
    GOLDEN.mkdir(parents=True, exist_ok=True)
    doc = {
        "generator": "scripts/reference/golden_deepseek_ocr2.py",
        "versions": {"transformers": transformers.__version__, "torch": torch.__version__,
                     "torchvision": torchvision.__version__, "pillow": PIL.__version__, "numpy": np.__version__,
                     "cpu_capability": torch.backends.cpu.get_cpu_capability()},
        "image_processor": proc.image_processor.to_dict(),
        "question": QUESTION,
        "images": images,
        "cases": cases,
    }
    (GOLDEN / "manifest.json").write_text(json.dumps(doc, separators=(",", ":"), ensure_ascii=False) + "\n")
    views = sum(len(c["views"]) for c in cases)
    print(f"{(GOLDEN / 'manifest.json').relative_to(ROOT)}: {len(images)} images, {len(cases)} cases, "
          f"{views} views", file=sys.stderr)


if __name__ == "__main__":
    main()
