#!/usr/bin/env bash
# Unpacks the random-weight fixture checkpoints' weights (core/internal/engine/testdata/qwen2_5_vl:
# tiny-untied, tiny-tied) from their committed xz files in packed/, where they are missing or
# differ from the recorded sha256. The unpacked model.safetensors are git-ignored: compressed, the
# two weigh 17.9 MB instead of 25.3, which keeps the tree plus a GPU run's binaries under the
# device tool's 64 MiB (docs/gpu.md). `just setup` runs it; so does scripts/gpu/run.sh there.
# --pack does the reverse after `just fixtures` regenerated them: packed/ from the checkpoints.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/unxz.sh
dir=core/internal/engine/testdata/qwen2_5_vl
if [[ ${1:-} == --pack ]]; then
  for m in tiny-untied tiny-tied; do
    xz -9e -T0 -c "$dir/$m/model.safetensors" >"$dir/packed/$m.safetensors.xz"
    (cd "$dir" && sha256sum "$m/model.safetensors") >"$dir/packed/$m.safetensors.sha256"
    echo "packed $dir/packed/$m.safetensors.xz"
  done
  exit 0
fi
for sum in "$dir"/packed/*.safetensors.sha256; do
  name=$(basename "$sum" .safetensors.sha256)
  want=$(cut -d' ' -f1 "$sum")
  out=$dir/$name/model.safetensors
  if [[ -f $out && $(sha256sum "$out" | cut -d' ' -f1) == "$want" ]]; then continue; fi
  unxz_checked "$dir/packed/$name.safetensors.xz" "$want" "$out"
  echo "unpacked $out"
done
