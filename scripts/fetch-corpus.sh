#!/usr/bin/env bash
# Fetches the default profiling corpus into .build/corpus: ten real RGB photos shipped inside two
# pinned PyPI wheels (nine from scikit-image 0.25.2's skimage/data, Grace Hopper from matplotlib
# 3.10.3's sample data), every wheel and photo checked by sha256, then writes corpus.jsonl in
# AIPerf's single_turn format: the photos' original bytes as data URIs, one question, 10 tokens.
# Nothing here is committed; the digests are the pin.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.build/corpus
question="What is the main object in this image? Answer in one word."
check() { echo "$1  $2" | sha256sum --check --quiet - >/dev/null 2>&1; }

# wheel file | sha256 | requirement
wheels=(
  "scikit_image-0.25.2-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl|24cc986e1f4187a12aa319f777b36008764e856e5013666a4a83f8df083c2641|scikit-image==0.25.2"
  "matplotlib-3.10.3-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl|fdfa07c0ec58035242bc8b2c8aae37037c9a886370eef6850703d7583e19964b|matplotlib==3.10.3"
)
# photo path in its wheel | sha256 (original bytes)
photos=(
  "skimage/data/astronaut.png|88431cd9653ccd539741b555fb0a46b61558b301d4110412b5bc28b5e3ea6cb5"
  "skimage/data/chelsea.png|596aa1e7cb875eb79f437e310381d26b338a81c2da23439704a73c4651e8c4bb"
  "skimage/data/coffee.png|cc02f8ca188b167c775a7101b5d767d1e71792cf762c33d6fa15a4599b5a8de7"
  "skimage/data/hubble_deep_field.jpg|3a19c5dd8a927a9334bb1229a6d63711b1c0c767fb27e2286e7c84a3e2c2f5f4"
  "skimage/data/ihc.png|f8dd1aa387ddd1f49d8ad13b50921b237df8e9b262606d258770687b0ef93cef"
  "skimage/data/motorcycle_left.png|db18e9c4157617403c3537a6ba355dfeafe9a7eabb6b9b94cb33f6525dd49179"
  "skimage/data/motorcycle_right.png|5fc913ae870e42a4b662314bc904d1786bcad8e2f0b9b67dba5a229406357797"
  "skimage/data/retina.jpg|38a07f36f27f095e818aea7b96d34202c05176d30253c66733f2e00379e9e0e6"
  "skimage/data/rocket.jpg|c2dd0de7c538df8d111e479619b129464d0269d0ae5fd18ca91d33a7fdfea95c"
  "matplotlib/mpl-data/sample_data/grace_hopper.jpg|a8ca6d734765703b09728ab47fe59f473d93ae3967fc24c7c0288c3c7adb7130"
)

ok=1
for p in "${photos[@]}"; do
  f=$dest/images/$(basename "${p%%|*}")
  check "${p##*|}" "$f" || { ok=0; break; }
done
if [[ $ok == 1 && -s $dest/corpus.jsonl && $dest/corpus.jsonl -nt "$0" ]]; then
  exit 0
fi

echo "corpus: fetching the pinned wheels" >&2
mkdir -p "$dest/wheels" "$dest/images"
for w in "${wheels[@]}"; do
  IFS='|' read -r file sha req <<<"$w"
  if ! check "$sha" "$dest/wheels/$file"; then
    python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_17_x86_64 \
      --python-version 3.11 --dest "$dest/wheels" "$req"
  fi
  check "$sha" "$dest/wheels/$file" || { echo "corpus: $file does not match its pinned sha256" >&2; exit 1; }
done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for p in "${photos[@]}"; do
  path=${p%%|*}
  wheel=$dest/wheels/${wheels[0]%%|*}
  [[ $path == matplotlib/* ]] && wheel=$dest/wheels/${wheels[1]%%|*}
  python3 -c 'import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))' "$wheel" "$path" >"$tmp/photo"
  check "${p##*|}" "$tmp/photo" || { echo "corpus: $path does not match its pinned sha256" >&2; exit 1; }
  mv "$tmp/photo" "$dest/images/$(basename "$path")"
done
: >"$tmp/corpus.jsonl"
for p in "${photos[@]}"; do
  name=$(basename "${p%%|*}")
  case $name in *.png) mime=image/png ;; *.jpg) mime=image/jpeg ;; esac
  printf '{"session_id":"%s","text":"%s","image":"data:%s;base64,%s","output_length":10}\n' \
    "${name%.*}" "$question" "$mime" "$(base64 -w0 "$dest/images/$name")" >>"$tmp/corpus.jsonl"
done
mv "$tmp/corpus.jsonl" "$dest/corpus.jsonl"
echo "corpus: wrote $dest/corpus.jsonl (${#photos[@]} photos)" >&2
