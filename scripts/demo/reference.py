#!/usr/bin/env python3
"""transformers' greedy answers to a scene set (issue 15's accuracy gate and its reference).

Reads DIR/scenes.jsonl and the PNGs beside it (what scripts/demo/scenes.py writes, or the
committed held-out set scripts/demo/heldout), loads the checkpoint in --dtype (fp32 by default:
the gate's reference) and answers every question one at a time (batch 1: no padding enters the
products) with greedy generate() through AutoProcessor and the chat template, as any transformers
user would. Writes one JSON line per question: index, question, answer, type, got (the decoded
answer, special tokens skipped), tokens (the generated ids, the stop token included), ok.

  .build/refenv/bin/python scripts/demo/reference.py --model .build/models/demo \\
      --scenes scripts/demo/heldout --out scripts/demo/heldout/reference.jsonl

`just demo-reference` runs it on the committed model and held-out scenes (about 2 minutes on
2 CPU cores).
"""

import argparse
import json
import os
import sys
import time

import torch
from PIL import Image
from transformers import AutoProcessor, Qwen2_5_VLForConditionalGeneration

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import scenes  # noqa: E402

PAD = 151643


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="checkpoint directory (train.py's --out)")
    ap.add_argument("--scenes", required=True, help="directory with scenes.jsonl and its PNGs")
    ap.add_argument("--out", required=True, help="JSONL to write")
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--max-new-tokens", type=int, default=8)
    args = ap.parse_args()
    torch.manual_seed(0)
    dtype = torch.float32 if args.dtype == "fp32" else torch.bfloat16
    proc = AutoProcessor.from_pretrained(args.model)
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(args.model, dtype=dtype, attn_implementation="sdpa")
    model = model.to(args.device).eval()
    with open(os.path.join(args.scenes, "scenes.jsonl")) as f:
        items = [json.loads(line) for line in f if line.strip()]
    t0, last, rows = time.perf_counter(), time.perf_counter(), []
    for k, it in enumerate(items):
        with Image.open(os.path.join(args.scenes, it["image"])) as im:
            image = im.convert("RGB")
        enc = proc(text=[scenes.prompt_text(it["question"])], images=[image], return_tensors="pt").to(args.device)
        out = model.generate(**enc, max_new_tokens=args.max_new_tokens, do_sample=False, num_beams=1,
                             repetition_penalty=1.0, pad_token_id=PAD)
        ids = out[0, enc["input_ids"].shape[1]:].tolist()
        got = proc.tokenizer.decode(ids, skip_special_tokens=True)
        rows.append({"index": it["index"], "question": it["question"], "answer": it["answer"], "type": it["type"],
                     "got": got, "tokens": ids, "ok": got == it["answer"]})
        if time.perf_counter() - last > 10:
            last = time.perf_counter()
            print(f"{k + 1}/{len(items)} questions, {last - t0:.0f} s", file=sys.stderr, flush=True)
    with open(args.out, "w") as f:
        for r in rows:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    ok = sum(r["ok"] for r in rows)
    print(json.dumps({"questions": len(rows), "correct": ok, "accuracy": round(ok / max(1, len(rows)), 4),
                      "dtype": args.dtype, "seconds": round(time.perf_counter() - t0, 1)}))


if __name__ == "__main__":
    main()
