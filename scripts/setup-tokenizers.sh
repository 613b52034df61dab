#!/usr/bin/env bash
# Builds libtokenizers.a from the Rust sources of the pinned github.com/daulet/tokenizers module
# into .build/lib (cached by version). The module's Cargo.toml pulls tiktoken-rs from a GitHub
# branch, which the package registries cannot serve; we build a copy with that one dependency
# pointed at the crates.io release of the same API (the Go side never calls tiktoken).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
version=$(go list -m -f '{{.Version}}' github.com/daulet/tokenizers)
out=$root/.build/lib
stamp=$out/libtokenizers.$version.stamp
if [[ -f $out/libtokenizers.a && -f $stamp ]]; then
  exit 0
fi
echo "setup: building libtokenizers.a for daulet/tokenizers $version (cargo, ~2 min on 2 cores)" >&2
src=$(go mod download -json "github.com/daulet/tokenizers@$version" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
work=$root/.build/tokenizers-src
rm -rf "$work" && mkdir -p "$work"
cp -r "$src"/. "$work"/ && chmod -R u+w "$work"
sed -i 's|^tiktoken-rs = .*|tiktoken-rs = "=0.9.1"|' "$work/Cargo.toml"
(cd "$work" && cargo build --release --lib --quiet)
mkdir -p "$out"
cp "$work/target/release/libtokenizers.a" "$out/libtokenizers.a"
rm -f "$out"/libtokenizers.*.stamp && touch "$stamp"
rm -rf "$work/target/release/build" "$work/target/release/deps" "$work/target/release/incremental"
