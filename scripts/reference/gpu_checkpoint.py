#!/usr/bin/env python3
"""Build the full-size Qwen2.5-VL-3B checkpoint with random bf16 weights (no download).

Run on the GPU machine (scripts/gpu/run.sh does): the architecture comes from the real 3B
config.json (gpu_qwen2_5_vl_3b.config.json beside this script, a copy of the hub file), the
weights from transformers' own initialisation under a fixed seed, on the GPU for speed:

  python3 scripts/reference/gpu_checkpoint.py --out /tmp/iris-gpu/qwen25vl-3b \
      --tokenizer .build/tokenizer/qwen3 --template core/internal/engine/testdata/qwen2_5_vl/tiny-untied

It writes the HF layout (config.json, model*.safetensors, generation_config.json with greedy
defaults) plus the real tokenizer files, the VL chat template and preprocessor_config.json (the
hub's processor settings), i.e. everything `iris bundle build` and transformers' AutoProcessor
read.
"""

import argparse
import json
import os
import shutil
import time

import torch
from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--config", default=os.path.join(here, "gpu_qwen2_5_vl_3b.config.json"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokenizer", required=True, help="dir with tokenizer.json (+ tokenizer_config.json)")
    ap.add_argument("--template", required=True, help="dir with chat_template.json(.jinja) and preprocessor_config.json")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()

    with open(args.config) as f:
        cfg = json.load(f)
    t0 = time.perf_counter()
    torch.manual_seed(args.seed)
    config = Qwen2_5_VLConfig(**cfg)
    with torch.device(args.device):
        model = Qwen2_5_VLForConditionalGeneration._from_config(config, dtype=torch.bfloat16)
    model.eval()
    n = sum(p.numel() for p in model.parameters())
    t1 = time.perf_counter()
    os.makedirs(args.out, exist_ok=True)
    model.save_pretrained(args.out)
    t2 = time.perf_counter()
    # greedy, no penalty, both stop ids (families.md §0.3-6)
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 151643, "pad_token_id": 151643, "eos_token_id": [151645, 151643], "do_sample": False}, f, indent=2)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        src = os.path.join(args.tokenizer, name)
        if not os.path.exists(src):
            src = os.path.join(args.template, name)
        shutil.copyfile(os.path.realpath(src), os.path.join(args.out, name))
    for name in ("chat_template.json", "chat_template.jinja", "preprocessor_config.json"):
        src = os.path.join(args.template, name)
        if os.path.exists(src):
            shutil.copyfile(src, os.path.join(args.out, name))
    print(json.dumps({"params": n, "init_s": round(t1 - t0, 1), "save_s": round(t2 - t1, 1), "out": args.out}))


if __name__ == "__main__":
    main()
