#!/usr/bin/env python3
"""The seeded weight generator of the test checkpoints, numpy only, and the writer of the fixture
checkpoints' weights from it.

Tiny checkpoints with the real 151936-token vocabulary are 5-100 MB each; none is committed. Their
weights come from this generator, written bit-identically in Go
(core/internal/enginetest/fixture/seeded.go), and a small manifest:

  u(name, i) = top 24 bits of splitmix64((seed ^ fnv1a64(name)) + i), mapped to [-1, 1) exactly
  value      = 0.05u                       biases
               u * sqrt(3)                 the final RMSNorm gain (model.norm.weight, Qwen3-VL's
                                           model.language_model.norm.weight): zero-mean, because
                                           with a positive gain a tied model's hidden state, which
                                           holds the input token's own embedding, makes every token
                                           predict itself (greedy answers of one repeated token)
               1 + 0.1u                    the other 1-D weights (RMSNorm and LayerNorm gains,
                                           Qwen3-VL's q_norm and k_norm)
               u * sqrt(3)                 embed_tokens (unit-variance rows)
               0.5u                        InternViT's cls_token and position_embeddings, MoonViT's
                                           patch_embed.pos_emb.weight, Phi-4's SigLIP
                                           position_embedding.weight and its sub/global separators
                                           (*_img_feature_extensor): the fan-in rule would make a
                                           position table vanish next to the patches, and the
                                           separators next to the pooled cells
               u * 4 * sqrt(3 / hidden)    lm_head: logits of std ~4, as tied ones have, so greedy
                                           margins stay far above float32 rounding
               u * sqrt(3 / fan_in)        other matrices, fan_in = product of the dims after the
                                           first (unit-variance outputs from unit-variance inputs;
                                           Qwen3-VL's pos_embed.weight, 2-D, takes this rule too)

all in float32 with one rounding per operation. The shape sweeps (make_sweep.py) and the served
goldens (golden_served.py) store these float32 values (F32 checkpoints); the parity fixtures
(make_fixtures.py: core/internal/enginetest/testdata/qwen2_5_vl/tiny-untied, tiny-tied) store them in
bf16, each float32 value rounded to the nearest bfloat16 (ties to even), so that transformers'
bf16 checkpoint and the generated one are the same bytes.

As a command it writes the fixture checkpoints' model.safetensors (scripts/unpack-fixtures.sh runs
it where there is no Go, e.g. the GPU machine: python3 and numpy are enough):

  python3 scripts/reference/seeded.py [MODEL ...] [--out PATH]

Each model's manifest, core/internal/enginetest/testdata/qwen2_5_vl/seeded/<model>.json, holds its seed
and tensors (name and shape, in file order); <model>.safetensors.sha256 beside it the file's
sha256, which the written file must have (the Go writer is held to the same).
"""

import argparse
import hashlib
import json
import math
import os
import sys

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURES = os.path.join(ROOT, "core", "internal", "enginetest", "testdata", "qwen2_5_vl")
SEEDED = os.path.join(FIXTURES, "seeded")

M64 = (1 << 64) - 1

# The final RMSNorm gain, zero-mean (see the module doc), by checkpoint layout.
FINAL_NORMS = ("model.norm.weight", "model.language_model.norm.weight", "language_model.model.norm.weight")
LM_HEADS = ("lm_head.weight", "language_model.lm_head.weight")
# Tensors added to or placed among activations of unit scale, 0.5u (see the module doc).
HALF_SCALE = ("embeddings.cls_token", "embeddings.position_embeddings", "patch_embed.pos_emb.weight",
              "embeddings.position_embedding.weight", "_img_feature_extensor")


def fnv1a64(s):
    h = 0xCBF29CE484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001B3) & M64
    return h


def uniform(seed, name, n):
    """n values u in [-1, 1), exact multiples of 2^-23 (see the module doc)."""
    key = np.uint64((seed ^ fnv1a64(name)) & M64)
    out = np.empty(n, dtype=np.float32)
    chunk = 1 << 22
    for lo in range(0, n, chunk):
        z = np.arange(lo, min(n, lo + chunk), dtype=np.uint64) + key  # wraps mod 2^64
        z += np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
        top = (z >> np.uint64(40)).astype(np.int64) - (1 << 23)
        out[lo : lo + len(z)] = top.astype(np.float32) / np.float32(1 << 23)
    return out


