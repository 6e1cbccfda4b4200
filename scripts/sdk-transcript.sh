#!/usr/bin/env bash
# Greedy transcript of the official SDKs (openai, @anthropic-ai/sdk) against
# `vtc serve`: completions, chat (whole, streamed, with a stop), Responses
# and Messages on three prompts, ids and timestamps left out, so the
# transcripts of two builds can be diffed byte for byte (a refactor of
# serve/ must leave them equal).
#   scripts/sdk-transcript.sh VTC MODEL.gguf > transcript.txt
# Needs node and the packages of scripts/fetch-openai.sh (~/.cache/vtc/openai-npm).
set -euo pipefail
VTC="$1"; MODEL="$2"
CACHE="${VTC_OPENAI_CACHE:-$HOME/.cache/vtc/openai-npm}"
[[ -d "$CACHE/node_modules/openai" ]] || { echo "sdk-transcript: run scripts/fetch-openai.sh first" >&2; exit 2; }
WORK="$(mktemp -d)"; LOG="$WORK/serve.log"
trap 'kill $PID 2>/dev/null || true; rm -rf "$WORK"' EXIT
"$VTC" serve "$MODEL" --port 0 -t 2 2>"$LOG" &
PID=$!
PORT=""
for _ in $(seq 600); do
  PORT="$(grep -o 'listening on http://[^ ]*' "$LOG" | sed 's/.*://' || true)"
  [[ -n "$PORT" ]] && curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
  sleep 0.1
done
# ESM resolves packages next to the script: run a copy beside the cache's node_modules.
cp "$(dirname "$0")/sdk_transcript.mjs" "$WORK/" && ln -s "$CACHE/node_modules" "$WORK/node_modules"
node "$WORK/sdk_transcript.mjs" "http://127.0.0.1:$PORT"
