#!/usr/bin/env bash
# Writes the JSON schemas the chart is validated against into .build/deploy/schemas (once):
#   core/  the Kubernetes v1.36 core schemas of PyPI's kubernetes-validate (pinned by hash), with
#          their references made relative so that kubeconform reads them from disk;
#   crds/  the InferencePool CRDs of the EPP module and the Gateway API's HTTPRoute, converted
#          by kubeconform's own openapi2jsonschema.py (the three modules at the versions
#          deploy/go.mod pins, from the Go module proxy).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$root/.build/deploy/schemas
stamp=$out/.v1
[[ -f $stamp ]] && exit 0
rm -rf "$out" && mkdir -p "$out/core" "$out/crds" "$root/.build/deploy/wheels"

python3 -m pip download -q --no-deps --require-hashes -r "$root/deploy/scripts/schemas-requirements.txt" -d "$root/.build/deploy/wheels"
python3 - "$root/.build/deploy/wheels/kubernetes_validate-1.37.0-py3-none-any.whl" "$out/core" <<'PY'
import json, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
prefix = "kubernetes_validate/kubernetes-json-schema/v1.36.0-local-strict/"
n = 0
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if not name.startswith(prefix) or not name.endswith(".json"):
            continue
        schema = json.loads(z.read(name))
        schema.pop("$id", None)
        text = json.dumps(schema).replace('"/api/_definitions.json#', '"_definitions.json#')
        with open(out + "/" + name[len(prefix):], "w") as f:
            f.write(text)
        n += 1
print(f"schemas: {n} core schemas", file=sys.stderr)
PY

cd "$root/deploy"
go mod download sigs.k8s.io/gateway-api-inference-extension sigs.k8s.io/gateway-api github.com/yannh/kubeconform
dir() { go list -m -f '{{.Dir}}' "$1"; }
gie=$(dir sigs.k8s.io/gateway-api-inference-extension)
gwapi=$(dir sigs.k8s.io/gateway-api)
kc=$(dir github.com/yannh/kubeconform)
# openapi2jsonschema.py reads YAML: PyYAML, from a pinned venv where python3 lacks it.
py=python3
if ! python3 -c 'import yaml' 2>/dev/null; then
  python3 -m venv "$root/.build/deploy/pyenv"
  "$root/.build/deploy/pyenv/bin/pip" install -q PyYAML==6.0.3
  py=$root/.build/deploy/pyenv/bin/python
fi
cd "$out/crds"
FILENAME_FORMAT='{kind}_{version}' "$py" "$kc/scripts/openapi2jsonschema.py" \
  "$gie"/config/crd/bases/*.yaml "$gwapi/config/crd/standard/gateway.networking.k8s.io_httproutes.yaml" >/dev/null
echo "schemas: $(ls | wc -l) CRD schemas" >&2
touch "$stamp"
