#!/usr/bin/env python3
"""Time transformers (the baseline) on the engine's benchmark checkpoint and case.

Run with the reference stack after `make_fixtures.py --bench DIR` (`just bench-engine-baseline`):

  .build/refenv/bin/python scripts/reference/bench_baseline.py --dir .build/bench --threads 2
  .build/refenv/bin/python scripts/reference/bench_baseline.py --threads 2 \
      --dir core/internal/enginetest/testdata/qwen2_5_vl --model tiny-untied --case windows_448x336

It loads DIR/MODEL (bf16 on disk) in float32, feeds the processor outputs recorded in
DIR/cases/CASE.json (+ .pixels.gz) and reports, as the best of --repeat runs (and their median
under "median"; the machine may be shared):

  vision_ms   model.model.get_image_features (the vision tower)
  prefill_ms  the decoder over the whole prompt (image rows scattered in, 3-D positions) with a
              cache, and lm_head on the last token: the engine's Prefill
  decode_tps  N-1 greedy steps of the decoder on that cache: the engine's DecodeStep loop
  generate_*  the same through model.generate (first token incl. vision; decode rate), for context

and writes them, with the greedy tokens, to OUT/baseline-MODEL-CASE.json (OUT: .build/bench). The
engine's Go benchmarks (BenchmarkMid, BenchmarkTiny in core/internal/models/qwen25vl) run the same
checkpoint and case and print the baseline next to their own figures.
"""

import argparse
import gzip
import json
import os
import statistics
import struct
import time

import numpy as np
import torch
from transformers import Qwen2_5_VLForConditionalGeneration


def read_pixels(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    assert raw[:4] == b"IRPX"
    version, rows, cols, ch = struct.unpack_from("<IIII", raw, 4)
    assert version == 1
    lut = np.frombuffer(raw, dtype="<f4", count=ch * 256, offset=20).reshape(ch, 256)
    levels = np.frombuffer(raw, dtype=np.uint8, offset=20 + ch * 256 * 4).reshape(rows, cols)
    span = cols // ch
    out = np.empty((rows, cols), dtype=np.float32)
    for c in range(ch):
        out[:, c * span : (c + 1) * span] = lut[c][levels[:, c * span : (c + 1) * span]]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=".build/bench")
    ap.add_argument("--model", default="qwen25vl-mid")
    ap.add_argument("--case", default="bench_448x336")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=".build/bench", help="directory for the result JSON")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(
        os.path.join(args.dir, args.model), dtype=torch.float32
    ).eval()
    model.generation_config.eos_token_id = None  # ignore EOS: always N tokens
    with open(os.path.join(args.dir, "cases", args.case + ".json")) as f:
        case = json.load(f)
    ids = torch.tensor([case["input_ids"]])
    inputs = {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "mm_token_type_ids": torch.tensor([case["mm_token_type_ids"]]),
        "pixel_values": torch.from_numpy(read_pixels(os.path.join(args.dir, "cases", case["pixels"]))),
        "image_grid_thw": torch.tensor(case["image_grid_thw"]),
    }

    lm = model.model.language_model
    n_prompt = ids.shape[1]

    def gen(n):
        return model.generate(
            **inputs, do_sample=False, num_beams=1, repetition_penalty=1.0, max_new_tokens=n, pad_token_id=151643
        )

    def vision():
        return torch.cat(model.model.get_image_features(inputs["pixel_values"], inputs["image_grid_thw"]).pooler_output)

    def prompt_embeds(image):
        """inputs_embeds with the image rows scattered in, and the 4-row position ids of generate."""
        embeds = model.model.get_input_embeddings()(ids)
        mask = (ids == model.config.image_token_id)[..., None].expand_as(embeds)
        embeds = embeds.masked_scatter(mask, image)
        pos, delta = model.model.get_rope_index(
            ids, mm_token_type_ids=inputs["mm_token_type_ids"], image_grid_thw=inputs["image_grid_thw"]
        )
        text = torch.arange(n_prompt).view(1, 1, -1)
        return embeds, torch.cat([text, pos], dim=0), int(delta.view(-1)[0])

    def prefill(embeds, position_ids):
        """The decoder over the prompt, and lm_head on its last token (what the engine's prefill does)."""
        out = lm(inputs_embeds=embeds, position_ids=position_ids, use_cache=True)
        return out.past_key_values, model.lm_head(out.last_hidden_state[:, -1:])[0, -1]

    def decode(cache, logits, delta, n):
        """n-1 greedy steps on the cache: the model's forward per token, as the engine's decode."""
        toks = [int(torch.argmax(logits))]
        for i in range(n - 1):
            at = n_prompt + i
            pos = torch.tensor([at, at + delta, at + delta, at + delta]).view(4, 1, 1)
            out = lm(inputs_embeds=model.model.get_input_embeddings()(torch.tensor([[toks[-1]]])),
                     position_ids=pos, past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            toks.append(int(torch.argmax(model.lm_head(out.last_hidden_state[:, -1:])[0, -1])))
        return toks

    def timed(fn):
        t = time.perf_counter()
        out = fn()
        return time.perf_counter() - t, out

    n = args.new_tokens
    samples = {"vision": [], "prefill": [], "decode": [], "gen_first": [], "gen_full": []}
    with torch.inference_mode():
        gen(2)  # warm-up
        tokens = None
        for _ in range(args.repeat):
            t, image = timed(vision)
            samples["vision"].append(t)
            embeds, position_ids, delta = prompt_embeds(image)
            t, (cache, logits) = timed(lambda: prefill(embeds, position_ids))
            samples["prefill"].append(t)
            t, tokens = timed(lambda: decode(cache, logits, delta, n))
            samples["decode"].append(t)
            samples["gen_first"].append(timed(lambda: gen(1))[0])
            t, out = timed(lambda: gen(n))
            samples["gen_full"].append(t)
            if out[0, n_prompt:].tolist() != tokens:
                raise SystemExit("the stage-by-stage greedy tokens differ from generate()")

    # The machine may be shared: the best run measures the code, the median the conditions.
    def stats(pick):
        v, p, d = pick(samples["vision"]), pick(samples["prefill"]), pick(samples["decode"])
        first, full = pick(samples["gen_first"]), pick(samples["gen_full"])
        return {
            "vision_ms": v * 1e3,
            "prefill_ms": p * 1e3,
            "decode_tps": (n - 1) / d,
            "generate_first_token_ms": first * 1e3,
            "generate_decode_tps": (n - 1) / max(full - first, 1e-9),
        }

    result = {
        "model": args.model,
        "case": args.case,
        "threads": args.threads,
        "prompt_tokens": int(n_prompt),
        "image_tokens": int(sum(case["mm_token_type_ids"])),
        "new_tokens": n,
        "repeat": args.repeat,
        **stats(min),
        "median": stats(statistics.median),
        "tokens": tokens,
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "loadavg_after": open("/proc/loadavg").read().split()[:3],
    }
    os.makedirs(args.out, exist_ok=True)
    out = os.path.join(args.out, f"baseline-{args.model}-{args.case}.json")
    with open(out, "w") as fh:
        json.dump(result, fh, indent=1)
        fh.write("\n")
    print(json.dumps({k: v for k, v in result.items() if k != "tokens"}, indent=1))
    print("wrote", out)


if __name__ == "__main__":
    main()
