#!/usr/bin/env bash
# The one device call of a GPU run (docs/gpu.md). Runs on the H200 machine in the repository root
# with .carry/ made by `just gpu-bench` (scripts/gpu/prepare.sh):
#
#   bash scripts/gpu/run.sh check   the first three smoke steps (no Python), then the record of the
#                                   test binaries' runs ($OUT/gpu-tests.tsv, a GPU-TESTS line;
#                                   scripts/gpu/record-check.sh adds it to docs/results/gpu-tests.md)
#   bash scripts/gpu/run.sh smoke   toolchain and driver, module load, every kernel against a CPU
#                                   reference, cuBLAS, tiny-fixture parity against the golden
#                                   tokens, and the whole full-run pipeline on the tiny models
#                                   (Qwen2.5-VL fixture; a generated tiny Qwen3-VL: `qwen3 tiny`)
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
#   bash scripts/gpu/run.sh qwen3 2b|8b|tiny
#                                   Qwen3-VL in one call (`vl qwen3_vl <size>`): the random bf16
#                                   checkpoint of gpu_qwen3_vl_<size>.config.json, fp32 parity
#                                   against transformers (12 cases x 32 tokens), the engine's
#                                   timings, the bundle served over HTTP, the transformers
#                                   baselines, and summary-qwen3_vl-<size>.json; ~4 min for the
#                                   2B, ~6 for the 8B, 1-2 for tiny (estimates; IRIS_PHASE=qwen3
#                                   `just gpu-bench` carries it)
#   bash scripts/gpu/run.sh throughput [family size]
#                                   continuous batching (issue 14): the cuda tests (IRIS_NO_TESTS=1
#                                   skips them: a repeat of a build already tested; IRIS_BENCH=<re>
#                                   runs the cuda package's benchmarks matching it), the engine's
#                                   passes by kind and size with an op profile of one round
#                                   (gpucheck passes; IRIS_NO_PASSES=1 skips, IRIS_OPS=<n> ops a
#                                   pass, IRIS_PASSES_ARGS more flags, IRIS_PASSES_AB flags of a
#                                   second run, e.g. -no-mma, or of several separated by ';'; IRIS_PRODUCTS=1 first times cuBLASLt's
#                                   candidates for the 3B's product shapes; IRIS_NCU=1 Nsight Compute on the
#                                   attention, SwiGLU and RMSNorm kernels of each pass, ncu-*.csv), iris serve at its defaults,
#                                   distinct JPEGs at IRIS_CONC (default c=1,8,32,64,128; each
#                                   level's passes by phase and batch size and per image; IRIS_NO_HTTP=1 skips),
#                                   the base build's c=1 (IRIS_BASE at prepare), IRIS_AB_APART=1
#                                   this build again with runtime.decode_apart at IRIS_APART_CONC
#                                   (64), IRIS_AB_SERIAL=1 with runtime.vision_serial at
#                                   IRIS_SERIAL_CONC (32,64), IRIS_AB_RUNTIME="KEY=VALUE ..." with
#                                   each runtime setting (or KEY=VALUE,KEY=VALUE together) at IRIS_RT_CONC (64),
#                                   IRIS_NEW_RUNTIME="KEY=VALUE,..." settings of this build's own levels (IRIS_BASE_RUNTIME
#                                   the base build's), IRIS_BASE_CONC=<levels>
#                                   the base build at those levels first and last, IRIS_C1_AB=N the base
#                                   build's and this one's c=1 in turn N times, transformers batch 1 and 16 (IRIS_SKIP_BASELINE=1 skips);
#                                   default the Qwen2.5-VL 3B; ~4 min
#   bash scripts/gpu/run.sh soak [family size]
#                                   issue 14's soak at full size: iris serve at its defaults on the
#                                   random checkpoint (default the Qwen2.5-VL 3B), 2,000 mixed
#                                   requests at c=64 (the cases' JPEG/PNG files; 10% bad inputs,
#                                   10% cancellations): no 5xx, answers equal alone, the KV pool
#                                   back to 0, the server's RSS flat (IRIS_PHASE=throughput
#                                   `just gpu-bench` carries it; IRIS_SOAK=<n> another count)
#   bash scripts/gpu/run.sh vl <family> <size> [parts]
#                                   the same for any family with a gpu_<family>_<size>.config.json
#                                   (vl qwen2_5_vl 3b: the 3B's whole story in one call)
#   bash scripts/gpu/run.sh internvl 2b|8b|tiny [parts]
#                                   InternVL3 (`vl internvl <size>`, gpu_internvl3_<size>.config.json):
#                                   as qwen3, with both tilings of the photo: the default (12 tiles
#                                   + thumbnail, 3,353 prompt tokens) and max_patches = 1 (one tile;
#                                   case photo_426x320_t1, the bundle served again with
#                                   [plugin.params] max_patches = 1); parity on 10 cases (9 tiled +
#                                   the single tile). parts: parity,speed (default both); a warm
#                                   machine reuses the checkpoint and the cases, so `internvl 8b
#                                   parity` then `internvl 8b speed` split a size over two calls.
#                                   Raw results stay in $IRIS_WORK/out-internvl-<size>; $OUT gets
#                                   summary-internvl-<size>.json and raw-internvl-<size>.tgz
#                                   (IRIS_PHASE=internvl `just gpu-bench` carries it)
#   bash scripts/gpu/run.sh attn    the attention kernels' tests (every mask form and head dim),
#                                   Iris's attention paths and torch SDPA's backends side by side on
#                                   the nine profiles' long and masked shapes, the InternViT tower:
#                                   $OUT/attn.md (scripts/gpu/attn_table.py)
#   bash scripts/gpu/run.sh qualify 1/4|2/4|3/4|4/4|all [profile,...]
#                                   the nine-profile qualification (docs/qualification.md): each
#                                   profile of scripts/gpu/qualify.tsv of that call served in turn
#                                   from its full-size random checkpoint, `iris profile` with the
#                                   upstream protocol (c=1, 5 warm-up + 50 measured, native
#                                   parity, provenance), transformers on the same corpus, the
#                                   table in $OUT/qualify-<K>of<N>.md (IRIS_PHASE=qualify
#                                   IRIS_PART=K/N `just qualify` carries it); named profiles:
#                                   only those rows again, the call's other results kept
#   bash scripts/gpu/run.sh demo    issue 15's demo model in one call: train it (~400 s), then the
#                                   CUDA engine's bf16 and fp32 answers on the 300 held-out scenes
#                                   against transformers' (IRIS_PHASE=demo `just gpu-bench` carries it)
#
# vl phases: IRIS_BUDGET_S (default 560) is the time the phase may take; each step's timeout is cut
# to what is left and a step that no longer fits says SKIP, so the summary is always written
# (set it to what is left when another phase runs first in the same call). IRIS_BF16=1 adds the
# bf16 reference and parity (free-running agreement on random weights is an INFO line).
# IRIS_CPU=1 runs a vl phase without a GPU (the dry run of the pipeline on the development
# machine: fp32 on the native backend, transformers on the CPU), with the binaries of a build
# without the cuda tag in IRIS_BIN and the reference stack's IRIS_PYTHON (docs/gpu.md).
#
# Each step prints PASS/FAIL lines; results and logs go to $OUT (at most 8 files).
set -uo pipefail
phase=${1:-smoke}
OUT=${OUT:-/tmp/iris-out}
mkdir -p "$OUT"
root=$PWD
carry=$root/${IRIS_CARRY:-.carry} # IRIS_CARRY=.carry-base for `run.sh base` (prepare.sh's IRIS_CARRY_DIR)
cpu=${IRIS_CPU:-}
py=${IRIS_PYTHON:-python3}
if [[ -n ${IRIS_BIN:-} ]]; then
  bin=$(cd "$IRIS_BIN" && pwd) # binaries built here (IRIS_CPU=1 runs)
