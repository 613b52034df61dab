#!/usr/bin/env bash
# Creates the pinned Python environment export.py runs in (.build/swiglu-gemm-venv, ~5 GB with
# torch's CUDA wheels; quack imports torch).
set -euo pipefail
cd "$(dirname "$0")/../../.."
venv=.build/swiglu-gemm-venv
[[ -x $venv/bin/python ]] || python3 -m venv "$venv"
"$venv/bin/pip" install -q -r scripts/gpu/swiglu-gemm/requirements.txt
echo "swiglu-gemm: $venv ready" >&2
