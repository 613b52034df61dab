#!/usr/bin/env python3
"""The GPU runs of the families whose parity is checked on the served path: Phi-4-multimodal,
DeepSeek-OCR-2, LocateAnything-3B and Lance-3B (scripts/gpu/run.sh `vl`, `qualify`).

  gpu_served.py checkpoint --config gpu_<family>_<size>.config.json --out DIR --tokenizer DIR [--device cuda]
  gpu_served.py reference  --model DIR --cases DIR --out ref.jsonl [--new 32] [--device cuda]
  gpu_served.py baseline   --model DIR --cases DIR --case NAME --tokens 3,300 [--runs 8] --out baseline.json
  gpu_served.py corpus     --model DIR --input corpus.jsonl --max-tokens 10 --out tf.json   (any family: qualify)

Their engines take views, crops and tiles that gpucheck's case files (processor outputs of one
grid) do not describe, so their parity is end to end: the same image bytes and question go to the
reference's own processor and model here and to `iris serve` (the family's plugin, the engine in
fp32) there, and benchmark/cmd/accuracy compares the greedy token ids (-ignore-eos,
-min-token-agreement 1).

checkpoint: the reference's own classes on the meta device give every tensor's name and shape;
each is drawn on the device (bf16, seeded) with a scale by kind (weights() below: norms around 1,
fan-in scaled products, a wide lm_head for clear greedy margins), so no tensor keeps a constant
initialisation (DeepSeek-OCR-2's SAM: std 1e-10 and zero position tables; zero CLS tokens), then
written in the layout the hub's checkpoint has (save_pretrained; Lance: its state dict without
the generation expert and the config Iris reads, as golden_lance.py writes its sweep), with the
family's tokenizer files, processor settings and generation config.

reference: the cases (gpu_parity.py's synthetic images and the photo JPEG, plus a page image for
OCR), each with the profile's question (grounding: upstream's "Locate a single instance..."
question; OCR's page: "what is written in the image?"), written as a scene set (scenes.jsonl and
the image files) and answered greedily in fp32 (TF32 off), EOS never stopping: ref.jsonl holds
per case the token ids, the prompt's length and the smallest top-two margin. A case whose prompt
and answer would not fit the bundle's context (--context) is left out and named.

baseline: the reference's generate() in bf16 on one case: c=1 latency at each --tokens count
(p50, p95), TTFT (1 token) and TPOT; the processor's time on the image.

Where each reference comes from (families.md section 11): transformers 5.17's Phi4Multimodal and
DeepseekOcr2 classes and processors (golden_served.py, golden_served_deepseek_ocr2.py);
LocateAnything's remote-code export (NVlabs/Eagle 783f656d, .build/locany, in transformers 4.57.1:
make_sweep_locateanything.py's loader and run_case, golden_served_locateanything.py's framing);
Lance's official code (bytedance/Lance 4baeee08, .build/lance-src, in transformers 4.49:
golden_lance.py's shims, x2t and run_case). The last two run in their own environments
(IRIS_LAENV, IRIS_LANCEENV: run.sh picks the interpreter by family).
"""

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import time

import numpy as np
import torch
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# name, width, height, question[, image file under testdata/]: gpu_parity.py's cases (imported
# lazily there: gpu_parity imports transformers' AutoProcessor, which the official envs have too)
PHOTO_Q = "What is the main object in this image? Answer in one word."
GROUNDING_Q = "Locate a single instance that matches the following description: {label}."
OCR_Q = "what is written in the image?"
# grounding labels of the cases (the upstream profile asks for an Imagenette class label)
LABELS = {"photo_426x320": "the astronaut", "min_56x56": "a red square", "rect_320x240": "the blue block",
          "square_448x448": "the largest block", "vga_640x480": "the top left corner", "wide_500x90": "the banner",
          "tall_120x300": "the top of the image", "xga_1024x768": "the leftmost object",
          "uxga_1600x1200": "the brightest block", "page_850x1100": "the title"}
# each family's workload: (question kind, max tokens of the speed run on its own workload, its case)
WORKLOAD = {"phi4_multimodal": ("photo", 10, "photo_426x320"), "deepseek_ocr2": ("ocr", 300, "page_850x1100"),
            "locateanything": ("grounding", 32, "photo_426x320"), "lance": ("photo", 10, "photo_426x320")}


def family_of(path):
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    with open(path) as f:
        return json.load(f)["model_type"]


