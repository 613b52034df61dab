"""What the GPU scripts (gpu_checkpoint.py, gpu_parity.py, gpu_baseline.py) know per model family.

A checkpoint directory names its family by config.json's model_type; these helpers give the
transformers classes of that family and the files a random-weight checkpoint of it needs beside
its weights (processor settings, chat template), as the hub checkpoints have them.
"""

import json
import os

import transformers

import golden_internvl
from plugin_cases import QWEN3_VL_TEMPLATE

HERE = os.path.dirname(os.path.abspath(__file__))

# model_type -> (config class, model class)
CLASSES = {
    "qwen2_5_vl": ("Qwen2_5_VLConfig", "Qwen2_5_VLForConditionalGeneration"),
    "qwen3_vl": ("Qwen3VLConfig", "Qwen3VLForConditionalGeneration"),
    "internvl": ("InternVLConfig", "InternVLForConditionalGeneration"),
}

# Qwen/Qwen3-VL-*-Instruct's preprocessor_config.json (families.md §2.3): Qwen2VLImageProcessor
# with factor 32 (patch 16, merge 2), mean = std = 0.5, bicubic.
QWEN3_VL_PREPROCESSOR = {
    "size": {"shortest_edge": 65536, "longest_edge": 16777216},
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "resample": 3,
    "do_resize": True,
    "do_rescale": True,
    "rescale_factor": 1 / 255,
    "do_normalize": True,
    "do_convert_rgb": True,
    "image_processor_type": "Qwen2VLImageProcessorFast",
    "processor_class": "Qwen3VLProcessor",
}

# OpenGVLab/InternVL3-*-hf's preprocessor_config.json (golden_internvl.py has it, from
# convert_internvl_weights_to_hf.py; families.md §3.3): GotOcr2 tiles of 448x448, ImageNet
# statistics, bicubic, 1 to 12 tiles (InternVLProcessor forces crop_to_patches on).
INTERNVL_PREPROCESSOR = golden_internvl.PREPROCESSOR

# greedy, no penalty, both stop ids (families.md §0.3-6, §2.4); the same for both Qwen families
GENERATION_CONFIG = {"bos_token_id": 151643, "pad_token_id": 151643, "eos_token_id": [151645, 151643], "do_sample": False}
# InternVL3: the conversion forces eos 151645 (<|im_end|>) alone (families.md §3.4)
GENERATION_CONFIGS = {"internvl": {"bos_token_id": 151643, "pad_token_id": 151643, "eos_token_id": 151645, "do_sample": False}}

IMAGE_TOKEN_ID = 151655
# the image placeholder token of each family (<|image_pad|> for both Qwen families)
IMAGE_TOKEN_IDS = {"internvl": 151667}


def generation_config(mt):
    return GENERATION_CONFIGS.get(mt, GENERATION_CONFIG)


def image_token_id(mt):
    return IMAGE_TOKEN_IDS.get(mt, IMAGE_TOKEN_ID)


def randomize(mt, model, seed):
    """Random values for the parameters transformers initialises to constants, where parity should
    see them: InternVL's CLS token and position embeddings (zeros) and LayerScale (0.1)."""
    if mt != "internvl":
        return
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("embeddings.cls_token", "embeddings.position_embeddings")):
                p.copy_(torch.randn(p.shape, generator=g).mul_(0.02).to(p.dtype))
            elif name.endswith(("lambda_1", "lambda_2")):
                p.copy_(torch.rand(p.shape, generator=g).mul_(0.1).add_(0.05).to(p.dtype))


def model_type(path):
    """model_type of a config.json file or of a checkpoint directory."""
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    with open(path) as f:
        return json.load(f)["model_type"]


def classes(mt):
    if mt not in CLASSES:
        raise SystemExit(f"model_type {mt!r}: these scripts know {sorted(CLASSES)}")
    cfg, model = CLASSES[mt]
    return getattr(transformers, cfg), getattr(transformers, model)


def model_class(model_dir):
    return classes(model_type(model_dir))[1]


def write_processor_files(mt, out, template_dir=None):
    """The processor and chat-template files of a family into the checkpoint directory out.

    qwen2_5_vl copies them from template_dir (the committed tiny fixture holds the hub's);
    qwen3_vl writes the hub's preprocessor settings and its chat template, which has no default
    system turn (only the system/user part of the hub template: a one-turn image request renders
    the same; plugin_cases.py checks the plugin against it); internvl writes the preprocessor
    settings (its chat template is in the tokenizer directory, scripts/reference/internvl_tokenizer.py).
    """
    if mt == "internvl":  # the chat template came with the tokenizer directory
        with open(os.path.join(out, "preprocessor_config.json"), "w") as f:
            json.dump(INTERNVL_PREPROCESSOR, f, indent=2)
        return
    if mt == "qwen3_vl":
        with open(os.path.join(out, "preprocessor_config.json"), "w") as f:
            json.dump(QWEN3_VL_PREPROCESSOR, f, indent=2)
        with open(os.path.join(out, "chat_template.json"), "w") as f:
            json.dump({"chat_template": QWEN3_VL_TEMPLATE}, f, indent=2)
        return
    if not template_dir:
        raise SystemExit(f"{mt}: --template (a dir with chat_template.json and preprocessor_config.json) is required")
    import shutil

    for name in ("chat_template.json", "chat_template.jinja", "preprocessor_config.json"):
        src = os.path.join(template_dir, name)
        if os.path.exists(src):
            shutil.copyfile(src, os.path.join(out, name))


def messages(question, text_first=False):
    """The one-turn image request of a case, image first unless text_first."""
    parts = [{"type": "image"}, {"type": "text", "text": question}]
    if text_first:
        parts.reverse()
    return [{"role": "user", "content": parts}]


def load_model(model_dir, dtype, device):
    """The checkpoint's model in dtype with SDPA attention, in eval mode, on device: loaded straight
    onto a GPU (device_map, which needs accelerate), else on the host and moved."""
    cls = model_class(model_dir)
    if device != "cpu":
        try:
            return cls.from_pretrained(model_dir, dtype=dtype, attn_implementation="sdpa", device_map=device).eval()
        except (ImportError, ValueError) as e:  # no accelerate
            print(f"loading through the host ({e.__class__.__name__}: {str(e)[:80]})", flush=True)
    return cls.from_pretrained(model_dir, dtype=dtype, attn_implementation="sdpa").to(device).eval()
