"""Golden token ids for core/internal/tokenize, from the Hugging Face `tokenizers` package.

Run: `just golden-tokenizer` (uses .build/refenv). Reads the real Qwen tokenizer fetched by
`just setup` and writes core/internal/tokenize/testdata/golden.json.
"""
import hashlib
import json
import pathlib
import sys

import tokenizers

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOK = ROOT / ".build/tokenizer/qwen3/tokenizer.json"
OUT = ROOT / "core/internal/tokenize/testdata/golden.json"

PAD = "<|image_pad|>"
STRINGS = [
    "Hello, world!",
    "What is the main object in this image? Answer in one word.",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
    "<|vision_start|>" + PAD * 4 + "<|vision_end|>What is this?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\n<|vision_start|>" + PAD * 99 + "<|vision_end|>Describe the picture.<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nDescribe it.<|vision_start|>" + PAD * 3 + "<|vision_end|><|im_end|>\n<|im_start|>assistant\n",
    "这是什么动物？请用一个词回答。",
    "日本語のテキストと한국어 텍스트",
    "Emoji: 🐈‍⬛ 👩🏽‍💻 🇯🇵 ✨",
    "tabs\tand\nnewlines\r\n and   many    spaces",
    " " * 40 + "leading and trailing" + " " * 37,
    "\n\n\n\n",
    "code: def f(x):\n    return x**2  # square",
    "numbers 1234567890 3.14159 -42 1e-6",
    "URL https://example.com/a?b=c&d=e#f",
    "mixed <|im_end|> inside text <|endoftext|> tokens",
    "Ünïcödé àccénts ßtraße naïve café",
    "Ελληνικά και русский текст",
    "مرحبا بالعالم",
    "a" * 300,
    "<think>\nreasoning\n</think>\n\nanswer",
    "<|vision_start|><|vision_end|>",
    "What's the colour of the cat's eyes?   Answer: \"green\".",
]


def main() -> int:
    tk = tokenizers.Tokenizer.from_file(str(TOK))
    cases = []
    for s in STRINGS:
        enc = tk.encode(s, add_special_tokens=False)
        cases.append({
            "text": s,
            "ids": enc.ids,
            "decoded": tk.decode(enc.ids, skip_special_tokens=False),
        })
    doc = {
        "generator": f"scripts/reference/golden_tokenizer.py, tokenizers {tokenizers.__version__}",
        "tokenizer_sha256": hashlib.sha256(TOK.read_bytes()).hexdigest(),
        "cases": cases,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
    print(f"wrote {len(cases)} cases to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
