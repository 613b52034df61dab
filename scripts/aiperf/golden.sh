#!/usr/bin/env bash
# Regenerates the AIPerf golden files of benchmark/aiperf/testdata with the real aiperf 0.13.0:
# statistics from AIPerf's own functions, and two recorded runs (streaming and not, one row of
# four failing) against the scripted fixture_server.py. Needs .build/aiperf-venv (setup-venv.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
py=.build/aiperf-venv/bin/python
out=benchmark/aiperf/testdata
"$py" scripts/aiperf/golden_stats.py "$out/stats_golden.json"

tmp=$(mktemp -d)
port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$py" scripts/aiperf/fixture_server.py "$port" &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$tmp"' EXIT
"$py" - "$tmp/in.jsonl" <<'PY'
import base64, io, json, sys
from PIL import Image
rows = []
for i, (q, rgb) in enumerate([("What is this? cat", (200, 30, 30)), ("What is this? dog", (30, 200, 30)),
                               ("What is this? FAIL", (30, 30, 200)), ("What is this? car", (90, 90, 90))]):
    buf = io.BytesIO()
    Image.new("RGB", (64, 48), rgb).save(buf, "PNG")
    rows.append({"session_id": f"img-{i:04d}", "text": q, "image": "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode(), "output_length": 8})
with open(sys.argv[1], "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
PY
for i in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.2; done
for mode in stream nonstream; do
  flag=""; [[ $mode == stream ]] && flag=--streaming
  AIPERF_DATASET_MMAP_CACHE_ENABLED=false .build/aiperf-venv/bin/aiperf profile --model fixture --url "http://127.0.0.1:$port" \
    --endpoint-type chat $flag --input-file "$tmp/in.jsonl" --custom-dataset-type single_turn \
    --concurrency 2 --request-count 8 --warmup-request-count 2 --random-seed 0 \
    --extra-inputs temperature:0 --extra-inputs top_k:1 \
    --tokenizer "$PWD/.build/tokenizer/qwen3" --use-server-token-count \
    --artifact-dir "$tmp/$mode" --export-level raw \
    --ui-type none --no-server-metrics --no-gpu-telemetry --workers-max 2 >"$tmp/$mode.log" 2>&1 \
    || { tail -50 "$tmp/$mode.log"; exit 1; }
  mkdir -p "$out/aiperf013/$mode"
  for f in profile_export.jsonl profile_export_raw.jsonl profile_export_aiperf.json profile_export_aiperf.csv inputs.json phase_manifest.json; do
    cp "$tmp/$mode/$f" "$out/aiperf013/$mode/$f"
  done
done
echo "golden: wrote $out"
