#!/usr/bin/env python3
"""Train the demo model (issue 15): a tiny Qwen2.5-VL that answers questions about synthetic scenes.

transformers 5.17 + torch (the reference stack, `.build/refenv` here, the H200 machine's python3
there). Seeded: the weights' initialisation (--seed), the training scenes (scenes.py, --train-seed)
and the held-out scenes (--eval-seed) are all functions of their seeds; GPU kernels are not
bit-reproducible, so two CUDA runs agree in accuracy, not in bytes.

The model: `Qwen2_5_VLForConditionalGeneration` with the real Qwen vocabulary (151,936 rows, the
tokenizer of .build/tokenizer/qwen3 and the hub's chat template, as the repo's fixtures), tied
embeddings, text hidden 64 (4 layers, 4 heads, 2 KV heads, head_dim 16, M-RoPE [2,3,3], SwiGLU 256),
vision hidden 160 (6 blocks, 4 heads, SwiGLU 320, 112-px windows, full attention in blocks 2 and 5).
12,156,896 parameters, 24.3 MB in bf16, of which the embedding is 9,723,904 (80%): the script prints
the count and refuses a config over 25 MB before it trains.

Training: each step takes --batch scenes; the vision tower runs once per scene and each of the
scene's questions (--questions all; `one`: one drawn per scene, the type uniformly) is a sequence
of its own, framed as the qwen2_5_vl plugin frames it (system turn, image, question, assistant
turn: scenes.prompt_text), its image tokens gathered from the tower's output, the answer followed
by <|im_end|>. The loss: cross-entropy on the answer tokens and <|im_end|> only (the logits
computed at those positions alone: the whole [sequences, length, 151936] would dominate a step),
plus --aux-weight x training-only linear heads on the tower's merged tokens (each token's shape,
colour, sign word, horizontal half, object centre: labels from the scene's recorded objects),
which give the tower a label per token where an answer gives a few per scene; the heads are never
saved. The language model runs the sequences in LENGTH_GROUPS groups of similar length. AdamW,
linear warm-up then cosine decay over whichever ends first, --steps or --max-seconds; bf16
autocast on CUDA (fp32 master weights), fp32 on the CPU. Scenes are drawn and preprocessed (the
checkpoint's own Qwen2VLImageProcessor) in DataLoader workers.

Then: the weights are saved in bf16 with everything `iris bundle build --family qwen2_5_vl` reads
(config.json, model.safetensors, generation_config.json greedy, tokenizer.json,
tokenizer_config.json, chat_template.{json,jinja}, preprocessor_config.json); the saved checkpoint is
loaded back in fp32 (what the accuracy gate compares against) and every question of --eval-count
held-out scenes is answered by greedy generate() through AutoProcessor and the chat template;
exact match per question type and overall. The report: report.md, accuracy.json, loss.png (drawn
with Pillow), answers.jsonl (every held-out item with transformers' fp32 answer), train.log.

  # the H200 (one device call; docs/demo-model.md):
  python3 scripts/demo/train.py --device cuda --out /tmp/demo-model --report $OUT --pack $OUT
  # the CPU smoke test here (a few steps; accuracy is near zero):
  .build/refenv/bin/python scripts/demo/train.py --device cpu --steps 20 --batch 8 --eval-count 12 \\
      --workers 1 --out /tmp/demo-smoke --report /tmp/demo-smoke-report

Measured on the H200 (docs/demo-model.md): run 3 (one question a scene, no auxiliary heads, batch
128, 440 s) 6.98 steps/s, 60.3% held-out; run 5, the committed model (continuing run 4; every
question, aux weight 1.0, batch 512, 330 s) 0.79 steps/s (134,656 scenes, 522,052 questions),
64.5% held-out; the held-out evaluation in fp32 and bf16 ~30 s. The training loop replaces the vision attention and index code with batched
equivalents (checked against the stock code at start-up; --stock-paths turns them off): the
stock code made 1.54 steps/s.
Measured on the CPU here (2 shared cores, the smoke command above): 20 steps of 8 scenes (every
question) in 21 s, 30 s in all; --max-seconds 300 with 8 scenes a step: 273 steps, answer loss
~1.06, 33% of 150 held-out questions.
--pack DIR writes the checkpoint as demo-model.tgz.00, .01, ... (15 MiB parts: the device call
brings back at most 8 files of 16 MiB); `cat demo-model.tgz.* | tar xz` restores demo-model/.
"""

import argparse
import contextlib
import io
import json
import math
import os
import random
import shutil
import sys
import tarfile
import time

import PIL
import torch
from PIL import Image, ImageDraw

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import scenes  # noqa: E402

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from transformers import (  # noqa: E402
    AutoImageProcessor,
    AutoProcessor,
    AutoTokenizer,
    Qwen2_5_VLConfig,
    Qwen2_5_VLForConditionalGeneration,
)

IMAGE_PAD = 151655
PAD = 151643  # <|endoftext|>, the pad id of the hub's generation_config
MAX_BYTES = 25_000_000
# greedy, no penalty, both stop ids (as scripts/reference/gpu_family.py writes for the Qwen families)
GENERATION_CONFIG = {"bos_token_id": 151643, "pad_token_id": 151643, "eos_token_id": [151645, 151643], "do_sample": False}
TEMPLATE_DIR = os.path.join(ROOT, "core", "internal", "enginetest", "testdata", "qwen2_5_vl", "tiny-untied")


def model_config(text_layers=4):
    return Qwen2_5_VLConfig(
        text_config=dict(
            hidden_size=64,
            intermediate_size=256,
            num_hidden_layers=text_layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=151936,
            rope_theta=1e6,
            rms_norm_eps=1e-6,
            max_position_embeddings=4096,
            rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]},  # head_dim 16: 8 frequencies
            tie_word_embeddings=True,
        ),
        vision_config=dict(
            depth=6,
            hidden_size=160,
            intermediate_size=320,
            num_heads=4,
            out_hidden_size=64,
            window_size=112,
            fullatt_block_indexes=[2, 5],
            tokens_per_second=2,
        ),
        tie_word_embeddings=True,
    )


