#!/usr/bin/env bash
# The README's demo: serve the demo bundles (a Qwen2.5-VL and a Qwen3-VL one, one server), ask
# each one image question through the OpenAI API (answer, usage, image sha256, per-stage
# timings), then profile the first briefly with native answer parity and the server's spans, and
# stop. The demo models have random weights: their words mean nothing (see README); parity and
# timings are what it shows.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/aiperf/lib.sh
bundle=${IRIS_DEMO_BUNDLE:-.build/bundles/demo}
bundle3=${IRIS_DEMO_BUNDLE_QWEN3:-.build/bundles/demo-qwen3}
question="What is the main object in this image? Answer in one word."
scripts/fetch-corpus.sh
image=${IRIS_DEMO_IMAGE:-.build/corpus/images/chelsea.png}
work=$(mktemp -d -t iris-demo.XXXXXX)
trap 'stop_serve; rm -rf "$work"' EXIT
port=$(free_port)
otlp=$(free_port)
echo "== starting iris serve (bundles $bundle: tiny Qwen2.5-VL, $bundle3: tiny Qwen3-VL; random weights: their words mean nothing)"
start_serve "$bundle" "$port" "$otlp" "$work/serve.log" "$bundle3"
for b in "$bundle" "$bundle3"; do
  echo "== asking $(basename "$b") one image question through the OpenAI API  [image: $image]"
  "$IRIS" ask --url "http://127.0.0.1:$port" --model "$(basename "$b")" --image "$image" --max-tokens 10 "$question"
  echo
done
echo "== profiling: 10 photos, 1 warm-up + 10 measured requests, each answer checked against an in-process run"
"$IRIS" profile --url "http://127.0.0.1:$port" --model "$(basename "$bundle")" --input .build/corpus/corpus.jsonl \
  --concurrency 1 --warmup 1 --requests 10 --max-tokens 10 --temperature 0 --top-k 1 \
  --bundle "$bundle" --tokenizer .build/tokenizer/qwen3 --otlp-listen "127.0.0.1:$otlp" --otlp-wait 5s \
  --source "" --out "$work/profile" >"$work/profile.log" 2>&1 || { cat "$work/profile.log" >&2; exit 1; }
# The short profile: the summary table and the server's stage breakdown from report.md.
awk '/^\| profile \|/,/^$/' "$work/profile/report.md"
awk '/^\| stage \|/,/^$/' "$work/profile/report.md"
grep -E '^- (Parity|Result)' "$work/profile/report.md"
