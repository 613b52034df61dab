# Iris: the one place build and test commands live. CI runs `just test` (README, .ci/run).
# Run it without installing just: `npx --yes rust-just@1.57.0 <recipe>`.
set shell := ["bash", "-euo", "pipefail", "-c"]
set export

root := justfile_directory()
modules := ". sdk-wasm plugins"
families := "qwen2_5_vl qwen3_vl"
tags := env("IRIS_TAGS", "")

# cgo finds libtokenizers.a (built by `just setup`) here.
CGO_LDFLAGS := "-L" + root + "/.build/lib"
GOFLAGS := "-buildvcs=false"

import 'just/tokenizer.just'
import 'just/gateway.just'
import 'just/pixels.just'
import 'just/plugins.just'
import 'just/engine.just'
import 'just/profile.just'
import 'just/gpu.just'

default:
    @just --list

# Fetch and build every input the build needs (cached under .build/).
setup:
    scripts/setup-tokenizers.sh
    scripts/fetch-tokenizer.sh

# Build the iris binary into bin/.
build: setup
    go build -tags '{{tags}}' -o bin/iris ./gateway/cmd/iris

# The reference Python stack (torch, transformers) for golden files; CI never needs it.
refenv:
    test -x .build/refenv/bin/python || (python3 -m venv .build/refenv && .build/refenv/bin/pip install -q -r scripts/reference/requirements.txt)