def page_image(w=850, h=1100, seed=7):
    """A synthetic printed page: dark word-like blocks in lines on white, a title line, margins."""
    rng = np.random.default_rng(seed)
    img = np.full((h, w, 3), 250, np.uint8)
    y = 80
    img[y:y + 28, 100:100 + 420] = 20  # the title
    y += 70
    while y < h - 90:
        x = 70
        while x < w - 120:
            ww = int(rng.integers(18, 90))
            img[y:y + 12, x:x + ww] = int(rng.integers(0, 60))
            x += ww + int(rng.integers(8, 14))
        y += int(rng.integers(20, 26))
    return Image.fromarray(img, "RGB")


def question_of(family, name):
    kind = WORKLOAD[family][0]
    if kind == "grounding":
        return GROUNDING_Q.format(label=LABELS[name])
    if kind == "ocr" and name.startswith("page_"):
        return OCR_Q
    return None  # the case's own question


def write_cases(family, cases_dir):
    """The scene set: gpu_parity.py's images (PNG; the photo's JPEG bytes), a page for OCR."""
    from gpu_parity import CASES, make_image
    os.makedirs(cases_dir, exist_ok=True)
    out = []
    for i, (name, w, h, q, *src) in enumerate(CASES):
        if src:
            shutil.copyfile(os.path.join(HERE, "testdata", src[0]), os.path.join(cases_dir, name + ".jpg"))
            image = name + ".jpg"
        else:
            make_image(i, w, h).save(os.path.join(cases_dir, name + ".png"))
            image = name + ".png"
        out.append({"name": name, "image": image, "question": question_of(family, name) or q, "index": i})
    if WORKLOAD[family][0] == "ocr":
        page_image().save(os.path.join(cases_dir, "page_850x1100.png"))
        out.append({"name": "page_850x1100", "image": "page_850x1100.png", "question": OCR_Q, "index": len(out)})
    return out


# ---- random weights in the real layout


def kind(name, shape):
    """(scale, offset) of a tensor's uniform [-0.5, 0.5) draw, by what the tensor is."""
    low = name.lower()
    if len(shape) == 1 and ("norm" in low or "ln_" in low or ".ln" in low) and low.endswith("weight"):
        return 0.4, 1.0
    if low.endswith("bias"):
        return 0.2, 0.0
    if "pos_embed" in low or "position_embedding" in low or "rel_pos" in low or low.endswith("cls_token"):
        return 1.0, 0.0
    if low.endswith("embed_tokens.weight") or low.endswith("wte.weight"):
        return 2.0 * math.sqrt(3.0), 0.0
    if low.endswith("lm_head.weight"):
        return 8.0 * math.sqrt(3.0 / shape[-1]), 0.0  # logits of std ~4: clear greedy margins
    if len(shape) == 1:
        return 0.4, 0.0
    fan_in = int(np.prod(shape[1:]))
    return 2.0 * math.sqrt(3.0 / fan_in), 0.0  # unit variance through a product


def fill_random(model, seed, device):
    """Every parameter and persistent buffer of a model materialised on device (to_empty) and drawn."""
    g = torch.Generator(device=device).manual_seed(seed)
    seen = set()
    with torch.no_grad():
        for name, t in list(model.named_parameters()) + list(model.named_buffers()):
            if id(t) in seen or not t.is_floating_point():
                continue
            seen.add(id(t))
            scale, offset = kind(name, tuple(t.shape))
            u = torch.rand(t.shape, generator=g, device=device, dtype=torch.float32).sub_(0.5)
            t.copy_(u.mul_(scale).add_(offset).to(t.dtype))


def copy_files(src_dir, out, names, optional=()):
    for n in names:
        p = os.path.join(src_dir, n)
        if not os.path.exists(p):
            if n in optional:
                continue
            raise SystemExit(f"the tokenizer directory {src_dir} has no {n}")
        shutil.copyfile(os.path.realpath(p), os.path.join(out, n))


def checkpoint(args):
    with open(args.config) as f:
        cfg = json.load(f)
    cfg.pop("_comment", None)
    mt = cfg["model_type"]
    t0 = time.perf_counter()
    fam = ADAPTERS[mt]()
    model = fam.meta_model(cfg)
    model.to_empty(device=args.device)
    fill_random(model, args.seed, args.device)
    n = sum(p.numel() for p in model.parameters())
    if args.device == "cuda":
        torch.cuda.synchronize()
    t1 = time.perf_counter()
    os.makedirs(args.out, exist_ok=True)
    fam.save(model, cfg, args.out, args.tokenizer)
    t2 = time.perf_counter()
    size = sum(os.path.getsize(os.path.join(args.out, f)) for f in os.listdir(args.out))
    print(json.dumps({"model_type": mt, "params": n, "bytes": size, "init_s": round(t1 - t0, 1), "save_s": round(t2 - t1, 1),
                      "out": args.out}))


