#!/usr/bin/env bash
# Runs every fuzz target of the three modules (., sdk-wasm, plugins), one at a time, for TIME each
# (default 30s), with a short minimisation of each new input (IRIS_FUZZ_MINIMIZE, default 2s: Go's
# default of 60 s spends a short run shrinking its first new input), then prints a target a line:
# its package, executions, executions per second over the run, and the new interesting inputs
# it found (from go test's last "fuzz: elapsed" line). A target's whole output is kept in
# .build/fuzz/<target>.log; a failing target leaves its input under the package's
# testdata/fuzz/ (as go test does) and makes the script exit 1.
#
#   scripts/fuzz.sh [TIME] [REGEXP]    REGEXP picks targets by name (default: every one)
set -euo pipefail
cd "$(dirname "$0")/.."
time=${1:-30s} filter=${2:-.} minimize=${IRIS_FUZZ_MINIMIZE:-2s}
mkdir -p .build/fuzz

# module, package directory (relative to the module) and name of every target, in path order
targets=$(git grep --untracked -E -o '^func Fuzz[A-Za-z0-9_]*\(' -- '*_test.go' | sed -E 's/:func (Fuzz[A-Za-z0-9_]*)\($/ \1/' |
  while read -r file name; do
    dir=$(dirname "$file") mod=.
    case $dir in sdk-wasm/*) mod=sdk-wasm ;; plugins/*) mod=plugins ;; esac
    rel=$dir
    [[ $mod == . ]] || rel=${dir#"$mod"/}
    echo "$mod ./$rel $name"
  done | sort -u | awk -v re="$filter" '$3 ~ re')
if [[ -z $targets ]]; then
  echo "fuzz: no target matches $filter" >&2
  exit 2
fi

failed=0 rows=()
while read -r mod pkg name; do
  log=.build/fuzz/$name.log
  echo "=== $name ($mod ${pkg#./}): -fuzztime $time -fuzzminimizetime $minimize"
  rc=0
  go -C "$mod" test -run '^$' -fuzz "^$name\$" -fuzztime "$time" -fuzzminimizetime "$minimize" "$pkg" >"$log" 2>&1 || rc=$?
  # fuzz: elapsed: 30s, execs: 1234567 (41152/sec), new interesting: 12 (total: 52)
  last=$(grep -E '^fuzz: elapsed: [0-9]+s, execs: ' "$log" | tail -1 || true)
  read -r secs execs new <<<"$(sed -E 's/^fuzz: elapsed: ([0-9]+)s, execs: ([0-9]+) .*new interesting: ([0-9]+).*/\1 \2 \3/' <<<"$last")"
  result=ok
  if ((rc != 0)); then
    result="FAILED (exit $rc, $log)"
    failed=1
    tail -20 "$log"
  fi
  rate=-
  if [[ -n $last && ${secs:-0} -gt 0 ]]; then rate=$((execs / secs)); fi
  where=${pkg#./}
  [[ $mod == . ]] || where=$mod/$where
  rows+=("$(printf '%-24s %-38s %6ss %12s %9s %5s  %s' "$name" "$where" "${secs:--}" "${execs:--}" "$rate" "${new:--}" "$result")")
done <<<"$targets"

echo
printf '%-24s %-38s %7s %12s %9s %5s  %s\n' target package elapsed execs execs/s new result
printf '%s\n' "${rows[@]}"
exit $failed
