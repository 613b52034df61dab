"""Golden data for the Lance family (plugins/lance, the lance family), from Lance's official code.

The reference is github.com/bytedance/Lance at 4baeee086648996f6ab12e673cbe461b0b149997
(Apache-2.0; not a transformers model). Get it, outside the repository's tracked files:

    git clone https://github.com/bytedance/Lance .build/lance-src
    git -C .build/lance-src checkout 4baeee086648996f6ab12e673cbe461b0b149997

(or set LANCE_SRC). The script checks the sha256 of every file it runs. It needs transformers
4.49.0 (the vendored Qwen2.5-VL uses ROPE_INIT_FUNCTIONS["default"]): `just lance-env` makes
.build/lance-venv with transformers 4.49.0, tokenizers 0.21.4, huggingface-hub 0.29.1 and einops
0.8.1, reusing the reference stack's torch 2.11 / torchvision 0.26 / Pillow 12.3 through a .pth
file. Nothing of Lance is committed.

Shims, all documented here and nothing else changed:
- cv2 and decord are empty modules: data/transforms.py imports cv2 for its motion-blur
  augmentation and validation_dataset.py imports decord for videos; neither runs on an image.
- RandomResizedCrop.get_params draws the crop's offset with torch.randint. With scale (1, 1) the
  offset's range is {0} unless the drawn crop is a pixel short of the image on one side, where
  it is {0, 1} and the reference's result depends on the generator's state. The goldens are made
  with torch.randint returning its lower bound (what Iris does) and record which cases drew a
  range wider than one ("rng_offset").

Subcommand `plugin` writes:
- plugins/lance/testdata/cases.json (sdk-wasm/plugintest.Suite): for a spread of image sizes (every
  bucket, both centre-crop fallbacks, exact-ratio sizes where the drawn crop fits, sizes where it
  fits a pixel short, 1-pixel strips, huge images) and resolutions, the whole plan, built from
  the reference's own choices: find_nearest_bucket, RandomResizedCrop.get_params and
  DivisibleCrop's centre_crop offsets; and frames rendered by render_qwenvl_prompt itself.
- core/internal/prep/testdata/golden_lance/manifest.json: the official ValidationDataset.x2t_sample
  run on each golden image (the Qwen goldens' files and synthetic images from golden_internvl's
  synth()) with a question: sha256 and samples of packed_vit_tokens (the [N, 1176] float32 rows
  the ViT gets), vit_video_grid_thw, and the prompt ids validation_und_KVcache prefills
  (packed_text_ids up to the first target, run-length encoded). Also the sha256 of the RGB
  Lance's loader makes (get_video_tensor_online: PIL open, P -> RGBA, RGBA composited on white,
  else convert("RGB"), no EXIF transpose) and of transformers' load_image RGB (what Iris decodes):
  where they differ the image is marked (the Lance bundle reads images as Lance does:
  bundles.ReadPILWhite).
- core/internal/imageio/testdata/lance_*.png and lance_read.json: palette PNGs with tRNS and an
  RGBA PNG (written with Pillow) and the sha256 of the RGB of Lance's loader and of load_image.

Subcommand `sweep` writes core/internal/enginetest/testdata/sweep/lance.json (the format of
core/internal/enginetest/fixture.Sweep): tiny Lance models of many shapes built from the official
classes (Lance with visual_gen off, Qwen2ForCausalLM of qwen2_navit with Qwen2MoTDecoderLayer and
QK norms, Qwen2_5_VisionTransformerPretrainedModel), every parameter from the seeded generator
(scripts/reference/seeded.py; the generation expert's *_moe_gen tensors are seeded too but left
out of the checkpoint, which x2t never reads), prompts and grids from x2t_sample on synthetic
images with seeded pixel rows in place of the transform's, and validation_und_KVcache's greedy
tokens, first-step logits (masked at len(tokenizer) = 151665) and margins in float32. Two more
shims run the model on a CPU in float32:
- flash_attn is a module whose flash_attn_varlen_func is SDPA-equivalent math in float32 with
  flash-attn's semantics: attention within each cu_seqlens pair, the causal mask aligned to the
  bottom right when a chunk's queries are fewer than its keys;
- qwen2_navit.py is executed with its unconditional `.to(torch.bfloat16)` of q, k and v (before
  flash attention) changed to the activations' dtype: bfloat16 in the official bf16 run, so that
  run is unchanged. The file is read and patched in memory; nothing is written.
Each case is also run with every prefill split causal (the image span too); causal_span_differs
records whether that changes the tokens or the first-step logits, for the sweep's mutation test.

Subcommand `served` writes core/internal/enginetest/testdata/lance/served.json
(fixture.Served): the case PNGs of core/internal/enginetest/testdata/qwen2_5_vl/cases with their
questions through x2t_sample (Lance's loader, transform and framing, the system turn empty) and
validation_und_KVcache on the sweep model g3-h60 in float32, 8 greedy tokens with EOS never
stopping; the gateway's TestHTTPMatchesReference serves the same seeded checkpoint over HTTP and
must answer these tokens.

Run: `just golden-lance` (CI never runs it; the outputs are committed).
"""

import argparse
import contextlib
import hashlib
import json
import os
import pathlib
import random
import sys
import tempfile
import types

ROOT = pathlib.Path(__file__).resolve().parents[2]
LANCE = pathlib.Path(os.environ.get("LANCE_SRC", ROOT / ".build/lance-src"))
QWEN_TOKENIZER = ROOT / ".build/tokenizer/qwen3"
TOKENIZER = ROOT / ".build/tokenizer/qwen25-lance"
CASES = ROOT / "plugins/lance/testdata/cases.json"
GOLDEN = ROOT / "core/internal/prep/testdata/golden_lance"
QWEN_IMAGES = ROOT / "core/internal/prep/testdata/golden/images"