def seeded_tensor(seed, name, shape):
    """Tensor `name` of the checkpoint seeded by `seed`, float32 (see the module doc)."""
    u = uniform(seed, name, int(np.prod(shape)))
    if name.endswith(".bias"):
        v = np.float32(0.05) * u
    elif name in FINAL_NORMS:
        v = np.float32(math.sqrt(3.0)) * u
    elif name.endswith(HALF_SCALE):
        v = np.float32(0.5) * u
    elif len(shape) == 1:
        v = np.float32(1) + np.float32(0.1) * u
    elif name.endswith("embed_tokens.weight"):
        v = np.float32(math.sqrt(3.0)) * u
    elif name in LM_HEADS:
        v = np.float32(4 * math.sqrt(3.0 / shape[1])) * u
    else:
        fan_in = int(np.prod(shape[1:]))
        v = np.float32(math.sqrt(3.0 / fan_in)) * u
    return v.astype(np.float32).reshape(shape)


def seeded_pixels(seed, image, rows, cols):
    u = uniform(seed, "pixels/" + image, rows * cols)
    return (np.float32(1.95) * u + np.float32(0.15)).astype(np.float32).reshape(rows, cols)


def bf16_bits(v):
    """The bfloat16 nearest each float32 of v (ties to even), as uint16 bit patterns. No NaN here:
    the generator's values are finite and small."""
    b = np.ascontiguousarray(v, dtype=np.float32).view(np.uint32)
    return ((b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)


def safetensors_header(tensors, dtype="BF16", size=2):
    """The header safetensors (0.7, transformers' save_pretrained) writes for tensors [(name,
    shape)] stored in this order: compact JSON, metadata {"format": "pt"} first, padded with
    spaces to a multiple of 8 bytes. Returns the file's first bytes: the u64 length and the header."""
    parts, off = [], 0
    for name, shape in tensors:
        n = size * int(np.prod(shape))
        dims = ",".join(str(int(d)) for d in shape)
        parts.append(f'"{name}":{{"dtype":"{dtype}","shape":[{dims}],"data_offsets":[{off},{off + n}]}}')
        off += n
    hdr = ('{"__metadata__":{"format":"pt"},' + ",".join(parts) + "}").encode()
    hdr += b" " * ((8 - len(hdr) % 8) % 8)
    return len(hdr).to_bytes(8, "little") + hdr


def read_manifest(model):
    with open(os.path.join(SEEDED, model + ".json")) as f:
        m = json.load(f)
    if m.get("model") != model or m.get("dtype") != "BF16":
        raise SystemExit(f"{model}: manifest is of {m.get('model')!r}, dtype {m.get('dtype')!r} (want BF16)")
    return m


def want_sha256(model):
    with open(os.path.join(SEEDED, model + ".safetensors.sha256")) as f:
        return f.read().split()[0]


def write_bf16(path, seed, tensors):
    """Writes the bf16 safetensors file of the seeded checkpoint (tensors [(name, shape)] in file
    order) to path and returns its sha256."""
    h = hashlib.sha256()
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        head = safetensors_header(tensors)
        f.write(head)
        h.update(head)
        for name, shape in tensors:
            b = bf16_bits(seeded_tensor(seed, name, shape)).astype("<u2").tobytes()
            f.write(b)
            h.update(b)
    os.replace(tmp, path)
    return h.hexdigest()


def write_fixture(model, path=None):
    """Writes the fixture model's weights (to its model.safetensors unless path) and checks the
    committed sha256; on a mismatch the file is removed."""
    m = read_manifest(model)
    path = path or os.path.join(FIXTURES, model, "model.safetensors")
    sha = write_bf16(path, m["seed"], [(t["name"], t["shape"]) for t in m["tensors"]])
    want = want_sha256(model)
    if sha != want:
        os.remove(path)
        raise SystemExit(f"{model}: generated sha256 {sha}, the committed one is {want}")
    return sha


def main():
    models = sorted(f[: -len(".json")] for f in os.listdir(SEEDED) if f.endswith(".json"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*", help=f"fixture models (default all: {' '.join(models)})")
    ap.add_argument("--out", help="with one model: write here instead of its model.safetensors")
    args = ap.parse_args()
    todo = args.models or models
    if args.out and len(todo) != 1:
        ap.error("--out needs exactly one model")
    for model in todo:
        if model not in models:
            raise SystemExit(f"no manifest {os.path.relpath(os.path.join(SEEDED, model + '.json'), ROOT)}")
        path = args.out or os.path.join(FIXTURES, model, "model.safetensors")
        sha = write_fixture(model, path)
        print(f"seeded.py: wrote {os.path.relpath(path, ROOT) if not args.out else path} (sha256 {sha[:16]}...)")


if __name__ == "__main__":
    sys.exit(main())
