"""Golden log-probabilities for the engine's fixture checkpoints, from transformers itself.

For each fixture case (core/internal/enginetest/testdata/qwen2_5_vl/cases) and model it runs greedy
generate() with output_logits=True (EOS never stops, as the parity goldens) and records, per
step, torch.log_softmax of the fp32 logits: the chosen token's log-probability and the 20 most
likely tokens with theirs, what an OpenAI `logprobs` / `top_logprobs: 20` answer carries.

Writes core/internal/enginetest/testdata/qwen2_5_vl/golden/logprobs-<model>.json. Run with the
reference stack: `just golden-logprobs`. CI never runs it; the outputs are committed.
"""

import json
import os

import torch
from PIL import Image
from transformers import AutoProcessor, Qwen2_5_VLForConditionalGeneration

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURES = os.path.join(ROOT, "core", "internal", "enginetest", "testdata", "qwen2_5_vl")
STEPS = 8
TOP = 20
CASES = {"tiny-untied": ["square_56", "rect_320x240", "tall_120x300"], "tiny-tied": ["square_56", "rect_320x240"]}


def main():
    torch.set_num_threads(1)
    for model_name, cases in CASES.items():
        model_dir = os.path.join(FIXTURES, model_name)
        model = Qwen2_5_VLForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32).eval()
        model.generation_config.eos_token_id = None  # EOS is an ordinary token here
        processor = AutoProcessor.from_pretrained(model_dir)
        out = []
        for name in cases:
            with open(os.path.join(FIXTURES, "cases", name + ".json")) as f:
                case = json.load(f)
            img = Image.open(os.path.join(FIXTURES, "cases", case["image"]))
            inputs = processor(text=[case["prompt"]], images=[img], return_tensors="pt")
            if inputs["input_ids"][0].tolist() != case["input_ids"]:
                raise SystemExit(f"{name}: the processor's input_ids differ from the fixture's")
            with torch.no_grad():
                gen = model.generate(**inputs, do_sample=False, num_beams=1, repetition_penalty=1.0,
                                     max_new_tokens=STEPS, pad_token_id=151643, output_logits=True,
                                     return_dict_in_generate=True)
            n = inputs["input_ids"].shape[1]
            tokens = gen.sequences[0, n:].tolist()
            steps = []
            for i, logits in enumerate(gen.logits):
                lp = torch.log_softmax(logits[0].float(), dim=-1)
                top = torch.topk(lp, TOP)
                steps.append({"token": tokens[i], "logprob": float(lp[tokens[i]]),
                              "top_ids": top.indices.tolist(), "top_logprobs": [float(v) for v in top.values]})
            out.append({"case": name, "steps": steps})
            print(f"{model_name} {name}: tokens {tokens} logprobs {[round(s['logprob'], 4) for s in steps]}")
        doc = {"generator": "scripts/reference/golden_logprobs.py",
               "transformers": __import__("transformers").__version__, "torch": torch.__version__,
               "semantics": "torch.log_softmax of the fp32 logits of greedy generate() from the bf16 checkpoint "
                            "loaded in fp32; EOS never stops",
               "model": model_name, "top": TOP, "cases": out}
        path = os.path.join(FIXTURES, "golden", f"logprobs-{model_name}.json")
        with open(path, "w") as f:
            json.dump(doc, f, separators=(",", ":"))
            f.write("\n")


if __name__ == "__main__":
    main()
