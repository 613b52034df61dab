#!/usr/bin/env bash
# One step of `just test`, timed: prints the step's name, runs it, prints its duration, and
# records it in .build/test-steps.tsv (name, seconds, exit status).
#
#   scripts/step.sh <name> <command> [args...]   run and time one step (its exit status is the step's)
#   scripts/step.sh --reset                      start a new run's record
#   scripts/step.sh --summary                    every step's duration and the whole run's
set -uo pipefail
cd "$(dirname "$0")/.."
record=.build/test-steps.tsv
mkdir -p .build
case ${1:-} in
--reset)
  date +%s >.build/test-steps.start
  : >"$record"
  exit 0
  ;;
--summary)
  start=$(cat .build/test-steps.start 2>/dev/null || date +%s)
  total=$(($(date +%s) - start))
  echo "== step durations (s)"
  awk -F'\t' '{ printf "   %-28s %5d%s\n", $1, $2, ($3 == 0 ? "" : "  FAILED (exit " $3 ")") }' "$record"
  printf '   %-28s %5d  (%dm%02ds, setup included; background steps overlap the others)\n' total "$total" $((total / 60)) $((total % 60))
  exit 0
  ;;
esac
name=$1
shift
shown=("$(basename "$1")" "${@:2}") # `just` by its name, not the path npx keeps it under
echo "== step $name: ${shown[*]}"
t0=$(date +%s)
"$@"
rc=$?
dt=$(($(date +%s) - t0))
printf '%s\t%d\t%d\n' "$name" "$dt" "$rc" >>"$record"
if ((rc == 0)); then
  echo "-- step $name: ${dt}s"
else
  echo "-- step $name: FAILED (exit $rc) after ${dt}s"
fi
exit $rc
