#!/usr/bin/env bash
# Compiles core/internal/ml/cuda/kernels/iris.cu with the pinned CUDA 13.0 nvcc from .build/cuda
# (scripts/gpu/setup-cuda.sh) into core/internal/ml/cuda/kernels/build/iris.fatbin: sm_90 SASS plus
# compute_90 PTX. A resource report (registers, shared memory, spills) goes to build/ptxas.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
cuda=$PWD/.build/cuda
src=core/internal/ml/cuda/kernels/iris.cu
out=core/internal/ml/cuda/kernels/build
mkdir -p "$out"
if [[ -f $out/iris.fatbin && $out/iris.fatbin -nt $src && $out/iris.fatbin -nt "$0" ]]; then exit 0; fi
flags=(-I"$cuda/include" -isystem "$cuda/include/cccl" -O3 -std=c++17 -Xptxas -v
       -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90)
"$cuda/bin/nvcc" "${flags[@]}" -fatbin -o "$out/iris.fatbin.tmp" "$src" 2>"$out/ptxas.txt" || { cat "$out/ptxas.txt" >&2; exit 1; }
if grep -q "bytes spill stores" "$out/ptxas.txt" && grep "spill stores" "$out/ptxas.txt" | grep -vq " 0 bytes spill stores"; then
  echo "build-kernels: warning: register spills (see $out/ptxas.txt)" >&2
fi
mv "$out/iris.fatbin.tmp" "$out/iris.fatbin"
echo "build-kernels: $out/iris.fatbin ($(wc -c <"$out/iris.fatbin") bytes)" >&2