# ---- families


class Phi4:
    """transformers 5.17's Phi4MultimodalForCausalLM; the hub's processor (Phi4MultimodalImageProcessor's
    defaults), phi4_tokenizer.py's tokenizer and chat template; eager attention in the reference
    (on SDPA an unpadded image's tower turns causal, families.md section 11)."""

    def meta_model(self, cfg):
        from transformers import Phi4MultimodalConfig, Phi4MultimodalForCausalLM
        with torch.device("meta"):
            return Phi4MultimodalForCausalLM._from_config(Phi4MultimodalConfig(**cfg), dtype=torch.bfloat16)

    def save(self, model, cfg, out, tokenizer):
        from transformers import Phi4MultimodalImageProcessor
        model.save_pretrained(out)
        with open(os.path.join(out, "preprocessor_config.json"), "w") as f:
            f.write(Phi4MultimodalImageProcessor().to_json_string())
        with open(os.path.join(out, "generation_config.json"), "w") as f:
            json.dump({"bos_token_id": 199999, "eos_token_id": [200020, 199999], "pad_token_id": 199999, "do_sample": False}, f)
        copy_files(tokenizer, out, ["tokenizer.json", "tokenizer_config.json", "chat_template.jinja"])

    def load(self, model_dir, dtype, device):
        from transformers import (AutoTokenizer, Phi4MultimodalFeatureExtractor, Phi4MultimodalForCausalLM,
                                  Phi4MultimodalImageProcessor, Phi4MultimodalProcessor)
        with open(os.path.join(model_dir, "preprocessor_config.json")) as f:
            ipc = {k: v for k, v in json.load(f).items() if k not in ("image_processor_type", "processor_class")}
        self.proc = Phi4MultimodalProcessor(image_processor=Phi4MultimodalImageProcessor(**ipc),
                                            audio_processor=Phi4MultimodalFeatureExtractor(),
                                            tokenizer=AutoTokenizer.from_pretrained(model_dir),
                                            chat_template=open(os.path.join(model_dir, "chat_template.jinja")).read())
        self.model = Phi4MultimodalForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation="eager").to(device).eval()
        self.device = device

    def inputs(self, image, question):
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]}]
        prompt = self.proc.apply_chat_template(messages, add_generation_prompt=True)
        return self.proc(text=[prompt], images=[image], return_tensors="pt")

    def generate(self, x, n, scores=True):
        x = _to(x, self.device, self.model.dtype)
        with torch.no_grad():
            out = self.model.generate(**x, do_sample=False, num_beams=1, repetition_penalty=1.0, max_new_tokens=n,
                                      min_new_tokens=n, eos_token_id=None, pad_token_id=199999,
                                      output_logits=scores, return_dict_in_generate=True)
        k = x["input_ids"].shape[1]
        return out.sequences[0, k:].tolist(), [_margin(s[0]) for s in out.logits] if scores else []


class DeepseekOcr2:
    """transformers 5.17's DeepseekOcr2ForConditionalGeneration and DeepseekOcr2Processor (its
    image processor's defaults, the tokenizer of deepseek_ocr2_tokenizer.py), framed as the
    upstream run scripts do: "<image>\\n{question}", BOS from the tokenizer, no chat roles."""

    def meta_model(self, cfg):
        from transformers import DeepseekOcr2Config, DeepseekOcr2ForConditionalGeneration
        with torch.device("meta"):
            return DeepseekOcr2ForConditionalGeneration._from_config(DeepseekOcr2Config(**cfg), dtype=torch.bfloat16)

    def save(self, model, cfg, out, tokenizer):
        from transformers import DeepseekOcr2ImageProcessor
        model.save_pretrained(out)
        with open(os.path.join(out, "preprocessor_config.json"), "w") as f:
            json.dump(DeepseekOcr2ImageProcessor().to_dict(), f, indent=1)
        with open(os.path.join(out, "generation_config.json"), "w") as f:
            json.dump({"bos_token_id": 0, "eos_token_id": 1, "do_sample": False}, f)
        copy_files(tokenizer, out, ["tokenizer.json", "tokenizer_config.json"])

    def load(self, model_dir, dtype, device):
        from transformers import (AutoTokenizer, DeepseekOcr2ForConditionalGeneration, DeepseekOcr2ImageProcessor,
                                  DeepseekOcr2Processor)
        with open(os.path.join(model_dir, "preprocessor_config.json")) as f:
            ipc = {k: v for k, v in json.load(f).items() if k not in ("image_processor_type", "processor_class")}
        self.proc = DeepseekOcr2Processor(image_processor=DeepseekOcr2ImageProcessor(**ipc),
                                          tokenizer=AutoTokenizer.from_pretrained(model_dir))
        self.model = DeepseekOcr2ForConditionalGeneration.from_pretrained(model_dir, dtype=dtype).to(device).eval()
        self.device = device

    def inputs(self, image, question):
        return self.proc(images=[image], text="<image>\n" + question, return_tensors="pt")

    def generate(self, x, n, scores=True):
        x = _to(x, self.device, self.model.dtype)
        with torch.no_grad():
            out = self.model.generate(**x, do_sample=False, num_beams=1, repetition_penalty=1.0, max_new_tokens=n,
                                      min_new_tokens=n, eos_token_id=None, output_logits=scores, return_dict_in_generate=True)
        k = x["input_ids"].shape[1]
        return out.sequences[0, k:].tolist(), [_margin(s[0]) for s in out.logits] if scores else []


