"""Served goldens whose answers carry boxes and points: LocateAnything-3B checkpoints CONSTRUCTED so
that greedy decoding spells a chosen grounding answer, run by the official remote code.

Why constructed: a seeded random-weight checkpoint (golden_served_locateanything.py) never emits
<ref>, <box> or coordinate tokens, so its served answers name no box (iris.boxes: []) and the
path from the answer's tokens to iris.boxes in the image's pixels goes untested end to end. Here
the sweep model g3-h72 (testdata/sweep/locateanything.json, its weights regenerated from the seed
with seeded.py) is edited by a rule the golden stores ("construction"), which the Go fixture
(fixture.WriteServedModelFrom) applies to the same seeded tensors:

  - every decoder layer's self_attn.o_proj and mlp.down_proj are zero (Qwen2 has no bias on
    either): attention and MLP add nothing, so the residual stream at a position is that
    position's token embedding, whatever the image or the rest of the prompt;
  - the final RMSNorm gain is one (the seeded gain is zero-mean: its sign would pick the answer);
  - chain = the prompt's last token ("\\n" after <|im_start|>assistant), then the answer's tokens,
    distinct, ending with <|im_end|>. The embedding row of chain[i] is embed_scale * e_i (one-hot,
    i < hidden: orthogonal rows); the lm_head row of chain[i+1] is head_scale * e_i and the last
    token's row also has head_scale * e_last (it follows itself); those rows are zero elsewhere.
    After the final norm the hidden state of chain[i] is sqrt(hidden) * e_i, so chain[i+1] scores
    sqrt(72) * 4 = 34 while every other row (the seeded lm_head, |entries| < 0.82) scores below 7:
    greedy follows the chain with a margin near 27.

Each chain is a checkpoint of its own (the answer's tokens are distinct, so one chain holds one
labelled group): "box", a labelled box whose corners reach the clamp (<1000>), and "point", a
labelled point of non-integer pixels. The vision tower and the projector keep their seeded weights
and run (the prompt's image tokens, the prompt length), but no image feature reaches the answer:
the vision path's parity is the sweep's job (make_sweep_locateanything.py, TestSweep). What this
golden holds is the grounding path: the reference's answer tokens and NVIDIA's own parser's boxes
on several images of different sizes.

The reference is the official path of golden_served_locateanything.py: LocateAnythingImageProcessor
(in_token_limit 25600), chat_template.json, replace_media_placeholder, the LocateAnything tokenizer,
LocateAnythingForConditionalGeneration.generate in the slow mode, temperature 0, <|im_end|> not
stopping (max_new_tokens = the chain's answer and one more <|im_end|>), every step's argmax checked
against the logits and its margin recorded. Boxes: Embodied/evaluation/inference_grounding_ddp.py's
parse_bbox_with_labels on the answer decoded with its special tokens, then
convert_normalized_{bbox,point}_to_absolute with the ORIGINAL image's (width, height) as PIL opens
it (the size Iris reports boxes in: v * side / 1000, clamped to [0, side - 1], corners ordered),
not the processor's resized size. NVlabs/Eagle 783f656d in .build/laenv (transformers 4.57.1).

Output: core/internal/enginetest/testdata/locateanything/grounded_{box,point}.json, each the
served golden's format plus "construction" (and each case's original width and height).
CI never runs this; core/coretest builds the same checkpoint in Go and gateway/server's
TestHTTPMatchesReference asks every case over HTTP (models locateanything-box, -point).

Run: `just golden-grounded-locateanything`.
"""

import json
import os
import sys
import types

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_sweep_locateanything as sweep  # noqa: E402 (the reference, its loader and its generate)
import golden_served_locateanything as served  # noqa: E402 (its model, processor settings, question)
from seeded import seeded_tensor  # noqa: E402