def grow_text_layers(src, dst, layers, seed):
    """Copy the checkpoint src to dst with its language model grown to `layers` decoder layers: the
    new ones are interleaved after the old (spread evenly) and start as the identity (o_proj and
    down_proj zero, so each adds nothing to the residual stream), their other products drawn like
    a fresh model's (normal, std 0.02, seeded). The grown model answers exactly as src does until
    training moves the new layers. Returns the new order: the old layer's index, or None for a new one."""
    from safetensors.torch import load_file, save_file
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    text = cfg["text_config"]
    old = text["num_hidden_layers"]
    if layers < old:
        raise SystemExit(f"--text-layers {layers}: the checkpoint has {old} already (layers are only added)")
    weights = load_file(os.path.join(src, "model.safetensors"))
    gen = torch.Generator().manual_seed(seed)
    extra, order = layers - old, []
    for i in range(old):
        order.append(i)
        order += [None] * (extra // old + (i < extra % old))
    prefix = "model.layers."
    grown = {k: v for k, v in weights.items() if not k.startswith(prefix)}
    template = {k[len(prefix + "0."):]: v for k, v in weights.items() if k.startswith(prefix + "0.")}
    for j, i in enumerate(order):
        for name, like in template.items():
            if i is not None:
                grown[f"{prefix}{j}.{name}"] = weights[f"{prefix}{i}.{name}"]
            elif name.endswith("layernorm.weight"):
                grown[f"{prefix}{j}.{name}"] = torch.ones_like(like)
            elif name.endswith("bias") or name in ("self_attn.o_proj.weight", "mlp.down_proj.weight"):
                grown[f"{prefix}{j}.{name}"] = torch.zeros_like(like)
            else:
                grown[f"{prefix}{j}.{name}"] = (torch.randn(like.shape, generator=gen) * 0.02).to(like.dtype)
    os.makedirs(dst, exist_ok=True)
    for name in os.listdir(src):
        if name != "model.safetensors" and os.path.isfile(os.path.join(src, name)):
            shutil.copy(os.path.join(src, name), dst)
    text["num_hidden_layers"] = layers
    text["layer_types"] = ["full_attention"] * layers
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    save_file(grown, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
    return order


def log(f, msg):
    line = f"[{time.strftime('%H:%M:%S')}] {msg}"
    print(line, flush=True)
    if f:
        f.write(line + "\n")
        f.flush()


class Framer:
    """Token ids of a training example, built from pieces that tokenise the same as the whole
    (special tokens split the text; checked against the processor once at start)."""

    def __init__(self, tok):
        self.tok = tok
        head = scenes.prompt_text("\x00").split("<|image_pad|>")[0]  # ...<|vision_start|>
        self.before = tok(head, add_special_tokens=False)["input_ids"]

    def prompt_ids(self, question, n_image):
        tail = scenes.prompt_text(question).split("<|image_pad|>")[1]  # <|vision_end|>question...assistant\n
        return self.before + [IMAGE_PAD] * n_image + self.tok(tail, add_special_tokens=False)["input_ids"]

    def answer_ids(self, answer):
        return self.tok(answer + scenes.IM_END, add_special_tokens=False)["input_ids"]


class Examples(torch.utils.data.Dataset):
    """Example i: scene (seed, i) with every question it asks (--types: of those types only;
    --questions one: one of them, the type drawn uniformly), its objects and its sign (the
    auxiliary labels are drawn from them)."""

    def __init__(self, seed, n, only=None, one=False, sign_rate=scenes.SIGN_RATE, dense=False):
        self.seed, self.n, self.only, self.one = seed, n, set(only or scenes.TYPES), one
        self.sign_rate, self.dense = sign_rate, dense

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        sc = scenes.scene(self.seed, i, self.sign_rate, self.dense)
        k = 0
        while not self.only & {t for t, _, _ in sc["qa"]}:  # --types: another scene of the same stream
            k += 1
            sc = scenes.scene(self.seed, f"{i}.{k}", self.sign_rate, self.dense)
        qa = [x for x in sc["qa"] if x[0] in self.only]
        if self.one:
            rng = random.Random(f"pick:{self.seed}:{i}")
            types = sorted({t for t, _, _ in qa})
            typ = types[rng.randrange(len(types))]
            same = [x for x in qa if x[0] == typ]
            qa = [same[rng.randrange(len(same))]]
        return {"image": sc["image"], "qa": qa, "objects": sc["objects"], "sign": sc["sign"]}


SIGN_WORDS = sorted(set(scenes.WORDS))
# the auxiliary heads' classes (training only, never saved): each merged vision token's shape
# (0: none), colour (0: none), sign word (0: none), horizontal half and whether an object's
# centre falls in it
AUX = {"shape": len(scenes.SHAPES) + 1, "colour": len(scenes.COLOURS) + 1, "sign": len(SIGN_WORDS) + 1,
       "half": 2, "centre": 2}
# every auxiliary loss (--aux-head-weights): the per-token heads and the pooled sign word
HEADS = list(AUX) + ["sign_word"]
SAMPLES = 8  # label samples per merged token side
LENGTH_GROUPS = 4


def centre_token(box, width, height, merged_h, merged_w):
    """(row, column) of the merged token holding the centre of box (x0, y0, x1, y1) in an image of
    width x height."""
    x0, y0, x1, y1 = box
    return (min(merged_h - 1, int((y0 + y1) / 2 / height * merged_h)),
            min(merged_w - 1, int((x0 + x1) / 2 / width * merged_w)))


def token_labels(item, merged_h, merged_w):
    """The auxiliary labels of a scene's merged vision tokens (row-major, as the tower emits them):
    {name: LongTensor[merged_h * merged_w]}. A token takes the object (or sign) covering most of its
    SAMPLES x SAMPLES samples, if it covers at least a tenth of them."""
    import numpy as np
    img = item["image"]
    w, h = img.size
    ids = Image.new("L", (w, h), 0)
    d = ImageDraw.Draw(ids)
    sign = item["sign"]
    if sign is not None:
        x0, y0, x1, y1 = sign["box"]
        d.rectangle([x0, y0, x1 - 1, y1 - 1], fill=255)
    for k, o in enumerate(item["objects"]):
        scenes.draw_shape(d, o["shape"], o["colour"], o["box"], fill=k + 1)
    a = np.asarray(ids.resize((merged_w * SAMPLES, merged_h * SAMPLES), Image.NEAREST))
    a = a.reshape(merged_h, SAMPLES, merged_w, SAMPLES).transpose(0, 2, 1, 3).reshape(merged_h, merged_w, -1)
    present = [k + 1 for k in range(len(item["objects"]))] + ([255] if sign is not None else [])
    best = np.zeros((merged_h, merged_w), dtype=np.int64)
    if present:
        counts = np.stack([(a == v).sum(-1) for v in present])  # [objects, h, w]
        top = counts.argmax(0)
        keep = counts.max(0) * 10 >= SAMPLES * SAMPLES
        best = np.where(keep, np.asarray(present)[top], 0)
    shape = np.zeros_like(best)
    colour = np.zeros_like(best)
    word = np.zeros_like(best)
    centre = np.zeros_like(best)
    for k, o in enumerate(item["objects"]):
        on = best == k + 1
        shape[on] = scenes.SHAPES.index(o["shape"]) + 1
        colour[on] = list(scenes.COLOURS).index(o["colour"]) + 1
        centre[centre_token(o["box"], w, h, merged_h, merged_w)] = 1
    if sign is not None:
        word[best == 255] = SIGN_WORDS.index(sign["text"]) + 1
    half = np.broadcast_to((np.arange(merged_w) * 2 + 1 > merged_w).astype(np.int64), best.shape)
    out = {"shape": shape, "colour": colour, "sign": word, "half": half, "centre": centre}
    return {k: torch.from_numpy(np.array(v, dtype=np.int64).reshape(-1)) for k, v in out.items()}


BIND_TYPES = ("side", "colour")  # questions about one named shape
BIND_LAYERS = (2, 3)  # where run 11's colour answers attend to the named shape (scripts/demo/binding.py)


def named_shape(typ, question):
    """SHAPES index + 1 of the one shape a side or colour question names, else 0."""
    if typ not in BIND_TYPES:
        return 0
    word = question.rstrip("?").split()[-2 if typ == "side" else -1]  # "...the circle on?", "...the circle?"
    return scenes.SHAPES.index(word) + 1


def bind_loss(attn, inputs, rows, target, key_mask):
    """[m]: -log of the attention mass (mean over heads) that the positions `rows` [m] put on the tokens
    `target` [m, n] in one decoder layer's self-attention, recomputed from that layer's inputs
    (hidden_states [m, n, d] after its input norm, position_embeddings (cos, sin)): the scores as
    the layer computes them (projections, M-RoPE, GQA, scaling), keys limited to key_mask [m, n]
    and to positions <= the row."""
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import apply_rotary_pos_emb
    hidden, (cos, sin) = inputs
    m, n, _ = hidden.shape
    d = attn.head_dim
    ar = torch.arange(m, device=hidden.device)
    q = attn.q_proj(hidden[ar, rows]).view(m, -1, 1, d)  # [m, heads, 1, d]
    k = attn.k_proj(hidden).view(m, n, -1, d).transpose(1, 2)  # [m, kv heads, n, d]
    q, _ = apply_rotary_pos_emb(q, q, cos[ar, rows].unsqueeze(1), sin[ar, rows].unsqueeze(1))
    _, k = apply_rotary_pos_emb(k, k, cos, sin)
    k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    scores = (q * attn.scaling * k).sum(-1).float()  # [m, heads, n]
    allowed = key_mask.bool() & (torch.arange(n, device=hidden.device)[None, :] <= rows[:, None])
    p = scores.masked_fill(~allowed[:, None, :], float("-inf")).softmax(-1)
    mass = (p * target[:, None, :].to(p.dtype)).sum(-1).mean(1)
    return -torch.log(mass + 1e-6)


class Collate:
    """A batch of scenes: their pixels once, one sequence per (scene, question), the index of each
    sequence's image tokens into the tower's output, and the tokens' auxiliary labels."""

    def __init__(self, tokenizer_dir, template_dir):
        self.tokenizer_dir, self.template_dir = tokenizer_dir, template_dir
        self.ready = False

    def _init(self):  # in the worker: each loads its own tokenizer and image processor
        torch.set_num_threads(1)
        self.tok = AutoTokenizer.from_pretrained(self.tokenizer_dir)
        self.ip = AutoImageProcessor.from_pretrained(self.template_dir)
        self.framer = Framer(self.tok)
        self.config = model_config()
        self.ready = True

    def __call__(self, batch):
        if not self.ready:
            self._init()
        px = self.ip(images=[b["image"] for b in batch], return_tensors="pt")
        grids = px["image_grid_thw"]
        seqs, labels, seq_grids, gather, types, bind = [], [], [], [], [], []
        aux = {k: [] for k in AUX}
        aux["scene"] = []
        offset = 0
        for si, (item, g) in enumerate(zip(batch, grids)):
            mh, mw = int(g[1]) // 2, int(g[2]) // 2
            n = int(g.prod()) // 4
            for typ, q, a in item["qa"]:
                bind.append(named_shape(typ, q))
                p, ans = self.framer.prompt_ids(q, n), self.framer.answer_ids(a)
                seqs.append(p + ans)
                labels.append([-100] * len(p) + ans)
                seq_grids.append(g)
                gather.append(torch.arange(offset, offset + n))
                types.append(typ)
            for k, v in token_labels(item, mh, mw).items():
                aux[k].append(v)
            aux["scene"].append(torch.full((n,), si, dtype=torch.long))  # the pooled sign head's groups
            offset += n
        L = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), L), PAD, dtype=torch.long)
        lab = torch.full((len(seqs), L), -100, dtype=torch.long)
        mask = torch.zeros((len(seqs), L), dtype=torch.long)
        for i, (s, l) in enumerate(zip(seqs, labels)):
            ids[i, : len(s)] = torch.tensor(s)
            lab[i, : len(l)] = torch.tensor(l)
            mask[i, : len(s)] = 1
        seq_grids = torch.stack(seq_grids)
        out = {
            "input_ids": ids,
            "attention_mask": mask,
            "labels": lab,
            "mm_token_type_ids": (ids == IMAGE_PAD).long(),
            "pixel_values": px["pixel_values"],
            "image_grid_thw": grids,
            "seq_grid_thw": seq_grids,
            "image_gather": torch.cat(gather),
            "position_ids": rope_index(ids, mask, seq_grids, self.config),
            "types": types,
            "bind_shape": torch.tensor(bind, dtype=torch.long),
        }
        for k, v in aux.items():
            out["aux_" + k] = torch.cat(v)
        return out


