#!/usr/bin/env bash
# Builds what a GPU run needs into .carry/ (git-ignored) and prints the device call to make:
# test binaries of the cuda packages, gpucheck, httpbench, the cuda iris binary when the gateway
# links the CUDA engine, the tokenizer files, the family plugin and (optional first argument) a
# reference JSON of an earlier run. Binaries are stripped and xz-compressed: the carried tree must stay
# under the device tool's 64 MiB together with the working tree.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/gpu/env.sh
out=${IRIS_CARRY_DIR:-.carry} # another git-ignored .carry-* directory for a second carry
case $out in .carry | .carry-*) ;; *) echo "prepare: IRIS_CARRY_DIR must be .carry or .carry-<name> (git-ignored)" >&2; exit 2 ;; esac
rm -rf "$out" && mkdir -p "$out/bin" "$out/tokenizer" "$out/plugins" "$out/base"
# the commit the binaries are built from (-dirty: with uncommitted changes), for run.sh's record
# of the test runs (docs/results/gpu-tests.md)
{ git rev-parse --short HEAD | tr -d '\n'; [[ -z $(git status --porcelain --untracked-files=no) ]] || printf -- '-dirty'; echo; } >"$out/commit"
# the kernels the binaries embed, rebuilt when iris.cu changed (a stale fatbin would carry
# kernels the Go side no longer names, or lack new ones)
scripts/gpu/build-kernels.sh
tags=cuda
if [[ -n ${IRIS_QUACK:-} ]]; then
  # issue 14's experiment: the gate/up product with SwiGLU in its epilogue linked in
  # (scripts/gpu/swiglu-gemm; gpucheck passes -quack-swiglu, the cuda tests' TestKernelBackendSwiGLUProduct)
  scripts/gpu/swiglu-gemm/build.sh
  tags=cuda,quack
fi
flags=(-tags "$tags" -trimpath -ldflags '-s -w')
# IRIS_PHASE picks what travels (the device tool takes 64 MiB with the working tree, ~23 MB):
#   check    the test binaries of the cuda packages: the backend's kernels (cuda.test) and the
#            families' parity on it (cudaparity.test) (run.sh check)
#   attn     cuda.test alone (run.sh attn: the attention kernels' tests and benchmarks)
#   compare  iris and gpucheck of this tree and of IRIS_BASE=<commit> (run.sh compare)
#   qwen3    iris, gpucheck, httpbench and the qwen3_vl plugin (run.sh qwen3 2b|8b|tiny, run.sh vl)
#   throughput  iris, httpbench, soak, cuda.test, cudaparity.test, gpucheck, the qwen2_5_vl plugin, and IRIS_BASE's build when
#            set (run.sh throughput, run.sh soak)
#   internvl the same with the internvl plugin (run.sh internvl 2b|8b|tiny [parity|speed])
#   demo     iris, accuracy and the qwen2_5_vl plugin (run.sh demo: issue 15's training call)
#   base     IRIS_BASE's build alone (run.sh base stages it on the machine, where it stays while
#            the machine is warm: then a throughput call finds it without carrying it; with
#            IRIS_CARRY_DIR=.carry-base, so that both carries are ready before the first call)
#   phi4_multimodal, deepseek_ocr2, locateanything, lance
#            iris, httpbench, accuracy, the family's plugin and tokenizer (run.sh vl <family> <size>);
#            locateanything and lance also their reference: the official sources and the site-packages
#            of their transformers (pack_env below)
#   qualify  iris, the corpora, the plugins, tokenizers and reference environments of the profiles of one
#            qualify call (IRIS_PART=1/4 to 4/4: scripts/gpu/qualify.tsv's split), and in call 1/4 AIPerf
#            0.13.0 (pack_aiperf)
#   all      (default) everything the other phases use
phase=${IRIS_PHASE:-all}
served=(phi4_multimodal deepseek_ocr2 locateanything lance)
is_served() { [[ " ${served[*]} " == *" $1 "* ]]; }
if [[ $phase == base && -z ${IRIS_BASE:-} ]]; then echo "prepare: IRIS_PHASE=base needs IRIS_BASE=<commit>" >&2; exit 2; fi
if [[ $phase == check || $phase == all ]]; then
  # test binaries keep their source paths: the fixture package finds testdata through them
  go test -c -tags "$tags" -ldflags '-s -w' -o "$out/bin/gpu.test" ./core/internal/ml/cuda/gpu
  go test -c -tags "$tags" -ldflags '-s -w' -o "$out/bin/cuda.test" ./core/internal/ml/cuda
  go test -c -tags "$tags" -ldflags '-s -w' -o "$out/bin/cudaparity.test" ./core/internal/enginetest/cudaparity