PINNED = {
    "data/transforms.py": "8350f2aad5740614881a53045e77196e47f6a30e79ac4ce060e773a33ac9c3fc",
    "data/video/transforms/bucket_resize.py": "d62a60aef9045557c14927d67fe93535ba7533acf380a978e04abfb63df36004",
    "data/video/transforms/divisible_crop.py": "caed75a7b6a1fb33516fe8cddf8c699855023c8759c7172f913155a31841d628",
    "data/video/transforms/na_resize.py": "7393e1bd22ca518f003ce8d0e73281a831c0a0ef35a646e309dc02ee74713570",
    "data/datasets_custom/validation_dataset.py": "30b76294809363066298cd9b5bc1437f1d7d9303df8b18ad9db751aa40d54ce2",
    "data/system_prompt_render.py": "f40eff28865b1c1534d148f85351afd32355e9dc20ff7be559624cd2a7bee737",
    "data/data_utils.py": "7e545258dd50e31ad80dabd21dd71ddd75e42bd72dbe6dbe73925d95e99a3b19",
    "modeling/lance/lance.py": "196dbb4b3bc8914f90f211ba7b1e8099804fb978c2c21196815f11f66efb418f",
    "modeling/lance/qwen2_navit.py": "f60959b763314c1f3360d9b7d372f78019606162de485ea12f660bd6caad7397",
    "modeling/vit/qwen2_5_vl_vit.py": "6f1185e10b1979097f6e081b3b5a685f78c8501318125279e08fc8ec5deede30",
    "modeling/qwen2/tokenization_qwen2.py": "eccb7b674297b11c9c1509265d7cd2c06d295e192740a6a992d8695d86052aa6",
}

RESOLUTIONS = {"image_256res": 224, "video_192p": 224, "image_512res": 448, "image_768res": 672,
               "video_360p": 476, "video_480p": 616}
DEFAULT_RES = "image_512res"
QUESTION = "What is the main object in this image? Answer in one word."
SYSTEM = "You are a careful assistant. Réponds en un mot."
IM_END = 151645
VIDEO_PAD = 151656
SAMPLES = 8


def sha(b):
    return hashlib.sha256(b).hexdigest()


def check_sources():
    for rel, want in PINNED.items():
        p = LANCE / rel
        if not p.is_file():
            raise SystemExit(f"{p} is missing: clone Lance into {LANCE} (see this script's docstring)")
        if sha(p.read_bytes()) != want:
            raise SystemExit(f"{p} is not the file of Lance 4baeee08 (sha256 differs)")


def install_shims():
    import importlib.machinery
    for name in ("cv2", "decord"):
        m = types.ModuleType(name)
        m.__spec__ = importlib.machinery.ModuleSpec(name, None)
        m.VideoReader = m.cpu = None
        sys.modules.setdefault(name, m)
    sys.path.insert(0, str(LANCE))


@contextlib.contextmanager
def randint_low(record):
    """torch.randint returning its lower bound; record gets True when the range was wider than one."""
    import torch
    real = torch.randint

    def low(lo, hi=None, size=None, **kw):
        if hi is None:
            lo, hi = 0, lo
        if hi - lo > 1:
            record.append(True)
        return torch.full(size, lo, dtype=torch.long)

    torch.randint = low
    try:
        yield
    finally:
        torch.randint = real


