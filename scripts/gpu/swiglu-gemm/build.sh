#!/usr/bin/env bash
# Builds .build/swiglu-gemm (export.py's products for sm_90a) unless it is already the export of
# this export.py and requirements.txt: a stamp of their hashes decides, so that an export left
# by an older script (other variants, another dispatch header) is rebuilt, not linked.
set -euo pipefail
cd "$(dirname "$0")/../../.."
dir=scripts/gpu/swiglu-gemm out=.build/swiglu-gemm
stamp=$(cat "$dir/export.py" "$dir/requirements.txt" | sha256sum | cut -c1-16)
if [[ -f $out/libswiglu_gemm.a && -f $out/stamp && $(cat "$out/stamp") == "$stamp" ]]; then
  exit 0
fi
"$dir/setup.sh"
rm -rf "$out"
.build/swiglu-gemm-venv/bin/python "$dir/export.py" --out "$out"
echo "$stamp" >"$out/stamp"