else
  bin=/tmp/iris-bin # the carried binaries, unpacked
  mkdir -p "$bin"
  for f in "$carry"/bin/*.gz "$carry"/plugins/*.gz; do [[ -e $f ]] && gunzip -c "$f" >"$bin/$(basename "${f%.gz}")"; done
  for f in "$carry"/bin/*.xz "$carry"/plugins/*.xz; do [[ -e $f ]] && xz -dc "$f" >"$bin/$(basename "${f%.xz}")"; done
  chmod +x "$bin"/* 2>/dev/null
fi
work=${IRIS_WORK:-/tmp/iris-gpu}
mkdir -p "$work"
log=$OUT/run-$phase${2:+-$2}${3:+-$3}.log
exec > >(tee -a "$log") 2>&1
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 HF_HUB_DISABLE_PROGRESS_BARS=1

step() { echo; echo "=== $* ($(date +%T))"; }
verdict() { # verdict <name> <exit status>
  if [[ $2 == 0 ]]; then echo "PASS $1"; else echo "FAIL $1 (exit $2)"; fi
}

step "machine"
if [[ -n $cpu ]]; then
  echo "IRIS_CPU=1: no GPU; binaries from $bin, python $py"
  "$py" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
else
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__, torch.cuda.get_device_name(0))'
  echo "cpus $(nproc), load $(cut -d" " -f1-3 /proc/loadavg)" # a loaded host slows the HTTP levels and transformers
  # cuBLAS 13 for the binaries: the toolkit's, else the one beside PyTorch's wheels
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
           $(python3 -c 'import site; print(" ".join(p + "/nvidia/cu13/lib" for p in site.getsitepackages()))'); do
    if [[ -e $d/libcublas.so.13 ]]; then export LD_LIBRARY_PATH=$d:${LD_LIBRARY_PATH:-}; echo "libcublas.so.13 from $d"; break; fi
  done
fi
df -h "$work" | tail -1
# Test binaries find the fixtures by their build path (/work/main); the tokenizer symlinks of the
# fixture models point into .build/tokenizer.
if [[ ! -e /work/main/core && $root != /work/main ]]; then mkdir -p /work && ln -sfn "$root" /work/main; fi
if [[ -f $carry/tokenizer/tokenizer.json.gz && -z $cpu ]]; then
  mkdir -p "$root/.build/tokenizer/qwen3" && cp "$carry/tokenizer/tokenizer_config.json" "$root/.build/tokenizer/qwen3/"
  gunzip -c "$carry/tokenizer/tokenizer.json.gz" >"$root/.build/tokenizer/qwen3/tokenizer.json"
fi
# the fixtures' weights are not carried: scripts/unpack-fixtures.sh writes them from their seeded
# manifests with $IRIS_PYTHON (python3) and numpy (no Go here), checking the committed sha256
bash "$root/scripts/unpack-fixtures.sh" || echo "FAIL unpack-fixtures"
tiny=$root/core/internal/enginetest/testdata/qwen2_5_vl
template=$tiny/tiny-untied
ref=$root/scripts/reference
photo_q="What is the main object in this image? Answer in one word."

# tokenizer_dir <family>: the tokenizer directory of a family's checkpoints: the fetched Qwen files,
# or for internvl the InternVL3-hf directory internvl_tokenizer.py derives from them (written once).
tokenizer_dir() {
  if [[ $1 != internvl ]]; then echo "$root/.build/tokenizer/qwen3"; return; fi
  local d=$root/.build/tokenizer/internvl3
  if [[ ! -f $d/tokenizer.json ]]; then
    "$py" "$ref/internvl_tokenizer.py" --out "$d" >&2 || echo "FAIL internvl tokenizer" >&2
  fi
  echo "$d"
}

# make_checkpoint <config> <dir> <timeout> [tokenizer dir]: the random bf16 checkpoint of a config
# (reused when the machine is still warm); its JSON line (parameters, sizes, times) in <dir>.json.
make_checkpoint() {
  if [[ -f $2/config.json && -f $2/tokenizer.json && -f $2.json ]]; then
    echo "reusing the checkpoint in $2"
    return
  fi
  step "checkpoint with random bf16 weights: $(basename "$1")"
  if (($3 < 10)); then echo "SKIP checkpoint (the phase's time budget is spent)"; return; fi
  local dev=cuda
  [[ -n $cpu ]] && dev=cpu
  timeout "$3" "$py" "$ref/gpu_checkpoint.py" --config "$1" --out "$2" --tokenizer "${4:-$root/.build/tokenizer/qwen3}" \
    --template "$template" --device "$dev" | tee "$2.json.tmp"
  local rc=${PIPESTATUS[0]}
  verdict checkpoint "$rc"
  [[ $rc == 0 ]] && tail -1 "$2.json.tmp" >"$2.json"
  rm -f "$2.json.tmp"
}

# serve_start <bundle> <seconds>: iris serve on the bundle (its log in $work/serve.log), waiting at
# most <seconds> for /readyz (a large bundle's files are all verified first); fails if it is not
# ready. serve_stop stops it and prints its log's errors and warnings.
# The speed runs send the same photo again and again: the image-embedding cache is off
# (nocache_config) so that every request runs the vision tower, as distinct images would.
nocache_config() { printf '[runtime]\nembedding_cache_bytes = 0\n' >"$work/nocache.toml"; echo "$work/nocache.toml"; }
serve_start() {
  "$bin/iris" serve -config "$(nocache_config)" --bundle "$1" --addr 127.0.0.1:18080 >"$work/serve.log" 2>&1 & # its defaults: 64 running, 256 queued
  srv=$!
  local t0=$SECONDS until=$((SECONDS + $2))
  while ((SECONDS < until)); do
    if curl -fs 127.0.0.1:18080/readyz >/dev/null 2>&1; then echo "server ready after $((SECONDS - t0)) s"; return 0; fi
    kill -0 "$srv" 2>/dev/null || break
    sleep 1
  done
  echo "FAIL serve: not ready"
  return 1
}
serve_stop() {
  kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null
  grep -iE 'error|warn|engine loaded|panic' "$work/serve.log" | head -20
}

# ---- vl <family> <size>: one model's whole story in one call, under a time budget
t_end=$((SECONDS + ${IRIS_BUDGET_S:-560}))
# fit <seconds>: a step's timeout, cut to what is left of the budget (15 s kept for the summary)
fit() { local left=$((t_end - SECONDS - 15)); if ((left < $1)); then echo $((left > 1 ? left : 1)); else echo "$1"; fi; }
# pass_table METRICS: the scheduler's passes by phase and batch class and their mean wall time
# (iris_engine_batch_{passes,seconds}_total), from a saved /metrics scrape, then the passes'
# time per image through the tower (iris_engine_vision_images_total) by phase.
pass_table() {
  echo "phase    batch   passes   mean ms"
  awk -F'[{}]' '/^iris_engine_batch_(passes|seconds)_total/ {
      ph = $2; sub(/.*phase="/, "", ph); sub(/".*/, "", ph)
      b = $2; sub(/.*batch="/, "", b); sub(/".*/, "", b)
      k = ph " " b; split($3, v, " ")
      if ($1 ~ /passes/) n[k] = v[1]; else { t[k] = v[1]; secs[ph] += v[1] }
    }
    /^iris_engine_vision_images_total/ { split($3, v, " "); img += v[1] }
    /^iris_engine_seconds_total.*phase="hold"/ { split($3, v, " "); held += v[1] }
    END {
      if (held > 0) printf "held   (decode steps for the tower'"'"'s prompts) %.3f s\n", held
      for (k in n) if (n[k] > 0) { split(k, p, " "); printf "%-8s %-6s %8d %9.2f\n", p[1], p[2], n[k], 1000 * t[k] / n[k] }
      if (img > 0) printf "~ per image (%d through the tower): vision %.2f ms, prefill %.2f, decode %.2f: %.2f ms of passes\n", img,
        1000 * secs["vision"] / img, 1000 * secs["prefill"] / img, 1000 * secs["decode"] / img,
        1000 * (secs["vision"] + secs["prefill"] + secs["decode"]) / img
    }' "$1" | sort -k1,1 -k3,3nr
}

# metrics_diff BEFORE AFTER: the counters of AFTER less those of BEFORE (two /metrics scrapes)
metrics_diff() {
  awk 'NR == FNR { if ($1 !~ /^#/) v[$1] = $2; next } $1 !~ /^#/ { printf "%s %.9g\n", $1, $2 - v[$1] }' "$1" "$2"
}

# budgeted <name> <seconds> <command...>: the command under timeout fit(seconds) and its verdict;
# SKIP when under 10 s are left
budgeted() {
  local name=$1 to
  to=$(fit "$2")
  shift 2
  if ((to < 10)); then echo "SKIP $name (the phase's time budget is spent)"; return 1; fi
  timeout "$to" "$@"
  local rc=$?
  ((rc == 124)) && echo "timed out after $to s"
  verdict "$name" $rc
  return $rc
}

# ---- the served families: Phi-4-multimodal, DeepSeek-OCR-2, LocateAnything-3B and Lance-3B. Their
# engines take views, crops and tiles that gpucheck's case files do not describe, so parity is end
# to end (scripts/reference/gpu_served.py): the same image bytes and question to the reference's own
# processor and model and to `iris serve` (the plugin, the engine in fp32), the greedy token ids
# compared by benchmark/cmd/accuracy.
served_family() { case $1 in phi4_multimodal | deepseek_ocr2 | locateanything | lance) return 0 ;; esac; return 1; }

# served_py <family>: the interpreter of the family's reference. LocateAnything and Lance run the
# official code in transformers 4.57.1 / 4.49: on the device the carried site-packages
# ($carry/env/<family>.tar.xz, prepare.sh) unpacked into $work/env-<family> and put before the
# system's on PYTHONPATH (their sources in .build/locany, .build/lance-src); here IRIS_LAPY and
# IRIS_LANCEPY (the official envs' python, .build/laenv and .build/lance-venv).
served_py() {
  local v=
  case $1 in locateanything) v=${IRIS_LAPY:-} ;; lance) v=${IRIS_LANCEPY:-} ;; esac
  if [[ -n $v ]]; then echo "$v"; return; fi
  if [[ $1 == locateanything || $1 == lance ]]; then
    local site=$work/env-$1
    if [[ ! -d $site && -f $carry/env/$1.tar.xz ]]; then
      mkdir -p "$site.tmp" && xz -dc "$carry/env/$1.tar.xz" | tar -x -C "$site.tmp" && mv "$site.tmp" "$site"
    fi
    local src
    for src in "$carry"/env/"$1"-src.tar.xz; do
      [[ -f $src ]] && mkdir -p "$root/.build" && xz -dc "$src" | tar -x -C "$root/.build"
    done
    echo "env PYTHONPATH=$site $py"
    return
  fi
  echo "$py"
}

