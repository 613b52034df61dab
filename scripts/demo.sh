#!/usr/bin/env bash
# The README's demo: serve the demo bundles (the trained tiny Qwen2.5-VL `demo`, a random-weight
# Qwen3-VL `demo-qwen3` and a random-weight Phi-4-multimodal `demo-phi4`, one server), ask the
# demo model every question of one held-out scene through the OpenAI API (answer, usage, image
# sha256, per-stage timings; the scene's true answer beside each), ask the Qwen3-VL and Phi-4
# bundles one photo question each (random weights: their words mean nothing), then profile the
# demo model briefly with native answer parity and the server's spans, check the Phi-4 bundle's
# answers against an in-process run the same way, and stop. IRIS_DEMO_SCENE (default 82; `just demo N`, e.g. `just demo 41`) picks the scene among the 300
# committed held-out scenes (scripts/demo/heldout, never seen in training; docs/demo-model.md).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/aiperf/lib.sh
bundle=${IRIS_DEMO_BUNDLE:-.build/bundles/demo}
bundle3=${IRIS_DEMO_BUNDLE_QWEN3:-.build/bundles/demo-qwen3}
bundle4=${IRIS_DEMO_BUNDLE_PHI4:-.build/bundles/demo-phi4}
scene=${IRIS_DEMO_SCENE:-82}
held=scripts/demo/heldout
question="What is the main object in this image? Answer in one word."
scripts/fetch-corpus.sh
image=${IRIS_DEMO_IMAGE:-.build/corpus/images/chelsea.png}
[[ $scene =~ ^[0-9]+$ ]] && ((scene < 300)) || { echo "demo: the scene is a held-out scene's number, 0-299 (e.g. just demo 41), not $scene" >&2; exit 2; }
scene_png=$held/$(printf '%05d' "$scene").png
work=$(mktemp -d -t iris-demo.XXXXXX)
trap 'stop_serve; rm -rf "$work"' EXIT
port=$(free_port)
otlp=$(free_port)
echo "== starting iris serve (bundles $bundle: the trained tiny Qwen2.5-VL; $bundle3: tiny Qwen3-VL and $bundle4: tiny Phi-4-multimodal, random weights)"
start_serve "$bundle" "$port" "$otlp" "$work/serve.log" "$bundle3" "$bundle4"
# the scene's questions and true answers, from the committed held-out set
python3 -c 'import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["index"] == int(sys.argv[2]):
        print(r["type"] + "\t" + r["question"] + "\t" + r["answer"])' "$held/scenes.jsonl" "$scene" >"$work/qa.tsv"
echo "== asking $(basename "$bundle") about held-out scene $scene ($scene_png: $(python3 -c 'import struct,sys; d=open(sys.argv[1],"rb").read(24); print("%dx%d" % struct.unpack(">II", d[16:24]))' "$scene_png")) through the OpenAI API"
ask_json() { # the answer text of one question, from `iris ask --json`
  "$IRIS" ask --url "http://127.0.0.1:$port" --model "$(basename "$bundle")" --image "$scene_png" --max-tokens 8 --json "$1" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["message"]["content"])'
}
first=1
while IFS=$'\t' read -r type q answer; do
  if ((first)); then
    # the first question once, in full (usage, image, stages); its answer read from that output
    # (a Go-quoted string, JSON for these answers; asked again as JSON if not)
    out=$("$IRIS" ask --url "http://127.0.0.1:$port" --model "$(basename "$bundle")" --image "$scene_png" --max-tokens 8 "$q")
    printf '%s\n' "$out"
    got=$(printf '%s\n' "$out" | python3 -c 'import json,sys
for line in sys.stdin:
    if line.startswith("answer:"):
        print(json.loads(line.split(":", 1)[1].strip()))
        break
else:
    sys.exit(1)' 2>/dev/null) || got=$(ask_json "$q")
    first=0
  else
    got=$(ask_json "$q")
  fi
  mark=correct
  [[ $got == "$answer" ]] || mark=WRONG
  printf '   %-7s %-32s -> %-14s (true answer: %s, %s)\n' "$type" "$q" "\"$got\"" "$answer" "$mark"
done <"$work/qa.tsv"
echo
echo "== asking $(basename "$bundle3") one image question (random weights: its words mean nothing)  [image: $image]"
"$IRIS" ask --url "http://127.0.0.1:$port" --model "$(basename "$bundle3")" --image "$image" --max-tokens 10 "$question"
echo
echo "== asking $(basename "$bundle4") one image question (random weights: its words mean nothing)  [image: $image]"
"$IRIS" ask --url "http://127.0.0.1:$port" --model "$(basename "$bundle4")" --image "$image" --max-tokens 10 "$question"
echo
echo "== profiling: 10 photos, 1 warm-up + 10 measured requests, each answer checked against an in-process run"
"$IRIS" profile --url "http://127.0.0.1:$port" --model "$(basename "$bundle")" --input .build/corpus/corpus.jsonl \
  --concurrency 1 --warmup 1 --requests 10 --max-tokens 10 --temperature 0 --top-k 1 \
  --bundle "$bundle" --tokenizer .build/tokenizer/qwen3 --otlp-listen "127.0.0.1:$otlp" --otlp-wait 5s \
  --source "" --out "$work/profile" >"$work/profile.log" 2>&1 || { cat "$work/profile.log" >&2; exit 1; }
# The short profile: the summary table and the server's stage breakdown from report.md.
awk '/^\| profile \|/,/^$/' "$work/profile/report.md"
# with ten requests the p95 is the slowest photo's time (the largest photo is 1411x1411 on the CPU
# engine), which the report names
grep -E '^The slowest' "$work/profile/report.md"
awk '/^\| stage \|/,/^$/' "$work/profile/report.md"
grep -E '^- (Parity|Result)' "$work/profile/report.md"
echo
echo "== $(basename "$bundle4"): 3 photos, each answer checked against an in-process run"
"$IRIS" profile --url "http://127.0.0.1:$port" --model "$(basename "$bundle4")" --input .build/corpus/corpus.jsonl \
  --concurrency 1 --warmup 0 --requests 3 --max-tokens 10 --temperature 0 --top-k 1 \
  --bundle "$bundle4" --tokenizer .build/tokenizer/phi4 \
  --source "" --out "$work/profile-phi4" >"$work/profile-phi4.log" 2>&1 || { cat "$work/profile-phi4.log" >&2; exit 1; }
grep -E '^- (Parity|Result)' "$work/profile-phi4/report.md"