fi
if [[ $phase == attn ]]; then
  go test -c -tags "$tags" -ldflags '-s -w' -o "$out/bin/cuda.test" ./core/internal/ml/cuda
fi
if [[ $phase == throughput ]]; then
  go test -c -tags "$tags" -ldflags '-s -w' -o "$out/bin/cuda.test" ./core/internal/ml/cuda
  go test -c -tags "$tags" -ldflags '-s -w' -o "$out/bin/cudaparity.test" ./core/internal/enginetest/cudaparity
  go build "${flags[@]}" -o "$out/bin/iris" ./gateway/cmd/iris
  go build -trimpath -ldflags '-s -w' -o "$out/bin/httpbench" ./benchmark/cmd/httpbench
  go build -trimpath -ldflags '-s -w' -o "$out/bin/soak" ./benchmark/cmd/soak # issue 14's soak (run.sh soak)
  go build "${flags[@]}" -o "$out/bin/gpucheck" ./core/internal/enginetest/gpucheck # run.sh throughput's passes
fi
if [[ $phase == demo ]]; then
  go build "${flags[@]}" -o "$out/bin/iris" ./gateway/cmd/iris
  go build -trimpath -ldflags '-s -w' -o "$out/bin/accuracy" ./benchmark/cmd/accuracy
fi
if [[ $phase == compare || $phase == qwen3 || $phase == internvl || $phase == all ]]; then
  go build "${flags[@]}" -o "$out/bin/gpucheck" ./core/internal/enginetest/gpucheck
  go build "${flags[@]}" -o "$out/bin/iris" ./gateway/cmd/iris
fi
if [[ $phase == qwen3 || $phase == internvl || $phase == all ]]; then
  go build -trimpath -ldflags '-s -w' -o "$out/bin/httpbench" ./benchmark/cmd/httpbench # the HTTP load of `run.sh speed`, `vl`
fi
if [[ $phase == all ]]; then
  go test -c -ldflags '-s -w' -o "$out/bin/imageio.test" ./core/internal/imageio # the host's JPEG decoding
fi
# the served families' phases: iris, the HTTP timing and parity clients; the qualification: iris
# alone (`iris profile` and AIPerf are its clients; httpbench and accuracy would take call 1/4,
# AIPerf's, past 64 MiB)
if is_served "$phase" || [[ $phase == qualify ]]; then
  go build "${flags[@]}" -o "$out/bin/iris" ./gateway/cmd/iris
fi
if is_served "$phase"; then
  go build -trimpath -ldflags '-s -w' -o "$out/bin/httpbench" ./benchmark/cmd/httpbench
  go build -trimpath -ldflags '-s -w' -o "$out/bin/accuracy" ./benchmark/cmd/accuracy
