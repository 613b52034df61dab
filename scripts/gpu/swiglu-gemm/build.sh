#!/usr/bin/env bash
# Builds .build/swiglu-gemm (export.py's products for sm_90a) unless it is already the export of
# this export.py and requirements.txt: a stamp of their hashes decides, so that an export left
# by an older script (other variants, another dispatch header) is rebuilt, not linked.
set -euo pipefail
cd "$(dirname "$0")/../../.."
dir=scripts/gpu/swiglu-gemm out=.build/swiglu-gemm
stamp=$(cat "$dir/export.py" "$dir/requirements.txt" | sha256sum | cut -c1-16)
if [[ ! -f $out/libswiglu_gemm.a || ! -f $out/stamp || $(cat "$out/stamp") != "$stamp" ]]; then
  "$dir/setup.sh"
  rm -rf "$out"
  .build/swiglu-gemm-venv/bin/python "$dir/export.py" --out "$out"
  echo "$stamp" >"$out/stamp"
fi
# the launchers call the CUDA runtime: its link-time library beside them, where the quack
# build's cgo directive looks (the GPU machine's CUDA 13 runtime provides it at run time)
ln -sf "$(ls "$PWD"/.build/swiglu-gemm-venv/lib/python3*/site-packages/nvidia/cu13/lib/libcudart.so.13)" "$out/libcudart.so.13"