TESTDATA = served.TESTDATA
OUT_DIR = os.path.join(TESTDATA, "locateanything")
# Images of different sizes and aspect ratios (the processor resizes each to other multiples of 28,
# so scaling by the resized size instead of the original one gives other pixels).
IMAGES = ["tiny_30x40", "tall_120x300", "wide_500x90", "partial_406x238"]
# name: (the answer the checkpoint is built to give, the label the question asks for).
CHAINS = {
    "box": ("<ref>white vehicle</ref><box><100><250><500><1000></box><|im_end|>", "white vehicle"),
    "point": ("<ref>the red dog</ref><box><333><667></box><|im_end|>", "the red dog"),
}
EMBED_SCALE = 8.0
HEAD_SCALE = 4.0
EMBED = "language_model.model.embed_tokens.weight"
LM_HEAD = "language_model.lm_head.weight"
FINAL_NORM = "language_model.model.norm.weight"
IM_END = 151645


def construction(tensor_names, chain):
    """The edit rule's data (see the module doc), as the golden stores it."""
    zero = sorted(n for n in tensor_names if n.startswith("language_model.model.layers.")
                  and (n.endswith(".self_attn.o_proj.weight") or n.endswith(".mlp.down_proj.weight")))
    return {"why": "random weights never emit grounding tokens: decoder layers add nothing (o_proj, down_proj "
                   "zero), chain[i]'s embedding is embed_scale*e_i and lm_head row chain[i+1] is head_scale*e_i "
                   "(the last token's also head_scale*e_last), so greedy decoding spells the chain; the vision "
                   "path's parity is the sweep's job",
            "zero": zero, "ones": [FINAL_NORM], "embed": EMBED, "lm_head": LM_HEAD, "chain": chain,
            "embed_scale": EMBED_SCALE, "head_scale": HEAD_SCALE}


def apply_construction(state, c):
    """Edits the seeded state dict by the rule (the Go fixture's Construction.apply is the same rule)."""
    for name in c["zero"]:
        state[name] = torch.zeros_like(state[name])
    for name in c["ones"]:
        state[name] = torch.ones_like(state[name])
    chain, hidden = c["chain"], state[c["embed"]].shape[1]
    if len(set(chain)) != len(chain) or len(chain) > hidden:
        raise SystemExit(f"chain {chain}: its tokens must be distinct and at most {hidden}")
    emb, head = state[c["embed"]].clone(), state[c["lm_head"]].clone()
    for i, t in enumerate(chain):
        emb[t] = 0
        emb[t, i] = c["embed_scale"]
    for t in chain[1:]:
        head[t] = 0
    for i in range(len(chain) - 1):
        head[chain[i + 1], i] = c["head_scale"]
    head[chain[-1], len(chain) - 1] = c["head_scale"]
    state[c["embed"]], state[c["lm_head"]] = emb, head


