#!/usr/bin/env bash
# Installs the real AIPerf 0.13.0 from PyPI into .build/aiperf-venv (kept between runs). The aiperf
# wheel is checked against its published sha256; its dependencies come from PyPI as pip resolves
# them. Needs Python 3.11-3.13 (PYTHON overrides python3).
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=.build/aiperf-venv
version=0.13.0
wheel=aiperf-$version-py3-none-any.whl
sha=a20100fd127f1d10ea45d4946b1658a186030e86770344c80dfd256a60192f34
installed() { "$venv/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("aiperf") != sys.argv[1])' "$version" 2>/dev/null; }
if [[ -x $venv/bin/aiperf ]] && installed; then
  exit 0
fi
py=${PYTHON:-python3}
"$py" -c 'import sys; sys.exit(not ((3, 11) <= sys.version_info[:2] <= (3, 13)))' \
  || { echo "aiperf: $py is $("$py" --version 2>&1); AIPerf $version needs Python 3.11-3.13" >&2; exit 1; }
echo "aiperf: installing aiperf==$version into $venv" >&2
"$py" -m venv "$venv"
"$venv/bin/pip" install --quiet --upgrade pip
mkdir -p .build/aiperf-wheel
[[ -f .build/aiperf-wheel/$wheel ]] || "$venv/bin/pip" download --quiet --no-deps --dest .build/aiperf-wheel "aiperf==$version"
echo "$sha  .build/aiperf-wheel/$wheel" | sha256sum --check --quiet - \
  || { echo "aiperf: $wheel does not match its published sha256" >&2; exit 1; }
"$venv/bin/pip" install --quiet ".build/aiperf-wheel/$wheel"
installed
