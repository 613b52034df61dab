"""Golden answers for serving LocateAnything-3B end to end, from the official remote code.

A model of the LocateAnything shape sweep (core/internal/enginetest/testdata/sweep/locateanything.json,
its weights regenerated from the seed with seeded.py) answers the committed case images
(core/internal/enginetest/testdata/qwen2_5_vl/cases, PNG files of many sizes) with the grounding
workload's question, through the official path: LocateAnythingImageProcessor with the checkpoint's
preprocessor_config.json (in_token_limit 25600), chat_template.json and the processor's
replace_media_placeholder, the LocateAnything tokenizer (.build/tokenizer/locateanything,
scripts/reference/locateanything_tokenizer.py), and LocateAnythingForConditionalGeneration.generate
in generation_mode="slow", temperature 0, repetition penalty 1.0, <|im_end|> not stopping (as
make_sweep_locateanything.py runs it). The reference is NVlabs/Eagle 783f656d
Embodied/eaglevl/utils/locany in .build/laenv (transformers 4.57.1; `just laenv`).

CI never runs this: core/coretest rebuilds the checkpoint with the Go generator
(fixture.WriteServedModel), builds an Iris bundle from it with `--family locateanything` (whose
bundle.toml then holds the grounding ids of config.json), and the gateway's end-to-end test asks
every case over HTTP: the answer's tokens must be these, and its iris.boxes what the evaluation
code's parser (Embodied/evaluation/inference_grounding_ddp.py: parse_bbox_with_labels, then
convert_normalized_{bbox,point}_to_absolute, on the answer decoded with its special tokens) reads in
them. Random weights: the tokens mean nothing, and name no box (boxes: []); box_cases are answers
spelled out (their ids by the tokenizer, their boxes by the same parser) for the runtime's reader.
Served answers that carry a box and a point are golden_grounded_locateanything.py's (this model
with its weights constructed to spell them).

Output: core/internal/enginetest/testdata/locateanything/served.json.

Run: `just golden-served-locateanything`.
"""

import json
import os
import sys

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_sweep_locateanything as sweep  # noqa: E402 (the reference, its loader and its generate)
from seeded import seeded_tensor  # noqa: E402

ROOT = sweep.ROOT
TESTDATA = os.path.join(ROOT, "core", "internal", "enginetest", "testdata")
CASES = os.path.join(TESTDATA, "qwen2_5_vl", "cases")
TOKENIZER = os.path.join(ROOT, ".build", "tokenizer", "locateanything")
OUT = os.path.join(TESTDATA, "locateanything", "served.json")
MODEL = "g3-h72"
IMAGES = ["tiny_30x40", "square_56", "tall_120x300", "wide_500x90", "rect_320x240", "partial_406x238", "large_644x476"]
LABELS = {"tiny_30x40": "a red square", "square_56": "the circle", "tall_120x300": "the top of the image",
          "wide_500x90": "the banner", "rect_320x240": "white vehicle", "partial_406x238": "a circle",
          "large_644x476": "the leftmost object"}
QUESTION = "Locate a single instance that matches the following description: {label}."
PREPROCESSOR = {"auto_map": {"AutoImageProcessor": "image_processing_locateanything.LocateAnythingImageProcessor",
                             "AutoProcessor": "processing_locateanything.LocateAnythingProcessor"},
                "image_processor_type": "LocateAnythingImageProcessor", "merge_kernel_size": [2, 2],
                "in_token_limit": 25600}
MAX_NEW_TOKENS = 8

# Answers spelled out, whose boxes the evaluation code's parser gives (box_cases): labelled boxes and
# points, several groups a label, corners out of order, the edges, "None", groups of 3, boxes
# without a label or after text, a label with "<" in it.
BOX_ANSWERS = [
    ("<ref>white vehicle</ref><box><100><250><500><1000></box>", 640, 480),
    ("<ref>dog</ref><box><1><999></box>", 640, 480),
    ("<ref>a</ref><box><900><800><100><200></box>", 640, 480),
    ("<ref>cat</ref><box><0><0><10><10></box><box><500><500></box><box><1000><1000></box><ref>dog</ref><box><10><20></box>", 501, 333),
    ("<ref>a</ref><box>None</box><box><1><2><3></box><box></box><box><5><5></box>", 640, 480),
    ("<ref>a</ref> then <box><5><5></box>", 640, 480),
    ("<box><5><5><6><6></box>", 640, 480),
    ("<ref>x<y</ref><box><5><5></box>", 640, 480),
    ("There is <ref>one car</ref><box><333><666><667><999></box> on the left.", 4000, 3000),
    ("<ref>c1</ref><box><1><1><2><2></box></c><ref>c2</ref><box><3><4></box><box><5><6><7><8></box>", 1, 1),
]


