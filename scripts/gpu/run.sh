#!/usr/bin/env bash
# The one device call of a GPU run (docs/gpu.md). Runs on the H200 machine in the repository root
# with .carry/ made by `just gpu-bench` (scripts/gpu/prepare.sh):
#
#   bash scripts/gpu/run.sh check   the first three smoke steps (no Python)
#   bash scripts/gpu/run.sh smoke   toolchain and driver, module load, every kernel against a CPU
#                                   reference, cuBLAS, tiny-fixture parity against the golden
#                                   tokens, and the whole full-run pipeline on the tiny model
#   bash scripts/gpu/run.sh full    the 3B random checkpoint, parity on 8 cases (fp32, bf16) against
#                                   transformers, the engine's timings
#   bash scripts/gpu/run.sh compare the previous main's build (.carry/base, `just gpu-bench` with
#                                   IRIS_BASE=<commit>) against this one on the 3B checkpoint, in
#                                   one call: fp32 parity of this build (288 tokens), then engine
#                                   and HTTP timings of both, alternating
#   bash scripts/gpu/run.sh speed   HTTP timings (iris serve) and the transformers baselines on the
#                                   same checkpoint (reused when the machine is still warm);
#                                   IRIS_SKIP_BASELINE=1 skips transformers, IRIS_HTTP_ONLY=1 runs
#                                   only the photo case over HTTP
#
# Each step prints PASS/FAIL lines; results and logs go to $OUT (at most 8 files).
set -uo pipefail
phase=${1:-smoke}
OUT=${OUT:-/tmp/iris-out}
mkdir -p "$OUT"
root=$PWD
carry=$root/.carry
bin=/tmp/iris-bin # the carried binaries, unpacked
mkdir -p "$bin"
for f in "$carry"/bin/*.gz "$carry"/plugins/*.gz; do [[ -e $f ]] && gunzip -c "$f" >"$bin/$(basename "${f%.gz}")"; done
for f in "$carry"/bin/*.xz "$carry"/plugins/*.xz; do [[ -e $f ]] && xz -dc "$f" >"$bin/$(basename "${f%.xz}")"; done
chmod +x "$bin"/* 2>/dev/null
work=/tmp/iris-gpu
mkdir -p "$work"
log=$OUT/run-$phase.log
exec > >(tee -a "$log") 2>&1
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0

step() { echo; echo "=== $* ($(date +%T))"; }
verdict() { # verdict <name> <exit status>
  if [[ $2 == 0 ]]; then echo "PASS $1"; else echo "FAIL $1 (exit $2)"; fi
}

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__, torch.cuda.get_device_name(0))'
# cuBLAS 13 for the binaries: the toolkit's, else the one beside PyTorch's wheels
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c 'import site; print(" ".join(p + "/nvidia/cu13/lib" for p in site.getsitepackages()))'); do
  if [[ -e $d/libcublas.so.13 ]]; then export LD_LIBRARY_PATH=$d:${LD_LIBRARY_PATH:-}; echo "libcublas.so.13 from $d"; break; fi
done
# Test binaries find the fixtures by their build path (/work/main); the tokenizer symlinks of the
# fixture models point into .build/tokenizer.
if [[ ! -e /work/main/core && $root != /work/main ]]; then mkdir -p /work && ln -sfn "$root" /work/main; fi
mkdir -p "$root/.build/tokenizer/qwen3" && cp "$carry/tokenizer/tokenizer_config.json" "$root/.build/tokenizer/qwen3/"
gunzip -c "$carry/tokenizer/tokenizer.json.gz" >"$root/.build/tokenizer/qwen3/tokenizer.json"
tiny=$root/core/internal/engine/testdata/qwen2_5_vl
template=$tiny/tiny-untied
ref=$root/scripts/reference

if [[ $phase == sweep ]]; then # the sweep alone (while it is being mended)
  step "shape sweep"
  (cd core/internal/engine/cuda && timeout 240 "$bin/cuda.test" -test.v -test.run 'Sweep' 2>&1 | tee "$OUT/sweep.log" | grep -E -- '^--- (PASS|FAIL)|^    --- FAIL|^FAIL|^ok|panic|sweep.go' | tail -60); verdict sweep ${PIPESTATUS[0]}
  exit 0
fi
if [[ $phase == smoke || $phase == check ]]; then
  step "gpu package: compat symbols, PTX load, launch, graph capture"
  (cd core/internal/gpu && timeout 60 "$bin/gpu.test" -test.v 2>&1 | grep -E '^(=== RUN|--- |PASS|FAIL|ok|\s+gpu)' ); verdict gpu.test ${PIPESTATUS[0]}
  step "kernels against CPU references"
  (cd core/internal/engine/cuda && timeout 120 "$bin/cuda.test" -test.v -test.run 'Kernel' 2>&1 | grep -vE '^=== (RUN|PAUSE|CONT)'); verdict kernels ${PIPESTATUS[0]}
  step "tiny fixtures: parity with transformers (fp32), graph vs plain decode, bf16, batch = single"
  (cd core/internal/engine/cuda && timeout 150 "$bin/cuda.test" -test.v -test.run 'Parity|BF16|Graph|BatchEqualsSingle' 2>&1 | tee "$OUT/fixtures.log" | grep -E -- '^--- (PASS|FAIL)|^    --- FAIL|FAIL|^ok|agree|error|panic' | tail -80); verdict fixtures ${PIPESTATUS[0]}
  step "shape sweeps: 14 Qwen2.5-VL and 11 Qwen3-VL seeded checkpoints x 6 cases against transformers (fp32)"
  (cd core/internal/engine/cuda && timeout 240 "$bin/cuda.test" -test.v -test.run 'Sweep' 2>&1 | tee "$OUT/sweep.log" | grep -E -- '^--- (PASS|FAIL)|^    --- FAIL|^FAIL|^ok|panic|sweep.go' | tail -60); verdict sweep ${PIPESTATUS[0]}
fi
if [[ $phase == smoke ]]; then
  step "pipeline dry run on the tiny model (gpu_parity.py, gpucheck parity/bench, gpu_baseline.py)"
  timeout 150 python3 "$ref/gpu_parity.py" --model "$template" --cases "$work/tcases" --out "$work/tref.json" --new 8; verdict tiny-ref $?
  timeout 60 "$bin/gpucheck" parity -model "$template" -cases "$work/tcases" -ref "$work/tref.json" -new 8 -out "$work/tiny-parity.json"; verdict tiny-parity $?
  timeout 60 "$bin/gpucheck" bench -model "$template" -cases "$work/tcases" -case photo_426x320 -runs 5 -seconds 1 -out "$work/tiny-bench.json"; verdict tiny-bench $?
  timeout 150 python3 "$ref/gpu_baseline.py" --model "$template" --cases "$work/tcases" --case photo_426x320 --runs 3 --out "$work/tiny-baseline.json"; verdict tiny-baseline $?
fi
if [[ $phase == smoke || $phase == check ]]; then
  step "done"
  grep -hE '^(PASS|FAIL|SKIP)' "$log"
  exit 0
fi

# ---- full and speed share the checkpoint and the cases (kept on a machine that stays warm)
# unit_tests <timeout>: kernels, cuBLAS attention and tiny-fixture parity of the cuda package.
unit_tests() {
  step "unit tests (kernels, decode attention, tiny-fixture parity)"
  (cd core/internal/engine/cuda && timeout "$1" "$bin/cuda.test" -test.run 'Kernel|Attention|Parity|BF16|Graph' 2>&1 | grep -E -- '--- FAIL|FAIL|ok|PASS|panic|error|relative' | head -40); verdict unit ${PIPESTATUS[0]}
}
# engine_benches <seconds>: gpucheck bench on the photo (throughput for <seconds> each), on
# 640x480, then on the photo with the earlier products (cublasGemmEx after a bias kernel).
engine_benches() {
  step "engine timing (bf16): the issue's 426x320 photo, 640x480, then the photo with the earlier products"
  timeout $((30 + 30 * $1)) "$bin/gpucheck" bench -model "$model" -cases "$cases" -case photo_426x320 -runs 30 -seconds "$1" -out "$OUT/bench.json"; verdict bench $?
  timeout 100 "$bin/gpucheck" bench -model "$model" -cases "$cases" -case vga_640x480 -runs 20 -seconds 2 -concurrency 1 -out "$OUT/bench-vga.json"; verdict bench-vga $?
  local v
  for v in -gemm-ex; do
    echo "--- variant $v"
    timeout 60 "$bin/gpucheck" bench -model "$model" -cases "$cases" -case photo_426x320 -runs 10 -seconds 1 -concurrency 1 "$v" | grep -E 'c=1 |stage (vision|prefill)'; verdict "bench$v" ${PIPESTATUS[0]}
  done
}

model=$work/qwen25vl-3b
cases=$work/cases
if [[ -f $model/config.json && -f $model/tokenizer.json ]]; then
  echo "reusing the checkpoint in $model"
else
  step "3B checkpoint with random bf16 weights"
  timeout 300 python3 "$ref/gpu_checkpoint.py" --out "$model" --tokenizer "$root/.build/tokenizer/qwen3" --template "$template"; verdict checkpoint $?
fi

if [[ ( $phase == full || $phase == compare ) && ! -f $cases/index.json ]]; then
  timeout 90 python3 "$ref/gpu_parity.py" --model "$model" --cases "$cases" --out /dev/null --prepare-only; verdict cases $?
fi

if [[ $phase == full ]]; then
  unit_tests 150
  step "processor outputs and transformers greedy reference (fp32, bf16)"
  timeout 360 python3 "$ref/gpu_parity.py" --model "$model" --cases "$cases" --out "$OUT/ref.json" --new 32; verdict reference $?
  step "engine parity (fp32 tokens identical; bf16 >= 98% agreement)"
  timeout 300 "$bin/gpucheck" parity -model "$model" -cases "$cases" -ref "$OUT/ref.json" -new 32 -out "$OUT/parity.json"; verdict parity $?
  engine_benches 4
fi

if [[ $phase == compare ]]; then
  base=/tmp/iris-base
  mkdir -p "$base"
  for f in "$carry"/base/*.gz; do [[ -e $f ]] && gunzip -c "$f" >"$base/$(basename "${f%.gz}")"; done
  for f in "$carry"/base/*.xz; do [[ -e $f ]] && xz -dc "$f" >"$base/$(basename "${f%.xz}")"; done
  chmod +x "$base"/* 2>/dev/null
  if [[ ! -x $base/iris || ! -x $base/gpucheck ]]; then echo "FAIL compare: no base binaries in .carry/base"; exit 1; fi
  if [[ -z ${IRIS_COMPARE_SPEED:-} ]]; then # IRIS_COMPARE_SPEED=1: timings only
    step "fp32 reference of transformers (9 cases x 32 tokens) and this build's parity"
    timeout 300 python3 "$ref/gpu_parity.py" --model "$model" --cases "$cases" --out "$OUT/ref.json" --new 32 --precisions fp32; verdict reference $?
    timeout 150 "$bin/gpucheck" parity -model "$model" -cases "$cases" -ref "$OUT/ref.json" -new 32 -precision fp32 -out "$OUT/parity.json"; verdict parity $?
  fi
  step "engine, c=1: base and this build alternating (gpucheck bench, the photo)"
  for round in 1 2; do
    for who in base new; do
      b=$bin; [[ $who == base ]] && b=$base
      echo "--- engine $who (round $round)"
      timeout 90 "$b/gpucheck" bench -model "$model" -cases "$cases" -case photo_426x320 -runs 40 -seconds 1 -concurrency 1 \
        -out "$work/engine-$who-$round.json" | grep -E 'c=1 |decode step'; verdict "engine-$who-$round" ${PIPESTATUS[0]}
    done
  done
  step "HTTP, c=1: base and this build alternating (iris serve + httpbench, the photo)"
  for who in base new; do
    b=$bin; [[ $who == base ]] && b=$base
    rm -rf "$work/bundle-$who"
    plugin=(); [[ -f $bin/qwen2_5_vl.wasm ]] && plugin=(--plugin "$bin/qwen2_5_vl.wasm")
    [[ $who == base && -f $base/qwen2_5_vl.wasm ]] && plugin=(--plugin "$base/qwen2_5_vl.wasm") # its own wire format
    timeout 120 "$b/iris" bundle build --from "$model" --family qwen2_5_vl --out "$work/bundle-$who" --backend cuda --name qwen25vl-3b --context 4096 "${plugin[@]}" >/dev/null; verdict "bundle-$who" $?
  done
  for round in 1 2; do
    for who in base new; do
      b=$bin; [[ $who == base ]] && b=$base
      "$b/iris" serve --bundle "$work/bundle-$who" --addr 127.0.0.1:18080 --workers 8 --queue-depth 64 >"$work/serve-$who.log" 2>&1 &
      srv=$!
      for _ in $(seq 90); do curl -fs 127.0.0.1:18080/readyz >/dev/null 2>&1 && break; sleep 1; done
      echo "--- http $who (round $round)"
      # one client for both servers: the base's gpucheck http (the same driver as httpbench)
      timeout 90 "$base/gpucheck" http -url http://127.0.0.1:18080 -model qwen25vl-3b -image "$cases/photo_426x320.jpg" \
        -question "What is the main object in this image? Answer in one word." -runs 40 -seconds 2 -concurrency 8 \
        -out "$work/http-$who-$round.json" | grep -E 'c=1|c=8'; verdict "http-$who-$round" ${PIPESTATUS[0]}
      kill "$srv"; wait "$srv" 2>/dev/null
    done
  done
  python3 - "$work" "$OUT/compare.json" <<'PY'
import json, sys, glob, os, statistics
work, out = sys.argv[1], sys.argv[2]
res = {}
for kind in ("engine", "http"):
    for who in ("base", "new"):
        rows = []
        for f in sorted(glob.glob(f"{work}/{kind}-{who}-*.json")):
            d = json.load(open(f))
            ls = [l for l in d.get("latency", []) if l.get("new_tokens") == 3] + ([d["c1_3tok"]] if "c1_3tok" in d else [])
            rows += [(l["p50_ms"], l["p95_ms"]) for l in ls]
        res[f"{kind}-{who}"] = rows
json.dump(res, open(out, "w"), indent=1)
print("compare (3 tokens, p50/p95 ms per round):")
for k, rows in res.items():
    print(f"  {k:12s} " + "  ".join(f"{a:.2f}/{b:.2f}" for a, b in rows if a is not None))
PY
  grep -iE 'error|panic' "$work"/serve-*.log | head -10
fi

if [[ $phase == speed && ! -f $cases/index.json ]]; then
  timeout 90 python3 "$ref/gpu_parity.py" --model "$model" --cases "$cases" --out /dev/null --prepare-only; verdict cases $?
fi

if [[ $phase == speed && -z ${IRIS_HTTP_ONLY:-} ]]; then
  unit_tests 60
  step "decode-step kernels in isolation (graph replay; cuBLAS the baseline)"
  (cd core/internal/engine/cuda && timeout 120 "$bin/cuda.test" -test.run '^$' -test.bench DecodeKernels -test.benchtime 1x 2>&1 | grep -E '^kernel|FAIL|panic'); verdict kernel-times ${PIPESTATUS[0]}
  if [[ -f $carry/ref.json ]]; then
    step "engine parity against the carried transformers reference (free-running and teacher-forced)"
    timeout 150 "$bin/gpucheck" parity -model "$model" -cases "$cases" -ref "$carry/ref.json" -new 32 -out "$OUT/parity.json"; verdict parity $?
  fi
  engine_benches 3
fi
if [[ $phase == speed && -x $bin/imageio.test ]]; then
  step "host CPU: Inspect + Decode of the JPEGs at 1, 4 and 16 cores"
  # one command a core count: with b.Loop, a -test.cpu list runs its first row at the list's
  # last value (seen with Go 1.26)
  for c in 1 4 16; do
    (cd core/internal/imageio && timeout 30 "$bin/imageio.test" -test.run '^$' -test.bench 'InspectDecode$' -test.cpu $c -test.benchtime 1s 2>&1 | grep -E '^Benchmark|FAIL'); verdict "jpeg-bench-$c" ${PIPESTATUS[0]}
  done
fi
if [[ $phase == speed ]]; then
  if [[ -x $bin/iris ]]; then
    step "HTTP: bundle build, iris serve, loopback load"
    bundle=$work/bundle
    plugin=()
    [[ -f $bin/qwen2_5_vl.wasm ]] && plugin=(--plugin "$bin/qwen2_5_vl.wasm")
    rm -rf "$bundle"
    timeout 120 "$bin/iris" bundle build --from "$model" --family qwen2_5_vl --out "$bundle" --backend cuda --name qwen25vl-3b --context 4096 "${plugin[@]}"; verdict bundle $?
    "$bin/iris" serve --bundle "$bundle" --addr 127.0.0.1:18080 --workers 8 --queue-depth 64 >"$work/serve.log" 2>&1 &
    srv=$!
    for _ in $(seq 90); do
      if curl -fs 127.0.0.1:18080/readyz >/dev/null 2>&1; then break; fi
      sleep 1
    done
    timeout 150 "$bin/httpbench" -url http://127.0.0.1:18080 -model qwen25vl-3b -image "$cases/photo_426x320.jpg" \
      -question "What is the main object in this image? Answer in one word." -runs 30 -seconds 4 -out "$OUT/http.json"; verdict http $?
    if [[ -z ${IRIS_HTTP_ONLY:-} ]]; then
      timeout 60 "$bin/httpbench" -url http://127.0.0.1:18080 -model qwen25vl-3b -image "$cases/vga_640x480.png" \
        -question "Is there any text in the image?" -runs 20 -seconds 2 -out "$OUT/http-vga.json"; verdict http-vga $?
    fi
    kill "$srv"; wait "$srv" 2>/dev/null
    grep -iE 'error|warn|engine loaded' "$work/serve.log" | head -20
  else
    echo "SKIP http: no cuda iris binary carried"
  fi
  if [[ -z ${IRIS_SKIP_BASELINE:-} ]]; then
    step "transformers baseline (bf16; dynamic and static cache)"
    timeout 240 python3 "$ref/gpu_baseline.py" --model "$model" --cases "$cases" --case photo_426x320 --runs 8 --out "$OUT/baseline.json"; verdict baseline $?
  fi
fi
step "done"
grep -hE '^(PASS|FAIL|SKIP)' "$log"