def check_framing(tokenizer_dir, template_dir, logf):
    """The training ids equal the processor's for one scene (the real chat template, expanded)."""
    proc = AutoProcessor.from_pretrained(template_dir, tokenizer=AutoTokenizer.from_pretrained(tokenizer_dir))
    sc = scenes.scene(0, 0)
    typ, q, a = sc["qa"][0]
    text = proc.apply_chat_template([{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": q}]}],
                                    add_generation_prompt=True, tokenize=False)
    if text != scenes.prompt_text(q):
        raise SystemExit(f"chat template differs from scenes.prompt_text:\n{text!r}\n{scenes.prompt_text(q)!r}")
    got = proc(text=[text], images=[sc["image"]], return_tensors="pt")
    batch = Collate(tokenizer_dir, template_dir)([dict(sc, qa=[(typ, q, a)])])
    n = got["input_ids"].shape[1]
    if batch["input_ids"][0, :n].tolist() != got["input_ids"][0].tolist():
        raise SystemExit("training ids differ from the processor's")
    if not torch.equal(batch["pixel_values"], got["pixel_values"]):
        raise SystemExit("training pixels differ from the processor's")
    if batch["mm_token_type_ids"][0, :n].tolist() != got["mm_token_type_ids"][0].tolist():
        raise SystemExit("mm_token_type_ids differ from the processor's")
    log(logf, f"framing check: {n} prompt ids and {tuple(got['pixel_values'].shape)} pixels equal the processor's")


def varlen_attention(q, k, v, cu_seqlens, scaling):
    """Attention within each segment of cu_seqlens (windows or images) as batched products, scores
    and softmax in fp32. q, k, v: [tokens, heads, dim]. Segments are grouped by length class
    (powers of two) and padded to their group's longest, the padding keys masked: memory grows
    with the sum of squared lengths, not batch x longest^2 (a 640x480 scene has 1,564 patches).
    The model's own sdpa path runs one SDPA call per segment from Python (~600 windows per batch
    of 64 scenes, forward and backward): most of a training step on the H200. (A masked bf16 SDPA
    call here went to NaN after ~250 steps; the fp32 products did not.)"""
    dev = q.device
    lengths = cu_seqlens[1:] - cu_seqlens[:-1]
    starts = cu_seqlens[:-1].to(dev)
    cls = torch.ceil(torch.log2(lengths.clamp(min=1).float())).long()
    out = torch.zeros(q.shape, dtype=torch.float32, device=dev)
    for c in torch.unique(cls).tolist():
        segs = (cls == c).nonzero().squeeze(1)
        seg_len = lengths[segs]
        longest = int(seg_len.max())
        ar = torch.arange(longest, device=dev)
        valid = ar[None, :] < seg_len[:, None]  # [n, longest]
        idx = torch.where(valid, starts[segs][:, None] + ar[None, :], 0)  # padding reads token 0, masked

        def pad(x):
            return x.float()[idx].transpose(1, 2)  # [n, heads, longest, dim]

        with torch.autocast(dev.type, enabled=False):
            scores = torch.matmul(pad(q), pad(k).transpose(-1, -2)) * scaling
            probs = torch.softmax(scores.masked_fill(~valid[:, None, None, :], float("-inf")), dim=-1)
            o = torch.matmul(probs, pad(v)).transpose(1, 2)  # [n, longest, heads, dim]
        out = out.index_put((idx[valid],), o[valid])
    return out.to(q.dtype)


def fast_vision_attention(self, hidden_states, cu_seqlens, position_embeddings=None, max_seqlen=None, **kwargs):
    """Qwen2_5_VLVisionAttention.forward with the segments in one padded SDPA call (training only:
    the evaluation and every reference output use the stock module)."""
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import apply_rotary_pos_emb_vision
    n = hidden_states.shape[0]
    q, k, v = self.qkv(hidden_states).reshape(n, 3, self.num_heads, -1).permute(1, 0, 2, 3).unbind(0)
    cos, sin = position_embeddings
    q, k = apply_rotary_pos_emb_vision(q, k, cos, sin)
    out = varlen_attention(q, k, v, cu_seqlens, self.scaling)
    return self.proj(out.reshape(n, -1).contiguous())


_GRID_CACHE = {}


def _per_grid(kind, grid, compute):
    key = (kind, grid)
    if key not in _GRID_CACHE:
        _GRID_CACHE[key] = compute(torch.tensor([grid]))
    return _GRID_CACHE[key]


def cached_vision_position_ids(grid_thw, spatial_merge_size, include_temporal=False, kwargs=None):
    """transformers' get_vision_position_ids per distinct grid, computed once on the CPU: the stock
    function launches ~10 kernels per image per step."""
    from transformers import vision_utils
    parts = [_per_grid(("pos", spatial_merge_size, include_temporal), tuple(g),
                       lambda t: vision_utils.get_vision_position_ids(t, spatial_merge_size, include_temporal))
             for g in grid_thw.tolist()]
    return torch.cat(parts).to(grid_thw.device, non_blocking=True)


def cached_vision_window_index(grid_thw, spatial_merge_size, window_size, patch_size, kwargs=None):
    """transformers' get_vision_window_index per distinct grid (each image's windows offset by the
    tokens before it; the boundaries are per-image unique already, as the stock function's are)."""
    from transformers import vision_utils
    index, cu, tokens, patches = [], [torch.zeros(1, dtype=torch.int32)], 0, 0
    for g in grid_thw.tolist():
        wi, cw = _per_grid(("win", spatial_merge_size, window_size, patch_size), tuple(g),
                           lambda t: vision_utils.get_vision_window_index(t, spatial_merge_size, window_size, patch_size))
        index.append(wi + tokens)
        cu.append(cw[1:] + patches)
        tokens += wi.numel()
        patches += int(cw[-1])
    return (torch.cat(index).to(grid_thw.device, non_blocking=True),
            torch.cat(cu).to(grid_thw.device, non_blocking=True))


def use_fast_paths():
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as qm
    qm.Qwen2_5_VLVisionAttention.forward = fast_vision_attention
    qm.get_vision_position_ids = cached_vision_position_ids
    qm.get_vision_window_index = cached_vision_window_index


def rope_index(ids, mask, grids, config):
    """The M-RoPE position ids of a training batch (what the model's get_rope_index computes per
    sample on the GPU), in the collate worker."""
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLModel

    class Stub:
        pass

    stub = Stub()
    stub.config = config
    stub.get_vision_position_ids = lambda *a, **k: Qwen2_5_VLModel.get_vision_position_ids(stub, *a, **k)
    pos, _ = Qwen2_5_VLModel.get_rope_index(stub, ids, image_grid_thw=grids, attention_mask=mask,
                                            mm_token_type_ids=(ids == IMAGE_PAD).long())
    return pos


@torch.no_grad()
def check_fast_attention(model, collate, device, logf):
    """The fast paths equal the stock ones on a few scenes (fp32): the vision tower's output with the
    padded attention and the cached indices, and the collate's M-RoPE ids against the model's."""
    threads = torch.get_num_threads()
    scenes_ = Examples(99, 4, None)
    batch = collate([dict(item, qa=item["qa"][:1]) for item in (scenes_[i] for i in range(4))])
    torch.set_num_threads(threads)  # the collate set one thread, as for its workers
    pixels, grid = batch["pixel_values"].to(device), batch["image_grid_thw"].to(device)
    was = model.training
    model.eval()
    stock = model.model.visual(pixels, grid_thw=grid).pooler_output
    ref_pos, _ = model.model.get_rope_index(batch["input_ids"], image_grid_thw=batch["image_grid_thw"],
                                           attention_mask=batch["attention_mask"],
                                           mm_token_type_ids=batch["mm_token_type_ids"])
    use_fast_paths()
    fast = model.model.visual(pixels, grid_thw=grid).pooler_output
    model.train(was)
    err = (stock - fast).abs().max().item()
    scale = stock.abs().max().item()  # trained weights reach magnitudes that random ones do not
    same_pos = torch.equal(ref_pos, batch["position_ids"])
    log(logf, f"fast paths: grids {grid.tolist()}, max |stock - fast| {err:.2e} (max |stock| {scale:.2e}), "
              f"M-RoPE ids equal: {same_pos}")
    if err > 1e-5 * max(10.0, scale) or not same_pos:
        raise SystemExit("a fast path differs from the stock one")


class AuxHeads(torch.nn.Module):
    """Training-only linear heads on the tower's merged tokens (the language model's input): each
    token's shape, colour, sign word, horizontal half and object centre. One answer is a few tokens
    of signal per scene; these give the tower a label per token, so it learns to see the shapes
    before the language model learns to ask about them. Never saved: the checkpoint is the stock
    architecture.

    sign_word: the word of a scene's sign from the mean of its sign's tokens. A token holds a
    letter or two of the word ("PU" of PUSH and of PULL), so the per-token sign head cannot tell
    the words apart; their mean, what an attention head of the language model can read, can."""

    def __init__(self, width):
        super().__init__()
        self.proj = torch.nn.Linear(width, sum(AUX.values()))
        self.pool = torch.nn.Linear(width, len(SIGN_WORDS))

    def forward(self, tokens, batch):
        logits = self.proj(tokens).float()
        losses, k = {}, 0
        for name, n in AUX.items():
            losses[name] = torch.nn.functional.cross_entropy(logits[:, k: k + n], batch["aux_" + name])
            k += n
        losses["sign_word"] = self.sign_word(tokens.float(), batch["aux_sign"], batch["aux_scene"],
                                             batch["image_grid_thw"].shape[0])
        return losses

    def sign_word(self, tokens, word, scene, scenes_n):
        """Mean cross-entropy over the scenes with a sign (0 when none has one), without a host
        sync: masks and index_add instead of boolean indexing."""
        on = (word > 0).to(tokens.dtype)
        pooled = tokens.new_zeros(scenes_n, tokens.shape[1]).index_add_(0, scene, tokens * on[:, None])
        count = tokens.new_zeros(scenes_n).index_add_(0, scene, on)
        target = torch.zeros(scenes_n, dtype=torch.long, device=tokens.device).scatter_reduce_(
            0, scene, word, reduce="amax")  # every sign token of a scene holds the same word
        has = (count > 0).to(tokens.dtype)
        ce = torch.nn.functional.cross_entropy(self.pool(pooled / count.clamp(min=1)[:, None]),
                                               (target - 1).clamp(min=0), reduction="none")
        return (ce * has).sum() / has.sum().clamp(min=1)


def aux_total(losses, weights):
    """The auxiliary heads' losses summed, each times its weight (--aux-head-weights; default 1)."""
    return sum(weights.get(k, 1.0) * v for k, v in losses.items())


def step_loss(model, aux, batch, aux_weight, lengths, vision_only=False, vision_fp32=False, head_weights=None,
              seq_weights=None, bind_weight=0.0):
    """Cross-entropy on the answer tokens (the logits computed at those positions alone: the full
    [sequences, length, 151936] would be most of a step), plus aux_weight x the auxiliary heads'.
    The tower runs once per scene; each of the scene's questions is a sequence whose image tokens
    are gathered from its output. vision_only: the tower and the auxiliary heads alone (answer None).
    vision_fp32: the tower outside bf16 autocast (its residual stream in fp32). seq_weights: a
    weight per sequence (--type-weights) for its answer tokens, the mean taken over the weights.
    bind_weight: plus that times bind_loss in BIND_LAYERS for the side and colour questions (the
    position that predicts the answer attending to the named shape's tokens), reported as aux "bind"."""
    with torch.autocast(batch["pixel_values"].device.type, enabled=False) if vision_fp32 else contextlib.nullcontext():
        vis = model.model.visual(batch["pixel_values"], grid_thw=batch["image_grid_thw"]).pooler_output
    if vision_only:
        aux_losses = aux(vis, batch)
        return aux_total(aux_losses, head_weights or {}), None, aux_losses
    ids = batch["input_ids"]
    emb = model.model.language_model.embed_tokens(ids)
    image = (ids == IMAGE_PAD).unsqueeze(-1).expand_as(emb)
    emb = emb.masked_scatter(image, vis[batch["image_gather"]].to(emb.dtype))
    # the sequences run in LENGTH_GROUPS groups of similar length, each padded to its own longest:
    # one 640x480 scene (391 image tokens) would otherwise pad a batch's ~1,000 sequences to its length
    order = torch.argsort(lengths)  # on the CPU (no sync): the sequences' lengths
    total_loss, count = 0.0, 0
    binds, captured, hooks = [], {}, []
    if bind_weight > 0:
        rows_of = torch.full(ids.shape, -1, dtype=torch.long, device=ids.device)
        rows_of[ids == IMAGE_PAD] = batch["image_gather"]  # the tower row of each image position
        tok_shape = torch.where(rows_of >= 0, batch["aux_shape"][rows_of.clamp(min=0)], 0)
        layers = model.model.language_model.layers
        for L in BIND_LAYERS:
            hooks.append(layers[L].self_attn.register_forward_pre_hook(
                lambda mod, args, kwargs, L=L: captured.__setitem__(L, (kwargs["hidden_states"],
                                                                        kwargs["position_embeddings"])),
                with_kwargs=True))
    for idx in torch.tensor_split(order, min(LENGTH_GROUPS, len(order))):
        if idx.numel() == 0:
            continue
        n = int(lengths[idx].max())
        idx = idx.to(emb.device)
        hidden = model.model.language_model(inputs_embeds=emb[idx, :n], position_ids=batch["position_ids"][:, idx, :n],
                                            attention_mask=batch["attention_mask"][idx, :n]).last_hidden_state
        target = batch["labels"][idx, 1:n]
        if bind_weight > 0:
            named = batch["bind_shape"][idx]
            sel = (named > 0).nonzero()[:, 0]
            if sel.numel():
                rows = (target[sel] != -100).int().argmax(1)  # the position that predicts the answer's first token
                on = tok_shape[idx[sel], :n] == named[sel, None]
                for L in BIND_LAYERS:
                    h, (cos, sin) = captured[L]
                    binds.append(bind_loss(layers[L].self_attn,
                                           (h[sel], (cos[sel], sin[sel])), rows, on,
                                           batch["attention_mask"][idx[sel], :n]))
        keep = target != -100
        logits = model.lm_head(hidden[:, :-1][keep])
        if seq_weights is None:
            total_loss = total_loss + torch.nn.functional.cross_entropy(logits.float(), target[keep], reduction="sum")
            count = count + keep.sum()
        else:
            w = seq_weights[idx].unsqueeze(1).expand_as(keep)[keep]
            ce = torch.nn.functional.cross_entropy(logits.float(), target[keep], reduction="none")
            total_loss = total_loss + (ce * w).sum()
            count = count + w.sum()
    for hk in hooks:
        hk.remove()
    answer = total_loss / count.clamp(min=1)
    aux_losses = aux(vis, batch) if aux is not None else {}
    total = answer + aux_weight * aux_total(aux_losses, head_weights or {}) if aux_losses else answer
    if binds:
        aux_losses["bind"] = torch.cat(binds).mean()
        total = total + bind_weight * aux_losses["bind"]
    return total, answer, aux_losses


def start_profile(device):
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    if device == "cuda":
        torch.cuda.synchronize()
    prof = profile(activities=acts)
    prof.__enter__()
    return prof, time.perf_counter()


def stop_profile(prof, t0, device, path, logf):
    """Five steps' wall time and the profiler's top operators (by device time on CUDA)."""
    if device == "cuda":
        torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / 5
    prof.__exit__(None, None, None)
    key = "self_cuda_time_total" if device == "cuda" else "self_cpu_time_total"
    table = prof.key_averages().table(sort_by=key, row_limit=40)
    with open(path, "w") as f:
        f.write(f"five profiled steps, {wall * 1000:.1f} ms a step (wall, synchronised, the loader's waits "
                f"and the profiler's overhead included)\n\n{table}\n")
    log(logf, f"profile: {wall * 1000:.1f} ms a step; top operators in {path}")


def lr_at(progress, base, warm):
    if progress < warm:
        return base * progress / warm
    p = (progress - warm) / max(1e-9, 1 - warm)
    return base * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(1.0, p))))