# served_tokenizer <family>: the tokenizer directory its checkpoint copies (carried gzipped as
# .carry/tokenizer/<name>/, or derived here from the Qwen files)
served_tokenizer() {
  local name
  case $1 in phi4_multimodal) name=phi4 ;; deepseek_ocr2) name=deepseek_ocr2 ;; locateanything) name=locateanything ;; *) name=qwen3 ;; esac
  local d=$root/.build/tokenizer/$name
  if [[ ! -f $d/tokenizer.json && -f $carry/tokenizer/$name/tokenizer.json.gz ]]; then
    mkdir -p "$d" && cp "$carry/tokenizer/$name"/*.json "$carry/tokenizer/$name"/*.jinja "$d/" 2>/dev/null
    gunzip -c "$carry/tokenizer/$name/tokenizer.json.gz" >"$d/tokenizer.json"
  fi
  if [[ ! -f $d/tokenizer.json && $name == locateanything ]]; then
    "$py" "$ref/locateanything_tokenizer.py" --src "$root/.build/tokenizer/qwen3" --out "$d" >&2 || echo "FAIL locateanything tokenizer" >&2
  fi
  echo "$d"
}

# served_workload <family> <cases>: the case image, question and max tokens of the profile's own
# workload (OCR: a page, 300 tokens; grounding: the photo with upstream's question, 32 tokens; the
# others: the photo, 10 tokens), from the reference's scene set
served_workload() {
  "$py" - "$1" "$2" <<'PY'
import json, sys
fam, cases = sys.argv[1], sys.argv[2]
kind, n, case = {"deepseek_ocr2": ("ocr", 300, "page_850x1100"), "locateanything": ("grounding", 32, "photo_426x320")}.get(fam, ("photo", 10, "photo_426x320"))
for line in open(f"{cases}/scenes.jsonl"):
    s = json.loads(line)
    if s["image"].split(".")[0] == case:
        print(f'{cases}/{s["image"]}\t{s["question"]}\t{n}\t{case}')
        break
PY
}

# make_served_checkpoint <family> <config> <dir> <timeout>: gpu_served.py's random bf16
# checkpoint in the real layout (reused while the machine is warm); its JSON line in <dir>.json
make_served_checkpoint() {
  if [[ -f $3/config.json && -f $3/tokenizer.json && -f $3.json ]]; then
    echo "reusing the checkpoint in $3"
    return
  fi
  step "checkpoint with random bf16 weights: $(basename "$2")"
  if (($4 < 10)); then echo "SKIP checkpoint (the phase's time budget is spent)"; return; fi
  local dev=cuda fpy tok
  [[ -n $cpu ]] && dev=cpu
  fpy=$(served_py "$1") tok=$(served_tokenizer "$1")
  rm -rf "$3"
  # shellcheck disable=SC2086
  (cd "$ref" && timeout "$4" $fpy gpu_served.py checkpoint --config "$2" --out "$3" --tokenizer "$tok" --device "$dev") | tee "$3.json.tmp"
  local rc=${PIPESTATUS[0]}
  verdict checkpoint "$rc"
  [[ $rc == 0 ]] && tail -1 "$3.json.tmp" >"$3.json"
  rm -f "$3.json.tmp"
}

# served_phase <family> <size> [parts]: the vl phase of a served family: the checkpoint; the bundle
# (built while the reference runs); gpu_served.py's fp32 reference on the cases; iris serve in fp32
# (the bundle's engine.precision switched) and accuracy: every token id equal; iris serve as built
# (bf16 on the GPU) and httpbench on the photo (3 and 10 tokens; c=1, 8, 32) and on the profile's
# own workload (c=1); gpu_served.py's baselines on both; summary-<family>-<size>.json.
served_phase() {
  local family=$1 size=$2 parts=${3:-parity,speed}
  local config=$ref/gpu_${family}_${size}.config.json
  if [[ ! -f $config ]]; then echo "FAIL vl: no $config"; return; fi
  local model=$work/$family-$size cases=$work/cases-$family-$size bundle=$work/bundle-vl-$family-$size
  local name=${family//_/-}-$size res=$OUT
  [[ $size == tiny ]] && res=$work/out-$family-$size
  mkdir -p "$res"
  local d
  for d in "$work"/bundle "$work"/bundle-* "$work"/qwen3_vl-* "$work"/internvl-* "$work"/qwen2_5_vl-* \
    "$work"/phi4_multimodal-* "$work"/deepseek_ocr2-* "$work"/locateanything-* "$work"/lance-*; do
    [[ -e $d && $d != "$model" && $d != "$model.json" ]] && rm -rf "$d"
  done
  local backend=cuda dev=cuda new=${IRIS_NEW:-32} hruns=30 hsecs=4 bruns=8 conc=1,8,32
  [[ $size == tiny ]] && hruns=10 hsecs=1 bruns=3
  if [[ -n $cpu ]]; then backend=cpu dev=cpu new=${IRIS_NEW:-8} hruns=3 hsecs=1 bruns=2 conc=1; fi
  local fpy
  fpy=$(served_py "$family")
  echo "vl $family $size ($parts, served): $model, results in $res, budget $((t_end - SECONDS)) s, reference: $fpy"

  make_served_checkpoint "$family" "$config" "$model" "$(fit 300)"
  if [[ ! -f $model.json ]]; then echo "FAIL vl: no checkpoint"; return; fi

  step "bundle build (in the background, while the reference runs)"
  rm -rf "$bundle"
  local plugin=()
  [[ -f $bin/$family.wasm ]] && plugin=(--plugin "$bin/$family.wasm")
  (timeout "$(fit 400)" "$bin/iris" bundle build --from "$model" --family "$family" --out "$bundle" --backend "$backend" \
    --name "$name" --context 4096 "${plugin[@]}" >"$work/bundle.log" 2>&1; echo $? >"$work/bundle.rc") &
  local bpid=$!

  step "cases and the reference's fp32 greedy answers ($new tokens)"
  rm -f "$res/ref.jsonl" "$res/parity.json"
  # shellcheck disable=SC2086
  (cd "$ref" && budgeted reference 420 $fpy gpu_served.py reference --model "$model" --cases "$cases" --out "$res/ref.jsonl" \
    --new "$new" --device "$dev")
  wait "$bpid"
  local brc
  brc=$(cat "$work/bundle.rc" 2>/dev/null || echo 1)
  verdict bundle "$brc"
  grep -vE '%\)$' "$work/bundle.log" | tail -2
  if [[ $brc != 0 ]]; then echo "FAIL vl: no bundle"; return; fi
  local prec
  prec=$(sed -n 's/^ *precision *= *"\(.*\)"/\1/p' "$bundle/bundle.toml" | head -1)

  if [[ $parts == *parity* ]]; then
    step "served parity: iris serve in fp32 against the reference (every token id equal)"
    sed -i 's/^\( *\)precision *= *".*"/\1precision = "fp32"/' "$bundle/bundle.toml"
    if [[ ! -s $res/ref.jsonl ]]; then
      echo "SKIP parity: no reference"
    elif serve_start "$bundle" "$(fit 150)"; then
      # accuracy's table and token line (its list of answers that differ from the empty expected
      # answers is noise here: random weights, no expected answer)
      budgeted parity 240 bash -c '"$@" >"$0" 2>&1; rc=$?; head -4 "$0"; exit $rc' "$work/accuracy.txt" \
        "$bin/accuracy" -url http://127.0.0.1:18080 -model "$name" -scenes "$cases" -reference "$res/ref.jsonl" \
        -max-tokens "$new" -ignore-eos -concurrency 1 -min-token-agreement 1 -json "$res/parity.json"
      serve_stop
    else
      serve_stop
    fi
    sed -i "s/^\( *\)precision *= *\".*\"/\1precision = \"$prec\"/" "$bundle/bundle.toml"
  fi

  if [[ $parts == *speed* ]]; then
    local wl wimg wq wn wcase
    wl=$(served_workload "$family" "$cases")
    IFS=$'\t' read -r wimg wq wn wcase <<<"$wl"
    step "HTTP ($prec): iris serve, the photo (3 and 10 tokens) and the profile's workload ($wcase, $wn tokens)"
    if (($(fit 60) < 60)); then
      echo "SKIP http (the phase's time budget is spent)"
    elif serve_start "$bundle" "$(fit 150)"; then
      budgeted http 120 "$bin/httpbench" -url http://127.0.0.1:18080 -model "$name" -image "$cases/photo_426x320.jpg" \
        -question "$photo_q" -runs "$hruns" -seconds "$hsecs" -concurrency "$conc" -out "$res/http.json"
      if [[ -n $wimg && $wn != 10 ]]; then
        budgeted http-workload 150 "$bin/httpbench" -url http://127.0.0.1:18080 -model "$name" -image "$wimg" \
          -question "$wq" -runs "$hruns" -tokens "$wn" -concurrency "" -out "$res/http-workload.json"
      fi
      serve_stop
    else
      serve_stop
    fi
    step "the reference's generate() (bf16 on the GPU): the photo, then the workload"
    [[ -n $cpu ]] && echo "(IRIS_CPU=1: fp32 weights loaded as bf16 on the CPU)"
    # shellcheck disable=SC2086
    (cd "$ref" && budgeted baseline 240 $fpy gpu_served.py baseline --model "$model" --cases "$cases" --case photo_426x320 \
      --tokens 3,10 --runs "$bruns" --device "$dev" --out "$res/baseline.json")
    if [[ -n $wcase && $wn != 10 ]]; then
      # shellcheck disable=SC2086
      # half the runs: 300 tokens of the reference's generate() take seconds each
      (cd "$ref" && budgeted baseline-workload 240 $fpy gpu_served.py baseline --model "$model" --cases "$cases" --case "$wcase" \
        --tokens "$wn" --runs "$(((bruns + 1) / 2))" --device "$dev" --out "$res/baseline-workload.json")
    fi
  fi
  rm -rf "$bundle"

  step "summary"
  "$py" "$root/scripts/gpu/summary.py" --served --dir "$res" --out "$res/summary-$family-$size.json" --model "$name" --checkpoint "$model.json"
}

# vl_phase <family> <size>: gpu_<family>_<size>.config.json's random checkpoint; fp32 parity of
# the engine against transformers; the engine's timings on the photo; the bundle (built while the
# reference runs) served over HTTP; transformers' baselines; summary-<family>-<size>.json.
# Results go to $OUT (7 files with the log), a tiny model's to $work (the log has its summary
# table), so `qwen3 tiny; qwen3 2b` in one call stays within $OUT's 8 files.
vl_phase() {
  local family=$1 size=$2 parts=${3:-parity,speed}
  if served_family "$family"; then served_phase "$@"; return; fi
  local stem=$family
  [[ $family == internvl ]] && stem=internvl3 # the InternVL3 generation's configs
  local config=$ref/gpu_${stem}_${size}.config.json
  if [[ ! -f $config ]]; then echo "FAIL vl: no $config"; return; fi
  local model=$work/$family-$size cases=$work/cases-$family-$size bundle=$work/bundle-vl-$family-$size
  local name=${family//_/-}-$size res=$OUT
  [[ $family == qwen2_5_vl ]] && name=qwen25vl-$size
  # internvl: two tilings make twice the speed files; they stay in $work (a tarball and the
  # summary go to $OUT)
  [[ $size == tiny || $family == internvl ]] && res=$work/out-$family-$size
  mkdir -p "$res"
  # disk: a warm machine may still hold other sizes' checkpoints and bundles (the 8B is 17.5 GB, and
  # its bundle a copy)
  local d
  for d in "$work"/bundle "$work"/bundle-* "$work"/qwen3_vl-* "$work"/internvl-*; do
    [[ -e $d && $d != "$model" && $d != "$model.json" ]] && rm -rf "$d"
  done
  local backend=cuda dev=cuda bprec=bf16 precs=fp32 new=${IRIS_NEW:-32} runs=30 secs=3 hruns=30 hsecs=4 bruns=8
  [[ -n ${IRIS_BF16:-} ]] && precs=fp32,bf16
  [[ $size == tiny ]] && runs=10 secs=1 hruns=10 hsecs=1 bruns=3 # a dry run: every step, short
  if [[ -n $cpu ]]; then
    backend=cpu dev=cpu bprec=fp32 precs=fp32 new=${IRIS_NEW:-8} runs=5 secs=1 hruns=5 hsecs=1 bruns=2
  fi
  # the photo's tilings: <case>:<suffix of the result files>:<bundle params for HTTP>
  local tilings=("photo_426x320::")
  [[ $family == internvl ]] && tilings+=("photo_426x320_t1:-t1:max_patches = 1")
  echo "vl $family $size ($parts): $model, results in $res, budget $((t_end - SECONDS)) s"

  make_checkpoint "$config" "$model" "$(fit 300)" "$(tokenizer_dir "$family")"
  if [[ ! -f $model.json ]]; then echo "FAIL vl: no checkpoint"; return; fi

  local bpid=
  if [[ $parts == *speed* ]]; then
    step "bundle build (in the background, while the reference runs)"
    rm -rf "$bundle"
    local plugin=()
    [[ -f $bin/$family.wasm ]] && plugin=(--plugin "$bin/$family.wasm")
    (timeout "$(fit 400)" "$bin/iris" bundle build --from "$model" --family "$family" --out "$bundle" --backend "$backend" \
      --name "$name" --context 4096 "${plugin[@]}" >"$work/bundle.log" 2>&1; echo $? >"$work/bundle.rc") &
    bpid=$!
  fi

  if [[ $parts == *parity* ]]; then
    step "processor outputs and transformers' greedy reference ($precs, $new tokens)"
    rm -f "$res/ref.json" "$res/parity.json"
    budgeted reference 300 "$py" "$ref/gpu_parity.py" --model "$model" --cases "$cases" --out "$res/ref.json" --new "$new" \
      --precisions "$precs" --device "$dev"
  fi
  if [[ ! -f $cases/index.json ]]; then
    budgeted cases 90 "$py" "$ref/gpu_parity.py" --model "$model" --cases "$cases" --out /dev/null --prepare-only --device "$dev"
  fi

  if [[ $parts == *parity* ]]; then
    step "engine parity against transformers (fp32 tokens identical)"
    if [[ -f $res/ref.json ]]; then
      budgeted parity 240 "$bin/gpucheck" parity -backend "$backend" -model "$model" -cases "$cases" -ref "$res/ref.json" -new "$new" \
        -precision "$precs" -out "$res/parity.json"
    else
      echo "SKIP parity: no reference"
    fi
  fi

  if [[ $parts == *speed* ]]; then
    local t c sfx params
    for t in "${tilings[@]}"; do
      IFS=: read -r c sfx params <<<"$t"
      step "engine timing ($bprec): $c"
      budgeted "bench$sfx" 150 "$bin/gpucheck" bench -backend "$backend" -precision "$bprec" -model "$model" -cases "$cases" -case "$c" \
        -runs "$runs" -seconds "$secs" -out "$res/bench$sfx.json"
    done

    step "HTTP: the bundle, iris serve, loopback load (the photo's JPEG bytes)"
    wait "$bpid"
    local brc
    brc=$(cat "$work/bundle.rc" 2>/dev/null || echo 1)
    verdict bundle "$brc"
    grep -vE '%\)$' "$work/bundle.log" | head -4 # not the progress lines
    if [[ $brc == 0 ]]; then
      for t in "${tilings[@]}"; do
        IFS=: read -r c sfx params <<<"$t"
        if [[ -n $params ]]; then # the same files with other plugin params: bundle.toml digests the others, not itself
          sed -i "s/^\( *\)${params%% *} = .*/\1$params/" "$bundle/bundle.toml"
          grep -q "^ *$params\$" "$bundle/bundle.toml" || { echo "FAIL http$sfx: bundle.toml has no ${params%% *}"; continue; }
        fi
        if (($(fit 60) < 60)); then
          echo "SKIP http$sfx (the phase's time budget is spent)"
        elif serve_start "$bundle" "$(fit 150)"; then
          budgeted "http$sfx" 120 "$bin/httpbench" -url http://127.0.0.1:18080 -model "$name" -image "$cases/photo_426x320.jpg" \
            -question "$photo_q" -runs "$hruns" -seconds "$hsecs" -concurrency 1,8,32 -out "$res/http$sfx.json"
          serve_stop
        else
          serve_stop
        fi
      done
    fi
    rm -rf "$bundle"

    for t in "${tilings[@]}"; do
      IFS=: read -r c sfx params <<<"$t"
      step "transformers baseline (bf16; dynamic and static cache): $c"
      budgeted "baseline$sfx" 300 "$py" "$ref/gpu_baseline.py" --model "$model" --cases "$cases" --case "$c" --runs "$bruns" --caches "${IRIS_CACHES:-dynamic,static}" \
        --device "$dev" --out "$res/baseline$sfx.json"
    done
  fi

  step "summary"
  local also=()
  [[ $family == internvl ]] && also=(--also=-t1)
  "$py" "$root/scripts/gpu/summary.py" --dir "$res" --out "$res/summary-$family-$size.json" --model "$name" --checkpoint "$model.json" "${also[@]}"
  if [[ $family == internvl && $size != tiny ]]; then
    cp "$res/summary-$family-$size.json" "$OUT/"
    tar -czf "$OUT/raw-$family-$size.tgz" -C "$res" .
  fi
}

