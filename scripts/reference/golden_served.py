#!/usr/bin/env python3
"""Golden answers for serving a checkpoint end to end: transformers 5.17's own processor (the
hub's preprocessor settings and chat template) and model on a seeded checkpoint of the family's
shape sweep, on the committed case images (PNG files of many sizes) with their questions.

  python3 scripts/reference/golden_served.py [--family qwen3_vl|internvl|phi4_multimodal]

qwen3_vl: Qwen3VLProcessor and Qwen3VLForConditionalGeneration. internvl: InternVLProcessor
(GotOcr2 tiles with max_patches 2, so that every prompt, up to three tiles of 256 tokens, fits
the 1024-token context the tests serve with: one tile, two plus the thumbnail) and
InternVLForConditionalGeneration, the tokenizer directory of internvl_tokenizer.py.
phi4_multimodal: Phi4MultimodalProcessor (Phi4MultimodalImageProcessor with dynamic_hd 2, so that
every prompt, the global view and one or two crops of up to 256 cells, fits the 1024-token context
the tests serve with; the tokenizer and chat template of phi4_tokenizer.py) and
Phi4MultimodalForCausalLM with eager attention (on SDPA an unpadded image's tower turns causal,
families.md §11).

Run with the reference stack (`just golden-served`). CI never runs this: core/coretest rebuilds the
same checkpoint with the Go generator (fixture.WriteSeeded), builds an Iris bundle from it with
the family plugin, and the gateway's end-to-end test asks every case over HTTP: the answer's
tokens must be these. It proves the whole served path (image decoding, the plugin's resize and
framing, the tokenizer, the engine) against transformers', not one piece at a time. Random
weights: the words mean nothing.

Output: core/internal/enginetest/testdata/<family>/served.json.
"""

import argparse
import json
import os
import sys
import tempfile

import numpy as np
import torch
from PIL import Image
from safetensors.numpy import save_file
from transformers import (AutoProcessor, AutoTokenizer, InternVLForConditionalGeneration, Phi4MultimodalFeatureExtractor,
                          Phi4MultimodalForCausalLM, Phi4MultimodalImageProcessor, Phi4MultimodalProcessor,
                          Qwen3VLForConditionalGeneration)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_preprocess import FAMILIES  # noqa: E402 (the hub's processor settings and template)
from golden_internvl import PREPROCESSOR as INTERNVL_PREPROCESSOR  # noqa: E402
from golden_internvl import PROCESSOR as INTERNVL_PROCESSOR  # noqa: E402
from seeded import seeded_tensor  # noqa: E402 (the seeded weight rule, shared with Go)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TESTDATA = os.path.join(ROOT, "core", "internal", "enginetest", "testdata")
CASES = os.path.join(TESTDATA, "qwen2_5_vl", "cases")

# Per family: the sweep model served (qwen3_vl: deepstack after three of its four blocks, grouped
# KV and untied embeddings), its transformers class, its tokenizer directory and the files of the
# processor beside the weights.
SERVED = {
    "qwen3_vl": {"model": "g2-h60-d12", "cls": Qwen3VLForConditionalGeneration, "label": "Qwen3-VL",
                 "tokenizer": os.path.join(ROOT, ".build", "tokenizer", "qwen3")},
    "internvl": {"model": "g2-h60-d12", "cls": InternVLForConditionalGeneration, "label": "InternVL3 (-hf)",
                 "tokenizer": os.path.join(ROOT, ".build", "tokenizer", "internvl3")},
    # g4-h56-p57: untied, GQA 4, 8 of 14 head dims rotated, LongRoPE's derived attention factor
    "phi4_multimodal": {"model": "g4-h56-p57", "cls": Phi4MultimodalForCausalLM, "label": "Phi-4-multimodal",
                        "tokenizer": os.path.join(ROOT, ".build", "tokenizer", "phi4"), "attn": "eager", "pad": 199999},
}
# one or two crops and the global view: 817 image tokens at most (see the docstring)
PHI4_DYNAMIC_HD = 2
# up to 2 grid tiles (+ the thumbnail): 768 image tokens at most (see the docstring)
INTERNVL_SERVED_PREPROCESSOR = dict(INTERNVL_PREPROCESSOR, max_patches=2)
# Committed PNGs of many sizes (tiny, odd widths, wide, tall, large); their questions.
IMAGES = ["tiny_30x40", "square_56", "tall_120x300", "wide_500x90", "rect_320x240", "partial_406x238", "large_644x476"]
MAX_NEW_TOKENS = 8
PAD = 151643


