#!/usr/bin/env bash
# Fails if a backend names a model family (docs/ARCHITECTURE.md, "Rules"): the op set and its
# backends (core/internal/ml and everything under it: the C engine, the CUDA engine, its device
# layer and kernels) know ops, never families, so no non-test source there may name one. The
# names are every family folder under core/internal/models and the families and vision towers
# the project serves or plans to serve.
set -euo pipefail
cd "$(dirname "$0")/.."
words=(qwen internvl internvit phi3 phi4 phi-4 deepseek lance moonvit siglip llava gemma3 locateanything)
for d in core/internal/models/*/; do
  name=$(basename "$d")
  [[ $name == internal ]] || words+=("$name")
done
mapfile -t words < <(printf '%s\n' "${words[@]}" | sort -u)
pattern="(^|[^a-z])($(IFS='|'; echo "${words[*]}"))"
hits=$(find core/internal/ml -type f \( -name '*.go' -o -name '*.c' -o -name '*.h' -o -name '*.cu' \) ! -name '*_test.go' \
  -exec grep -inHE "$pattern" {} + || true)
if [[ -n $hits ]]; then
  echo "backend sources that name a model family (a family belongs in core/internal/models/<family>):" >&2
  echo "$hits" >&2
  exit 1
fi
echo "backends name no family ($(IFS=,; echo "${words[*]}"))"
