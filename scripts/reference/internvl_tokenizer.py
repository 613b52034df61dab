"""Writes an InternVL3-hf-style tokenizer directory from the real Qwen tokenizer files.

OpenGVLab/InternVL3-{2B,8B}-hf ship Qwen2.5's byte-level BPE (the same 151,643 entries and merges
as the Qwen3 files `just setup` fetches, scripts/fetch-tokenizer.sh) with Qwen2.5's 22 added tokens
(151643 <|endoftext|> .. 151664 <|file_sep|>) followed by InternVL's nine special tokens:
<img> 151665, </img> 151666, <IMG_CONTEXT> 151667, <quad> .. </box> up to 151673 (vocab 151674).
transformers' convert_internvl_weights_to_hf.py builds it from Qwen2.5-VL's tokenizer the same
way, and names the image tokens in extra_special_tokens (start_image_token, end_image_token,
context_image_token, video_token), which InternVLProcessor reads; the -hf chat template renders an
image part as "<IMG_CONTEXT>\\n", no default system turn.

So this script takes .build/tokenizer/qwen3, drops Qwen3's four extra added tokens (151665..151668:
<tool_response>, </tool_response>, <think>, </think>), appends InternVL's nine, and writes
tokenizer.json, tokenizer_config.json and chat_template.jinja to .build/tokenizer/internvl3 (or
--out). The standard library is enough: `just setup` runs it with the system python3, and the
plugin goldens, the family's checkpoints and the served bundles reuse the directory.
"""

import argparse
import hashlib
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SRC = ROOT / ".build/tokenizer/qwen3"
OUT = ROOT / ".build/tokenizer/internvl3"

# The last of Qwen2.5's added tokens; Qwen3's files add four more after it.
QWEN25_LAST_ID = 151664
# InternVL's special tokens, in id order from 151665 (convert_internvl_weights_to_hf.py's
# additional_special_tokens).
INTERNVL_TOKENS = ["<img>", "</img>", "<IMG_CONTEXT>", "<quad>", "</quad>", "<ref>", "</ref>", "<box>", "</box>"]
# Qwen2.5-VL's tokenizer_config additional_special_tokens, then InternVL's.
QWEN25_SPECIAL = ["<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
                  "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
                  "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]
EXTRA_SPECIAL = {"start_image_token": "<img>", "end_image_token": "</img>",
                 "context_image_token": "<IMG_CONTEXT>", "video_token": "<video>"}
# The conversion sets model_max_length to its CONTEXT_LENGTH.
CONTEXT_LENGTH = 8192

# The -hf chat template: every message as <|im_start|>role\n...<|im_end|>\n, an image part as
# "<IMG_CONTEXT>\n" (InternVLProcessor expands it to <img> + <IMG_CONTEXT> x 256 per tile + </img>),
# text parts verbatim, no default system turn.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\\n'}}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' %}{{ '<IMG_CONTEXT>\\n' }}"
    "{% elif content['type'] == 'video' %}{{ '<video>\\n' }}"
    "{% elif content['type'] == 'text' %}{{ content['text'] }}"
    "{% endif %}{% endfor %}{% endif %}"
    "{{'<|im_end|>\\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{'<|im_start|>assistant\\n' }}{% endif %}"
)


def added(token_id, content, special=True):
    return {"id": token_id, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": special}


def convert(src, out):
    tok = json.loads((src / "tokenizer.json").read_text(encoding="utf-8"))
    cfg = json.loads((src / "tokenizer_config.json").read_text(encoding="utf-8"))
    vocab = tok["model"]["vocab"]
    if len(vocab) != 151643 or max(vocab.values()) != 151642:
        raise SystemExit(f"{src}: expected the Qwen BPE vocabulary of 151643 entries, got {len(vocab)}")
    keep = [a for a in tok["added_tokens"] if a["id"] <= QWEN25_LAST_ID]
    if [a["id"] for a in keep] != list(range(151643, QWEN25_LAST_ID + 1)) or keep[-1]["content"] != "<|file_sep|>":
        raise SystemExit(f"{src}: the added tokens are not Qwen2.5's 151643..151664")
    tok["added_tokens"] = keep + [added(QWEN25_LAST_ID + 1 + i, t) for i, t in enumerate(INTERNVL_TOKENS)]

    decoder = {k: v for k, v in cfg["added_tokens_decoder"].items() if int(k) <= QWEN25_LAST_ID}
    for a in tok["added_tokens"][len(keep):]:
        decoder[str(a["id"])] = {k: a[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word",
                                                   "special")}
    cfg = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "additional_special_tokens": QWEN25_SPECIAL + INTERNVL_TOKENS,
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "extra_special_tokens": EXTRA_SPECIAL,
        "model_max_length": CONTEXT_LENGTH,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "tokenizer.json": json.dumps(tok, ensure_ascii=False, indent=2) + "\n",
        "tokenizer_config.json": json.dumps(cfg, ensure_ascii=False, indent=2) + "\n",
        "chat_template.jinja": CHAT_TEMPLATE,
    }
    for name, text in files.items():
        path = out / name
        data = text.encode("utf-8")
        if not path.exists() or path.read_bytes() != data:
            path.write_bytes(data)
        print(f"{hashlib.sha256(data).hexdigest()}  {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}",
              file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", type=pathlib.Path, default=SRC, help="the Qwen tokenizer directory (just setup)")
    ap.add_argument("--out", type=pathlib.Path, default=OUT, help="where to write the InternVL3-hf tokenizer")
    args = ap.parse_args()
    convert(args.src, args.out)


if __name__ == "__main__":
    main()
