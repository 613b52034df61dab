#!/usr/bin/env python3
"""Build a full-size checkpoint with random bf16 weights (no download): Qwen2.5-VL-3B, Qwen3-VL-2B/8B, InternVL3-2B/8B.

Run on the GPU machine (scripts/gpu/run.sh does): the architecture comes from a config.json beside
this script (gpu_qwen2_5_vl_3b.config.json, a copy of the hub file, by default;
gpu_qwen3_vl_{2b,8b,tiny}.config.json: README.md says where each comes from), the family from its
model_type, the weights from transformers' own initialisation under a fixed seed, on the GPU for
speed:

  python3 scripts/reference/gpu_checkpoint.py --out /tmp/iris-gpu/qwen25vl-3b \
      --tokenizer .build/tokenizer/qwen3 --template core/internal/enginetest/testdata/qwen2_5_vl/tiny-untied
  python3 scripts/reference/gpu_checkpoint.py --config scripts/reference/gpu_qwen3_vl_8b.config.json \
      --out /tmp/iris-gpu/qwen3_vl-8b --tokenizer .build/tokenizer/qwen3
  python3 scripts/reference/gpu_checkpoint.py --config scripts/reference/gpu_internvl3_2b.config.json \
      --out /tmp/iris-gpu/internvl-2b --tokenizer DIR   # DIR: scripts/reference/internvl_tokenizer.py's

It writes the HF layout (config.json, model*.safetensors, generation_config.json with greedy
defaults) plus the real tokenizer files, the family's chat template and preprocessor_config.json
(the hub's processor settings: copied from --template for qwen2_5_vl, written by gpu_family.py for
qwen3_vl and internvl), i.e. everything `iris bundle build` and transformers' AutoProcessor read.
--device cpu builds the tiny config here (the CPU dry run of run.sh).

InternVL: transformers initialises the ViT's CLS token and position embeddings to zeros and every
LayerScale to 0.1; random values replace them (gpu_family.randomize) so that parity exercises them.
"""

import argparse
import json
import os
import shutil
import time

import torch

import gpu_family


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default=os.path.join(gpu_family.HERE, "gpu_qwen2_5_vl_3b.config.json"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokenizer", required=True, help="dir with tokenizer.json (+ tokenizer_config.json)")
    ap.add_argument("--template", help="qwen2_5_vl: dir with chat_template.json(.jinja) and preprocessor_config.json")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--init-range", type=float, default=None,
                    help="initializer_range of the weights (default: the config's, else transformers' 0.02)")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()

    with open(args.config) as f:
        cfg = json.load(f)
    mt = cfg["model_type"]
    config_cls, model_cls = gpu_family.classes(mt)
    if args.init_range is not None:
        cfg["initializer_range"] = args.init_range
        for sub in ("text_config", "vision_config"):
            if isinstance(cfg.get(sub), dict):
                cfg[sub]["initializer_range"] = args.init_range
    t0 = time.perf_counter()
    torch.manual_seed(args.seed)
    config = config_cls(**cfg)
    with torch.device(args.device):
        model = model_cls._from_config(config, dtype=torch.bfloat16)
    model.eval()
    gpu_family.randomize(mt, model, args.seed)
    n = sum(p.numel() for p in model.parameters())
    if args.device == "cuda":
        torch.cuda.synchronize()
    t1 = time.perf_counter()
    os.makedirs(args.out, exist_ok=True)
    model.save_pretrained(args.out)
    t2 = time.perf_counter()
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump(gpu_family.generation_config(mt), f, indent=2)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json"):
        src = os.path.join(args.tokenizer, name)
        if not os.path.exists(src) and args.template:
            src = os.path.join(args.template, name)
        if not os.path.exists(src) and name in ("chat_template.jinja", "special_tokens_map.json"):
            continue  # optional: a tokenizer directory that has them (internvl_tokenizer.py's) passes them on
        shutil.copyfile(os.path.realpath(src), os.path.join(args.out, name))
    gpu_family.write_processor_files(mt, args.out, args.template)
    size = sum(os.path.getsize(os.path.join(args.out, f)) for f in os.listdir(args.out))
    print(json.dumps({"model_type": mt, "params": n, "bytes": size, "init_s": round(t1 - t0, 1), "save_s": round(t2 - t1, 1),
                      "out": args.out}))


if __name__ == "__main__":
    main()