if [[ $phase == sweep ]]; then # the sweep alone (while it is being mended)
  step "shape sweep"
  (cd core/internal/enginetest/cudaparity && timeout 240 "$bin/cudaparity.test" -test.v -test.run 'Sweep' 2>&1 | tee "$OUT/sweep.log" | grep -E -- '^--- (PASS|FAIL)|^    --- FAIL|^FAIL|^ok|panic|sweep.go' | tail -60); verdict sweep ${PIPESTATUS[0]}
  exit 0
fi
# run_tests <binary> <dir> <timeout> <args>...: runs a carried test binary with -test.v in dir and
# prints its output; the output and the exit status are also kept in $tests for record_tests.
tests=$work/tests
rm -rf "$tests" && mkdir -p "$tests"
run_tests() {
  local b=$1 dir=$2 t=$3 rc
  shift 3
  (cd "$dir" && timeout "$t" "$bin/$b" -test.v "$@") >"$tests/last.log" 2>&1
  rc=$?
  cat "$tests/last.log" >>"$tests/$b.log"
  echo "$rc" >>"$tests/$b.status"
  cat "$tests/last.log"
  return $rc
}
# record_tests <phase> <binary>...: the dated record of the binaries' runs: for each, the tests
# and subtests run, passed, failed and skipped (their --- lines), and the verdict (passed when
# every run of every binary exited 0). One line, "GPU-TESTS" and tab-separated fields, printed and
# written to $OUT/gpu-tests.tsv: scripts/gpu/record-check.sh adds it to docs/results/gpu-tests.md.
# The commit is the one prepare.sh built the binaries from ($carry/commit).
record_tests() {
  local phase=$1 verdict=passed b pass fail skip
  shift
  local fields=("$(date -u +%F)" "$(cat "$carry/commit" 2>/dev/null || echo unknown)" "run.sh $phase")
  for b in "$@"; do
    if [[ ! -f $tests/$b.status ]]; then
      fields+=("$b=not run")
      verdict=failed
      continue
    fi
    pass=$(grep -cE '^ *--- PASS' "$tests/$b.log")
    fail=$(grep -cE '^ *--- FAIL' "$tests/$b.log")
    skip=$(grep -cE '^ *--- SKIP' "$tests/$b.log")
    fields+=("$b=$((pass + fail + skip)) run: $pass passed, $fail failed, $skip skipped")
    if ((fail > 0)) || grep -qv '^0$' "$tests/$b.status"; then verdict=failed; fi
  done
  fields+=("$verdict")
  (IFS=$'\t'; echo "GPU-TESTS${IFS}${fields[*]}") | tee "$OUT/gpu-tests.tsv"
}

if [[ $phase == smoke || $phase == check ]]; then
  step "gpu package: compat symbols, PTX load, launch, graph capture"
  run_tests gpu.test core/internal/ml/cuda/gpu 60 | grep -E '^(=== RUN|--- |PASS|FAIL|ok|\s+gpu)'; verdict gpu.test ${PIPESTATUS[0]}
  step "kernels against CPU references"
  run_tests cuda.test core/internal/ml/cuda 180 -test.run 'Kernel' | grep -vE '^=== (RUN|PAUSE|CONT)'; verdict kernels ${PIPESTATUS[0]}
  step "tiny fixtures: parity with transformers (fp32), graph vs plain decode, bf16, batch = single"
  run_tests cudaparity.test core/internal/enginetest/cudaparity 150 -test.run 'Parity|BF16|Graph|BatchEqualsSingle|VisionBatch|VisionLane' | tee "$OUT/fixtures.log" | grep -E -- '^--- (PASS|FAIL)|^    --- FAIL|FAIL|^ok|agree|error|panic' | tail -80; verdict fixtures ${PIPESTATUS[0]}
  step "shape sweeps: 14 Qwen2.5-VL and 11 Qwen3-VL seeded checkpoints x 6 cases against transformers (fp32)"
  run_tests cudaparity.test core/internal/enginetest/cudaparity 240 -test.run 'Sweep' | tee "$OUT/sweep.log" | grep -E -- '^--- (PASS|FAIL)|^    --- FAIL|^FAIL|^ok|panic|sweep.go' | tail -60; verdict sweep ${PIPESTATUS[0]}
  step "the record (scripts/gpu/record-check.sh adds it to docs/results/gpu-tests.md)"
  record_tests "$phase" gpu.test cuda.test cudaparity.test
fi
if [[ $phase == attn ]]; then
  # issue 44's kernel half in one call (~5 min): the attention kernels' tests (every mask form,
  # head dims 64/72/80/128, against float64 and against the cuBLAS path), then Iris's paths and
  # torch SDPA's backends on the profiles' shapes (core/internal/ml/cuda/testdata/attn_shapes.json)
  # and the InternViT tower, and the side-by-side table ($OUT/attn.md). The InternVL3 HTTP table
  # is `run.sh internvl 2b` and `run.sh internvl 8b`, a call each.
  t_end=$((SECONDS + ${IRIS_BUDGET_S:-560}))
  step "attention kernels: iris_attn_mma(_mask) and the backend's attention ops against float64 and the cuBLAS path"
  budgeted attn-kernels 200 bash -c "cd core/internal/ml/cuda && '$bin/cuda.test' -test.v -test.run 'Kernel.*(Attention|Mask|KeyFlags|Bidirectional|SequenceSegments|MMA)' 2>&1 \
    | tee '$OUT/attn-tests.log' | grep -E -- '^--- |^    --- FAIL|^(PASS|FAIL|ok)|panic' | tail -60; exit \${PIPESTATUS[0]}"
  step "Iris's attention paths on the profiles' shapes, and the InternViT tower (cuda.test -test.bench)"
  budgeted attn-iris 240 bash -c "cd core/internal/ml/cuda && '$bin/cuda.test' -test.run '^$' -test.bench 'AttentionForms|VisionTower' -test.benchtime 5x 2>&1 | tee '$OUT/attn-iris.txt'; exit \${PIPESTATUS[0]}"
  step "torch SDPA's backends on the same shapes (flash, cuDNN, memory-efficient, math)"
  budgeted attn-sdpa 150 "$py" scripts/gpu/attn_sdpa.py --out "$OUT/attn-sdpa.json"
  step "the table"
  "$py" scripts/gpu/attn_table.py --iris "$OUT/attn-iris.txt" --sdpa "$OUT/attn-sdpa.json" | tee "$OUT/attn.md"
fi
if [[ $phase == smoke ]]; then
  step "pipeline dry run on the tiny model (gpu_parity.py, gpucheck parity/bench, gpu_baseline.py)"
  timeout 150 python3 "$ref/gpu_parity.py" --model "$template" --cases "$work/tcases" --out "$work/tref.json" --new 8; verdict tiny-ref $?
  timeout 60 "$bin/gpucheck" parity -model "$template" -cases "$work/tcases" -ref "$work/tref.json" -new 8 -out "$work/tiny-parity.json"; verdict tiny-parity $?
  timeout 60 "$bin/gpucheck" bench -model "$template" -cases "$work/tcases" -case photo_426x320 -runs 5 -seconds 1 -out "$work/tiny-bench.json"; verdict tiny-bench $?
  timeout 150 python3 "$ref/gpu_baseline.py" --model "$template" --cases "$work/tcases" --case photo_426x320 --runs 3 --out "$work/tiny-baseline.json"; verdict tiny-baseline $?
  step "the same dry run on a generated tiny Qwen3-VL, and its bundle over HTTP (run.sh qwen3 tiny)"
  t_end=$((SECONDS + ${IRIS_BUDGET_S:-240}))
  vl_phase qwen3_vl tiny