fi
# pack_env <family>: the reference of LocateAnything (transformers 4.57.1) or Lance (4.49) for the
# device, which has transformers 5.17 and no network: the packages below at the versions the
# family's requirements file pins (plus the requests stack huggingface_hub imports), installed
# for the device's CPython 3.12 into a directory and xz-packed (~6 MB against 16 MB of wheels),
# and the official sources the goldens run (never committed; .build/locany, .build/lance-src).
# run.sh unpacks them and puts the directory before the system's site-packages.
pack_env() {
  local fam=$1 req pkgs tmp
  case $fam in
    locateanything) req=scripts/reference/requirements-locateanything.txt pkgs="transformers tokenizers huggingface_hub requests charset-normalizer idna urllib3 certifi" ;;
    lance) req=scripts/reference/requirements-lance.txt pkgs="transformers tokenizers huggingface-hub einops imageio requests charset-normalizer idna urllib3 certifi" ;;
    *) return 0 ;;
  esac
  local pins=() p v
  for p in $pkgs; do
    v=$(grep -iE "^${p}==" "$req" | head -1 || true)
    [[ -z $v ]] && v=$(grep -iE "^${p}==" scripts/reference/requirements-locateanything.txt | head -1 || true) # the requests stack
    [[ -n $v ]] || { echo "prepare: no pin of $p in $req" >&2; exit 1; }
    pins+=("$v")
  done
  tmp=$(mktemp -d)
  python3 -m pip install --quiet --no-deps --no-compile --only-binary=:all: --platform manylinux2014_x86_64 --python-version 3.12 \
    --implementation cp --target "$tmp/site" "${pins[@]}"
  mkdir -p "$out/env"
  tar -C "$tmp/site" -cf - --exclude=__pycache__ --exclude=./bin . | xz -9 -T0 >"$out/env/$fam.tar.xz"
  rm -rf "$tmp"
  case $fam in
    locateanything) [[ -f .build/locany/modeling_locateanything.py ]] || scripts/reference/fetch_locateanything.sh
      tar -C .build -chf - --exclude=__pycache__ locany | xz -9 >"$out/env/$fam-src.tar.xz" ;;
    lance) [[ -f .build/lance-src/modeling/lance/lance.py ]] || { echo "prepare: no .build/lance-src (golden_lance.py says how to get it)" >&2; exit 1; }
      tar -C .build -chf - --exclude=.git --exclude=__pycache__ lance-src/modeling lance-src/data lance-src/common lance-src/LICENSE |
        xz -9 >"$out/env/$fam-src.tar.xz" ;;
  esac
}
# carry_tokenizer <name>: a tokenizer directory of .build/tokenizer, its tokenizer.json gzipped
carry_tokenizer() {
  mkdir -p "$out/tokenizer/$1"
  cp .build/tokenizer/"$1"/*.json "$out/tokenizer/$1/" && rm "$out/tokenizer/$1/tokenizer.json"
  cp .build/tokenizer/"$1"/*.jinja "$out/tokenizer/$1/" 2>/dev/null || true
  gzip -9c ".build/tokenizer/$1/tokenizer.json" >"$out/tokenizer/$1/tokenizer.json.gz"
}
# the families of the profiles scripts/gpu/qualify.tsv assigns to call IRIS_PART
qualify_families() {
  local f
  f=$(awk -F'\t' -v p="${IRIS_PART:-1/4}" '!/^#/ && $7 == p { print $2 }' scripts/gpu/qualify.tsv | sort -u | tr '\n' ' ')
  [[ -n $f ]] || { echo "prepare: no profile of scripts/gpu/qualify.tsv in call ${IRIS_PART:-}" >&2; exit 2; }
  echo "$f"
}
extra_fams=()
if is_served "$phase"; then extra_fams=("$phase"); fi
if [[ $phase == qualify ]]; then
  fams=$(qualify_families) || exit 2
  read -r -a extra_fams <<<"$fams"
fi
for f in "${extra_fams[@]}"; do
  case $f in phi4_multimodal) carry_tokenizer phi4 ;; deepseek_ocr2) carry_tokenizer deepseek_ocr2 ;; esac
  pack_env "$f"
done
# pack_aiperf: AIPerf 0.13.0 and what it imports beyond the machine's Python
# (scripts/aiperf/requirements-device.txt), installed for CPython IRIS_DEVICE_PY (3.12) and
# xz-packed (16.5 MB): carried by call 1/4 (IRIS_AIPERF_CARRY=1 or 0 says otherwise; 2/4 has room
# for it too, 3/4 and 4/4 with their references have not), which stages it in /tmp/iris-aiperf,
# where the later calls find it while the machine stays warm
pack_aiperf() {
  local tmp
  tmp=$(mktemp -d)
  python3 -m pip install --quiet --no-deps --no-compile --only-binary=:all: --platform manylinux2014_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 --python-version "${IRIS_DEVICE_PY:-3.12}" \
    --implementation cp --target "$tmp/site" -r scripts/aiperf/requirements-device.txt
  mkdir -p "$out/env"
  tar -C "$tmp/site" -cf - --exclude=__pycache__ --exclude=./bin . | xz -9 -T0 >"$out/env/aiperf.tar.xz"
  rm -rf "$tmp"
}
if [[ $phase == qualify && ${IRIS_AIPERF_CARRY:-$([[ ${IRIS_PART:-1/4} == 1/4 ]] && echo 1 || echo 0)} == 1 ]]; then
  pack_aiperf
fi
if [[ $phase == qualify ]]; then
  # the three corpora (photo, grounding, ocr: scripts/gpu/qualify_corpus.py; ~1 MB) and the commit
  # for the table
  scripts/fetch-corpus.sh
  .build/refenv/bin/python scripts/gpu/qualify_corpus.py --images .build/corpus/images --out "$out/qualify"
fi
if [[ $phase != base ]]; then
  cp .build/tokenizer/qwen3/tokenizer_config.json "$out/tokenizer/"
  gzip -9c .build/tokenizer/qwen3/tokenizer.json >"$out/tokenizer/tokenizer.json.gz" # 11 MB -> 2 MB
fi
# the family plugins `iris bundle build` packs, built from this tree (just plugin <family>)
plugins=(qwen2_5_vl qwen3_vl internvl)
[[ $phase == compare || $phase == throughput || $phase == demo ]] && plugins=(qwen2_5_vl)
[[ $phase == qwen3 ]] && plugins=(qwen3_vl)
[[ $phase == internvl ]] && plugins=(internvl)
[[ $phase == check || $phase == base || $phase == attn ]] && plugins=()
if is_served "$phase"; then plugins=("$phase"); fi
if [[ $phase == qualify ]]; then plugins=("${extra_fams[@]}"); fi
for f in "${plugins[@]}"; do
  (dest=$PWD/$out/plugins && cd "plugins/$f" && GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 go build -buildmode=c-shared -trimpath -o "$dest/$f.wasm" .)
done
if [[ -n ${1:-} ]]; then cp "$1" "$out/ref.json"; fi
# IRIS_BASE=<commit>: that commit's iris and gpucheck too, for `run.sh compare` (a worktree under .build)
if [[ -n ${IRIS_BASE:-} ]]; then
  wt=.build/base-worktree
  git worktree remove --force "$wt" 2>/dev/null || rm -rf "$wt"
  git worktree add --detach "$wt" "$IRIS_BASE" >/dev/null
  ln -sfn "$PWD/.build" "$wt/.build"
  # the base's own plugin too: a host refuses a plugin newer than its wire format
  dest=$PWD/$out/base
  # (throughput serves the base, and without its gpucheck both builds fit the tool's 64 MiB)
  (cd "$wt" && scripts/gpu/build-kernels.sh && go build "${flags[@]}" -o "$dest/iris" ./gateway/cmd/iris &&
    { [[ $phase == throughput ]] || go build "${flags[@]}" -o "$dest/gpucheck" ./core/internal/enginetest/gpucheck; } &&
    cd plugins/qwen2_5_vl && GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 go build -buildmode=c-shared -trimpath -o "$dest/qwen2_5_vl.wasm" .)
  git worktree remove --force "$wt"
fi
# xz: the cuda iris binary is 12.8 MB against gzip's 18.9, which the default carry needs to stay
# under the limit with both plugins
xz -9e -T0 "$out"/bin/* "$out"/base/* "$out"/plugins/* 2>/dev/null || true
total=$(( $(du -sb "$out" | cut -f1) + $(git ls-files -co --exclude-standard -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1) ))
if ((total > 64 * 1024 * 1024)); then echo "prepare: WARNING: $total bytes with the working tree, over the device tool's 64 MiB" >&2; fi
du -ab "$out" | sort -n | tail -12 >&2
echo "prepare: carried $(du -sb "$out" | cut -f1) bytes; working tree (tracked + untracked, not ignored):" \
  "$(git ls-files -co --exclude-standard -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1) bytes" >&2
cat <<'MSG'
Device calls (tool `run`, kind nvidia-h200, carry [".carry"]); docs/gpu.md says what each runs
(IRIS_PHASE=check or compare keep the carry within the tool's 64 MiB):
  bash scripts/gpu/run.sh check; bash scripts/gpu/run.sh full    (~4 min; writes ref.json)
  bash scripts/gpu/run.sh check; bash scripts/gpu/run.sh speed   (~6 min; needs a carried ref.json,
      IRIS_SKIP_BASELINE=1 skips transformers, IRIS_HTTP_ONLY=1 runs only the photo over HTTP)
  bash scripts/gpu/run.sh attn        (IRIS_PHASE=attn; ~5 min: the attention kernels' tests, Iris's paths and
                                      torch SDPA's backends on the profiles' shapes: $OUT/attn.md; the check
                                      carry serves it too, in a call of its own)
  bash scripts/gpu/run.sh soak        (IRIS_PHASE=throughput; issue 14's soak: 2,000 mixed requests at c=64
                                      against iris serve on the 3B, KV back to 0, RSS flat)
  bash scripts/gpu/run.sh qwen3 2b    (IRIS_PHASE=qwen3; ~4 min: Qwen3-VL-2B parity, engine, HTTP, transformers)
  bash scripts/gpu/run.sh qwen3 8b    (IRIS_PHASE=qwen3; ~6 min: the same for the 8B; timeout_s 600)
  bash scripts/gpu/run.sh internvl 2b parity; bash scripts/gpu/run.sh internvl 2b speed
                                      (IRIS_PHASE=internvl; two calls a size, the machine kept warm between
                                      them; the same for 8b; timeout_s 600 each)
  bash scripts/gpu/run.sh vl phi4_multimodal 5b   (IRIS_PHASE=phi4_multimodal; likewise deepseek_ocr2 3b,
                                      locateanything 3b, lance 3b with IRIS_PHASE=<family>; timeout_s 600)
  bash scripts/gpu/run.sh qualify 1/4 (IRIS_PHASE=qualify IRIS_PART=1/4; then 2/4, 3/4 and 4/4 on the warm
                                      machine, each with its own carry: docs/qualification.md; timeout_s 600 each)
MSG