def qwen25_tokenizer_dir():
    """A Qwen2.5 tokenizer for Lance's vendored slow Qwen2Tokenizer: vocab.json and merges.txt from
    the Qwen byte-level BPE of .build/tokenizer/qwen3, the 22 special tokens of Qwen2.5 (ids 151643
    to 151664; Qwen3's four later ones dropped, so len(tokenizer) is 151665, the vocab_size
    validation_und_KVcache masks the logits from)."""
    tj = json.loads((QWEN_TOKENIZER / "tokenizer.json").read_text())
    cfg = json.loads((QWEN_TOKENIZER / "tokenizer_config.json").read_text())
    TOKENIZER.mkdir(parents=True, exist_ok=True)
    (TOKENIZER / "vocab.json").write_text(json.dumps(tj["model"]["vocab"], ensure_ascii=False))
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    (TOKENIZER / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    added = {k: v for k, v in cfg["added_tokens_decoder"].items() if int(k) < 151665}
    specials = [v["content"] for k, v in sorted(added.items(), key=lambda kv: int(kv[0])) if v["special"]]
    out = {"added_tokens_decoder": added, "additional_special_tokens": [s for s in specials if s not in
                                                                        ("<|endoftext|>",)],
           "bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "unk_token": None,
           "errors": "replace", "clean_up_tokenization_spaces": False, "model_max_length": 131072,
           "split_special_tokens": False, "tokenizer_class": "Qwen2Tokenizer"}
    (TOKENIZER / "tokenizer_config.json").write_text(json.dumps(out, ensure_ascii=False, indent=1))
    return TOKENIZER


def load_tokenizer():
    from modeling.qwen2 import Qwen2Tokenizer
    from data.data_utils import add_special_tokens
    tok = Qwen2Tokenizer.from_pretrained(str(qwen25_tokenizer_dir()))
    tok, new_ids, n_new = add_special_tokens(tok)
    if n_new or len(tok) != 151665 or new_ids["eos_token_id"] != IM_END:
        raise SystemExit(f"unexpected tokenizer: {n_new} new tokens, len {len(tok)}, ids {new_ids}")
    new_ids["image_token_id"] = VIDEO_PAD  # inference_lance.py: language_model.config.video_token_id
    return tok, new_ids


# ---------------------------------------------------------------------------------------------
# geometry, read off the official transforms

def fake_image(w, h):
    """A [3, h, w] tensor standing for an image of any size without its memory."""
    import torch
    return torch.zeros(3, 1, 1).expand(3, h, w)


def geometry(w, h, side):
    """The bucket, RandomResizedCrop's box and DivisibleCrop's box for a w x h image, from the
    official BucketResize, RandomResizedCrop.get_params and DivisibleCrop."""
    import torch
    from data.video.transforms.bucket_resize import BucketResize
    from data.video.transforms.divisible_crop import DivisibleCrop
    from torchvision.transforms import InterpolationMode
    br = BucketResize(max_area=side ** 2, interpolation=InterpolationMode.BICUBIC,
                      aspect_ratios=["21:9", "16:9", "4:3", "1:1", "3:4", "9:16"], stride=16)
    bucket = br.find_nearest_bucket(w, h)
    rrc = br.bucket_resize[bucket]
    wide = []
    with randint_low(wide):
        top, left, ch, cw = rrc.get_params(fake_image(w, h), rrc.scale, rrc.ratio)
    bh, bw = bucket
    rows = torch.arange(bh).view(1, bh, 1).expand(1, bh, bw)
    cols = torch.arange(bw).view(1, 1, bw).expand(1, bh, bw)
    rr, cc = DivisibleCrop(28)(rows), DivisibleCrop(28)(cols)
    region = {"x": int(cc[0, 0, 0]), "y": int(rr[0, 0, 0]), "width": rr.shape[-1], "height": rr.shape[-2]}
    return {"bucket": (bh, bw), "crop": {"x": left, "y": top, "width": cw, "height": ch}, "region": region,
            "rng_offset": bool(wide)}


def want_plan(w, h, g):
    """The plan the plugin must return, spelled as it spells it (no crop when the crop is the whole
    image, no region when DivisibleCrop keeps the whole bucket)."""
    bh, bw = g["bucket"]
    r = g["region"]
    view = {"resize": {"width": bw, "height": bh, "filter": "bicubic", "flavor": "pil", "antialias": True},
            "normalize": {"rescale": 1 / 255, "mean": [0.48145466, 0.4578275, 0.40821073],
                          "std": [0.26862954, 0.26130258, 0.27577711], "flavor": "pil"},
            "patches": {"size": 14, "temporal": 2, "merge": 2, "layout": "merge_blocks"},
            "grid": {"t": 1, "h": r["height"] // 14, "w": r["width"] // 14},
            "llm_grid": {"t": 1, "h": r["height"] // 28, "w": r["width"] // 28},
            "image_tokens": (r["height"] // 28) * (r["width"] // 28)}
    if g["crop"] != {"x": 0, "y": 0, "width": w, "height": h}:
        view["crop"] = g["crop"]
    if r != {"x": 0, "y": 0, "width": bw, "height": bh}:
        view["region"] = r
    return {"source": {"width": w, "height": h}, "image_tokens": view["image_tokens"], "views": [view]}


def exact_fits(side):
    """Sizes at each bucket's exact ratio (the drawn crop is the whole image) and a pixel off it
    (the drawn crop fits a pixel short: the reference's offset comes from the generator)."""
    from data.video.transforms.bucket_resize import BucketResize
    from torchvision.transforms import InterpolationMode
    br = BucketResize(max_area=side ** 2, interpolation=InterpolationMode.BICUBIC,
                      aspect_ratios=["21:9", "16:9", "4:3", "1:1", "3:4", "9:16"], stride=16)
    out = []
    for bh, bw in br.buckets:
        for k in (1, 2, 3, 5, 8):
            out.append((bw * k // 8, bh * k // 8))
            out.append((bw * k // 8 + 1, bh * k // 8))
            out.append((bw * k // 8, bh * k // 8 + 1))
    return out


EDGE = [(1, 1), (2, 2), (1, 2), (2, 1), (3, 3), (1, 100), (100, 1), (1, 32768), (32768, 1), (10, 10), (28, 28),
        (100, 101), (101, 100), (99, 100), (320, 240), (240, 320), (426, 320), (640, 480), (1024, 768),
        (1600, 1200), (1920, 1080), (1080, 1920), (2000, 1500), (280, 210), (350, 280), (400, 320),
        (448, 448), (449, 448), (448, 449), (512, 384), (384, 512), (672, 288), (592, 336), (336, 592),
        (4000, 3000), (32768, 32768), (32768, 14043), (10, 1990), (1990, 10), (2010, 10), (29, 1000),
        (1000, 29), (7, 2000), (3000, 9), (700, 300), (300, 700), (1000, 570), (570, 1000), (16000, 9000),
        # W/H exactly between the 1:1 and 3:4 buckets: argmin keeps the first (1:1)
        (7, 8), (700, 800), (1400, 1600),
        # near 4:3, where the crop drawn at torch's float32 ratio rounds otherwise than at the
        # float64 one (some a pixel short of the image)
        (2897, 2172), (2899, 2175), (2901, 2175), (2903, 2178), (2907, 2181), (2911, 2184)]


def random_sizes(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.random()
        if k < 0.6:
            out.append((rng.randint(1, 2048), rng.randint(1, 2048)))
        elif k < 0.9:
            out.append((rng.randint(1, 12000), rng.randint(1, 12000)))
        else:
            s = rng.randint(1, 40)
            w, h = s, s * rng.randint(2, 500)
            out.append((w, h) if rng.random() < 0.5 else (h, w))
    return out


def frames(tok, tokens, system_param):
    """Frames from render_qwenvl_prompt as x2t_sample calls it: the user turn's items in the
    interleave order (image, then the question when not empty), the answer empty, cut after
    "assistant\n". Text-first requests get the same rendering (the only one x2t has)."""
    from data.system_prompt_render import render_qwenvl_prompt
    out = []
    for question, text_first, client_system in [
            ("What is in this image?", False, None), ("Describe it.", True, None), ("", False, None),
            (" lead and trail ", False, None), ("Unicode: 東京 ☃\nsecond line", False, None),
            ("Answer briefly.", False, "Be brief."), ("Two\nlines", True, "")]:
        system = client_system if client_system is not None else system_param
        user = [{"type": "image"}] + ([{"type": "text", "text": question}] if question != "" else [])
        text = render_qwenvl_prompt([{"role": "user", "content": user}, {"role": "assistant", "content":
                                    [{"type": "text", "text": ""}]}], default_system=system,
                                    include_assistant_content=True)
        cut = text.index("<|im_start|>assistant\n") + len("<|im_start|>assistant\n")
        prompt = text[:cut]
        before, rest = prompt.split("<|vision_start|><|video_pad|><|vision_end|>")
        case = {"question": question, "text_first": text_first}
        if client_system is not None:
            case["system"] = client_system
        out.append({**case, "want": {"before": before, "after": rest,
                                     "span": {"open": ["<|vision_start|>"], "pad": "<|video_pad|>", "count": tokens,
                                              "close": ["<|vision_end|>"]},
                                     "stop_token_ids": [IM_END], "hints": {"skip_special_tokens": True}}})
    return out


def plugin_cases(tok):
    cases = []
    sizes = [(s, DEFAULT_RES) for s in EDGE + exact_fits(448) + random_sizes(150, 20261205)]
    for res in ("image_768res", "image_256res", "video_480p", "video_360p"):
        sizes += [(s, res) for s in EDGE[::3] + exact_fits(RESOLUTIONS[res])[::4] + random_sizes(12, len(res))]
    rng_cases = 0
    framed = set()
    for w, h in [(0, 10), (10, 0)]:
        cases.append({"name": f"{w}x{h}", "image": {"width": w, "height": h, "format": "png"},
                      "want_error": "image_too_small"})
    seen = set()
    for (w, h), res in sizes:
        name = f"{w}x{h}" + ("" if res == DEFAULT_RES else f"_{res}")
        if name in seen:
            continue
        seen.add(name)
        g = geometry(w, h, RESOLUTIONS[res])
        rng_cases += g["rng_offset"]
        case = {"name": name + ("_rng" if g["rng_offset"] else ""), "image": {"width": w, "height": h, "format": "png"}}
        params = {} if res == DEFAULT_RES else {"resolution": res}
        if (w, h) == (320, 240) and res == DEFAULT_RES:
            params = {"system_prompt": "You are a helpful assistant."}
        if params:
            case["params"] = params
        plan = want_plan(w, h, g)
        case["want"] = {"plan": plan, "image_tokens": plan["image_tokens"]}
        key = (res, bool(params.get("system_prompt")))
        if key not in framed:
            framed.add(key)
            case["frames"] = frames(tok, plan["image_tokens"], params.get("system_prompt", ""))
        cases.append(case)
    if rng_cases < 4:
        raise SystemExit(f"only {rng_cases} cases draw a crop offset; the spread misses that path")
    return cases


# ---------------------------------------------------------------------------------------------
# pixel and prompt goldens: ValidationDataset.x2t_sample itself

SYNTH = [(1, 1), (2, 2), (1, 700), (700, 1), (7, 2000), (3000, 9), (448, 448), (320, 240), (512, 384),
         (513, 384), (100, 101), (672, 288), (336, 592), (1000, 570), (640, 200), (200, 640), (1344, 896),
         (2560, 1920), (700, 800), (2897, 2172), (2899, 2175)]


def synth(w, h, seed):
    sys.path.insert(0, str(ROOT / "scripts/reference"))
    from golden_internvl import synth as s
    return s(w, h, seed)


def dataset(tok, new_ids, samples, res, system_prompt_type="SP0"):
    from data.datasets_custom.validation_dataset import ValidationDataset
    d = tempfile.mkdtemp()
    path = os.path.join(d, "samples.json")
    with open(path, "w") as f:
        json.dump(samples, f, indent=1)  # not one line: _read_jsonl must fail and json.load take it
    cfg = types.SimpleNamespace(resolution=res, text_template=True, vit_patch_size=14, vit_patch_size_temporal=2,
                                task="x2t_image")
    return ValidationDataset(jsonl_path=path, tokenizer=tok, data_args=None, model_args=None, training_args=None,
                             new_token_ids=new_ids, dataset_config=cfg)


def rle(ids):
    out = []
    for i in ids:
        if out and out[-1][0] == i:
            out[-1][1] += 1
        else:
            out.append([i, 1])
    return out


def x2t(tok, new_ids, file, question, system, res=DEFAULT_RES):
    """One x2t sample: pixel rows, grid, the prefilled prompt ids and the bidirectional span."""
    ds = dataset(tok, new_ids, {"0": {"interleave_array": [str(file), [system, question, ""]],
                                      "element_dtype_array": ["image", "text"], "istarget_in_interleave": [0, 1]}}, res)
    wide = []
    with randint_low(wide):
        s = ds.x2t_sample(0)
    ids = s["packed_text_ids"].tolist()
    first = int(s["ce_loss_indexes"][0])
    prompt = ids[:first + 1]  # validation_und_KVcache: prefill ids[:-1], then decode from the last
    modes, lens = s["attn_modes"], s["split_lens"]
    spans, at = [], 0
    for m, n in zip(modes, lens):
        if m == "full":
            spans.append([at, at + n])
        at += n
    assert len(spans) == 1 and prompt[spans[0][0]] == 151652 and prompt[spans[0][1] - 1] == 151653, (spans, modes)
    pv = s["packed_vit_tokens"][0].to("cpu").float().contiguous()
    return {"pv": pv, "grid": s["vit_video_grid_thw"][0].tolist(), "ids": prompt, "span": spans[0],
            "rng_offset": bool(wide)}


def lance_rgb(file):
    """get_video_tensor_online's image loading, as the official code does it."""
    from PIL import Image
    image = Image.open(file)
    if image.mode == "P":
        image = image.convert("RGBA")
    if image.mode == "RGBA":
        bg = Image.new("RGB", image.size, (255, 255, 255))
        bg.paste(image, mask=image.split()[3])
        image = bg
    else:
        image = image.convert("RGB")
    return image


def pixel_goldens(tok, new_ids):
    import numpy as np
    from PIL import Image
    from transformers.image_utils import load_image
    GOLDEN.mkdir(parents=True, exist_ok=True)
    images, cases = [], []
    tmp = pathlib.Path(tempfile.mkdtemp())
    entries = []
    for f in sorted(QWEN_IMAGES.iterdir()):
        entries.append((f.name, f, None))
    for k, (w, h) in enumerate(SYNTH):
        p = tmp / f"synth_{w}x{h}.png"
        synth(w, h, k).save(p)
        entries.append((f"synth_{w}x{h}", p, {"width": w, "height": h, "seed": k}))
    for name, f, syn in entries:
        lrgb = np.asarray(lance_rgb(f))
        hrgb = np.asarray(load_image(str(f)).convert("RGB")) if syn is None else lrgb
        im = {"name": name, "lance_rgb_sha256": sha(lrgb.tobytes()), "width": lrgb.shape[1], "height": lrgb.shape[0]}
        if syn is None:
            im["file"] = f"../golden/images/{f.name}"
            im["sha256"] = sha(f.read_bytes())
            im["rgb_sha256"] = sha(hrgb.tobytes())
            if hrgb.shape != lrgb.shape or not (hrgb == lrgb).all():
                im["host_rgb_differs"] = True
        else:
            im["synth"] = syn
            im["rgb_sha256"] = im["lance_rgb_sha256"]
        images.append(im)
        variants = [(DEFAULT_RES, "", QUESTION)]
        if name in ("rgb_426x320.jpg", "synth_2560x1920", "synth_100x101"):
            variants += [("image_768res", "", QUESTION), ("image_256res", SYSTEM, QUESTION)]
        if name == "synth_320x240":
            variants += [(DEFAULT_RES, SYSTEM, ""), (DEFAULT_RES, "", "Unicode: 東京 ☃\nsecond line")]
        for res, system, question in variants:
            r = x2t(tok, new_ids, f, question, system, res)
            flat = r["pv"].numpy().reshape(-1)
            rng = np.random.default_rng(len(cases))
            idx = sorted(set([0, flat.size - 1] + rng.choice(flat.size, SAMPLES - 2, replace=False).tolist()))
            g = geometry(im["width"], im["height"], RESOLUTIONS[res])
            n = (g["region"]["height"] // 28) * (g["region"]["width"] // 28)
            if r["grid"] != [1, g["region"]["height"] // 14, g["region"]["width"] // 14] or r["ids"].count(VIDEO_PAD) != n:
                raise SystemExit(f"{name}: x2t grid {r['grid']}, {r['ids'].count(VIDEO_PAD)} pads; geometry {g}")
            case = {"image": name, "resolution": res, "system": system, "question": question,
                    "grid": r["grid"], "rows": list(r["pv"].shape), "sha256": sha(flat.astype("<f4").tobytes()),
                    "samples": [[int(i), float(flat[i])] for i in idx], "input_ids": rle(r["ids"]),
                    "bidirectional": r["span"]}
            if r["rng_offset"]:
                case["rng_offset"] = True
            cases.append(case)
        print(name, [c["sha256"][:12] for c in cases[-len(variants):]], file=sys.stderr)
    if len(images) < 20:
        raise SystemExit(f"only {len(images)} images")
    import PIL
    import torch
    import torchvision
    import transformers
    manifest = {"generator": "scripts/reference/golden_lance.py plugin",
                "reference": "github.com/bytedance/Lance@4baeee086648996f6ab12e673cbe461b0b149997",
                "versions": {"transformers": transformers.__version__, "torch": torch.__version__,
                             "torchvision": torchvision.__version__, "pillow": PIL.__version__},
                "images": images, "cases": cases}
    (GOLDEN / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, separators=(",", ":")) + "\n")


# ---------------------------------------------------------------------------------------------
# the family's sweep: seeded tiny checkpoints through validation_und_KVcache

SWEEP_OUT = ROOT / "core/internal/enginetest/testdata/sweep/lance.json"
SWEEP_SEED = 20261243
MAX_NEW_TOKENS = 8
TOP_K, STRIDE = 64, 1499
MIN_MARGIN = 1e-3
VOCAB_SIZE = 151665  # len(tokenizer): validation_und_KVcache masks the logits from here on

# (name, synthetic image size, resolution, question): prompts and grids from x2t_sample itself;
# their pixel rows are replaced by seeded values of the same shape (seeded.seeded_pixels).
SWEEP_IMAGES = [
    ("wide_192x256", (256, 192), "image_256res", "What is it?"),
    ("tall_288x160", (160, 288), "image_256res", "Read the text in the banner."),
    ("square_224", (224, 224), "image_256res", ""),
    ("photo_384x512", (512, 384), "image_512res",
     "List every object you can find, from left to right, with its colour. 这是什么？"),
]

# name: text (layers, heads, kv_heads, head_dim, intermediate, mrope_section, rope_theta),
#       vision (depth, heads, head_dim, intermediate, window_size, fullatt_block_indexes).
# Lance's Qwen2Attention takes head_dim = hidden / heads, so hidden = heads * head_dim; the tower's
# out_hidden is the text hidden (vit_type qwen_2_5_vl_original: no connector).
SWEEP_MODELS = [
    ("g1-h32", (2, 2, 2, 16, 45, [2, 3, 3], 1e6), (2, 2, 16, 50, 112, [1])),
    ("g2-h48", (2, 4, 2, 12, 75, [2, 2, 2], 1e6), (1, 5, 4, 37, 56, [0])),
    ("g3-h54", (1, 3, 1, 18, 99, [3, 3, 3], 1e4), (3, 3, 20, 90, 168, [1])),
    ("g4-h24", (2, 4, 1, 6, 57, [1, 1, 1], 1e6), (4, 7, 4, 43, 112, [0, 3])),
    ("g5-h70", (2, 5, 1, 14, 101, [2, 2, 3], 1e4), (2, 1, 36, 66, 84, [0])),
    ("g7-h42", (1, 7, 1, 6, 85, [2, 1, 0], 1e6), (3, 3, 12, 53, 56, [2])),
    ("g8-h48", (2, 8, 1, 6, 93, [1, 1, 1], 1e6), (2, 5, 12, 77, 112, [])),
    ("g3-h60", (3, 6, 2, 10, 109, [2, 1, 2], 1e6), (4, 3, 12, 70, 112, [1, 2])),
    ("g1-h22", (2, 1, 1, 22, 61, [5, 3, 3], 1e4), (1, 1, 12, 30, 224, [])),
]

FLASH_ATTN_DOC = """flash_attn as SDPA (golden_lance.py): flash_attn_varlen_func's varlen isolation (attention within each
[cu_seqlens_q[i], cu_seqlens_q[i+1]) x [cu_seqlens_k[i], cu_seqlens_k[i+1]) pair) and its causal mask aligned to
the bottom right (query j of Lq sees keys <= Lk - Lq + j), softmax in float32, scale 1/sqrt(head_dim)."""


def flash_attn_shim():
    import importlib.machinery
    import torch
    m = types.ModuleType("flash_attn")
    m.__spec__ = importlib.machinery.ModuleSpec("flash_attn", None)
    m.__doc__ = FLASH_ATTN_DOC

    def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False,
                               softmax_scale=None, **kw):
        assert not kw, kw
        heads, kvh, d = q.shape[1], k.shape[1], q.shape[2]
        scale = softmax_scale if softmax_scale is not None else d ** -0.5
        out = torch.empty_like(q)
        for i in range(len(cu_seqlens_q) - 1):
            q0, q1 = int(cu_seqlens_q[i]), int(cu_seqlens_q[i + 1])
            k0, k1 = int(cu_seqlens_k[i]), int(cu_seqlens_k[i + 1])
            qi = q[q0:q1].transpose(0, 1).float()  # [H, Lq, D]
            ki = k[k0:k1].transpose(0, 1).float().repeat_interleave(heads // kvh, 0)
            vi = v[k0:k1].transpose(0, 1).float().repeat_interleave(heads // kvh, 0)
            s = (qi @ ki.transpose(1, 2)) * scale
            if causal:
                lq, lk = q1 - q0, k1 - k0
                allowed = torch.arange(lk, device=q.device)[None, :] <= (torch.arange(lq, device=q.device)[:, None] + (lk - lq))
                s = s.masked_fill(~allowed, float("-inf"))
            out[q0:q1] = (torch.softmax(s, -1) @ vi).transpose(0, 1).to(q.dtype)
        return out

    m.flash_attn_varlen_func = flash_attn_varlen_func
    sys.modules["flash_attn"] = m


BF16_CAST = ("        packed_query_states = packed_query_states.to(torch.bfloat16)\n"
             "        packed_key_states = packed_key_states.to(torch.bfloat16)\n"
             "        packed_value_states = packed_value_states.to(torch.bfloat16)\n")


def load_navit():
    """modeling/lance/qwen2_navit.py with its one change for a float32 reference: the unconditional
    bfloat16 cast of q, k and v before flash attention becomes a cast to the activations' dtype
    (bfloat16 in the official bf16 run, so that run is unchanged). Everything else runs as written."""
    import importlib.util
    path = LANCE / "modeling/lance/qwen2_navit.py"
    src = path.read_text()
    if src.count(BF16_CAST) != 2:  # forward_train's and forward_inference's
        raise SystemExit("qwen2_navit.py's bfloat16 cast is not where the shim expects it")
    src = src.replace(BF16_CAST, BF16_CAST.replace("torch.bfloat16", "packed_query_sequence.dtype"))
    spec = importlib.util.spec_from_loader("modeling.lance.qwen2_navit", loader=None, origin=str(path))
    mod = importlib.util.module_from_spec(spec)
    mod.__file__ = str(path)
    sys.modules["modeling.lance.qwen2_navit"] = mod
    exec(compile(src, str(path), "exec"), mod.__dict__)
    return mod


def lance_model(text, vision, seed):
    """Lance(visual_gen=False, visual_und=True, vit_type qwen_2_5_vl_original) of the given shape,
    every parameter seeded; returns the model, the config.json Iris reads, and the checkpoint's
    tensors (the understanding path and the tower; the generation expert left out). seed None
    leaves the classes' own initialisation (on the device of the caller's torch.device context:
    gpu_served.py builds the full size on the meta device) and returns no tensors."""
    import numpy as np
    import torch
    from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLVisionConfig
    from modeling.qwen2.modeling_qwen2 import Qwen2Config
    from modeling.lance import Lance, LanceConfig, Qwen2ForCausalLM
    from modeling.vit.qwen2_5_vl_vit import Qwen2_5_VisionTransformerPretrainedModel
    from seeded import seeded_tensor
    layers, heads, kvh, hd, inter, mrope, theta = text
    vdepth, vheads, vhd, vinter, window, full = vision
    hidden = heads * hd
    vcfg = dict(depth=vdepth, hidden_size=vheads * vhd, intermediate_size=vinter, num_heads=vheads,
                out_hidden_size=hidden, window_size=window, fullatt_block_indexes=full, patch_size=14,
                temporal_patch_size=2, spatial_merge_size=2, in_channels=3, hidden_act="silu", tokens_per_second=2)
    llm = Qwen2Config(hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                      num_attention_heads=heads, num_key_value_heads=kvh, vocab_size=151936, rms_norm_eps=1e-6,
                      rope_theta=theta, max_position_embeddings=32768, hidden_act="silu",
                      rope_scaling={"type": "mrope", "mrope_section": mrope}, tie_word_embeddings=False,
                      pad_token_id=151643, bos_token_id=151643, eos_token_id=151645)
    # what inference_lance.py sets from its flags (--llm_qk_norm* true, --tie_word_embeddings false,
    # --apply_qwen_2_5_vl_pos_emb true, layer_module Qwen2MoTDecoderLayer) and what get_rope_index reads
    llm.layer_module, llm.qk_norm, llm.qk_norm_und, llm.qk_norm_gen = "Qwen2MoTDecoderLayer", True, True, True
    llm.freeze_und, llm.apply_qwen_2_5_vl_pos_emb = False, True
    llm.vision_config = {"spatial_merge_size": 2, "tokens_per_second": 2}
    llm.image_token_id, llm.video_token_id, llm.vision_start_token_id = 151655, 151656, 151652
    vit_config = Qwen2_5_VLVisionConfig(**vcfg)
    vit_config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    lm = Qwen2ForCausalLM(llm)
    vit = Qwen2_5_VisionTransformerPretrainedModel(vit_config)
    cfg = LanceConfig(visual_gen=False, visual_und=True, llm_config=llm, vit_config=vit_config)
    model = Lance(language_model=lm, vit_model=vit, vit_type="qwen_2_5_vl_original", config=cfg)
    model.update_tokenizer  # noqa: B018 (present in the official class)
    state = model.state_dict() if seed is not None else {}
    tensors = {}
    with torch.no_grad():
        for name, p in state.items():
            v = torch.from_numpy(seeded_tensor(seed, name, tuple(p.shape)))
            p.copy_(v)
            if "_moe_gen" not in name:
                tensors[name] = v.numpy()
    model = model.float().eval()
    iris_cfg = {"model_type": "lance", "architectures": ["Lance"], "hidden_size": hidden, "intermediate_size": inter,
                "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kvh,
                "vocab_size": 151936, "rms_norm_eps": 1e-6, "rope_theta": theta, "hidden_act": "silu",
                "max_position_embeddings": 32768, "rope_scaling": {"type": "mrope", "mrope_section": mrope},
                "tie_word_embeddings": False, "qk_norm": True, "output_vocab_size": VOCAB_SIZE,
                "image_token_id": 151656, "video_token_id": 151656, "vision_start_token_id": 151652,
                "vision_end_token_id": 151653, "eos_token_id": 151645, "pad_token_id": 151643,
                "vision_config": vcfg}
    return model, iris_cfg, tensors


def sweep_cases(tok, new_ids):
    """x2t_sample's prompt ids, grids and bidirectional split for each sweep image."""
    tmp = pathlib.Path(tempfile.mkdtemp())
    images, cases = [], []
    for k, (name, (w, h), res, question) in enumerate(SWEEP_IMAGES):
        f = tmp / f"{name}.png"
        synth(w, h, 40 + k).save(f)
        r = x2t(tok, new_ids, f, question, "", res)
        images.append({"name": name, "grid": r["grid"]})
        cases.append({"name": name, "image": name, "order": "image_first", "input_ids": r["ids"],
                      "bidirectional": r["span"], "resolution": res, "question": question})
    return images, cases


def run_case(model, case, grid, pixels, new_ids, causal_image=False, device="cpu", dtype=None):
    """validation_und_KVcache on one prompt (max_length MAX_NEW_TOKENS, the vocabulary mask at
    VOCAB_SIZE), with the first step's logits and every step's top-two margin recorded from lm_head.
    device and dtype: where and in what the model runs (gpu_served.py: the GPU, fp32 or bf16)."""
    import torch
    dtype = dtype or torch.float32
    ids = torch.tensor(case["input_ids"])
    n = len(ids)
    s0, s1 = case["bidirectional"]
    split_lens = [s0, s1 - s0, n - s1 + 1]  # the answer split: validation_und_KVcache cuts it at ce[0]
    attn_modes = ["causal", "full", "causal"]
    steps = []
    real_head = model.language_model.lm_head

    class Head(torch.nn.Module):
        def forward(self, x):
            y = real_head(x)
            z = y.clone()
            z[:, VOCAB_SIZE:] = float("-inf")
            steps.append(z[0].detach().clone())
            return y

    model.language_model.lm_head = Head()
    real_fi = model.language_model.forward_inference
    if causal_image:  # the mutation: every prefill split causal
        model.language_model.forward_inference = lambda *a, **kw: real_fi(*a, **{**kw, "is_causal": True})
    try:
        out, _, _ = model.validation_und_KVcache(
            val_packed_text_ids=torch.cat([ids, torch.tensor([IM_END])]).to(device), val_packed_text_indexes=None,
            val_packed_position_ids=torch.arange(n + 1, device=device), val_ce_loss_indexes=torch.tensor([n - 1, n], device=device),
            val_sample_N_target=[1], val_split_lens=split_lens, val_attn_modes=attn_modes, val_sample_lens=[n + 1],
            val_sample_type=["und"], val_packed_vit_tokens=[pixels], val_vit_video_grid_thw=torch.tensor([grid], device=device),
            max_samples=1, max_length=MAX_NEW_TOKENS, device=device, dtype=dtype, new_token_ids=new_ids,
            pad_token_id=151643, vocab_size=VOCAB_SIZE, do_sample=False, apply_qwen_2_5_vl_pos_emb=True,
            image_token_id=VIDEO_PAD)
    finally:
        model.language_model.lm_head = real_head
        model.language_model.forward_inference = real_fi
    tokens = [int(t) for t in out[0].reshape(-1)]
    return tokens, steps


def sweep(tok, new_ids):
    import numpy as np
    import torch
    sys.path.insert(0, str(ROOT / "scripts/reference"))
    from seeded import seeded_pixels
    flash_attn_shim()
    load_navit()
    images, cases = sweep_cases(tok, new_ids)
    pix = {}
    for im in images:
        t, h, w = im["grid"]
        px = seeded_pixels(SWEEP_SEED, im["name"], t * h * w, 3 * 2 * 14 * 14)
        pix[im["name"]] = torch.from_numpy(px.copy())
        im["sha256"] = sha(px.astype("<f4").tobytes())
    models = []
    for k, (name, text, vision) in enumerate(SWEEP_MODELS):
        seed = SWEEP_SEED + 1000 * (k + 1)
        model, cfg, tensors = lance_model(text, vision, seed)
        rec = {"name": name, "seed": seed, "config": cfg,
               "tensors": [{"name": n, "shape": list(v.shape), "sum": float(v.astype(np.float64).sum()),
                            "sha256": sha(v.astype("<f4").tobytes())} for n, v in tensors.items()],
               "vision": [], "results": []}
        for im in images:
            with torch.no_grad():
                e = model.vit_model(hidden_states=pix[im["name"]], grid_thw=torch.tensor([im["grid"]]))
            e = e.double()
            rec["vision"].append({"image": im["name"], "rows": e.shape[0], "dim": e.shape[1], "sum": float(e.sum()),
                                  "sumabs": float(e.abs().sum())})
        for c in cases:
            grid = next(im["grid"] for im in images if im["name"] == c["image"])
            tokens, steps = run_case(model, c, grid, pix[c["image"]], new_ids)
            if len(tokens) < MAX_NEW_TOKENS and tokens[-1] != IM_END:
                raise SystemExit(f"{name}/{c['name']}: {len(tokens)} tokens")
            margins = []
            for st in steps:
                top2 = torch.topk(st.double(), 2).values
                margins.append(float(top2[0] - top2[1]))
            first = steps[0]
            ids = sorted(set(torch.topk(first, TOP_K).indices.tolist()) | set(range(0, VOCAB_SIZE, STRIDE)))
            res = {"case": c["name"], "tokens": tokens, "min_margin": min(margins), "argmax": int(first.argmax()),
                   "logit_ids": ids, "logit_values": [float(first[i]) for i in ids]}
            # the same prompt with the image split causal (what an HF Qwen model does): the sweep's
            # mutation test expects the engine to fail the cases where this differs
            causal, csteps = run_case(model, c, grid, pix[c["image"]], new_ids, causal_image=True)
            res["causal_span_differs"] = causal != tokens or float((csteps[0] - first).abs().max()) > 1e-4
            if res["min_margin"] < MIN_MARGIN:
                raise SystemExit(f"{name}/{c['name']}: greedy margin {res['min_margin']:.2g} under {MIN_MARGIN}")
            rec["results"].append(res)
            print(name, c["name"], tokens, f"margin {res['min_margin']:.3g}", "causal differs",
                  res["causal_span_differs"], file=sys.stderr)
        models.append(rec)
    differs = sum(r["causal_span_differs"] for m in models for r in m["results"])
    if differs < len(models) * len(cases) // 2:
        raise SystemExit(f"a causal image span changes only {differs} cases: the sweep would not catch it")
    import transformers
    golden = {"meta": {"max_new_tokens": MAX_NEW_TOKENS,
                       "semantics": "Lance 4baeee08 validation_und_KVcache in float32 on CPU (golden_lance.py sweep: "
                                    "flash_attn as SDPA with bottom-right causal alignment and varlen isolation, the "
                                    "bf16 cast of q/k/v made the activations' dtype); greedy, stops only at <|im_end|>, "
                                    f"logits of ids >= {VOCAB_SIZE} masked to -inf; transformers "
                                    f"{transformers.__version__}, torch {torch.__version__}"},
              "seed": SWEEP_SEED, "images": images, "cases": cases, "models": models}
    SWEEP_OUT.parent.mkdir(parents=True, exist_ok=True)
    SWEEP_OUT.write_text(json.dumps(golden, ensure_ascii=False, separators=(",", ":")) + "\n")


# ---------------------------------------------------------------------------------------------
# the served golden: the official path from the image file to the tokens

SERVED_OUT = ROOT / "core/internal/enginetest/testdata/lance/served.json"
SERVED_MODEL = "g3-h60"  # three layers, GQA 3: the image block changes its answers
SERVED_IMAGES = ["tiny_30x40", "square_56", "tall_120x300", "wide_500x90", "rect_320x240", "partial_406x238",
                 "large_644x476"]
CASES_DIR = ROOT / "core/internal/enginetest/testdata/qwen2_5_vl/cases"
READ_IMAGES = ["rgba_256x192.png", "exif6_240x180.jpg", "palette_200x150.png"]


def served(tok, new_ids):
    """Each case image (PNG) and question through ValidationDataset.x2t_sample (Lance's loader and
    transform, the x2t framing with an empty system turn) and validation_und_KVcache on the sweep's
    SERVED_MODEL, EOS never stopping (new_token_ids' eos set to -1), MAX_NEW_TOKENS tokens."""
    import torch
    flash_attn_shim()
    load_navit()
    sweep_doc = json.loads(SWEEP_OUT.read_text())
    spec = next(m for m in sweep_doc["models"] if m["name"] == SERVED_MODEL)
    k = [m[0] for m in SWEEP_MODELS].index(SERVED_MODEL)
    _, text, vision = SWEEP_MODELS[k]
    model, cfg, _ = lance_model(text, vision, spec["seed"])
    if cfg != spec["config"]:
        raise SystemExit("the sweep golden's config differs from this script's: regenerate the sweep first")
    no_eos = dict(new_ids, eos_token_id=-1)
    cases = []
    for name in SERVED_IMAGES:
        case = json.loads((CASES_DIR / f"{name}.json").read_text())
        f = CASES_DIR / case["image"]
        r = x2t(tok, new_ids, f, case["question"], "")
        c = {"input_ids": r["ids"], "bidirectional": r["span"]}
        tokens, steps = run_case(model, c, r["grid"], r["pv"], no_eos)
        margin = min(float(torch.topk(st.double(), 2).values[0] - torch.topk(st.double(), 2).values[1]) for st in steps)
        if len(tokens) != MAX_NEW_TOKENS or margin < MIN_MARGIN:
            raise SystemExit(f"{name}: {len(tokens)} tokens, greedy margin {margin:.3g}")
        print(name, r["grid"], len(r["ids"]), tokens, f"margin {margin:.3g}", file=sys.stderr)
        cases.append({"name": name, "image": case["image"], "question": case["question"], "grid": r["grid"],
                      "prompt_tokens": len(r["ids"]), "tokens": tokens, "min_margin": margin})
    # images Lance's loader reads otherwise than transformers' load_image (transparency over
    # white, no EXIF transpose), with the palette image that reads the same either way
    read_cases = []
    for file in READ_IMAGES:
        f = QWEN_IMAGES / file
        r = x2t(tok, new_ids, f, QUESTION, "")
        c = {"input_ids": r["ids"], "bidirectional": r["span"]}
        tokens, steps = run_case(model, c, r["grid"], r["pv"], no_eos)
        margin = min(float(torch.topk(st.double(), 2).values[0] - torch.topk(st.double(), 2).values[1]) for st in steps)
        if len(tokens) != MAX_NEW_TOKENS or margin < MIN_MARGIN:
            raise SystemExit(f"{file}: {len(tokens)} tokens, greedy margin {margin:.3g}")
        print(file, r["grid"], tokens, f"margin {margin:.3g}", file=sys.stderr)
        read_cases.append({"name": file, "image": str(f.relative_to(ROOT)), "question": QUESTION, "grid": r["grid"],
                           "prompt_tokens": len(r["ids"]), "tokens": tokens, "min_margin": margin})
    import transformers
    golden = {"meta": {"generator": "scripts/reference/golden_lance.py served", "transformers": transformers.__version__,
                       "torch": torch.__version__,
                       "semantics": "fp32, greedy, EOS never stops; Lance 4baeee08's x2t_sample (image_512res, empty "
                                    "system turn) and validation_und_KVcache with golden_lance.py's shims"},
              "model": SERVED_MODEL, "preprocessor_config": {}, "max_new_tokens": MAX_NEW_TOKENS, "cases": cases,
              "read_cases": read_cases}
    SERVED_OUT.parent.mkdir(parents=True, exist_ok=True)
    SERVED_OUT.write_text(json.dumps(golden, ensure_ascii=False, indent=1) + "\n")


READ_DIR = ROOT / "core/internal/imageio/testdata"


def read_goldens():
    """Palette PNGs with transparency (a 4-bit one with an alpha per entry, an 8-bit one with one
    transparent entry, which Pillow keeps as an index) and an 8-bit RGBA one, written here with
    Pillow, and the sha256 of the RGB Lance's loader makes of each (lance_rgb) beside
    load_image's (transformers: convert("RGB")), for imageio's OverWhite reading."""
    import numpy as np
    from PIL import Image
    from transformers.image_utils import load_image
    rng = np.random.default_rng(5)
    out = {}
    for name, mode, w, h in [("lance_palette4_trns_13x7.png", "P4", 13, 7), ("lance_palette8_trns1_9x11.png", "P8", 9, 11),
                             ("lance_rgba_6x5.png", "RGBA", 6, 5)]:
        p = READ_DIR / name
        if mode == "RGBA":
            px = rng.integers(0, 256, (h, w, 4), dtype=np.uint8)
            px[0, :3, 3] = [0, 255, 128]
            Image.fromarray(px, "RGBA").save(p)
        else:
            n = 16 if mode == "P4" else 200
            idx = rng.integers(0, n, (h, w), dtype=np.uint8)
            im = Image.fromarray(idx, "P")
            im.putpalette(rng.integers(0, 256, 3 * n, dtype=np.uint8).tobytes())
            trns = bytes(rng.integers(0, 256, n, dtype=np.uint8)) if mode == "P4" else int(idx[0, 0])
            im.save(p, bits=4 if mode == "P4" else 8, transparency=trns)
        lance = np.asarray(lance_rgb(p))
        plain = np.asarray(load_image(str(p)).convert("RGB"))
        if (lance == plain).all():
            raise SystemExit(f"{name}: Lance's loader and load_image agree: the file tests nothing")
        out[name] = {"lance_rgb_sha256": sha(lance.tobytes()), "rgb_sha256": sha(plain.tobytes()),
                     "width": w, "height": h}
    (READ_DIR / "lance_read.json").write_text(json.dumps(out, indent=1) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["plugin", "sweep", "served"])
    a = ap.parse_args()
    check_sources()
    install_shims()
    tok, new_ids = load_tokenizer()
    if a.what == "plugin":
        cases = plugin_cases(tok)
        CASES.parent.mkdir(parents=True, exist_ok=True)
        with open(CASES, "w") as f:
            f.write('{"family": "lance", "source": "scripts/reference/golden_lance.py (Lance 4baeee08)", "cases": [\n')
            f.write(",\n".join(json.dumps(c, ensure_ascii=False, separators=(",", ":")) for c in cases))
            f.write("\n]}\n")
        print(f"{len(cases)} cases", file=sys.stderr)
        pixel_goldens(tok, new_ids)
        read_goldens()
    elif a.what == "sweep":
        sweep(tok, new_ids)
    else:
        served(tok, new_ids)


if __name__ == "__main__":
    main()
