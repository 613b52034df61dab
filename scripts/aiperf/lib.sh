# Helpers for the profiling scripts: sourced, not run.

# free_port prints a loopback TCP port nothing listens on.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# IRIS is the iris binary (IRIS_BIN overrides bin/iris).
IRIS=${IRIS_BIN:-bin/iris}

# start_serve BUNDLE PORT OTLP_PORT LOG [BUNDLE...] starts `iris serve` exporting spans to
# OTLP_PORT (often nobody listens there between profiler runs; the gateway logs the first failed
# export, holds the spans and retries with a back-off of at most 2 s), serving BUNDLE and any further ones, and waits until it is ready. The server's pid is
# left in SERVE_PID.
start_serve() {
  local bundle=$1 port=$2 otlp=$3 log=$4
  local more=()
  for b in "${@:5}"; do more+=(--bundle "$b"); done
  OTEL_TRACES_EXPORTER=otlp OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf \
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="http://127.0.0.1:$otlp/v1/traces" OTEL_BSP_SCHEDULE_DELAY=100 \
    "$IRIS" serve --bundle "$bundle" "${more[@]}" --addr "127.0.0.1:$port" >"$log" 2>&1 &
  SERVE_PID=$!
  for _ in $(seq 600); do
    if curl -fsS -o /dev/null "http://127.0.0.1:$port/readyz" 2>/dev/null; then
      return 0
    fi
    if ! kill -0 "$SERVE_PID" 2>/dev/null; then
      echo "iris serve exited:" >&2
      tail -50 "$log" >&2
      return 1
    fi
    sleep 0.2
  done
  echo "iris serve did not become ready in 120 s" >&2
  tail -50 "$log" >&2
  return 1
}

# stop_serve stops the server started by start_serve.
stop_serve() {
  if [[ -n ${SERVE_PID:-} ]]; then
    kill "$SERVE_PID" 2>/dev/null || true
    wait "$SERVE_PID" 2>/dev/null || true
    SERVE_PID=
  fi
}
