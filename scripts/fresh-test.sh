#!/usr/bin/env bash
# Times the README's test command as a fresh machine runs it: a clean clone of a commit of this
# repository and empty Go, cargo, npm and pip caches (every module, crate, package and wheel
# fetched again, everything built again). The clone and the caches go under a temporary folder,
# removed afterwards unless --keep; the run's log is printed as it goes, its step durations at the
# end (scripts/step.sh).
#
#   scripts/fresh-test.sh [--keep] [commit]    (default HEAD)
set -euo pipefail
cd "$(dirname "$0")/.."
keep=
if [[ ${1:-} == --keep ]]; then keep=1; shift; fi
ref=$(git rev-parse --short "${1:-HEAD}")
work=$(mktemp -d -t iris-fresh.XXXXXX)
[[ -n $keep ]] || trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
git clone -q . "$work/repo"
git -C "$work/repo" checkout -q "$ref"
export GOCACHE=$work/cache/go-build GOMODCACHE=$work/cache/gomod GOPATH=$work/cache/gopath \
  CARGO_HOME=$work/cache/cargo npm_config_cache=$work/cache/npm PIP_CACHE_DIR=$work/cache/pip \
  XDG_CACHE_HOME=$work/cache/xdg
echo "fresh-test: $ref in $work/repo, empty caches in $work/cache" >&2
start=$(date +%s)
(cd "$work/repo" && .ci/run)
echo "fresh-test: $ref passed in $(($(date +%s) - start)) s" >&2
