#!/usr/bin/env bash
# Adds the records of GPU test runs to docs/results/gpu-tests.md, newest first: the GPU-TESTS
# lines that `bash scripts/gpu/run.sh check` prints and writes to $OUT/gpu-tests.tsv (give that
# file, or the call's saved output). A record already in the log is not added twice.
#
#   scripts/gpu/record-check.sh <file>...
set -euo pipefail
(($#)) || { echo "usage: scripts/gpu/record-check.sh <gpu-tests.tsv or the call's output>..." >&2; exit 2; }
files=()
for f in "$@"; do files+=("$(realpath "$f")"); done
cd "$(dirname "$0")/../.."
log=docs/results/gpu-tests.md

# one table row a record: date, commit, verdict, a cell for each binary (not run when the record
# has none), the command
rows=$(grep -h $'^GPU-TESTS\t' "${files[@]}" | awk -F'\t' '{
  delete cell
  for (i = 5; i < NF; i++) { eq = index($i, "="); cell[substr($i, 1, eq - 1)] = substr($i, eq + 1) }
  row = sprintf("| %s | %s | %s |", $2, $3, $NF)
  n = split("gpu.test cuda.test cudaparity.test", bins, " ")
  for (j = 1; j <= n; j++) row = row " " ((bins[j] in cell) ? cell[bins[j]] : "not run") " |"
  print row " `" $4 "` |"
}' | tac) || true
if [[ -z $rows ]]; then
  echo "record-check: no GPU-TESTS line in $*" >&2
  exit 1
fi
added=0 new=()
while IFS= read -r row; do
  if grep -qxF -- "$row" "$log"; then
    echo "already recorded: $row"
  else
    new+=("$row")
    added=$((added + 1))
  fi
done <<<"$rows"
((added)) || exit 0
# the rows go right under the table's header
tmp=$(mktemp)
awk -v rows="$(printf '%s\n' "${new[@]}")" '{ print } /^\| --- / && !done { print rows; done = 1 }' "$log" >"$tmp"
mv "$tmp" "$log"
printf 'added to %s:\n' "$log"
printf '%s\n' "${new[@]}"