fi
if [[ $phase == qwen3 || $phase == vl || $phase == internvl ]]; then
  case $phase in
  qwen3) vl_phase qwen3_vl "${2:-2b}" ;;
  internvl) vl_phase internvl "${2:-2b}" "${3:-}" ;;
  *) vl_phase "${2:?family}" "${3:?size}" "${4:-}" ;;
  esac
fi
# demo_phase: issue 15 in one call: train the demo model (scripts/demo/train.py: the checkpoint,
# transformers' fp32 and bf16 answers on the held-out scenes), then serve it with the CUDA engine in
# bf16 and fp32 and ask every held-out question (benchmark/cmd/accuracy): bf16 agreement with
# transformers bf16, fp32 answers against transformers fp32. $OUT: demo-model.tgz.NN (the
# checkpoint), demo-results.tgz (the training report, answers, the accuracy JSONs), the log.
# IRIS_TRAIN_S (default 400) is the training loop's budget; IRIS_BATCH (scenes a step), IRIS_LR,
# IRIS_MIN_PIXELS, IRIS_AUX (--aux-weight), IRIS_AUX_HEADS (--aux-head-weights, e.g.
# sign_word=0.25), IRIS_SIGN_RATE (--sign-rate), IRIS_DENSE=1 (--dense), IRIS_TYPE_WEIGHTS
# (--type-weights, e.g. side=3), IRIS_BIND (--bind-weight, e.g. 0.3), IRIS_QUESTIONS (all|one), IRIS_VISION_S
# (--vision-seconds: the tower alone first), IRIS_PROFILE_AT (--profile-at) and IRIS_VISION_FP32=1
# (--vision-fp32) pass to train.py; IRIS_INIT continues training from a checkpoint: `committed` (scripts/demo/model, in the
# tree) or a directory holding an earlier call's demo-model.tgz.NN (carried); IRIS_TRAIN_ONLY=1
# skips the engine's agreement (a continuation call that carries no iris: tokenizer only).
# IRIS_ALT="train.py arguments" trains a second model beside the first on the same GPU, the
# loader's workers split between them, with those arguments added (e.g. "--text-layers 8"); the
# better of the two on the held-out scenes (transformers fp32) is packed, served and reported, the
# other's log and accuracy go to the report's other/.
# IRIS_CPU=1: a few steps on the CPU.
demo_phase() {
  local model=$work/demo-model rep=$work/demo-report held=$work/heldout train_s=${IRIS_TRAIN_S:-400}
  local dev=cuda backend=cuda precs="bf16 fp32" count=300 targs=()
  if [[ -n $cpu ]]; then
    dev=cpu backend=cpu precs=fp32 count=${IRIS_EVAL_COUNT:-10} targs=(--steps 20 --batch 8 --workers 1)
  fi
  [[ -n ${IRIS_BATCH:-} ]] && targs+=(--batch "$IRIS_BATCH")
  [[ -n ${IRIS_LR:-} ]] && targs+=(--lr "$IRIS_LR")
  [[ -n ${IRIS_MIN_PIXELS:-} ]] && targs+=(--min-pixels "$IRIS_MIN_PIXELS")
  [[ -n ${IRIS_AUX:-} ]] && targs+=(--aux-weight "$IRIS_AUX")
  [[ -n ${IRIS_AUX_HEADS:-} ]] && targs+=(--aux-head-weights "$IRIS_AUX_HEADS")
  [[ -n ${IRIS_SIGN_RATE:-} ]] && targs+=(--sign-rate "$IRIS_SIGN_RATE")
  [[ -n ${IRIS_DENSE:-} ]] && targs+=(--dense)
  [[ -n ${IRIS_TYPE_WEIGHTS:-} ]] && targs+=(--type-weights "$IRIS_TYPE_WEIGHTS")
  [[ -n ${IRIS_BIND:-} ]] && targs+=(--bind-weight "$IRIS_BIND")
  [[ -n ${IRIS_QUESTIONS:-} ]] && targs+=(--questions "$IRIS_QUESTIONS")
  [[ -n ${IRIS_VISION_S:-} ]] && targs+=(--vision-seconds "$IRIS_VISION_S")
  [[ -n ${IRIS_PROFILE_AT:-} ]] && targs+=(--profile-at "$IRIS_PROFILE_AT")
  [[ -n ${IRIS_VISION_FP32:-} ]] && targs+=(--vision-fp32)
  rm -rf "$model" "$rep" "$held" "$work/init"
  if [[ ${IRIS_INIT:-} == committed ]]; then
    step "the committed demo model as the starting point"
    bash "$root/scripts/demo/unpack.sh" "$work/init" && targs+=(--init "$work/init")
  elif [[ -n ${IRIS_INIT:-} ]]; then
    step "an earlier call's checkpoint as the starting point ($IRIS_INIT)"
    mkdir -p "$work/init.tmp" && cat "$IRIS_INIT"/demo-model.tgz.* | tar xz -C "$work/init.tmp" &&
      mv "$work/init.tmp/demo-model" "$work/init" && targs+=(--init "$work/init")
  fi
  if [[ -n ${IRIS_INIT:-} && ! -f $work/init/model.safetensors ]]; then echo "FAIL demo: no starting checkpoint"; return; fi
  if [[ -n ${IRIS_ALT:-} ]]; then
    # two runs side by side on the one GPU (a step of this tiny model leaves it mostly idle), the
    # loader's workers split between them; the better on the held-out scenes is packed and served
    local v best=a alt half=$(($(nproc) / 2 - 1)) pids=()
    local -A acc=()
    read -ra alt <<<"$IRIS_ALT"
    step "train two demo models side by side ($train_s s each): a, and b with: ${alt[*]}"
    for v in a b; do
      local extra=()
      [[ $v == b ]] && extra=("${alt[@]}")
      rm -rf "$model-$v" "$model-$v-grown" "$rep-$v" "$work/pack-$v" && mkdir -p "$work/pack-$v"
      budgeted "train-$v" $((train_s + 150)) "$py" "$root/scripts/demo/train.py" --device "$dev" \
        --max-seconds "$train_s" --eval-count "$count" "${targs[@]}" --workers "$((half < 1 ? 1 : half))" \
        "${extra[@]}" --out "$model-$v" --report "$rep-$v" --pack "$work/pack-$v" >"$work/train-$v.out" 2>&1 &
      pids+=($!)
    done
    wait "${pids[@]}"
    cat "$work/train-a.out" "$work/train-b.out"
    for v in a b; do
      acc[$v]=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["accuracy"]["overall"]["accuracy"])' "$rep-$v/accuracy.json" 2>/dev/null || echo 0)
    done
    awk -v a="${acc[a]:-0}" -v b="${acc[b]:-0}" 'BEGIN { exit !(b > a) }' && best=b
    echo "held-out (transformers fp32): a ${acc[a]}, b ${acc[b]} (${alt[*]}): b's the better? $([[ $best == b ]] && echo yes || echo no)"
    rm -rf "$model" "$rep" && cp -r "$model-$best" "$model" && cp -r "$rep-$best" "$rep" || return
    local other=a
    [[ $best == a ]] && other=b
    mkdir -p "$rep/other" && cp "$rep-$other"/{train.log,accuracy.json,report.md} "$rep/other/" 2>/dev/null
    echo "$best" >"$rep/chosen" && cp "$work/pack-$best"/demo-model.tgz.* "$OUT/"
  else
    step "train the demo model (scripts/demo/train.py, $train_s s of training)"
    budgeted train $((train_s + 120)) "$py" "$root/scripts/demo/train.py" --device "$dev" --max-seconds "$train_s" \
      --eval-count "$count" "${targs[@]}" --out "$model" --report "$rep" --pack "$OUT"
  fi
  if [[ ! -f $model/model.safetensors ]]; then echo "FAIL demo: no checkpoint"; return; fi
  step "held-out scenes (seed 2, $count)"
  if [[ -n ${IRIS_TRAIN_ONLY:-} ]]; then tar czf "$OUT/demo-results.tgz" -C "$rep" .; return; fi
  budgeted scenes 90 "$py" "$root/scripts/demo/scenes.py" --seed 2 --count "$count" --out "$held"
  local prec bundle refs plugin=()
  [[ -f $bin/qwen2_5_vl.wasm ]] && plugin=(--plugin "$bin/qwen2_5_vl.wasm")
  for prec in $precs; do
    step "the $backend engine ($prec) on the held-out scenes against transformers $prec"
    bundle=$work/bundle-demo-$prec refs=answers.jsonl
    [[ $prec == bf16 ]] && refs=answers-bf16.jsonl
    rm -rf "$bundle"
    budgeted "bundle-$prec" 60 "$bin/iris" bundle build --from "$model" --family qwen2_5_vl --out "$bundle" \
      --backend "$backend" --precision "$prec" --name demo "${plugin[@]}" || continue
    if serve_start "$bundle" 60; then
      budgeted "accuracy-$prec" 150 "$bin/accuracy" --url http://127.0.0.1:18080 --model demo --scenes "$held" \
        --reference "$rep/$refs" --concurrency 16 --json "$rep/iris-$backend-$prec.json"
    fi
    serve_stop
  done
  tar czf "$OUT/demo-results.tgz" -C "$rep" .
}
if [[ $phase == demo ]]; then
  t_end=$((SECONDS + ${IRIS_BUDGET_S:-570}))
  demo_phase
fi

