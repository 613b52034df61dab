"""Writes LocateAnything-3B's tokenizer directory from the real Qwen tokenizer files.

nvidia/LocateAnything-3B's decoder is Qwen2.5-3B-Instruct with an extended vocabulary (152,681
embedding rows): Qwen2.5's byte-level BPE (the same 151,643 entries and merges as the Qwen3 files
`just setup` fetches, scripts/fetch-tokenizer.sh) with Qwen2.5's 22 added tokens (151643
<|endoftext|> .. 151664 <|file_sep|>), then the checkpoint's own. The hub's tokenizer files are not
reachable from here; each id below rests on a public source:

- <IMG_CONTEXT> 151665: config.json's image_token_index as locate-anything.cpp (mudler, MIT)
  asserts it against the checkpoint's added_tokens.json (scripts/la_reference.py,
  tests/test_tokenizer.cpp), and TRTMC's LocateAnything plugin's default;
- <img> 151666, </img> 151667: the released checkpoint's added_tokens.json as a public Rust port's
  tests read it (resolves_the_image_framing_tokens_from_added_tokens);
- <box> 151668, </box> 151669, <ref> 151672, </ref> 151673, <0> 151677 .. <1000> 152677: the remote
  code's LocateAnythingConfig defaults (configuration_locateanything.py, NVlabs/Eagle 783f656d),
  locate-anything.cpp's tests, and a public LocateAnything preflight script's EXPECTED_TOKEN_IDS;
- <text_mask> 151676, <null> 152678, <switch> 152679: that preflight script, and the remote code's
  generate_utils.get_token_ids_from_config defaults (text_mask_token_id, null_token_id,
  switch_token_id).

Unconfirmed: the tokens at 151670, 151671, 151674, 151675 and 152680 (the embedding has rows for
them; InternVL's vocabulary suggests <quad> and </quad> for one pair, but no source here says).
The tokenizers library numbers added tokens one after another whatever ids tokenizer.json gives
them, so the four inside the range stand as special placeholders, <|unconfirmed_151670|> and so
on, which keep every later id where the checkpoint has it; no text spells them. 152680, after the
last, is left out.

Special or not: <IMG_CONTEXT>, <img>, </img> and <text_mask> are special (never in an answer);
the grounding tokens (<box>, </box>, <ref>, </ref>, <0>..<1000>, <null>, <switch>) are not, so that
an answer decoded with special tokens skipped keeps them, as the official decode (which keeps
every token: skip_special_tokens=False) does; the runtime reads the boxes out of the same ids.

Writes tokenizer.json and tokenizer_config.json to .build/tokenizer/locateanything (or --out). The
standard library is enough: `just setup` runs it with the system python3.
"""

import argparse
import hashlib
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SRC = ROOT / ".build/tokenizer/qwen3"
OUT = ROOT / ".build/tokenizer/locateanything"

QWEN25_LAST_ID = 151664
# (id, content, special)
LOCATEANYTHING_TOKENS = (
    [(151665, "<IMG_CONTEXT>", True), (151666, "<img>", True), (151667, "</img>", True),
     (151668, "<box>", False), (151669, "</box>", False), (151670, "<|unconfirmed_151670|>", True),
     (151671, "<|unconfirmed_151671|>", True), (151672, "<ref>", False), (151673, "</ref>", False),
     (151674, "<|unconfirmed_151674|>", True), (151675, "<|unconfirmed_151675|>", True), (151676, "<text_mask>", True)]
    + [(151677 + k, f"<{k}>", False) for k in range(1001)]
    + [(152678, "<null>", False), (152679, "<switch>", False)]
)
QWEN25_SPECIAL = ["<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
                  "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
                  "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]
CONTEXT_LENGTH = 32768


def added(token_id, content, special):
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
    if [i for i, _, _ in LOCATEANYTHING_TOKENS] != list(range(QWEN25_LAST_ID + 1, 152680)):
        raise SystemExit("the added tokens must follow one another: the tokenizers library renumbers gaps")
    tok["added_tokens"] = keep + [added(i, c, s) for i, c, s in LOCATEANYTHING_TOKENS]

    decoder = {k: v for k, v in cfg["added_tokens_decoder"].items() if int(k) <= QWEN25_LAST_ID}
    for a in tok["added_tokens"][len(keep):]:
        decoder[str(a["id"])] = {k: a[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word",
                                                   "special")}
    cfg = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "additional_special_tokens": QWEN25_SPECIAL + [c for _, c, s in LOCATEANYTHING_TOKENS if s],
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
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
    ap.add_argument("--out", type=pathlib.Path, default=OUT, help="where to write LocateAnything's tokenizer")
    args = ap.parse_args()
    convert(args.src, args.out)


if __name__ == "__main__":
    main()
