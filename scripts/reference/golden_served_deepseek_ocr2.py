"""The served golden of DeepSeek-OCR-2 (core/internal/enginetest/testdata/deepseek_ocr2/served.json):
transformers 5.17's DeepseekOcr2Processor (DeepseekOcr2ImageProcessor's defaults, the tokenizer of
.build/tokenizer/deepseek_ocr2) and DeepseekOcr2ForConditionalGeneration on a checkpoint of the
family's sweep (golden_deepseek_ocr2_model.py's SERVED_MODEL, rebuilt from its seeds), greedy
with EOS never stopping, on the committed case images (core/internal/enginetest/testdata/
qwen2_5_vl/cases, all at most 768 px: the global view alone) with their questions, framed as
the upstream run scripts do ("<image>\\n{question}", BOS from the tokenizer).

core/coretest rebuilds the checkpoint (fixture.WriteServedModel), builds an Iris bundle from it
with the deepseek_ocr2 plugin, and the gateway's end-to-end test asks every case over HTTP: the
answer's tokens must be these. Run with the reference stack: `just golden-served-deepseek-ocr2`.
"""

import json
import os
import pathlib
import sys

import numpy as np
import torch
import transformers
from PIL import Image
from transformers import AutoTokenizer, DeepseekOcr2ImageProcessor, DeepseekOcr2Processor

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from golden_deepseek_ocr2_model import TOKENIZER, build  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
TESTDATA = ROOT / "core/internal/enginetest/testdata"
CASES = TESTDATA / "qwen2_5_vl" / "cases"
OUT = TESTDATA / "deepseek_ocr2" / "served.json"
SERVED_MODEL = "e8_k2_s1"
MAX_NEW_TOKENS = 8


def main():
    torch.set_num_threads(2)
    tok = AutoTokenizer.from_pretrained(str(TOKENIZER))
    ip = DeepseekOcr2ImageProcessor()
    proc = DeepseekOcr2Processor(image_processor=ip, tokenizer=tok)
    model, _, _, _ = build(SERVED_MODEL)
    cases = []
    for name in json.loads((CASES / "index.json").read_text()):
        case = json.loads((CASES / f"{name}.json").read_text())
        image = Image.open(CASES / case["image"]).convert("RGB")
        inputs = proc(images=[image], text="<image>\n" + case["question"], return_tensors="pt")
        with torch.no_grad():
            gen = model.generate(**inputs, do_sample=False, num_beams=1, repetition_penalty=1.0,
                                 max_new_tokens=MAX_NEW_TOKENS, min_new_tokens=MAX_NEW_TOKENS,
                                 output_logits=True, return_dict_in_generate=True)
        n = inputs["input_ids"].shape[1]
        tokens = gen.sequences[0, n:].tolist()
        margin = min(float(torch.topk(s[0], 2).values[0] - torch.topk(s[0], 2).values[1]) for s in gen.logits)
        if len(tokens) != MAX_NEW_TOKENS or margin < 1e-3:
            raise SystemExit(f"{name}: {len(tokens)} tokens, greedy margin {margin:.3g}")
        views = 1 + int(inputs["num_local_patches"][0])
        print(f"{name}: {views} views, prompt {n} tokens, margin {margin:.3g}, tokens {tokens}", flush=True)
        cases.append({"name": name, "image": case["image"], "question": case["question"], "grid": [views, 64, 64],
                      "prompt_tokens": n, "tokens": tokens, "min_margin": float(np.float32(margin))})
    golden = {
        "meta": {"generator": "scripts/reference/golden_served_deepseek_ocr2.py",
                 "transformers": transformers.__version__, "torch": torch.__version__,
                 "semantics": "fp32, greedy, EOS never stops; DeepseekOcr2Processor over <image>\\n{question}"},
        "model": SERVED_MODEL,
        "preprocessor_config": ip.to_dict(),
        "max_new_tokens": MAX_NEW_TOKENS,
        "cases": cases,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(golden, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
