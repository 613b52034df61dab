#!/usr/bin/env bash
# `just test` (README command 2, .ci/run): every check CI runs, each step timed by scripts/step.sh
# (the durations and the total close the run). The steps are the just recipes named below; the
# ones that mostly wait on package registries or leave a core idle (installing golangci-lint, the
# CUDA headers, the Python venvs of AIPerf and the openai client, the profiling corpus, the deploy
# module's modules and schemas) start at once in the background and overlap the CPU-bound steps;
# the step that needs one waits for it first, and a background step that failed fails the run
# with its log.
#
#   scripts/test.sh <just binary>
set -euo pipefail
cd "$(dirname "$0")/.."
just=${1:-just}
bg_dir=.build/test-bg
scripts/step.sh --reset
rm -rf .build/go-tests.jsonl "$bg_dir" && mkdir -p "$bg_dir"

declare -A pid=()
# background <name> <command...>: a step run in the background, timed like the others; its output
# goes to $bg_dir/<name>.log.
background() {
  local name=$1
  shift
  scripts/step.sh "$name (background)" "$@" >"$bg_dir/$name.log" 2>&1 &
  pid[$name]=$!
}
# await <name...>: waits for background steps; one that failed stops the run with its log.
await() {
  local name
  for name; do
    if ! wait "${pid[$name]}"; then
      echo "== background step $name failed; its log:" >&2
      cat "$bg_dir/$name.log" >&2
      exit 1
    fi
    unset "pid[$name]"
  done
}
stop() { # a failed step leaves no background step behind
  local p
  for p in "${pid[@]}"; do kill "$p" 2>/dev/null || true; done
}
trap stop EXIT

background tools "$just" tools
background cuda-inputs scripts/gpu/setup-cuda.sh
background aiperf-venv scripts/aiperf/setup-venv.sh
background openai-venv scripts/openai/setup-venv.sh
background corpus scripts/fetch-corpus.sh
background deploy-inputs bash -c 'deploy/scripts/schemas.sh && GOEXPERIMENT= go -C deploy mod download'

scripts/step.sh setup "$just" setup
scripts/step.sh plugins "$just" plugins
scripts/step.sh vet "$just" test-vet
await tools
scripts/step.sh lint "$just" test-lint
scripts/step.sh layers "$just" test-layers
scripts/step.sh go-race "$just" test-go-race
scripts/step.sh go-models "$just" test-go-models
await cuda-inputs
scripts/step.sh cuda "$just" vet-cuda
await aiperf-venv corpus
scripts/step.sh aiperf "$just" test-aiperf
await openai-venv
scripts/step.sh openai "$just" test-openai
scripts/step.sh accuracy-gate "$just" accuracy-gate
await deploy-inputs
scripts/step.sh deploy "$just" deploy-test
# shellcheck disable=SC2046 # the packages are words
scripts/gpu/not-run.sh --brief $("$just" --evaluate cuda_test_pkgs)
.build/bin/testsum -total .build/go-tests.jsonl
scripts/step.sh --summary
