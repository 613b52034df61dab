#!/usr/bin/env bash
# Writes the random-weight fixture checkpoints' weights (core/internal/enginetest/testdata/qwen2_5_vl:
# tiny-untied/model.safetensors, tiny-tied/model.safetensors, 20 MB and 5.3 MB, git-ignored) where
# they are missing or differ from the committed sha256 (seeded/<model>.safetensors.sha256). No
# weights are committed: each comes from the seeded rule of scripts/reference/seeded.py (the shape
# sweeps' generator, each value rounded to bf16) and its manifest seeded/<model>.json (seed, tensor
# names and shapes), which keeps the tree small (docs/testing.md). `just setup` runs it; so does
# scripts/gpu/run.sh on the GPU machine.
#
# The writer: Go where `go` is installed (fixture.WriteFixtureWeights, cmd/fixtureweights), else
# python3 with numpy (scripts/reference/seeded.py; the GPU machine has no Go). Both write the same
# bytes and check them against the sha256. IRIS_FIXTURE_WRITER=go|python picks one; IRIS_PYTHON is
# the python (default python3).
#   --check   writes both models with both writers into a temporary directory and compares each
#             file's sha256 with the committed one (`just fixtures` runs it; needs go and numpy).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=core/internal/enginetest/testdata/qwen2_5_vl
py=${IRIS_PYTHON:-python3}

# write WRITER [-out PATH] MODEL...: one writer over the models.
write() {
  local writer=$1
  shift
  case $writer in
    go) go run ./core/internal/enginetest/cmd/fixtureweights "$@" ;;
    python) "$py" scripts/reference/seeded.py "$@" ;;
    *) echo "unpack-fixtures: unknown writer $writer (go or python)" >&2; return 1 ;;
  esac
}

models=()
for sum in "$dir"/seeded/*.safetensors.sha256; do
  models+=("$(basename "$sum" .safetensors.sha256)")
done

if [[ ${1:-} == --check ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  for m in "${models[@]}"; do
    want=$(cut -d' ' -f1 "$dir/seeded/$m.safetensors.sha256")
    for w in go python; do
      write "$w" --out "$tmp/$m-$w.safetensors" "$m" >/dev/null
      got=$(sha256sum "$tmp/$m-$w.safetensors" | cut -d' ' -f1)
      [[ $got == "$want" ]] || { echo "unpack-fixtures: $m by $w: sha256 $got, want $want" >&2; exit 1; }
    done
    cmp "$tmp/$m-go.safetensors" "$tmp/$m-python.safetensors"
    echo "unpack-fixtures: $m: go and python write the same bytes, sha256 $want"
  done
  exit 0
fi

todo=()
for m in "${models[@]}"; do
  want=$(cut -d' ' -f1 "$dir/seeded/$m.safetensors.sha256")
  out=$dir/$m/model.safetensors
  if [[ -f $out && $(sha256sum "$out" | cut -d' ' -f1) == "$want" ]]; then continue; fi
  todo+=("$m")
done
((${#todo[@]})) || exit 0
writer=${IRIS_FIXTURE_WRITER:-}
if [[ -z $writer ]]; then
  if command -v go >/dev/null; then
    writer=go
  elif "$py" -c 'import numpy' 2>/dev/null; then
    writer=python
  else
    echo "unpack-fixtures: needs go, or $py with numpy, to write ${todo[*]}" >&2
    exit 1
  fi
fi
write "$writer" "${todo[@]}"