def _stub(name, force=False, **attrs):
    """An empty module for an import the image path never uses (documented per family), where the
    package is not installed, or always (force)."""
    import importlib.machinery
    import importlib.util
    import types
    if not force and (name in sys.modules or importlib.util.find_spec(name) is not None):
        return
    m = types.ModuleType(name)
    m.__spec__ = importlib.machinery.ModuleSpec(name, None)  # (transformers' availability checks call find_spec)
    for k, v in attrs.items():
        setattr(m, k, v)
    sys.modules[name] = m


class LocateAnything:
    """LocateAnything-3B's remote-code export (NVlabs/Eagle 783f656d, .build/locany) in transformers
    4.57.1, loaded as make_sweep_locateanything.py loads it; framed as golden_served_locateanything.py
    frames it (chat_template.json, then the processor's replace_media_placeholder, the tokenizer of
    locateanything_tokenizer.py); generate() in the official slow mode, temperature 0, repetition
    penalty 1.0, <|im_end|> not stopping. Shims beside make_sweep_locateanything.py's (decord): where
    they are not installed, processing_locateanything.py's module-level imports of lmdb and cv2
    (video and dataset paths) are empty modules, and modeling_locateanything.py's of peft (LoRA,
    off in this config) always is, so that the device carries only transformers 4.57.1 and its
    tokenizers."""

    PREPROCESSOR = {"auto_map": {"AutoImageProcessor": "image_processing_locateanything.LocateAnythingImageProcessor",
                                 "AutoProcessor": "processing_locateanything.LocateAnythingProcessor"},
                    "image_processor_type": "LocateAnythingImageProcessor", "merge_kernel_size": [2, 2],
                    "in_token_limit": 25600}

    def official(self):
        _stub("lmdb")
        _stub("cv2")

        def no_lora(*a, **k):
            raise SystemExit("LoRA is off in LocateAnything-3B's config: the peft stub has none")
        # always: a peft built for the machine's transformers 5 may not import over 4.57.1
        _stub("peft", force=True, LoraConfig=no_lora, get_peft_model=no_lora)
        import make_sweep_locateanything as sweep
        self.sweep = sweep
        return sweep.load_official()

    def config(self, cfg):
        cfgm, _ = self.official()
        return cfgm.LocateAnythingConfig(**cfg)

    def meta_model(self, cfg):
        _, modm = self.official()
        config = self.config(cfg)
        with torch.device("meta"):
            return modm.LocateAnythingForConditionalGeneration(config).to(torch.bfloat16)

    def save(self, model, cfg, out, tokenizer):
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        save_shards(state, out)
        with open(os.path.join(out, "config.json"), "w") as f:
            json.dump(dict(cfg, torch_dtype="bfloat16"), f, indent=1)
        with open(os.path.join(out, "preprocessor_config.json"), "w") as f:
            json.dump(self.PREPROCESSOR, f, indent=1)
        with open(os.path.join(out, "generation_config.json"), "w") as f:
            json.dump({"eos_token_id": 151645, "pad_token_id": 151643}, f)
        copy_files(tokenizer, out, ["tokenizer.json", "tokenizer_config.json"])

    def load(self, model_dir, dtype, device):
        cfgm, modm = self.official()
        ipm = __import__("locany.image_processing_locateanything", fromlist=["x"])
        self.prm = __import__("locany.processing_locateanything", fromlist=["x"])
        from transformers import AutoTokenizer
        from transformers.utils.chat_template_utils import _compile_jinja_template
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = json.load(f)
        cfg.pop("torch_dtype", None)
        cfg.pop("_comment", None)
        config = cfgm.LocateAnythingConfig(**cfg)
        with torch.device(device):
            model = modm.LocateAnythingForConditionalGeneration(config)
        state = load_shards(model_dir, device)
        missing, unexpected = model.load_state_dict(state, strict=False)
        if unexpected or missing:
            raise SystemExit(f"loading {model_dir}: missing {missing[:4]}, unexpected {unexpected[:4]}")
        self.model = model.to(dtype).eval()
        if device == "cpu" and dtype == torch.float32:  # (its recomputation is a float32 table on the host)
            self.sweep.check_rotary(self.model)
        self.tok = AutoTokenizer.from_pretrained(model_dir)
        self.tmpl = _compile_jinja_template(json.load(open(os.path.join(self.sweep.SRC, "chat_template.json")))["chat_template"])
        with open(os.path.join(model_dir, "preprocessor_config.json")) as f:
            pc = json.load(f)
        ip = ipm.LocateAnythingImageProcessor(in_token_limit=pc["in_token_limit"], merge_kernel_size=pc["merge_kernel_size"])
        import types
        self.proc = types.SimpleNamespace(image_processor=ip, image_placeholder="image", video_placeholder="video",
                                          image_start_token="<img>", image_end_token="</img>", image_token="<IMG_CONTEXT>")
        self.device = device

    def inputs(self, image, question):
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]}]
        text = self.tmpl.render(messages=messages, add_generation_prompt=True)
        text, pv, grids, _, _ = self.prm.LocateAnythingProcessor.replace_media_placeholder(
            self.proc, text, [image], [], None, None, images_kwargs={})
        ids = self.tok(text, add_special_tokens=False)["input_ids"]
        gh, gw = (int(v) for v in grids[0])
        return {"input_ids": torch.tensor([ids]), "pixel_values": pv.reshape(-1, 3, 14, 14),
                "image_grid_hws": np.array([[gh, gw]])}

    def generate(self, x, n, scores=True):
        m, sw = self.model, self.sweep
        ids = x["input_ids"].to(self.device)
        pv = x["pixel_values"].to(self.device)
        saved = m.token_ids["im_end_token_id"]
        m.token_ids["im_end_token_id"] = -1  # the stop switched off: n tokens
        try:
            with torch.no_grad():
                tokens = m.generate(pixel_values=pv, input_ids=ids, image_grid_hws=x["image_grid_hws"],
                                    tokenizer=sw.IdsTokenizer(), use_cache=True, max_new_tokens=n,
                                    generation_mode="slow", temperature=0, repetition_penalty=1.0)
        finally:
            m.token_ids["im_end_token_id"] = saved
        tokens = [int(t) for t in tokens]
        if not scores:
            return tokens, []
        # the margins: the language model's logits on the prompt and the answer, one pass
        hw = torch.tensor(x["image_grid_hws"], dtype=torch.int32, device=self.device)
        with torch.no_grad():
            vit = m.mlp1(torch.cat(m.extract_feature(pv.to(m.language_model.dtype), hw), dim=0))
            full = torch.cat([ids, torch.tensor([tokens], device=self.device)], 1)
            lg = m.language_model(input_ids=full, visual_features=vit, image_token_index=sw.IMG_CONTEXT,
                                  use_cache=False).logits[0]
        k = ids.shape[1]
        margins = []
        for i in range(len(tokens)):
            top = torch.topk(lg[k - 1 + i].float(), 2)
            if int(top.indices[0]) != tokens[i]:
                raise SystemExit(f"step {i}: generate chose {tokens[i]}, the logits' argmax is {int(top.indices[0])}")
            margins.append(float(top.values[0] - top.values[1]))
        return tokens, margins


