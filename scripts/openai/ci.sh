#!/usr/bin/env bash
# The official openai-python client (pinned, scripts/openai/requirements.txt) against
# `iris serve` with the random-weight bundle (`random`: answers run to max_tokens): system messages, stop, image_url.detail, logprobs and the
# min_pixels/max_pixels extensions, streamed and not, and their refusals (scripts/openai/e2e.py).
# Needs bin/iris and .build/bundles/random (just build demo-bundle); IRIS_BIN and BUNDLE override them.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/aiperf/lib.sh
bundle=${BUNDLE:-.build/bundles/random}
out=.build/openai-ci
[[ -x $IRIS && -f $bundle/bundle.toml ]] || { echo "openai-ci: needs $IRIS and $bundle (just build demo-bundle)" >&2; exit 1; }
scripts/openai/setup-venv.sh
rm -rf "$out"
mkdir -p "$out"
trap stop_serve EXIT
port=$(free_port)
start_serve "$bundle" "$port" "$(free_port)" "$out/serve.log"
.build/openai-venv/bin/python scripts/openai/e2e.py "http://127.0.0.1:$port" random \
  core/internal/enginetest/testdata/qwen2_5_vl/cases/rect_320x240.png
