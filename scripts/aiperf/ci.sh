#!/usr/bin/env bash
# CI end-to-end profiling of the random-weight bundle (`random`): the real AIPerf 0.13.0 and `iris profile` against
# `iris serve`, streamed and not, 2 warmup + 10 measured requests of the default corpus, greedy,
# 10 tokens. Every artifact directory is validated with AIPerf's own models
# (check_artifacts.py), every answer (AIPerf's and Iris's) is checked against the runtime
# in-process, and two mutation runs (a bundle byte flipped, a source file dirtied during the run)
# must fail while keeping their raw records.
# Then the Qwen3-VL demo bundle the same way through `iris profile` (parity with the runtime
# in-process, AIPerf's artifact models).
# Needs bin/iris and .build/bundles/{random,demo-qwen3} (just build demo-bundle); IRIS_BIN, BUNDLE and
# BUNDLE_QWEN3 override them.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/aiperf/lib.sh
bundle=${BUNDLE:-.build/bundles/random}
bundle3=${BUNDLE_QWEN3:-.build/bundles/demo-qwen3}
model=random
requests=10
warmup=2
out=.build/aiperf-ci
py=.build/aiperf-venv/bin/python

[[ -x $IRIS && -f $bundle/bundle.toml ]] || { echo "ci: needs $IRIS and $bundle (just build demo-bundle)" >&2; exit 1; }
scripts/aiperf/setup-venv.sh
scripts/fetch-corpus.sh
corpus=.build/corpus/corpus.jsonl
rm -rf "$out"
mkdir -p "$out"
trap stop_serve EXIT
port=$(free_port)
otlp=$(free_port)
start_serve "$bundle" "$port" "$otlp" "$out/serve.log"
url=http://127.0.0.1:$port

for mode in json stream; do
  flag=()
  [[ $mode == stream ]] && flag=(--streaming)

  echo "ci: AIPerf 0.13.0, $mode" >&2
  AIPERF_DATASET_MMAP_CACHE_ENABLED=false .build/aiperf-venv/bin/aiperf profile \
    --model "$model" --url "$url" --endpoint-type chat "${flag[@]}" \
    --input-file "$corpus" --custom-dataset-type single_turn \
    --concurrency 1 --request-count "$requests" --warmup-request-count "$warmup" --random-seed 0 \
    --extra-inputs temperature:0 --extra-inputs top_k:1 \
    --tokenizer "$PWD/.build/tokenizer/qwen3" --use-server-token-count --failed-request-threshold 0 \
    --request-timeout-seconds 300 --export-level raw --artifact-dir "$PWD/$out/aiperf-$mode" \
    --ui-type none --no-server-metrics --no-gpu-telemetry --workers-max 1 >"$out/aiperf-$mode.log" 2>&1 \
    || { tail -80 "$out/aiperf-$mode.log" >&2; exit 1; }
  "$py" scripts/aiperf/check_artifacts.py "$out/aiperf-$mode" --requests "$requests" --warmup "$warmup" "${flag[@]}"
  "$IRIS" profile report "$out/aiperf-$mode" --bundle "$bundle" | tee "$out/aiperf-$mode/report.md"

  echo "ci: iris profile, $mode" >&2
  "$IRIS" profile --url "$url" --model "$model" --input "$corpus" "${flag[@]}" \
    --concurrency 1 --warmup "$warmup" --requests "$requests" --temperature 0 --top-k 1 \
    --bundle "$bundle" --tokenizer .build/tokenizer/qwen3 --otlp-listen "127.0.0.1:$otlp" --out "$out/iris-$mode"
  "$py" scripts/aiperf/check_artifacts.py "$out/iris-$mode" --requests "$requests" --warmup "$warmup" --iris --parity "${flag[@]}"
done

# mutate DIR WHAT: a profiling run whose inputs change while it runs must fail and keep its raw
# records. WHAT is "bundle" (a byte of a copy of the bundle flipped) or "source" (a file of a
# scratch git work tree rewritten).
mutate() {
  local dir=$1 what=$2 copy=$out/mutate-bundle src=$out/mutate-src
  rm -rf "$copy" "$src"
  cp -r "$bundle" "$copy"
  mkdir -p "$src"
  echo "package main" >"$src/main.go"
  git -C "$src" init -q && git -C "$src" add . && git -C "$src" -c user.name=ci -c user.email=ci@ci commit -q -m init
  "$IRIS" profile --url "$url" --model "$model" --input "$corpus" --warmup 0 --requests 40 --temperature 0 --top-k 1 \
    --bundle "$copy" --source "$src" --out "$dir" >"$dir.log" 2>&1 &
  local pid=$!
  for _ in $(seq 300); do
    grep -q "measured requests" "$dir/logs/iris-profile.log" 2>/dev/null && break
    sleep 0.1
  done
  case $what in
    bundle)
      local f
      f=$(find "$copy" -name '*.safetensors' | head -1)
      python3 -c 'import sys; p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[len(b) // 2] ^= 1; open(p, "wb").write(bytes(b))' "$f" ;;
    source) echo "package main // dirtied during the run" >"$src/main.go" ;;
  esac
  if wait "$pid"; then
    echo "ci: the $what mutation run passed; it must fail" >&2
    exit 1
  fi
  grep -q "changed during the run" "$dir.log" || { tail -20 "$dir.log" >&2; echo "ci: the $what mutation run failed for another reason" >&2; exit 1; }
  local n
  n=$(wc -l <"$dir/profile_export_raw.jsonl")
  [[ $n == 40 ]] || { echo "ci: the $what mutation run kept $n raw records, want 40" >&2; exit 1; }
  echo "ci: the $what mutation run failed as it must, 40 raw records kept" >&2
}
mutate "$out/mutate-bundle-run" bundle
mutate "$out/mutate-source-run" source

echo "ci: iris profile, the Qwen3-VL bundle ($bundle3)" >&2
stop_serve
start_serve "$bundle3" "$port" "$otlp" "$out/serve-qwen3.log"
"$IRIS" profile --url "$url" --model "$(basename "$bundle3")" --input "$corpus" \
  --concurrency 1 --warmup "$warmup" --requests "$requests" --temperature 0 --top-k 1 \
  --bundle "$bundle3" --tokenizer .build/tokenizer/qwen3 --otlp-listen "127.0.0.1:$otlp" --out "$out/iris-qwen3"
"$py" scripts/aiperf/check_artifacts.py "$out/iris-qwen3" --requests "$requests" --warmup "$warmup" --iris --parity
echo "ci: profiling checks passed; artifacts in $out" >&2