class Lance:
    """Lance-3B's official code (bytedance/Lance 4baeee08, .build/lance-src or LANCE_SRC) in
    transformers 4.49 with golden_lance.py's shims (cv2 and decord empty, flash_attn as float32
    attention with flash-attn's alignment, qwen2_navit's bf16 cast made the activations' dtype,
    torch.randint at its lower bound in RandomResizedCrop): ValidationDataset.x2t_sample frames and
    preprocesses (image_512res, an empty system turn), validation_und_KVcache generates greedily
    with the vocabulary mask, EOS never stopping. The checkpoint is golden_lance.lance_model's
    model (the understanding path and the tower; the generation expert left out) with the config
    Iris reads (lance_3b.json's keys)."""

    def official(self):
        import golden_lance as gl
        if not getattr(self, "gl", None):
            gl.check_sources()
            gl.install_shims()
            gl.flash_attn_shim()
            gl.load_navit()
            self.gl = gl
        return gl

    @staticmethod
    def dims(cfg):
        v = cfg["vision_config"]
        heads = cfg["num_attention_heads"]
        text = (cfg["num_hidden_layers"], heads, cfg["num_key_value_heads"], cfg["hidden_size"] // heads,
                cfg["intermediate_size"], cfg["rope_scaling"]["mrope_section"], cfg["rope_theta"])
        vision = (v["depth"], v["num_heads"], v["hidden_size"] // v["num_heads"], v["intermediate_size"], v["window_size"],
                  v["fullatt_block_indexes"])
        return text, vision

    def meta_model(self, cfg):
        gl = self.official()
        text, vision = self.dims(cfg)
        with torch.device("meta"):
            model, _, _ = gl.lance_model(text, vision, None)
        return model.to(torch.bfloat16)

    def save(self, model, cfg, out, tokenizer):
        state = {k: v.contiguous() for k, v in model.state_dict().items() if "_moe_gen" not in k}
        save_shards(state, out)
        with open(os.path.join(out, "config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
        with open(os.path.join(out, "preprocessor_config.json"), "w") as f:
            json.dump({}, f)
        with open(os.path.join(out, "generation_config.json"), "w") as f:
            json.dump({"eos_token_id": 151645, "pad_token_id": 151643}, f)
        copy_files(tokenizer, out, ["tokenizer.json", "tokenizer_config.json"])

    def load(self, model_dir, dtype, device):
        gl = self.official()
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = json.load(f)
        text, vision = self.dims(cfg)
        with torch.device(device):
            model, _, _ = gl.lance_model(text, vision, None)
        state = load_shards(model_dir, device)
        missing, unexpected = model.load_state_dict(state, strict=False)
        if unexpected or [k for k in missing if "_moe_gen" not in k]:
            raise SystemExit(f"loading {model_dir}: missing {missing[:4]}, unexpected {unexpected[:4]}")
        self.model = model.to(dtype).eval()
        self.dtype, self.device = dtype, device
        self.tok, self.new_ids = gl.load_tokenizer()

    def inputs(self, image, question):
        import tempfile
        f = os.path.join(tempfile.mkdtemp(), "image.png")
        image.save(f)  # x2t_sample reads a file (Lance's loader); PNG keeps the pixels
        r = self.gl.x2t(self.tok, self.new_ids, f, question, "")
        return {"input_ids": torch.tensor([r["ids"]]), "r": r}

    def generate(self, x, n, scores=True):
        gl, r = self.gl, x["r"]
        gl.MAX_NEW_TOKENS = n
        no_eos = dict(self.new_ids, eos_token_id=-1)
        tokens, steps = gl.run_case(self.model, {"input_ids": r["ids"], "bidirectional": r["span"]}, r["grid"],
                                    r["pv"].to(self.device, self.dtype), no_eos, device=self.device, dtype=self.dtype)
        return tokens, [_margin(st) for st in steps] if scores else []


def save_shards(state, out, shard_bytes=4 << 30):
    """safetensors shards of at most shard_bytes and their index, as save_pretrained writes them."""
    from safetensors.torch import save_file
    shards, cur, size = [], {}, 0
    for k in sorted(state):
        b = state[k].numel() * state[k].element_size()
        if cur and size + b > shard_bytes:
            shards.append(cur)
            cur, size = {}, 0
        cur[k] = state[k]
        size += b
    shards.append(cur)
    if len(shards) == 1:
        save_file(shards[0], os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
        return
    index, total = {}, 0
    for i, sh in enumerate(shards):
        name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(sh, os.path.join(out, name), metadata={"format": "pt"})
        for k, v in sh.items():
            index[k] = name
            total += v.numel() * v.element_size()
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": index}, f, indent=1)


def load_shards(model_dir, device):
    from safetensors.torch import load_file
    files = sorted(f for f in os.listdir(model_dir) if f.endswith(".safetensors"))
    state = {}
    for f in files:
        state.update(load_file(os.path.join(model_dir, f), device=device))
    return state


class HFFamily:
    """The transformers-class families of gpu_family.py (Qwen2.5-VL, Qwen3-VL, InternVL3): their
    AutoProcessor (the checkpoint's processor files and chat template) and model class, SDPA; used
    by the qualification's transformers column (corpus)."""

    def load(self, model_dir, dtype, device):
        import gpu_family
        from transformers import AutoProcessor
        self.proc = AutoProcessor.from_pretrained(model_dir)
        self.model = gpu_family.load_model(model_dir, dtype, device)
        self.pad = gpu_family.generation_config(gpu_family.model_type(model_dir))["pad_token_id"]
        self.device = device

    def inputs(self, image, question):
        import gpu_family
        prompt = self.proc.apply_chat_template(gpu_family.messages(question), add_generation_prompt=True)
        return self.proc(text=[prompt], images=[image], return_tensors="pt")

    def generate(self, x, n, scores=True):
        x = _to(x, self.device, self.model.dtype)
        with torch.no_grad():
            out = self.model.generate(**x, do_sample=False, num_beams=1, repetition_penalty=1.0, max_new_tokens=n,
                                      min_new_tokens=n, eos_token_id=None, pad_token_id=self.pad,
                                      output_logits=scores, return_dict_in_generate=True)
        k = x["input_ids"].shape[1]
        return out.sequences[0, k:].tolist(), [_margin(s[0]) for s in out.logits] if scores else []


def _to(x, device, dtype):
    """The processor's tensors on device, floating ones (pixels) in the model's dtype."""
    return {k: v.to(device, dtype) if v.is_floating_point() else v.to(device) for k, v in x.items()}


def _margin(logits):
    top = torch.topk(logits.float(), 2).values
    return float(top[0] - top[1])


ADAPTERS = {"phi4_multimodal": Phi4, "deepseek_ocr2": DeepseekOcr2, "locateanything": LocateAnything, "lance": Lance,
            "qwen2_5_vl": HFFamily, "qwen3_vl": HFFamily, "internvl": HFFamily}


# ---- the reference and the baseline


def reference(args):
    mt = family_of(args.model)
    fam = ADAPTERS[mt]()
    cases = write_cases(mt, args.cases)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    t = time.perf_counter()
    fam.load(args.model, torch.float32, args.device)
    print(f"fp32\tloaded in {time.perf_counter() - t:.1f} s", flush=True)
    kept, rows = [], []
    for c in cases:
        image = Image.open(os.path.join(args.cases, c["image"])).convert("RGB")
        x = fam.inputs(image, c["question"])
        n = int(x["input_ids"].shape[1])
        if n + args.new > args.context:
            print(f"fp32\t{c['name']}\tprompt {n}: past the context {args.context} with {args.new} new tokens: left out", flush=True)
            continue
        t = time.perf_counter()
        tokens, margins = fam.generate(x, args.new)
        ms = (time.perf_counter() - t) * 1e3
        print(f"fp32\t{c['name']}\tprompt {n}\t{ms:.0f} ms\tmin margin {min(margins):.4f}\t{tokens[:8]}", flush=True)
        kept.append({"image": c["image"], "question": c["question"], "answer": "", "type": mt, "index": c["index"]})
        rows.append({"index": c["index"], "question": c["question"], "got": "", "tokens": tokens, "case": c["name"],
                     "prompt_tokens": n, "min_margin": min(margins), "generate_ms": round(ms, 2)})
    with open(os.path.join(args.cases, "scenes.jsonl"), "w") as f:
        f.writelines(json.dumps(s) + "\n" for s in kept)
    with open(args.out, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    import transformers
    print(json.dumps({"reference": mt, "cases": len(rows), "new_tokens": args.new, "transformers": transformers.__version__,
                      "torch": torch.__version__, "semantics": "fp32, TF32 off, greedy, EOS never stops"}))
    if len(rows) < 8:
        raise SystemExit(f"{len(rows)} cases fit the context: fewer than 8")


def pct(v, p):
    s = sorted(v)
    return s[max(0, min(len(s) - 1, int(np.ceil(p / 100 * len(s))) - 1))]


def baseline(args):
    mt = family_of(args.model)
    fam = ADAPTERS[mt]()
    cases = {c["name"]: c for c in write_cases(mt, args.cases)}
    c = cases[args.case]
    image = Image.open(os.path.join(args.cases, c["image"])).convert("RGB")
    dev = args.device
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    t = time.perf_counter()
    fam.load(args.model, torch.bfloat16, dev)
    out = {"model_type": mt, "case": c["name"], "question": c["question"], "load_s": round(time.perf_counter() - t, 1),
           "gpu": torch.cuda.get_device_name(0) if dev == "cuda" else "cpu"}
    times = []
    for _ in range(5):
        t = time.perf_counter()
        x = fam.inputs(image, c["question"])
        times.append((time.perf_counter() - t) * 1e3)
    out["processor_ms"] = round(statistics.median(times), 2)
    out["prompt_tokens"] = int(x["input_ids"].shape[1])

    def timed(n):
        sync()
        t = time.perf_counter()
        fam.generate(x, n, scores=False)
        sync()
        return (time.perf_counter() - t) * 1e3

    ns = [int(v) for v in args.tokens.split(",")]
    t = time.perf_counter()
    for _ in range(2):
        timed(ns[0])
    out["warmup_s"] = round(time.perf_counter() - t, 1)
    lat = {1: [timed(1) for _ in range(args.runs)]}
    out["ttft_ms"] = round(pct(lat[1], 50), 2)
    for n in ns:
        lat[n] = [timed(n) for _ in range(args.runs)]
        out[f"c1_{n}tok"] = {"p50_ms": round(pct(lat[n], 50), 2), "p95_ms": round(pct(lat[n], 95), 2)}
    last = ns[-1]
    out["tpot_ms"] = round((pct(lat[last], 50) - pct(lat[1], 50)) / max(1, last - 1), 3)
    print(json.dumps(out), flush=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


def corpus(args):
    """The qualification's transformers column: generate() in bf16 on each row of an AIPerf
    single_turn corpus (its data-URI image and question), max tokens new tokens each (EOS not
    stopping), one request at a time after one warm-up; per row the time of the processor and of
    generate() (the task), and the prompt's length. Stops starting rows after --seconds."""
    import base64
    import io
    mt = family_of(args.model)
    fam = ADAPTERS[mt]()
    dev = args.device
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    rows = [json.loads(l) for l in open(args.input) if l.strip()]
    t = time.perf_counter()
    fam.load(args.model, torch.bfloat16, dev)
    out = {"model_type": mt, "load_s": round(time.perf_counter() - t, 1), "max_tokens": args.max_tokens,
           "device": torch.cuda.get_device_name(0) if dev == "cuda" else "cpu",
           "transformers": __import__("transformers").__version__, "torch": torch.__version__, "rows": []}

    def image_of(row):
        return Image.open(io.BytesIO(base64.b64decode(row["image"].split(",", 1)[1]))).convert("RGB")

    def task(row):
        sync()
        t0 = time.perf_counter()
        x = fam.inputs(image_of(row), row["text"])
        t1 = time.perf_counter()
        tokens, _ = fam.generate(x, args.max_tokens, scores=False)
        sync()
        t2 = time.perf_counter()
        return {"session_id": row.get("session_id"), "prompt_tokens": int(x["input_ids"].shape[1]), "tokens": len(tokens),
                "processor_ms": round((t1 - t0) * 1e3, 2), "task_ms": round((t2 - t0) * 1e3, 2)}

    task(rows[0])  # warm-up
    t_end = time.perf_counter() + args.seconds
    for row in rows:
        if time.perf_counter() > t_end:
            break
        out["rows"].append(task(row))
    ms = [r["task_ms"] for r in out["rows"]]
    out["task_p50_ms"] = round(statistics.median(ms), 2) if ms else None
    out["task_p95_ms"] = round(pct(ms, 95), 2) if ms else None
    print(json.dumps({k: v for k, v in out.items() if k != "rows"}), flush=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("checkpoint")
    a.add_argument("--config", required=True)
    a.add_argument("--out", required=True)
    a.add_argument("--tokenizer", required=True)
    a.add_argument("--seed", type=int, default=1234)
    a.add_argument("--device", default="cuda")
    a.set_defaults(fn=checkpoint)
    r = sub.add_parser("reference")
    r.add_argument("--model", required=True)
    r.add_argument("--cases", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--new", type=int, default=32)
    r.add_argument("--context", type=int, default=4096, help="the bundle's context: longer cases are left out")
    r.add_argument("--device", default="cuda")
    r.set_defaults(fn=reference)
    b = sub.add_parser("baseline")
    b.add_argument("--model", required=True)
    b.add_argument("--cases", required=True)
    b.add_argument("--case", default="photo_426x320")
    b.add_argument("--tokens", default="3,10")
    b.add_argument("--runs", type=int, default=8)
    b.add_argument("--out", required=True)
    b.add_argument("--device", default="cuda")
    b.set_defaults(fn=baseline)
    c = sub.add_parser("corpus")
    c.add_argument("--model", required=True)
    c.add_argument("--input", required=True, help="an AIPerf single_turn JSONL (data-URI images)")
    c.add_argument("--max-tokens", type=int, default=10)
    c.add_argument("--seconds", type=float, default=90, help="start no row after this long")
    c.add_argument("--out", required=True)
    c.add_argument("--device", default="cuda")
    c.set_defaults(fn=corpus)
    args = ap.parse_args()
    torch.set_num_threads(max(1, min(16, os.cpu_count() or 1)))
    args.fn(args)


if __name__ == "__main__":
    main()