def main():
    cfgm, modm = sweep.load_official()
    ipm = __import__("locany.image_processing_locateanything", fromlist=["x"])
    prm = __import__("locany.processing_locateanything", fromlist=["x"])
    from transformers import AutoTokenizer
    from transformers.utils.chat_template_utils import _compile_jinja_template
    torch.set_num_threads(2)
    tok = AutoTokenizer.from_pretrained(TOKENIZER)
    template = json.load(open(os.path.join(sweep.SRC, "chat_template.json")))["chat_template"]
    tmpl = _compile_jinja_template(template)
    with open(os.path.join(TESTDATA, "sweep", "locateanything.json")) as f:
        sw = json.load(f)
    m = next(x for x in sw["models"] if x["name"] == MODEL)
    spec = next(x for x in sweep.MODELS if x[0] == MODEL)
    config = sweep.make_config(cfgm, spec[1], spec[2])
    torch.manual_seed(0)
    model = modm.LocateAnythingForConditionalGeneration(config).eval()
    state = {t["name"]: torch.from_numpy(seeded_tensor(m["seed"], t["name"], t["shape"])) for t in m["tensors"]}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or [k for k in missing if k != "language_model.lm_head.weight"] or spec[1][6]:
        raise SystemExit(f"{MODEL}: loading the seeded weights: {missing} {unexpected}")
    sweep.check_rotary(model)
    ip = ipm.LocateAnythingImageProcessor(in_token_limit=PREPROCESSOR["in_token_limit"],
                                          merge_kernel_size=PREPROCESSOR["merge_kernel_size"])
    proc = __import__("types").SimpleNamespace(image_processor=ip, image_placeholder="image", video_placeholder="video",
                                               image_start_token="<img>", image_end_token="</img>",
                                               image_token="<IMG_CONTEXT>")
    sys.path.insert(0, os.path.join(sweep.SRC, "eval"))
    import inference_grounding_ddp as evaluation  # the official answer parser (not committed)

    def boxes_of(text, w, h):
        out = []
        for label, coords, is_point in evaluation.parse_bbox_with_labels(text):
            if is_point:
                out.append({"label": label, "point": evaluation.convert_normalized_point_to_absolute(coords, (w, h))})
            else:
                out.append({"label": label, "box": evaluation.convert_normalized_bbox_to_absolute(coords, (w, h))})
        return out

    box_cases = []
    for text, w, h in BOX_ANSWERS:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        if tok.decode(ids, skip_special_tokens=False) != text:
            raise SystemExit(f"{text!r} does not round-trip through the tokenizer")
        box_cases.append({"text": text, "ids": ids, "width": w, "height": h, "boxes": boxes_of(text, w, h)})
    cases = []
    for name in IMAGES:
        with open(os.path.join(CASES, name + ".json")) as f:
            case = json.load(f)
        question = QUESTION.format(label=LABELS[name])
        image = Image.open(os.path.join(CASES, case["image"])).convert("RGB")
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]}]
        text = tmpl.render(messages=messages, add_generation_prompt=True)
        text, pv, grids, _, _ = prm.LocateAnythingProcessor.replace_media_placeholder(proc, text, [image], [], None, None,
                                                                                    images_kwargs={})
        ids = tok(text, add_special_tokens=False)["input_ids"]
        gh, gw = (int(v) for v in grids[0])
        if ids.count(151665) != gh * gw // 4:
            raise SystemExit(f"{name}: {ids.count(151665)} image tokens for a {gh}x{gw} grid")
        r = sweep.run_case(model, {"name": name, "input_ids": ids}, pv.numpy().reshape(gh * gw, -1), [1, gh, gw])
        if r["min_margin"] < sweep.MIN_MARGIN:
            raise SystemExit(f"{name}: greedy margin {r['min_margin']:.3g}")
        print(f"{name}: grid {gh}x{gw}, prompt {len(ids)} tokens, margin {r['min_margin']:.3g}, tokens {r['tokens']}",
              flush=True)
        answer = tok.decode(r["tokens"], skip_special_tokens=False)
        cases.append({"name": name, "image": case["image"], "question": question, "grid": [1, gh, gw],
                      "prompt_tokens": len(ids), "tokens": r["tokens"], "min_margin": r["min_margin"],
                      "boxes": boxes_of(answer, image.width, image.height)})
    golden = {
        "meta": {"generator": "scripts/reference/golden_served_locateanything.py",
                 "transformers": __import__("transformers").__version__, "torch": torch.__version__,
                 "semantics": "fp32; the official slow mode, temperature 0, <|im_end|> never stops; the remote code's "
                              "processor, chat template and replace_media_placeholder",
                 "reference": "NVlabs/Eagle 783f656d Embodied/eaglevl/utils/locany"},
        "model": MODEL,
        "preprocessor_config": PREPROCESSOR,
        "max_new_tokens": MAX_NEW_TOKENS,
        "cases": cases,
        "box_cases": box_cases,
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    sys.exit(main())