def main():
    cfgm, modm = sweep.load_official()
    ipm = __import__("locany.image_processing_locateanything", fromlist=["x"])
    prm = __import__("locany.processing_locateanything", fromlist=["x"])
    from transformers import AutoTokenizer
    from transformers.utils.chat_template_utils import _compile_jinja_template
    torch.set_num_threads(2)
    tok = AutoTokenizer.from_pretrained(served.TOKENIZER)
    tmpl = _compile_jinja_template(json.load(open(os.path.join(sweep.SRC, "chat_template.json")))["chat_template"])
    with open(os.path.join(TESTDATA, "sweep", "locateanything.json")) as f:
        sw = json.load(f)
    m = next(x for x in sw["models"] if x["name"] == served.MODEL)
    spec = next(x for x in sweep.MODELS if x[0] == served.MODEL)
    if spec[1][6]:
        raise SystemExit(f"{served.MODEL} ties its embeddings: the construction needs its own lm_head")
    config = sweep.make_config(cfgm, spec[1], spec[2])
    pp = served.PREPROCESSOR
    ip = ipm.LocateAnythingImageProcessor(in_token_limit=pp["in_token_limit"], merge_kernel_size=pp["merge_kernel_size"])
    proc = types.SimpleNamespace(image_processor=ip, image_placeholder="image", video_placeholder="video",
                                 image_start_token="<img>", image_end_token="</img>", image_token="<IMG_CONTEXT>")
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

    def prompt(name, question):
        with open(os.path.join(served.CASES, name + ".json")) as f:
            case = json.load(f)
        image = Image.open(os.path.join(served.CASES, case["image"])).convert("RGB")
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]}]
        text = tmpl.render(messages=messages, add_generation_prompt=True)
        text, pv, grids, _, _ = prm.LocateAnythingProcessor.replace_media_placeholder(proc, text, [image], [], None, None,
                                                                                    images_kwargs={})
        ids = tok(text, add_special_tokens=False)["input_ids"]
        gh, gw = (int(v) for v in grids[0])
        if ids.count(151665) != gh * gw // 4:
            raise SystemExit(f"{name}: {ids.count(151665)} image tokens for a {gh}x{gw} grid")
        return case, image, ids, pv, gh, gw

    for chain_name, (answer_text, label) in CHAINS.items():
        answer = tok(answer_text, add_special_tokens=False)["input_ids"]
        if tok.decode(answer, skip_special_tokens=False) != answer_text or answer[-1] != IM_END:
            raise SystemExit(f"{answer_text!r}: does not round-trip through the tokenizer or end with <|im_end|>")
        question = served.QUESTION.format(label=label)
        prompts = [prompt(name, question) for name in IMAGES]
        last = {p[2][-1] for p in prompts}
        if len(last) != 1:
            raise SystemExit(f"the prompts end with different tokens {last}")
        cons = construction([t["name"] for t in m["tensors"]], [last.pop()] + answer)
        state = {t["name"]: torch.from_numpy(seeded_tensor(m["seed"], t["name"], t["shape"])) for t in m["tensors"]}
        apply_construction(state, cons)
        torch.manual_seed(0)
        model = modm.LocateAnythingForConditionalGeneration(config).eval()
        missing, unexpected = model.load_state_dict(state, strict=False)
        if missing or unexpected:
            raise SystemExit(f"{served.MODEL}: loading the constructed weights: {missing} {unexpected}")
        sweep.check_rotary(model)
        sweep.MAX_NEW_TOKENS = len(answer) + 1  # the answer, then <|im_end|> following itself
        cases = []
        for name, (case, image, ids, pv, gh, gw) in zip(IMAGES, prompts):
            r = sweep.run_case(model, {"name": name, "input_ids": ids}, pv.numpy().reshape(gh * gw, -1), [1, gh, gw])
            if r["tokens"] != answer + [IM_END]:
                raise SystemExit(f"{chain_name} {name}: the reference answered {r['tokens']}, the chain is {answer}")
            if r["min_margin"] < 10:
                raise SystemExit(f"{chain_name} {name}: greedy margin {r['min_margin']:.3g}")
            text = tok.decode(r["tokens"], skip_special_tokens=False)
            boxes = boxes_of(text, image.width, image.height)
            if len(boxes) != 1:
                raise SystemExit(f"{chain_name} {name}: the parser reads {boxes} in {text!r}")
            print(f"{chain_name} {name} {image.width}x{image.height}: grid {gh}x{gw}, prompt {len(ids)} tokens, "
                  f"margin {r['min_margin']:.3g}, {text!r} -> {boxes}", flush=True)
            cases.append({"name": name, "image": case["image"], "width": image.width, "height": image.height,
                          "question": question, "grid": [1, gh, gw], "prompt_tokens": len(ids), "tokens": r["tokens"],
                          "min_margin": r["min_margin"], "boxes": boxes})
        golden = {
            "meta": {"generator": "scripts/reference/golden_grounded_locateanything.py",
                     "transformers": __import__("transformers").__version__, "torch": torch.__version__,
                     "semantics": "fp32; the official slow mode, temperature 0, <|im_end|> never stops; the remote "
                                  "code's processor, chat template and replace_media_placeholder; boxes by "
                                  "parse_bbox_with_labels and convert_normalized_*_to_absolute in the original "
                                  "image's pixels",
                     "reference": "NVlabs/Eagle 783f656d Embodied/eaglevl/utils/locany"},
            "model": served.MODEL,
            "construction": cons,
            "preprocessor_config": pp,
            "max_new_tokens": sweep.MAX_NEW_TOKENS,
            "cases": cases,
        }
        out = os.path.join(OUT_DIR, f"grounded_{chain_name}.json")
        with open(out, "w") as f:
            json.dump(golden, f, indent=1)
            f.write("\n")
        print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(main())