def write_checkpoint(family, model, d):
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(model["config"], f)
    tensors = {t["name"]: seeded_tensor(model["seed"], t["name"], t["shape"]) for t in model["tensors"]}
    save_file(tensors, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    tokenizer = SERVED[family]["tokenizer"]
    if family == "phi4_multimodal":
        ip = Phi4MultimodalImageProcessor(dynamic_hd=PHI4_DYNAMIC_HD)
        cfg = json.loads(ip.to_json_string())
        with open(os.path.join(d, "preprocessor_config.json"), "w") as f:
            json.dump(cfg, f)
        for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
            with open(os.path.join(tokenizer, name), "rb") as src, open(os.path.join(d, name), "wb") as dst:
                dst.write(src.read())
        return cfg
    if family == "internvl":
        files = {"preprocessor_config.json": INTERNVL_SERVED_PREPROCESSOR, "processor_config.json": INTERNVL_PROCESSOR}
        for name, doc in files.items():
            with open(os.path.join(d, name), "w") as f:
                json.dump(doc, f)
        for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
            with open(os.path.join(tokenizer, name), "rb") as src, open(os.path.join(d, name), "wb") as dst:
                dst.write(src.read())
        return INTERNVL_SERVED_PREPROCESSOR
    fam = FAMILIES["qwen3_vl"]
    cfg = dict(fam["config"], processor_class=fam["processor_class"])
    with open(os.path.join(d, "preprocessor_config.json"), "w") as f:
        json.dump(cfg, f)
    with open(os.path.join(d, "video_preprocessor_config.json"), "w") as f:
        json.dump(fam["video_config"], f)
    with open(os.path.join(d, "chat_template.json"), "w") as f:
        json.dump({"chat_template": fam["template"]}, f)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        with open(os.path.join(tokenizer, name), "rb") as src, open(os.path.join(d, name), "wb") as dst:
            dst.write(src.read())
    return cfg


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--family", choices=sorted(SERVED), default="qwen3_vl")
    ap.add_argument("--model", help="the sweep model served (default: the family's)")
    args = ap.parse_args()
    spec = SERVED[args.family]
    name_ = args.model or spec["model"]
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    with open(os.path.join(TESTDATA, "sweep", args.family + ".json")) as f:
        sweep = json.load(f)
    model = next((m for m in sweep["models"] if m["name"] == name_), None)
    if model is None:
        raise SystemExit(f"no model {name_} in the {args.family} sweep: {[m['name'] for m in sweep['models']]}")
    cases = []
    with tempfile.TemporaryDirectory() as d:
        cfg = write_checkpoint(args.family, model, d)
        if args.family == "phi4_multimodal":
            # the processor from its parts (its audio feature extractor unused): the saved
            # preprocessor_config.json holds the image processor's settings alone
            tok = AutoTokenizer.from_pretrained(d)
            proc = Phi4MultimodalProcessor(image_processor=Phi4MultimodalImageProcessor(**{k: v for k, v in cfg.items() if k != "image_processor_type"}),
                                           audio_processor=Phi4MultimodalFeatureExtractor(), tokenizer=tok,
                                           chat_template=open(os.path.join(d, "chat_template.jinja")).read())
            if proc.image_processor.backend != "torchvision" or proc.image_processor.dynamic_hd != PHI4_DYNAMIC_HD:
                raise SystemExit(f"image processor: backend {proc.image_processor.backend}, dynamic_hd {proc.image_processor.dynamic_hd}")
        else:
            proc = AutoProcessor.from_pretrained(d)
        kw = {"attn_implementation": spec["attn"]} if "attn" in spec else {}
        net = spec["cls"].from_pretrained(d, dtype=torch.float32, **kw).eval()
        for name in IMAGES:
            with open(os.path.join(CASES, name + ".json")) as f:
                case = json.load(f)
            messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": case["question"]}]}]
            prompt = proc.apply_chat_template(messages, add_generation_prompt=True)
            image = Image.open(os.path.join(CASES, case["image"]))
            inputs = proc(text=[prompt], images=[image], return_tensors="pt")
            with torch.no_grad():
                gen = net.generate(**inputs, do_sample=False, num_beams=1, repetition_penalty=1.0,
                                   max_new_tokens=MAX_NEW_TOKENS, eos_token_id=None, pad_token_id=spec.get("pad", PAD),
                                   output_logits=True, return_dict_in_generate=True)
            n = inputs["input_ids"].shape[1]
            tokens = gen.sequences[0, n:].tolist()
            margin = min(float(torch.topk(s[0], 2).values[0] - torch.topk(s[0], 2).values[1]) for s in gen.logits)
            if len(tokens) != MAX_NEW_TOKENS or margin < 1e-3:
                raise SystemExit(f"{name}: {len(tokens)} tokens, greedy margin {margin:.3g}")
            if "image_grid_thw" in inputs:
                grid = inputs["image_grid_thw"][0].tolist()
            elif "image_pixel_values" in inputs:  # Phi-4's views: [views, 448 / 14, 448 / 14]
                pv = inputs["image_pixel_values"]
                grid = [pv.shape[1], pv.shape[3] // 14, pv.shape[4] // 14]
            else:  # tiles: [tiles, 448 / 14, 448 / 14]
                pv = inputs["pixel_values"]
                grid = [pv.shape[0], pv.shape[2] // 14, pv.shape[3] // 14]
            print(f"{name}: grid {grid}, prompt {n} tokens, margin {margin:.3g}, tokens {tokens}", flush=True)
            cases.append({"name": name, "image": case["image"], "question": case["question"], "grid": grid,
                          "prompt_tokens": n, "tokens": tokens, "min_margin": float(np.float32(margin))})
    golden = {
        "meta": {
            "generator": "scripts/reference/golden_served.py",
            "transformers": __import__("transformers").__version__,
            "torch": torch.__version__,
            "semantics": f"fp32, greedy, EOS never stops; the processor and chat template of the hub's {spec['label']}",
        },
        "model": name_,
        "preprocessor_config": cfg,
        "max_new_tokens": MAX_NEW_TOKENS,
        "cases": cases,
    }
    out = os.path.join(TESTDATA, args.family, "served.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(main())
