#!/usr/bin/env bash
# Bounded load run of `vtc serve` on loopback: starts the server on MODEL,
# runs scripts/serve_load.mjs (default 60 s, 16 connections), prints the
# result with the server's RSS before and after, stops the server (SIGTERM)
# and checks it exits 0. VTC_LOAD_ROUNDS=N repeats the load N times against
# the same server, printing RSS after each round (growth after the first
# round, once the KV pool and prefix cache are warm, would be a leak).
# VTC_LOAD_TEMPERATURE (default 0.8; 0 = greedy) is passed to the load.
#   scripts/serve-load.sh MODEL [seconds] [connections] [extra vtc serve args...]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="$1"; SECONDS_="${2:-60}"; CONNS="${3:-16}"; shift $(( $# < 3 ? $# : 3 ))
VTC="${VTC:-./build/tools/vtc/vtc}"
LOG="$(mktemp)"
"$VTC" serve "$MODEL" --port 0 "$@" 2>"$LOG" &
PID=$!
trap 'kill $PID 2>/dev/null || true; rm -f "$LOG"' EXIT
PORT=""
for _ in $(seq 600); do
  PORT="$(grep -o 'listening on http://[^ ]*' "$LOG" | sed 's/.*://' || true)"
  [[ -n "$PORT" ]] && curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
  sleep 0.1
done
rss() { awk '/VmRSS/{print $2" kB"}' "/proc/$PID/status"; }
echo "RSS before: $(rss)"
for round in $(seq "${VTC_LOAD_ROUNDS:-1}"); do
  node scripts/serve_load.mjs "http://127.0.0.1:$PORT" "$SECONDS_" "$CONNS"
  echo "RSS after round $round: $(rss)"
done
curl -s "http://127.0.0.1:$PORT/metrics" | grep -E '^vtc_(kv_pages_(free|total|cached)|requests_running|queue_depth) '
kill -TERM $PID
wait $PID && echo "server exited 0"