# ---- base: stage IRIS_BASE's build (IRIS_PHASE=base IRIS_BASE=<commit> IRIS_CARRY_DIR=.carry-base
# just gpu-bench; carry [".carry-base"], IRIS_CARRY=.carry-base) in /tmp/iris-base, where it stays
# while the machine is warm: the throughput call that follows (within the tool's idle release, its
# carry prepared beforehand) serves it beside this build for the c=1 comparison, in one call, which
# the 64 MiB would not hold with both builds carried.
# unpack_base: the carried base build (.carry*/base) into $base (kept while the machine is warm).
base=/tmp/iris-base
unpack_base() {
  mkdir -p "$base"
  local f
  for f in "$carry"/base/*.gz; do [[ -e $f ]] && gunzip -c "$f" >"$base/$(basename "${f%.gz}")"; done
  for f in "$carry"/base/*.xz; do [[ -e $f ]] && xz -dc "$f" >"$base/$(basename "${f%.xz}")"; done
  chmod +x "$base"/* 2>/dev/null
}
if [[ $phase == base ]]; then
  unpack_base
  if [[ -x $base/iris ]]; then
    ls -la "$base"; echo "PASS base staged"
  else
    echo "FAIL base: no iris in $carry/base"
  fi
  exit 0
fi

# ---- soak [family] [size]: issue 14's soak on the GPU at full size. The random checkpoint (default
# the Qwen2.5-VL 3B) and its cases as throughput makes them, iris serve at its defaults (the
# embedding cache off, so that every request runs the vision tower), then benchmark/cmd/soak:
# IRIS_SOAK (default 2000) requests at c=64 drawn from good requests on the cases' .jpg/.png files
# (plain and streamed), 10% bad inputs and 10% client cancellations; no 5xx, every good answer
# equal to the same request alone, bad inputs refused as alone, iris_kv_cache_utilization back to
# 0, the server's RSS at the end within 10% + 64 MiB of its RSS after the warm-up fifth. The bundle
# is fp32 (IRIS_SOAK_PRECISION, default fp32): "the same answer as alone" holds for fp32 only. In
# bf16 a request's products depend on what it is batched with (cuBLAS picks kernels by the batch's
# rows), and random weights' near-tied logits turn those roundings into other tokens: the first
# H200 soak, in bf16, had 656 of 1,610 good answers differ from alone (and no 5xx). Before the
# 3B checkpoint the phases below share, so that `soak qwen2_5_vl tiny` (the dry run) builds none.
if [[ $phase == soak ]]; then
  fam=${2:-qwen2_5_vl} size=${3:-3b} backend=cuda
  [[ -n $cpu ]] && backend=cpu # the dry run here: IRIS_CPU=1 IRIS_SOAK=200 ... run.sh soak qwen2_5_vl tiny
  model=$work/$fam-$size cases=$work/cases-$fam-$size name=${fam//_/-}-$size
  [[ $fam == qwen2_5_vl ]] && name=qwen25vl-$size
  make_checkpoint "$ref/gpu_${fam}_${size}.config.json" "$model" "$(fit 300)"
  if [[ ! -f $cases/index.json ]]; then
    budgeted cases 90 "$py" "$ref/gpu_parity.py" --model "$model" --cases "$cases" --out /dev/null --prepare-only
  fi
  plugin=(); [[ -f $bin/$fam.wasm ]] && plugin=(--plugin "$bin/$fam.wasm")
  rm -rf "$work/bundle-soak"
  budgeted bundle-soak 200 "$bin/iris" bundle build --from "$model" --family "$fam" --out "$work/bundle-soak" --backend "$backend" \
    --name "$name" --context 4096 --precision "${IRIS_SOAK_PRECISION:-fp32}" "${plugin[@]}" >/dev/null
  if [[ -d $work/bundle-soak ]] && serve_start "$work/bundle-soak" 120; then
    step "soak: ${IRIS_SOAK:-2000} mixed requests at c=64 (10% bad, 10% cancelled) against iris serve"
    budgeted soak 420 "$bin/soak" -url http://127.0.0.1:18080 -model "$name" -images "$cases" -question "$photo_q" \
      -requests "${IRIS_SOAK:-2000}" -concurrency 64 -pid "$srv" -json "$OUT/soak.json"
    curl -fs 127.0.0.1:18080/metrics 2>/dev/null | grep -E '^iris_engine_pass|^iris_engine_vision|^iris_kv_cache' | head -8
    serve_stop
  fi
fi

# ---- qualify [K/N|all]: the upstream qualification's table (docs/qualification.md). Each profile of
# scripts/gpu/qualify.tsv measured in call K/N (all: every row, the CPU dry run), in turn: its random
# bf16 checkpoint from the full-size config (IRIS_CPU=1: the family's tiny config), the bundle (bf16
# on the GPU; the profile's context), iris serve (the embedding cache off, its spans exported to
# iris profile's OTLP receiver), `iris profile` with the corpus of qualify_corpus.py (AIPerf's
# single_turn format: the request AIPerf's built-in chat sends), c=1, 5 warm-up + 50 measured
# requests (IRIS_QWARMUP, IRIS_QREQUESTS), greedy, the profile's max tokens: HTTP and task latency,
# images/s, output tokens, every answer checked against the runtime in-process (--bundle) and the
# sources, bundle, inputs and tokenizer fingerprinted before and after (provenance); AIPerf 0.13.0
# itself first where IRIS_AIPERF names its executable or aiperf_stage finds it staged (its artifacts checked the same way by
# `iris profile report --bundle`); then transformers' generate() on the same corpus (gpu_served.py
# corpus, bf16, at most IRIS_TF_S seconds of rows). Results in $work/qualify/<profile>/; the table
# (qualify_table.py) in the log and $OUT/qualify-<K>of<N>.md and .json, the artifacts in
# $OUT/qualify-<K>of<N>.tgz.
# into: a bash -c script that runs "$@" with its output in the file $0 (a step's log, its verdict outside)
into='"$@" >"$0" 2>&1'
qualify_profile() {
  local profile=$1 family=$2 size=$3 context=$4 kind=$5 max=$6 call=$7
  local dir=$work/qualify/$profile stem=$family
  [[ $family == internvl ]] && stem=internvl3
  local config=$ref/gpu_${stem}_${size}.config.json model=$work/$family-$size bundle=$work/bundle-q-$profile
  local corpus=$qdata/corpus-$kind.jsonl backend=cuda dev=cuda tok
  [[ -n $cpu ]] && backend=cpu dev=cpu
  rm -rf "$dir" && mkdir -p "$dir"
  printf '{"profile": "%s", "family": "%s", "size": "%s", "context": %s, "corpus": "%s", "max_tokens": %s, "call": "%s"}\n' \
    "$profile" "$family" "$size" "$context" "$kind" "$max" "$call" >"$dir/row.json"
  step "qualify $profile ($family $size, context $context, corpus $kind, $max tokens; call $call; $((t_end - SECONDS)) s left)"
  if (($(fit 120) < 120)); then echo "SKIP qualify-$profile (the call's time budget is spent)"; return; fi
  # disk: another size's or family's checkpoint and every bundle go first (the 8B is 17.5 GB, its bundle a copy)
  local d
  for d in "$work"/bundle* "$work"/qwen2_5_vl-* "$work"/qwen3_vl-* "$work"/internvl-* "$work"/phi4_multimodal-* \
    "$work"/deepseek_ocr2-* "$work"/locateanything-* "$work"/lance-*; do
    [[ -e $d && $d != "$model" && $d != "$model.json" ]] && rm -rf "$d"
  done
  if served_family "$family"; then
    make_served_checkpoint "$family" "$config" "$model" "$(fit 240)"
    tok=$(served_tokenizer "$family")
  else
    make_checkpoint "$config" "$model" "$(fit 240)" "$(tokenizer_dir "$family")"
    tok=$(tokenizer_dir "$family")
  fi
  if [[ ! -f $model.json ]]; then echo "FAIL qualify-$profile: no checkpoint"; return; fi
  cp "$model.json" "$dir/checkpoint.json"
  local plugin=()
  [[ -f $bin/$family.wasm ]] && plugin=(--plugin "$bin/$family.wasm")
  rm -rf "$bundle"
  budgeted "bundle-$profile" 240 bash -c "$into" "$dir/bundle.log" "$bin/iris" bundle build --from "$model" --family "$family" \
    --out "$bundle" --backend "$backend" --name "$profile" --context "$context" "${plugin[@]}" || { tail -3 "$dir/bundle.log"; return; }
  sed -n 's/^ *precision *= *"\(.*\)"/\1/p' "$bundle/bundle.toml" | head -1 >"$dir/precision"
  local otlp=4319
  OTEL_TRACES_EXPORTER=otlp OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf OTEL_BSP_SCHEDULE_DELAY=100 \
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="http://127.0.0.1:$otlp/v1/traces" serve_start "$bundle" "$(fit 180)" || { serve_stop; return; }
  if [[ -n ${IRIS_AIPERF:-} ]]; then
    # AIPerf 0.13.0 itself, as scripts/aiperf/ci.sh runs it, then its answers checked in-process
    AIPERF_DATASET_MMAP_CACHE_ENABLED=false budgeted "aiperf-$profile" 240 bash -c "$into" "$dir/aiperf.log" "$IRIS_AIPERF" profile \
      --model "$profile" --url http://127.0.0.1:18080 --endpoint-type chat --input-file "$corpus" --custom-dataset-type single_turn \
      --concurrency 1 --request-count "$qreq" --warmup-request-count "$qwarm" --random-seed 0 \
      --extra-inputs temperature:0 --extra-inputs top_k:1 --extra-inputs "max_tokens:$max" --tokenizer "$tok" \
      --use-server-token-count --failed-request-threshold 0 --request-timeout-seconds 300 --export-level raw \
      --artifact-dir "$dir/aiperf" --ui-type none --no-server-metrics --no-gpu-telemetry --workers-max 1 || tail -20 "$dir/aiperf.log"
    [[ -d $dir/aiperf ]] && budgeted "aiperf-parity-$profile" 240 bash -c "$into" "$dir/aiperf-report.md" "$bin/iris" profile report "$dir/aiperf" --bundle "$bundle"
    grep -E "^\| $profile \||Parity against" "$dir/aiperf-report.md"
  fi
  budgeted "profile-$profile" 420 bash -c "$into" "$dir/profile.log" "$bin/iris" profile --url http://127.0.0.1:18080 --model "$profile" --input "$corpus" \
    --concurrency 1 --warmup "$qwarm" --requests "$qreq" --temperature 0 --top-k 1 --max-tokens "$max" --bundle "$bundle" \
    --tokenizer "$tok" --otlp-listen "127.0.0.1:$otlp" --otlp-wait 5s --source "$root" --out "$dir/iris"
  grep -E "^\| $profile \||Parity against|Provenance|Result:" "$dir/profile.log"
  serve_stop
  rm -rf "$bundle"
  local fpy=$py
  served_family "$family" && fpy=$(served_py "$family")
  # shellcheck disable=SC2086
  (cd "$ref" && budgeted "transformers-$profile" 240 $fpy gpu_served.py corpus --model "$model" --input "$corpus" \
    --max-tokens "$max" --seconds "${IRIS_TF_S:-60}" --device "$dev" --out "$dir/transformers.json" 2>&1 | grep -vE 'Warning|warn\(' | tail -2)
}

# aiperf_stage: AIPerf 0.13.0 for the profiles when IRIS_AIPERF names none: the carried
# env/aiperf.tar.xz (prepare.sh: call 1/4's carry) unpacked into /tmp/iris-aiperf, where it stays
# while the machine is warm, and a wrapper that runs it with the machine's python3; nothing when
# neither is there or it does not import (the table then has iris profile's rows alone)
aiperf_stage() {
  [[ -n ${IRIS_AIPERF:-} || -n ${IRIS_NO_AIPERF:-} ]] && return
  local site=${IRIS_AIPERF_SITE:-/tmp/iris-aiperf} # (IRIS_AIPERF_SITE: such a directory made here, the dry run)
  if [[ ! -d $site && -f $carry/env/aiperf.tar.xz ]]; then
    mkdir -p "$site.tmp" && xz -dc "$carry/env/aiperf.tar.xz" | tar -x -C "$site.tmp" && mv "$site.tmp" "$site"
  fi
  [[ -d $site ]] || { echo "AIPerf: not staged on this machine (call 1/4's carry stages it): iris profile alone"; return; }
  if PYTHONPATH=$site "$py" -c 'import aiperf.cli' 2>"$work/aiperf-import.err"; then
    cat >"$work/aiperf" <<SH
#!/bin/sh
PYTHONPATH=$site exec $py -c 'import sys; from aiperf.cli import app; sys.argv[0] = "aiperf"; app()' "\$@"
SH
    chmod +x "$work/aiperf"
    IRIS_AIPERF=$work/aiperf
    echo "AIPerf 0.13.0 staged in $site"
  else
    echo "AIPerf: staged in $site but does not import: $(tail -1 "$work/aiperf-import.err")"
  fi
}

qualify_phase() {
  local part=${1:-all} only=${2:-} n=0
  aiperf_stage
  qdata=${IRIS_QUALIFY_DATA:-$carry/qualify}
  [[ -f $qdata/corpus-photo.jsonl ]] || qdata=$root/.build/qualify # here: qualify_corpus.py's output
  qwarm=${IRIS_QWARMUP:-5} qreq=${IRIS_QREQUESTS:-50}
  [[ -n $cpu ]] && qwarm=${IRIS_QWARMUP:-1} qreq=${IRIS_QREQUESTS:-10}
  echo "qualify $part: corpora in $qdata, $qwarm warm-up + $qreq measured requests a profile, budget $((t_end - SECONDS)) s"
  [[ -z $only ]] && rm -rf "$work/qualify"
  mkdir -p "$work/qualify"
  local profile family size context kind max call
  while IFS=$'\t' read -r profile family size context kind max call; do
    [[ -z $profile || $profile == \#* ]] && continue
    [[ $part != all && $call != "$part" ]] && continue
    [[ -n $only && ",$only," != *",$profile,"* ]] && continue # `qualify 3/4 phi4-multimodal`: a row again
    [[ -n $cpu ]] && size=tiny
    qualify_profile "$profile" "$family" "$size" "$context" "$kind" "$max" "$call"
    n=$((n + 1))
  done <"$root/scripts/gpu/qualify.tsv"
  step "the qualification's table ($n profiles, call $part)"
  local tag=${part//\//of}
  "$py" "$root/scripts/gpu/qualify_table.py" --dir "$work/qualify" --tsv "$root/scripts/gpu/qualify.tsv" --part "$part" \
    --device "$( [[ -n $cpu ]] && echo "CPU dry run ($(nproc) cores)" || nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" \
    --commit "$(cat "$carry/commit" 2>/dev/null || git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    --out "$OUT/qualify-$tag.md" --json "$OUT/qualify-$tag.json"
  cat "$OUT/qualify-$tag.md"
  # the artifacts without the request bodies (inputs.json, *_raw.jsonl: the corpus's images again,
  # ~0.5 MB a profile per file; they stay in $work/qualify while the machine is warm)
  tar -czf "$OUT/qualify-$tag.tgz" -C "$work/qualify" --exclude='*.svg' --exclude=inputs.json --exclude='*_raw.jsonl' .
}
if [[ $phase == qualify ]]; then
  t_end=$((SECONDS + ${IRIS_BUDGET_S:-570}))
  qualify_phase "${2:-all}" "${3:-}"
fi

if [[ $phase == smoke || $phase == check || $phase == qwen3 || $phase == vl || $phase == internvl || $phase == demo || $phase == soak || $phase == qualify || $phase == attn ]]; then
  step "done"
  grep -hE '^(PASS|FAIL|SKIP)' "$log" | grep -vE '^PASS parity \S+ +\S+ +[0-9]+x[0-9]+ ' # not each passing case
  exit 0
fi

# ---- full and speed share the checkpoint and the cases (kept on a machine that stays warm)
# unit_tests <timeout>: kernels, cuBLAS attention and tiny-fixture parity of the cuda package.
unit_tests() {
  step "unit tests (kernels, decode attention, tiny-fixture parity)"
  (cd core/internal/ml/cuda && timeout "$1" "$bin/cuda.test" -test.run 'Kernel|Attention' 2>&1 | grep -E -- '--- FAIL|FAIL|ok|PASS|panic|error|relative' | head -40); verdict unit-kernels ${PIPESTATUS[0]}
  (cd core/internal/enginetest/cudaparity && timeout "$1" "$bin/cudaparity.test" -test.run 'Parity|BF16|Graph' 2>&1 | grep -E -- '--- FAIL|FAIL|ok|PASS|panic|error|relative' | head -40); verdict unit-parity ${PIPESTATUS[0]}
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
[[ $phase != throughput ]] && make_checkpoint "$ref/gpu_qwen2_5_vl_3b.config.json" "$model" 300 # throughput makes its own

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
  unpack_base
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
      b=$bin; cfg=(-config "$(nocache_config)"); [[ $who == base ]] && b=$base cfg=() # a base before the cache has no such key
      "$b/iris" serve "${cfg[@]}" --bundle "$work/bundle-$who" --addr 127.0.0.1:18080 --workers 8 --queue-depth 64 >"$work/serve-$who.log" 2>&1 &
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
  (cd core/internal/ml/cuda && timeout 120 "$bin/cuda.test" -test.run '^$' -test.bench DecodeKernels -test.benchtime 1x 2>&1 | grep -E '^kernel|FAIL|panic'); verdict kernel-times ${PIPESTATUS[0]}
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
# ---- throughput [family] [size]: issue 14's table in one call. The random checkpoint (default the
# Qwen2.5-VL 3B), iris serve at its defaults (64 running requests batched by the engine's
# scheduler, 256 queued; the embedding cache off), httpbench with distinct 426x320 JPEGs at c=1, 8,
# 32, 64, 128 (10-token answers: images/s, p50/p95 latency, TTFT) and the c=1 3-token latency; the
# base build (.carry/base, IRIS_BASE=<commit> `just gpu-bench`) served the same way for the c=1
# comparison; the engine's fp32 scheduled = alone check (cuda.test); transformers batch 1 and 16.
if [[ $phase == throughput ]]; then
  fam=${2:-qwen2_5_vl} size=${3:-3b} backend=cuda
  [[ -n $cpu ]] && backend=cpu # the dry run here: IRIS_CPU=1 IRIS_CONC=1,4 ... run.sh throughput qwen2_5_vl tiny
  model=$work/$fam-$size cases=$work/cases-$fam-$size name=${fam//_/-}-$size
  [[ $fam == qwen2_5_vl ]] && name=qwen25vl-$size
  make_checkpoint "$ref/gpu_${fam}_${size}.config.json" "$model" "$(fit 300)"
  if [[ ! -f $cases/index.json ]]; then
    budgeted cases 90 "$py" "$ref/gpu_parity.py" --model "$model" --cases "$cases" --out /dev/null --prepare-only
  fi
  if [[ -x $bin/cuda.test && -z ${IRIS_NO_TESTS:-} ]]; then
    step "the cuda tests: kernels, parity sweeps, fp32 scheduled = alone, batch = single and batched vision = alone (tiny fixtures)"
    (cd "$root/core/internal/ml/cuda" && budgeted kernels 60 "$bin/cuda.test" -test.run 'Kernel|Attention' -test.count 1 2>&1 | tail -20)
    (cd "$root/core/internal/enginetest/cudaparity" && budgeted sched-equals-alone 150 "$bin/cudaparity.test" -test.run 'Parity|BF16|Graph|BatchEqualsSingle|VisionBatch|VisionLane|Sweep' -test.count 1 2>&1 | tail -40)
  fi
  if [[ -x $bin/cuda.test && -n ${IRIS_BENCH:-} ]]; then
    # IRIS_BENCH=<regexp>: the cuda package's benchmarks matching it (e.g. PixelUpload)
    step "cuda benchmarks matching $IRIS_BENCH"
    (cd "$root/core/internal/ml/cuda" && budgeted bench 90 "$bin/cuda.test" -test.run '^$' -test.bench "$IRIS_BENCH" -test.benchtime 10x 2>&1 | grep -vE '^(goos|goarch|pkg|cpu):' | tail -${IRIS_BENCH_LINES:-20})
  fi
  if [[ -x $bin/gpucheck && -n ${IRIS_NCU:-} && -z $cpu ]]; then
    # IRIS_NCU=1: Nsight Compute (hardware counters: only where the machine's runtime lets ncu
    # read them, KINDS.md) on the first kernels of a 5-image tower pass (attention, SwiGLU,
    # RMSNorm), of a 5-prompt prefill (attention) and of a 54-row decode step (attention)
    ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    for spec in "vision|attn_mma_bf16_80|silu_mul|rmsnorm|40|-images 5 -prompts= -decodes=" \
      "prefill|attn_mma_bf16_128|12|-images= -prompts 5 -decodes=" "decode|attn_pool_gqa|12|-images= -prompts= -decodes 54"; do
      IFS='|' read -r -a f <<<"$spec"
      what=${f[0]} args=${f[-1]} count=${f[-2]} re=$(IFS='|'; echo "${f[*]:1:${#f[@]}-3}")
      step "Nsight Compute, $what: kernels matching $re, the first $count ($ncu)"
      # shellcheck disable=SC2086
      budgeted "ncu-$what" 120 "$ncu" --clock-control none -k "regex:$re" -c "$count" \
        --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --csv --page details \
        "$bin/gpucheck" passes -model "$model" -cases "$cases" $args -iters 1 -round "" -ops 0 \
        >"$work/ncu-$what.csv" 2>"$work/ncu-$what.err"
      tail -3 "$work/ncu-$what.err"; wc -l <"$work/ncu-$what.csv"
      cp "$work/ncu-$what.csv" "$OUT/" 2>/dev/null
    done
  fi
  if [[ -x $bin/gpucheck && -n ${IRIS_PRODUCTS:-} && -z $cpu ]]; then
    step "cuBLASLt's candidates against its heuristic's pick, the 3B's product shapes at c=64 (gpucheck products)"
    budgeted products 90 "$bin/gpucheck" products 2>&1 | tee "$work/products.txt"
  fi
  if [[ -x $bin/gpucheck && -z ${IRIS_NO_PASSES:-} ]]; then
    step "engine passes by kind and size (gpucheck passes: vision, prefill, decode, rounds, ops)"
    pb=(); [[ -n $cpu ]] && pb=(-backend cpu -precision fp32 -iters 3 -images 1,2 -prompts 1,2 -decodes 1,4 -round 2,2,4)
    budgeted passes 150 "$bin/gpucheck" passes -model "$model" -cases "$cases" -ops "${IRIS_OPS:-16}" "${pb[@]}" ${IRIS_PASSES_ARGS:-} 2>&1 | tee "$work/passes.txt"
    # IRIS_PASSES_AB: flag sets separated by ';', a run of the passes each
    IFS=';' read -r -a abs <<<"${IRIS_PASSES_AB:-}"
    for ab in "${abs[@]}"; do
      step "the passes again with $ab (the same call's A/B; no op profile)"
      # shellcheck disable=SC2086
      budgeted passes-ab 120 "$bin/gpucheck" passes -model "$model" -cases "$cases" -ops 0 "${pb[@]}" ${IRIS_PASSES_ARGS:-} $ab 2>&1 | tee -a "$work/passes-ab.txt"
    done
  fi
  unpack_base
  step "bundles (this build; the base build when carried)"
  for who in new base; do
    b=$bin; [[ $who == base ]] && b=$base
    [[ -x $b/iris ]] || continue
    plugin=(); [[ -f $b/$fam.wasm ]] && plugin=(--plugin "$b/$fam.wasm")
    rm -rf "$work/bundle-$who"
    budgeted "bundle-$who" 200 "$b/iris" bundle build --from "$model" --family "$fam" --out "$work/bundle-$who" --backend "$backend" \
      --name "$name" --context 4096 "${plugin[@]}" >/dev/null
  done
  # rt_config FILE [KEY=VALUE,...]: a server config, the embedding cache off, with those settings
  rt_config() {
    local kvs=${2:-} kv
    printf '[runtime]\nembedding_cache_bytes = 0\n' >"$1"
    for kv in ${kvs//,/ }; do printf '%s = %s\n' "${kv%%=*}" "${kv#*=}" >>"$1"; done
  }
  # IRIS_NEW_RUNTIME="KEY=VALUE,...": settings of this build's table and c=1 runs (not the base's)
  rt_config "$work/new.toml" "${IRIS_NEW_RUNTIME:-}"
  # IRIS_BASE_RUNTIME="KEY=VALUE,...": the base build's (a setting both builds have, e.g.
  # fused_swiglu=true between two quack builds)
  rt_config "$work/base.toml" "${IRIS_BASE_RUNTIME:-}"
  rt_config "$work/apart.toml" decode_apart=true
  rt_config "$work/serial.toml" vision_serial=true
  # apart (IRIS_AB_APART=1): this build again with decode steps in passes of their own, at
  # IRIS_APART_CONC (default 64): what carrying them in the prefill passes gives, same call;
  # serial (IRIS_AB_SERIAL=1): with the tower between the decoder's passes on its stream instead
  # of beside them on a lane, at IRIS_SERIAL_CONC (default 32,64)
  # IRIS_BASE_CONC=<levels>: the base build at these levels too, before this build and again
  # after the rest (a previous main against this one at c=64, same call)
  whos=(base new); [[ -n ${IRIS_AB_APART:-} ]] && whos+=(apart)
  [[ -n ${IRIS_AB_SERIAL:-} ]] && whos+=(serial)
  # rt-KEY-VALUE (IRIS_AB_RUNTIME="KEY=VALUE ..."): with runtime.KEY = VALUE, at IRIS_RT_CONC (64)
  # (several settings at once: KEY=VALUE,KEY=VALUE)
  for kvs in ${IRIS_AB_RUNTIME:-}; do
    w=rt
    for kv in ${kvs//,/ }; do
      v=${kv#*=} w+="-${kv%%=*}-${v//\"/}" # a quoted value (KEY="4ms"): the file name without quotes
    done
    rt_config "$work/$w.toml" "$kvs"
    whos+=("$w")
  done
  [[ -n ${IRIS_BASE_CONC:-} ]] && whos+=(base)
  for who in "${whos[@]}"; do
    b=$bin cfg=$work/new.toml bundle=$work/bundle-$who
    [[ $who == base ]] && b=$base cfg=$work/base.toml
    [[ $who == apart ]] && cfg=$work/apart.toml bundle=$work/bundle-new
    [[ $who == serial ]] && cfg=$work/serial.toml bundle=$work/bundle-new
    [[ $who == rt-* ]] && cfg=$work/$who.toml bundle=$work/bundle-new
    [[ -d $bundle && -z ${IRIS_NO_HTTP:-} ]] || continue
    step "HTTP, $who build: iris serve at its defaults, distinct JPEGs"
    conc=${IRIS_CONC:-1,8,32,64,128} workers=()
    [[ $who == base ]] && conc=1 workers=(--workers 1) # one request at a time: only its c=1 latency matters
    [[ $who == base && -n ${IRIS_BASE_CONC:-} ]] && conc=$IRIS_BASE_CONC workers=()
    [[ $who == apart ]] && conc=${IRIS_APART_CONC:-64}
    [[ $who == serial ]] && conc=${IRIS_SERIAL_CONC:-32,64}
    [[ $who == rt-* ]] && conc=${IRIS_RT_CONC:-64}
    "$b/iris" serve -config "$cfg" --bundle "$bundle" --addr 127.0.0.1:18080 "${workers[@]}" >"$work/serve-$who.log" 2>&1 &
    srv=$!
    for _ in $(seq 120); do curl -fs 127.0.0.1:18080/readyz >/dev/null 2>&1 && break; sleep 1; done
    if [[ $who != base || -n ${IRIS_BASE_CONC:-} ]]; then
      # one httpbench a level, the passes of each level apart (the counters' differences)
      curl -fs 127.0.0.1:18080/metrics >"$work/m0.txt" 2>/dev/null
      runs=${IRIS_RUNS:-30} # the c=1 latency figures with the first level only
      [[ $who == apart || $who == serial || $who == rt-* || $who == base ]] && runs=0
      for c in ${conc//,/ }; do
        budgeted "http-$who-c$c" 100 "$bin/httpbench" -url http://127.0.0.1:18080 -model "$name" -image "$cases/photo_426x320.jpg" \
          -question "$photo_q" -runs "$runs" -seconds "${IRIS_SECS:-6}" -concurrency "$c" -out "$work/throughput-$who-c$c.json"
        runs=0
        curl -fs 127.0.0.1:18080/metrics >"$work/m1.txt" 2>/dev/null
        echo "passes at c=$c:"
        pass_table <(metrics_diff "$work/m0.txt" "$work/m1.txt")
        mv "$work/m1.txt" "$work/m0.txt"
      done
      "$py" -c 'import json,sys; json.dump([json.load(open(f)) for f in sys.argv[2:]], open(sys.argv[1], "w"), indent=1)' \
        "$OUT/throughput-$who.json" $(for c in ${conc//,/ }; do echo "$work/throughput-$who-c$c.json"; done)
    else
      budgeted "http-$who" 200 "$bin/httpbench" -url http://127.0.0.1:18080 -model "$name" -image "$cases/photo_426x320.jpg" \
        -question "$photo_q" -runs "${IRIS_RUNS:-30}" -seconds "${IRIS_SECS:-6}" -concurrency "$conc" -out "$OUT/throughput-$who.json"
    fi
    curl -fs 127.0.0.1:18080/metrics >"$OUT/metrics-$who.txt" 2>/dev/null
    grep -E '^iris_engine_pass|^iris_engine_vision|^iris_engine_seconds|^iris_kv_cache' "$OUT/metrics-$who.txt" | head -12
    pass_table "$OUT/metrics-$who.txt"
    kill "$srv"; wait "$srv" 2>/dev/null
    grep -iE 'error|panic' "$work/serve-$who.log" | head -5
  done
  # IRIS_C1_AB=N: the base build's and this build's c=1 3-token latency N times in turn (a host's
  # speed drifts over a call: one run each can differ by 20% either way)
  if [[ -n ${IRIS_C1_AB:-} && -d $work/bundle-base && -d $work/bundle-new ]]; then
    step "c=1 3-token latency, the base build and this one in turn, $IRIS_C1_AB rounds"
    for i in $(seq "$IRIS_C1_AB"); do
      for who in base new; do
        b=$bin cfg=$work/new.toml; [[ $who == base ]] && b=$base cfg=$work/base.toml
        workers=(); [[ $who == base ]] && workers=(--workers 1)
        "$b/iris" serve -config "$cfg" --bundle "$work/bundle-$who" --addr 127.0.0.1:18080 "${workers[@]}" >"$work/serve-c1.log" 2>&1 &
        srv=$!
        for _ in $(seq 120); do curl -fs 127.0.0.1:18080/readyz >/dev/null 2>&1 && break; sleep 1; done
        echo -n "round $i, $who: "
        budgeted "c1-$who-$i" 60 "$bin/httpbench" -url http://127.0.0.1:18080 -model "$name" -image "$cases/photo_426x320.jpg" \
          -question "$photo_q" -runs "${IRIS_RUNS:-30}" -seconds 0.5 -concurrency 1 -out "$work/c1-$who-$i.json" 2>&1 | grep '3 tokens: p50'
        kill "$srv"; wait "$srv" 2>/dev/null
      done
    done
  fi
  step "transformers baseline (bf16; batch 1 and 16)"
  dev=cuda; [[ -n $cpu ]] && dev=cpu
  [[ -z ${IRIS_SKIP_BASELINE:-} ]] && budgeted baseline 240 "$py" "$ref/gpu_baseline.py" --model "$model" --cases "$cases" --case photo_426x320 --runs "${IRIS_BRUNS:-6}" \
    --caches dynamic --device "$dev" --out "$OUT/baseline.json"
fi

if [[ $phase == speed ]]; then
  if [[ -x $bin/iris ]]; then
    step "HTTP: bundle build, iris serve, loopback load"
    bundle=$work/bundle
    plugin=()
    [[ -f $bin/qwen2_5_vl.wasm ]] && plugin=(--plugin "$bin/qwen2_5_vl.wasm")
    rm -rf "$bundle"
    timeout 120 "$bin/iris" bundle build --from "$model" --family qwen2_5_vl --out "$bundle" --backend cuda --name qwen25vl-3b --context 4096 "${plugin[@]}"; verdict bundle $?
    if serve_start "$bundle" 90; then
      timeout 150 "$bin/httpbench" -url http://127.0.0.1:18080 -model qwen25vl-3b -image "$cases/photo_426x320.jpg" \
        -question "$photo_q" -runs 30 -seconds 4 -concurrency 1,8,32 -out "$OUT/http.json"; verdict http $?
      if [[ -z ${IRIS_HTTP_ONLY:-} ]]; then
        timeout 60 "$bin/httpbench" -url http://127.0.0.1:18080 -model qwen25vl-3b -image "$cases/vga_640x480.png" \
          -question "Is there any text in the image?" -runs 20 -seconds 2 -concurrency 1,8,32 -out "$OUT/http-vga.json"; verdict http-vga $?
      fi
    fi
    serve_stop
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
