#!/usr/bin/env bash
# Drives `vtc serve` with the official `openai` npm client (non-streaming,
# streaming, chat, n, json_schema, a tool-call round trip). Exit 77 (SKIPPED) with the reason when node or the
# package is absent; scripts/test.sh installs it (scripts/fetch-openai.sh).
#   openai_client_test.sh VTC_BINARY WORK_DIR
set -euo pipefail
VTC="$1"
WORK="$2"
CACHE="${VTC_OPENAI_CACHE:-$HOME/.cache/vtc/openai-npm}"
command -v node >/dev/null || { echo "SKIPPED: node is not installed"; exit 77; }
[[ -f "$CACHE/node_modules/openai/package.json" ]] ||
  { echo "SKIPPED: the openai npm package is not in $CACHE; run scripts/fetch-openai.sh"; exit 77; }
REF="${VTC_REF_CACHE:-$HOME/.cache/vtc/llama-ref}/llama.cpp"
VOCAB="$REF/models/ggml-vocab-llama-spm.gguf"
[[ -f "$VOCAB" ]] || { echo "SKIPPED: the llama.cpp reference (vocab) is not fetched"; exit 77; }
# A real model family's template, so tool calls render and parse as Qwen3's do.
TEMPLATE="$REF/models/templates/Qwen-Qwen3-0.6B.jinja"

mkdir -p "$WORK"
MODEL="$WORK/openai-tiny-llama.gguf"
[[ -f "$MODEL" ]] || "$VTC" gen-model --arch llama --size tiny --seed 42 -o "$MODEL" >/dev/null
LOG="$(mktemp)"
"$VTC" serve "$MODEL" --port 0 -t 2 --api-key test-key --chat-template-file "$TEMPLATE" 2>"$LOG" &
PID=$!
trap 'kill $PID 2>/dev/null || true; rm -f "$LOG"' EXIT
PORT=""
for _ in $(seq 200); do
  PORT="$(grep -o 'listening on http://[^ ]*' "$LOG" | sed 's/.*://' || true)"
  [[ -n "$PORT" ]] && break
  sleep 0.05
done
[[ -n "$PORT" ]] || { echo "vtc serve did not start:"; cat "$LOG"; exit 1; }
NODE_PATH="$CACHE/node_modules" node "$(dirname "$0")/openai_client.mjs" "http://127.0.0.1:$PORT/v1" "$CACHE/node_modules/openai/index.mjs"
kill -TERM $PID
wait $PID
echo "vtc serve exited 0 after SIGTERM"
