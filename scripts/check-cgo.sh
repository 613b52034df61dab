#!/usr/bin/env bash
# Fails if a package outside the sanctioned list has cgo files of its own (docs/ARCHITECTURE.md,
# "Rules"): the C engine and the tokenizer wrapper in every build, and under the cuda tag also
# the GPU package. Both builds are listed: without -tags cuda the GPU package's cgo files are
# excluded by their build constraints and would never be checked.
set -euo pipefail
cd "$(dirname "$0")/.."
pkg='^github.com/iris-vlm/iris/core/internal/'
allowed_default="$pkg(ml/cpu|tokenize)\$"
allowed_cuda="$pkg(ml/cpu|tokenize|ml/cuda/gpu)\$"

status=0
check() { # check <build name> <allowed regexp> [go list flags...]
  local name=$1 allowed=$2 cgo bad
  shift 2
  # -e: the cuda build's kernels package embeds build/iris.fatbin, which exists only after
  # `just kernels`; a package that fails to load still reports its cgo files.
  cgo=$(go list -e "$@" -f '{{if .CgoFiles}}{{.ImportPath}}{{end}}' ./...)
  bad=$(grep -Ev "$allowed" <<<"$cgo" | grep . || true)
  if [[ -n $bad ]]; then
    echo "cgo outside the sanctioned packages ($name build):" >&2
    echo "$bad" >&2
    status=1
  fi
  echo "cgo in ($name build): $(tr '\n' ' ' <<<"$cgo")"
}
check default "$allowed_default"
check cuda "$allowed_cuda" -tags cuda
exit $status