def loss_png(path, points, title):
    """A loss curve (log scale) drawn with Pillow: points = [(step, loss)]."""
    W, H, m = 900, 480, 60
    img = Image.new("RGB", (W, H), "white")
    d = ImageDraw.Draw(img)
    d.rectangle([m, 20, W - 20, H - m], outline="black")
    d.text((m, 4), title, fill="black")
    if len(points) >= 2:
        xs = [p[0] for p in points]
        ys = [math.log10(max(p[1], 1e-4)) for p in points]
        x0, x1 = min(xs), max(xs)
        y0, y1 = min(ys), max(ys)
        if y1 - y0 < 1e-6:
            y1 = y0 + 1
        def px(x, y):
            return (m + (x - x0) / max(1, x1 - x0) * (W - 20 - m), H - m - (y - y0) / (y1 - y0) * (H - m - 20))
        d.line([px(x, y) for x, y in zip(xs, ys)], fill=(30, 70, 220), width=2)
        for k in range(5):
            y = y0 + (y1 - y0) * k / 4
            _, py = px(x0, y)
            d.text((4, py - 6), f"{10 ** y:.3g}", fill="black")
        for k in range(5):
            x = x0 + (x1 - x0) * k / 4
            qx, _ = px(x, y0)
            d.text((qx - 10, H - m + 6), f"{int(x)}", fill="black")
        d.text((W // 2 - 40, H - 24), "step (loss: log scale)", fill="black")
    img.save(path)


def save_checkpoint(model, out, tokenizer_dir, template_dir):
    os.makedirs(out, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(out)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump(GENERATION_CONFIG, f, indent=2)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.realpath(os.path.join(tokenizer_dir, name)), os.path.join(out, name))
    for name in ("chat_template.json", "chat_template.jinja", "preprocessor_config.json"):
        shutil.copyfile(os.path.join(template_dir, name), os.path.join(out, name))


@torch.no_grad()
def evaluate(ckpt, device, seed, count, batch, logf, dtype=torch.float32):
    """Greedy answers of the checkpoint in dtype (fp32: the gate's reference; bf16: the agreement's) to every question of count scenes (seed), through
    AutoProcessor and the chat template as any transformers user would run it."""
    proc = AutoProcessor.from_pretrained(ckpt)
    proc.tokenizer.padding_side = "left"
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(ckpt, dtype=dtype, attn_implementation="sdpa")
    model = model.to(device).eval()
    items = []
    for i in range(count):
        sc = scenes.scene(seed, i)
        for typ, q, a in sc["qa"]:
            items.append((i, sc["image"], q, a, typ))
    rows = []
    for k in range(0, len(items), batch):
        chunk = items[k: k + batch]
        texts = [scenes.prompt_text(q) for _, _, q, _, _ in chunk]
        enc = proc(text=texts, images=[c[1] for c in chunk], return_tensors="pt", padding=True).to(device)
        out = model.generate(**enc, max_new_tokens=8, do_sample=False, num_beams=1, repetition_penalty=1.0,
                             pad_token_id=PAD)
        new = out[:, enc["input_ids"].shape[1]:]
        for (i, _, q, a, typ), ids in zip(chunk, new):
            got = proc.tokenizer.decode(ids, skip_special_tokens=True)
            rows.append({"seed": seed, "index": i, "type": typ, "question": q, "answer": a, "got": got,
                         "tokens": [t for t in ids.tolist() if t != PAD], "ok": got == a})
    by = {}
    for r in rows:
        t = by.setdefault(r["type"], [0, 0])
        t[0] += r["ok"]
        t[1] += 1
    acc = {t: {"correct": c, "total": n, "accuracy": round(c / n, 4)} for t, (c, n) in sorted(by.items())}
    ok = sum(r["ok"] for r in rows)
    acc["overall"] = {"correct": ok, "total": len(rows), "accuracy": round(ok / max(1, len(rows)), 4)}
    log(logf, f"held-out accuracy ({str(dtype).removeprefix('torch.')}): " + ", ".join(f"{t} {v['accuracy']:.3f} ({v['correct']}/{v['total']})"
                                                 for t, v in acc.items()))
    return acc, rows


def pack(ckpt, dest, part=15 << 20):
    """ckpt as demo-model.tgz split in parts of 15 MiB under dest."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tf:
        for name in sorted(os.listdir(ckpt)):
            tf.add(os.path.join(ckpt, name), arcname=f"demo-model/{name}")
    data = buf.getvalue()
    names = []
    for k in range(0, len(data), part):
        name = os.path.join(dest, f"demo-model.tgz.{k // part:02d}")
        with open(name, "wb") as f:
            f.write(data[k: k + part])
        names.append(os.path.basename(name))
    return names


def parse_weights(ap, flag, text, what, names):
    """{name: weight} from "name=number,..." (the flag's value), each name one of names."""
    weights = {}
    for part in filter(None, text.split(",")):
        name, _, value = part.partition("=")
        if name not in names:
            ap.error(f"{flag}: no {what} {name!r} ({what}s: {', '.join(names)})")
        try:
            weights[name] = float(value)
        except ValueError:
            ap.error(f"{flag}: {part!r} is not {what.split()[-1]}=number")
    return weights


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--steps", type=int, default=100000, help="most optimizer steps (--max-seconds usually ends first)")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--max-seconds", type=float, default=400, help="training-loop time budget")
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--warmup", type=float, default=0.05, help="fraction of the run spent warming up")
    ap.add_argument("--seed", type=int, default=1234, help="weight initialisation")
    ap.add_argument("--train-seed", type=int, default=1, help="scenes.py seed of the training scenes")
    ap.add_argument("--eval-seed", type=int, default=2, help="scenes.py seed of the held-out scenes")
    ap.add_argument("--eval-count", type=int, default=300, help="held-out scenes (every question of each)")
    ap.add_argument("--eval-batch", type=int, default=64)
    ap.add_argument("--workers", type=int, default=max(1, min(12, (os.cpu_count() or 2) - 2)))
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, ".build", "tokenizer", "qwen3"))
    ap.add_argument("--template", default=TEMPLATE_DIR, help="dir with chat_template.{json,jinja} and preprocessor_config.json")
    ap.add_argument("--out", required=True, help="checkpoint directory to write")
    ap.add_argument("--report", help="report directory (default: OUT-report)")
    ap.add_argument("--pack", help="also write the checkpoint as demo-model.tgz.NN parts here")
    ap.add_argument("--types", help="train on these question types only (comma-separated; default all)")
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--stock-paths", action="store_true",
                    help="train with the model's own per-window attention and per-image index code (slow on the GPU)")
    ap.add_argument("--min-pixels", type=int,
                    help="the preprocessor's min_pixels for training and in the checkpoint (default the "
                         "template's 3136): images under it are scaled up, more patches per shape; Iris "
                         "reads it from the checkpoint's preprocessor_config.json")
    ap.add_argument("--questions", default="all", choices=["all", "one"],
                    help="per scene: every question (the tower runs once for all of them) or one")
    ap.add_argument("--aux-weight", type=float, default=0.5,
                    help="weight of the auxiliary per-token heads' loss (0: answers only)")
    ap.add_argument("--aux-head-weights", default="",
                    help="per-head multipliers of the auxiliary loss, e.g. sign_word=0.25 (heads: "
                         f"{', '.join(HEADS)}; default 1 each)")
    ap.add_argument("--vision-seconds", type=float, default=0,
                    help="train the tower and the auxiliary heads alone for the first this many seconds of "
                         "--max-seconds (no language model: several times the scenes a second), then everything")
    ap.add_argument("--vision-fp32", action="store_true",
                    help="run the vision tower outside bf16 autocast (fp32 products, TF32 on CUDA): the tower's "
                         "shapes learn slowly, and its residual stream is bf16 under autocast")
    ap.add_argument("--profile-at", type=int, default=0,
                    help="profile steps N to N+4 with torch.profiler into REPORT/profile.txt (0: off)")
    ap.add_argument("--sign-rate", type=float, default=scenes.SIGN_RATE,
                    help="share of training scenes given a sign (the held-out scenes keep scenes.py's)")
    ap.add_argument("--type-weights", default="",
                    help="per-type multipliers of the answer loss, e.g. side=3 (the logged answer loss is "
                         "then the weighted mean)")
    ap.add_argument("--bind-weight", type=float, default=0.0,
                    help="weight of the training-only attention loss: in the language model's layers "
                         f"{BIND_LAYERS}, the position that answers a side or colour question attends to "
                         "the named shape's tokens (0: off)")
    ap.add_argument("--dense", action="store_true",
                    help="training scenes ask the count, colour and side of every shape with an answer "
                         "(scenes.questions dense), not of one drawn at random")
    ap.add_argument("--text-layers", type=int, default=0,
                    help="language-model layers (default 4); with --init, grow the checkpoint to this many "
                         "by interleaving identity-initialised layers")
    ap.add_argument("--init", help="start from this checkpoint's model.safetensors (a previous run's --out) "
                                   "instead of the seeded initialisation")
    args = ap.parse_args()
    if args.vision_seconds > 0 and args.aux_weight <= 0:
        ap.error("--vision-seconds trains the auxiliary heads: it needs --aux-weight > 0")
    head_weights = parse_weights(ap, "--aux-head-weights", args.aux_head_weights, "head", HEADS)
    type_weights = parse_weights(ap, "--type-weights", args.type_weights, "question type", scenes.TYPES)
    report = args.report or args.out.rstrip("/") + "-report"
    os.makedirs(report, exist_ok=True)
    logf = open(os.path.join(report, "train.log"), "w")
    t_start = time.perf_counter()
    log(logf, f"args: {json.dumps(vars(args))}")
    log(logf, f"torch {torch.__version__}, transformers {__import__('transformers').__version__}, "
              f"Pillow {PIL.__version__}, "
              f"device {torch.cuda.get_device_name() if args.device == 'cuda' else 'cpu'}")

    random.seed(args.seed)
    torch.manual_seed(args.seed)
    if args.text_layers and args.init:
        grown = args.out.rstrip("/") + "-grown"
        order = grow_text_layers(args.init, grown, args.text_layers, args.seed)
        log(logf, f"grew {args.init}'s language model to {args.text_layers} layers in {grown}: "
                  f"{['new' if i is None else i for i in order]} (the new ones start as the identity)")
        args.init = grown
    config = Qwen2_5_VLConfig.from_pretrained(args.init) if args.init else model_config(args.text_layers or 4)
    with torch.device("meta"):
        n_meta = sum(p.numel() for p in Qwen2_5_VLForConditionalGeneration._from_config(config).parameters())
    size = 2 * n_meta
    emb = config.text_config.vocab_size * config.text_config.hidden_size
    log(logf, f"model: {n_meta:,} parameters (embedding {emb:,}, tied), bf16 {size / 1e6:.2f} MB")
    if size > MAX_BYTES:
        raise SystemExit(f"bf16 size {size} over {MAX_BYTES}")
    model = Qwen2_5_VLForConditionalGeneration._from_config(config, dtype=torch.float32, attn_implementation="sdpa")
    if args.init:  # the hub layout's names differ from the modules': transformers maps them
        model = Qwen2_5_VLForConditionalGeneration.from_pretrained(args.init, dtype=torch.float32,
                                                                   attn_implementation="sdpa")
        log(logf, f"initialised from {args.init}")
    model.to(args.device).train()

    if args.min_pixels:  # a copy of the template with the preprocessor's min_pixels changed
        tdir = os.path.join(report, "template")
        shutil.rmtree(tdir, ignore_errors=True)
        shutil.copytree(args.template, tdir, ignore=shutil.ignore_patterns("*.safetensors", "tokenizer*"))
        with open(os.path.join(tdir, "preprocessor_config.json")) as f:
            pp = json.load(f)
        pp["min_pixels"] = args.min_pixels
        with open(os.path.join(tdir, "preprocessor_config.json"), "w") as f:
            json.dump(pp, f, indent=2)
        args.template = tdir
        log(logf, f"min_pixels {args.min_pixels} (template {tdir})")
    check_framing(args.tokenizer, args.template, logf)

    if not args.stock_paths:
        check_fast_attention(model, Collate(args.tokenizer, args.template), args.device, logf)
    ds = Examples(args.train_seed, args.steps * args.batch, args.types.split(",") if args.types else None,
                  one=args.questions == "one", sign_rate=args.sign_rate, dense=args.dense)
    dl = torch.utils.data.DataLoader(ds, batch_size=args.batch, shuffle=False, num_workers=args.workers,
                                     collate_fn=Collate(args.tokenizer, args.template),
                                     prefetch_factor=4 if args.workers > 0 else None,
                                     persistent_workers=False, pin_memory=args.device == "cuda")
    aux = AuxHeads(config.vision_config.out_hidden_size).to(args.device) if args.aux_weight > 0 else None
    named = list(model.named_parameters()) + (list(aux.named_parameters(prefix="aux")) if aux else [])
    decay = [p for n, p in named if p.ndim >= 2 and "embed" not in n]
    other = [p for n, p in named if not (p.ndim >= 2 and "embed" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": other, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.98), eps=1e-8, fused=args.device == "cuda")
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if args.device == "cuda" else torch.autocast("cpu", enabled=False)

    curve, window, step, seen, parts = [], [], 0, 0, {}
    vision_steps, prof, prof_t0 = 0, None, 0.0
    t_train = time.perf_counter()
    t_first = None
    wait, t_ready, skipped = 0.0, time.perf_counter(), 0
    for batch in dl:
        wait += time.perf_counter() - t_ready  # the loader behind the step: data-bound when large
        elapsed = time.perf_counter() - t_train
        if step >= args.steps or elapsed >= args.max_seconds:
            break
        progress = max(step / args.steps, elapsed / args.max_seconds)
        for g in opt.param_groups:
            g["lr"] = lr_at(progress, args.lr, args.warmup)
        vision_only = elapsed < args.vision_seconds
        vision_steps += vision_only
        types = batch.pop("types")
        n_questions = len(types)
        seq_weights = None
        if type_weights:
            seq_weights = torch.tensor([type_weights.get(t, 1.0) for t in types], device=args.device)
        seen += 0 if vision_only else n_questions
        if args.profile_at and step == args.profile_at:
            prof, prof_t0 = start_profile(args.device)
        lengths = batch["attention_mask"].sum(1)
        batch = {k: v.to(args.device, non_blocking=True) for k, v in batch.items()}
        with autocast:
            loss, answer, aux_losses = step_loss(model, aux, batch, args.aux_weight, lengths, vision_only,
                                                 args.vision_fp32, head_weights, seq_weights, args.bind_weight)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_([p for _, p in named], 1.0)
        if not torch.isfinite(norm):  # one non-finite batch must not poison the weights
            skipped += 1
            opt.zero_grad(set_to_none=True)
            if skipped > max(10, step // 20):
                log(logf, f"{skipped} non-finite steps by step {step}: stopping early (lower --lr)")
                break
        else:
            opt.step()
        t_ready = time.perf_counter()
        step += 1
        if prof is not None and step == args.profile_at + 5:
            stop_profile(prof, prof_t0, args.device, os.path.join(report, "profile.txt"), logf)
            prof = None
        if answer is not None:
            window.append(answer.detach())  # no sync per step: read at the log lines
        for k, v in aux_losses.items():
            parts.setdefault(k, []).append(v.detach())
        if t_first is None:
            t_first = time.perf_counter() - t_train
        if step % args.log_every == 0 or step == 1:
            avg = torch.stack(window).mean().item() if window else float("nan")
            if window:
                curve.append((step, avg))
            window = []
            auxs = " ".join(f"{k} {torch.stack(v).mean().item():.3f}" for k, v in parts.items())
            parts = {}
            log(logf, f"step {step} answer loss {avg:.4f} aux [{auxs}] lr {opt.param_groups[0]['lr']:.2e} "
                      f"elapsed {time.perf_counter() - t_train:.1f}s data wait {wait:.1f}s skipped {skipped}")
    if window:
        curve.append((step, torch.stack(window).mean().item()))
    train_s = time.perf_counter() - t_train
    log(logf, f"trained {step} steps ({step * args.batch:,} scenes, {vision_steps} of the steps vision only; "
              f"{seen:,} questions) in {train_s:.1f}s "
              f"(first step {t_first or 0:.1f}s, {step / max(train_s, 1e-9):.2f} steps/s)")
    del dl

    t0 = time.perf_counter()
    save_checkpoint(model, args.out, args.tokenizer, args.template)
    ckpt_bytes = {f: os.path.getsize(os.path.join(args.out, f)) for f in sorted(os.listdir(args.out))}
    log(logf, f"checkpoint {args.out}: {json.dumps(ckpt_bytes)} ({time.perf_counter() - t0:.1f}s)")
    del model, opt, aux
    if args.device == "cuda":
        torch.cuda.empty_cache()
    # the checkpoint and the loss curve leave first: a device call cut short during the
    # evaluation still brings them back
    if args.pack:
        os.makedirs(args.pack, exist_ok=True)
        log(logf, f"packed: {pack(args.out, args.pack)}")
    loss_png(os.path.join(report, "loss.png"), curve,
             f"demo model: training loss ({step} steps, batch {args.batch}, {args.device})")

    if args.device == "cuda":  # the fp32 reference in fp32 products, not TF32 (training's setting)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    t0 = time.perf_counter()
    acc, rows = evaluate(args.out, args.device, args.eval_seed, args.eval_count, args.eval_batch, logf)
    eval_s = time.perf_counter() - t0
    log(logf, f"evaluated {len(rows)} questions of {args.eval_count} scenes in {eval_s:.1f}s")
    if args.device == "cuda":  # transformers bf16, the reference of the CUDA engine's bf16 agreement
        acc16, rows16 = evaluate(args.out, args.device, args.eval_seed, args.eval_count, args.eval_batch, logf,
                                 dtype=torch.bfloat16)
        with open(os.path.join(report, "answers-bf16.jsonl"), "w") as f:
            for r in rows16:
                f.write(json.dumps(r, sort_keys=True) + "\n")
        same = sum(a["got"] == b["got"] for a, b in zip(rows, rows16))
        log(logf, f"transformers bf16 vs fp32: same answer on {same}/{len(rows)}")

    with open(os.path.join(report, "answers.jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    summary = {"params": n_meta, "bf16_bytes": size, "safetensors_bytes": ckpt_bytes.get("model.safetensors"),
               "steps": step, "batch": args.batch, "questions": seen, "aux_weight": args.aux_weight, "train_s": round(train_s, 1), "eval_s": round(eval_s, 1),
               "device": args.device, "train_seed": args.train_seed, "eval_seed": args.eval_seed,
               "eval_scenes": args.eval_count, "accuracy": acc, "final_loss": curve[-1][1] if curve else None,
               "loss_curve": curve}
    with open(os.path.join(report, "accuracy.json"), "w") as f:
        json.dump(summary, f, indent=1)
    with open(os.path.join(report, "report.md"), "w") as f:
        f.write(f"# Demo model training report\n\n"
                f"- model: tiny Qwen2.5-VL, {n_meta:,} parameters, bf16 safetensors "
                f"{ckpt_bytes.get('model.safetensors', 0):,} bytes\n"
                f"- training: {step} steps x {args.batch} scenes ({seen:,} questions, aux weight {args.aux_weight}) on {args.device} in {train_s:.0f} s "
                f"(train seed {args.train_seed}), final loss {summary['final_loss']}\n"
                f"- held-out: {args.eval_count} scenes of seed {args.eval_seed}, every question, greedy, fp32 "
                f"checkpoint through AutoProcessor ({eval_s:.0f} s)\n\n"
                f"| type | correct | total | accuracy |\n| --- | --- | --- | --- |\n")
        for t, v in acc.items():
            f.write(f"| {t} | {v['correct']} | {v['total']} | {v['accuracy']:.3f} |\n")
        wrong = [r for r in rows if not r["ok"]][:20]
        if wrong:
            f.write("\nFirst wrong answers:\n\n| index | question | answer | got |\n| --- | --- | --- | --- |\n")
            for r in wrong:
                f.write(f"| {r['index']} | {r['question']} | {r['answer']} | {json.dumps(r['got'])} |\n")
        f.write("\n![loss](loss.png)\n")
    log(logf, f"total {time.perf_counter() - t_start:.1f}s; overall accuracy {acc['overall']['accuracy']:.3f}")


if __name__ == "__main__":
    main()
