#!/usr/bin/env bash
# Installs openai-python and its dependencies, each pinned by version and wheel sha256
# (scripts/openai/requirements.txt), into .build/openai-venv (kept between runs while the
# requirements are unchanged). Needs Python 3.11 (PYTHON overrides python3).
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=.build/openai-venv
req=scripts/openai/requirements.txt
stamp=$venv/requirements.sha256
want=$(sha256sum "$req" | cut -d' ' -f1)
if [[ -x $venv/bin/python && -f $stamp && $(cat "$stamp") == "$want" ]]; then
  exit 0
fi
py=${PYTHON:-python3}
"$py" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
  || { echo "openai-venv: $py is $("$py" --version 2>&1); the pinned wheels are for CPython 3.11" >&2; exit 1; }
echo "openai-venv: installing $req into $venv" >&2
rm -rf "$venv"
"$py" -m venv "$venv"
"$venv/bin/pip" install --quiet --require-hashes --no-deps --only-binary :all: -r "$req"
"$venv/bin/python" -c 'import openai; print("openai-venv: openai", openai.__version__)' >&2
echo "$want" >"$stamp"
