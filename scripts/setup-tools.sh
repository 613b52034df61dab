#!/usr/bin/env bash
# Installs the pinned developer tools into .build/bin (cached by version).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/.build/bin
mkdir -p "$bin"
want=2.15.0
if [[ -x $bin/golangci-lint ]] && "$bin/golangci-lint" version 2>/dev/null | grep -q "version $want"; then
  exit 0
fi
echo "setup: installing golangci-lint v$want (go install, a few minutes on 2 cores)" >&2
GOBIN=$bin GOFLAGS=-buildvcs=false go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v$want"
