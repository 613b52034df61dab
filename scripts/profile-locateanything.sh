#!/usr/bin/env bash
# Profiles a seeded LocateAnything bundle on the grounding workload: the served golden's sweep
# checkpoint (core/internal/enginetest/cmd/servedmodel -family locateanything: random weights, so the
# words mean nothing), built into a bundle with the locateanything plugin, asked the upstream
# profile's question "Locate a single instance that matches the following description: {label}."
# with 32 new tokens about the committed case images (core/internal/enginetest/testdata/qwen2_5_vl/
# cases), through `iris serve` and `iris profile` with native parity, server spans and provenance.
# Leaves the artifacts and report.md in .build/profile/locateanything (PROFILE_OUT changes it).
# Needs bin/iris and bin/plugins/locateanything.wasm (just build plugins) and
# .build/tokenizer/locateanything (just setup).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/aiperf/lib.sh
model=.build/models/locateanything-seeded
bundle=.build/bundles/locateanything-seeded
out=${PROFILE_OUT:-.build/profile/locateanything}
input=.build/profile/locateanything.jsonl
rm -rf "$model" "$bundle" "$out"
mkdir -p .build/profile
go run ./core/internal/enginetest/cmd/servedmodel -family locateanything -out "$model"
"$IRIS" bundle build --from "$model" --family locateanything --out "$bundle" --plugin bin/plugins/locateanything.wasm
cases=core/internal/enginetest/testdata/qwen2_5_vl/cases
: >"$input"
for pair in "tiny_30x40:a red square" "square_56:the circle" "tall_120x300:the top of the image" \
  "wide_500x90:the banner" "rect_320x240:white vehicle" "partial_406x238:a circle" "large_644x476:the leftmost object"; do
  name=${pair%%:*} label=${pair#*:}
  printf '{"session_id":"%s","text":"Locate a single instance that matches the following description: %s.","image":"data:image/png;base64,%s","output_length":32}\n' \
    "$name" "$label" "$(base64 -w0 "$cases/$name.png")" >>"$input"
done
trap stop_serve EXIT
port=$(free_port)
otlp=$(free_port)
start_serve "$bundle" "$port" "$otlp" .build/profile/locateanything-serve.log
"$IRIS" profile --url "http://127.0.0.1:$port" --model locateanything-seeded --input "$input" \
  --concurrency 1 --warmup 2 --requests 14 --temperature 0 --top-k 1 --ignore-eos \
  --bundle "$bundle" --tokenizer .build/tokenizer/locateanything --otlp-listen "127.0.0.1:$otlp" --out "$out" ${PROFILE_ARGS:-}
