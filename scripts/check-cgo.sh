#!/usr/bin/env bash
# Fails if a package outside the sanctioned list has cgo files of its own (aesthetics §8.4):
# the C engine, the tokenizer wrapper and, under the cuda tag, the GPU packages.
set -euo pipefail
cd "$(dirname "$0")/.."
allowed='^github.com/iris-vlm/iris/core/internal/(engine/native|tokenize|gpu|engine/cuda)$'
bad=$(go list -f '{{if .CgoFiles}}{{.ImportPath}}{{end}}' ./... | grep -Ev "$allowed" || true)
if [[ -n $bad ]]; then
  echo "cgo outside the sanctioned packages:" >&2
  echo "$bad" >&2
  exit 1
fi
echo "cgo only in: $(go list -f '{{if .CgoFiles}}{{.ImportPath}}{{end}}' ./... | tr '\n' ' ')"
