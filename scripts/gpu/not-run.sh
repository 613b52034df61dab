#!/usr/bin/env bash
# Says which GPU tests CI compiled and linked (`just vet-cuda`, against link stubs) but could not
# run: the test functions that only the cuda build of each given package has. The tests both
# builds share run without a GPU in `go test`. With --brief, one line: the count and the last
# commit whose GPU tests passed on the H200 (the newest passed row of docs/results/gpu-tests.md).
#
#   scripts/gpu/not-run.sh [--brief] <package>...
set -euo pipefail
cd "$(dirname "$0")/../.."
brief=
if [[ ${1:-} == --brief ]]; then brief=1; shift; fi

# names <dir> <file>...: the Test/Benchmark/Fuzz/Example functions the files declare
names() {
  local dir=$1
  shift
  (($#)) || return 0
  (cd "$dir" && grep -hoE '^func (Test|Benchmark|Fuzz|Example)[A-Za-z0-9_]*\(' "$@" | sed -E 's/^func //; s/\($//' | sort -u)
}
files='{{join .TestGoFiles " "}} {{join .XTestGoFiles " "}}'
# the newest record whose verdict is passed: "<commit> (<date>)"
record=docs/results/gpu-tests.md
passed=$(awk -F'|' '/^\| --- / { table = 1; next }
  table && $4 ~ /^ *passed *$/ { gsub(/ /, "", $2); gsub(/ /, "", $3); print $3 " (" $2 ")"; exit }' "$record" 2>/dev/null || true)
last="the GPU tests last passed at ${passed:-no recorded commit}, $record"

total=0 lines=()
# -e: a package whose embedded kernels are not built yet still lists its files
while read -r path dir; do
  # shellcheck disable=SC2046 # file names are words
  only=$(comm -23 <(names "$dir" $(go list -e -tags cuda -f "$files" "$path")) \
                  <(names "$dir" $(go list -e -f "$files" "$path")))
  [[ -n $only ]] || continue
  n=$(wc -l <<<"$only")
  total=$((total + n))
  lines+=("  ${path#github.com/iris-vlm/iris/} ($(basename "$path").test, $n): $(paste -sd' ' <<<"$only")")
done < <(go list -e -tags cuda -f '{{.ImportPath}} {{.Dir}}' "$@")

if [[ -n $brief ]]; then
  echo "GPU tests: $total test functions compiled and linked, NOT run here (no GPU; list: just vet-cuda);" \
    "$last."
  exit 0
fi
echo "GPU tests compiled and linked against the link stubs, NOT run here (no GPU; scripts/gpu/run.sh"
echo "runs them on an H200, docs/gpu.md \"Running on the GPU machine\"):"
printf '%s\n' "${lines[@]}" | fold -s -w 110 | sed 's/ *$//; 2,$s/^\([^ ]\)/      \1/'
echo "  core/internal/enginetest/gpucheck: built, not run (parity and bench of the 3B checkpoint)"
echo "On the H200 $last; the latest device figures: docs/gpu.md, \"Current results\"."
