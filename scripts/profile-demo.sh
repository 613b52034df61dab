#!/usr/bin/env bash
# Profiles the demo bundle with the default corpus: starts `iris serve`, runs `iris profile` with
# native parity, server spans and provenance, and leaves the artifacts and report.md in
# .build/profile/demo (PROFILE_OUT changes the directory; PROFILE_ARGS adds flags, e.g. --streaming).
# Needs bin/iris and .build/bundles/demo (just build demo-bundle); IRIS_BIN and BUNDLE override them.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/aiperf/lib.sh
bundle=${BUNDLE:-.build/bundles/demo}
out=${PROFILE_OUT:-.build/profile/demo}
scripts/fetch-corpus.sh
rm -rf "$out"
mkdir -p "$(dirname "$out")"
trap stop_serve EXIT
port=$(free_port)
otlp=$(free_port)
start_serve "$bundle" "$port" "$otlp" "$(dirname "$out")/serve.log"
# shellcheck disable=SC2086 # PROFILE_ARGS is a list of flags
"$IRIS" profile --url "http://127.0.0.1:$port" --model demo --input .build/corpus/corpus.jsonl \
  --concurrency 1 --warmup 2 --requests 10 --temperature 0 --top-k 1 \
  --bundle "$bundle" --tokenizer .build/tokenizer/qwen3 --otlp-listen "127.0.0.1:$otlp" --out "$out" ${PROFILE_ARGS:-}
