#!/usr/bin/env bash
# Drives `vtc serve` with an official npm client script: the OpenAI
# Responses API (responses_client.mjs, package `openai`) or the Anthropic
# Messages API (anthropic_messages_client.mjs, package `@anthropic-ai/sdk`).
# The server runs a tiny generated llama with Qwen3's template, so tool
# calls render and parse, and --api-key test-key; a second one runs QwQ's
# template, whose generation prompt opens a think block, so the output is
# reasoning (the clients' reasoning and thinking events). Exit 77 (SKIPPED) with
# the reason when node, the package or the reference's vocabulary is
# absent; scripts/test.sh installs the packages (scripts/fetch-openai.sh).
#   responses_messages_client_test.sh VTC_BINARY WORK_DIR CLIENT.mjs PACKAGE
set -euo pipefail
VTC="$1"
WORK="$2"
CLIENT="$3"
PACKAGE="$4"
CACHE="${VTC_OPENAI_CACHE:-$HOME/.cache/vtc/openai-npm}"
command -v node >/dev/null || { echo "SKIPPED: node is not installed"; exit 77; }
[[ -f "$CACHE/node_modules/$PACKAGE/package.json" ]] ||
  { echo "SKIPPED: the $PACKAGE npm package is not in $CACHE; run scripts/fetch-openai.sh"; exit 77; }
REF="${VTC_REF_CACHE:-$HOME/.cache/vtc/llama-ref}/llama.cpp"
VOCAB="$REF/models/ggml-vocab-llama-spm.gguf"
[[ -f "$VOCAB" ]] || { echo "SKIPPED: the llama.cpp reference (vocab) is not fetched"; exit 77; }
TEMPLATES="$REF/models/templates"

mkdir -p "$WORK"
MODEL="$WORK/sdk-tiny-llama.gguf"
if [[ ! -f "$MODEL" ]]; then  # the two tests may run at once: write aside, then rename
  "$VTC" gen-model --arch llama --size tiny --seed 42 -o "$MODEL.$$.gguf" >/dev/null
  mv "$MODEL.$$.gguf" "$MODEL"
fi
LOGS="$(mktemp -d)"
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$LOGS"' EXIT
# Starts `vtc serve` with a template; prints its port.
serve() {
  "$VTC" serve "$MODEL" --port 0 -t 2 --api-key test-key --chat-template-file "$TEMPLATES/$1" 2>"$LOGS/$1.log" &
  PIDS+=($!)
}
serve Qwen-Qwen3-0.6B.jinja
serve Qwen-QwQ-32B.jinja
port_of() {
  local port=""
  for _ in $(seq 200); do
    port="$(grep -o 'listening on http://[^ ]*' "$LOGS/$1.log" | sed 's/.*://' || true)"
    [[ -n "$port" ]] && { echo "$port"; return; }
    sleep 0.05
  done
  echo "vtc serve did not start:" >&2; cat "$LOGS/$1.log" >&2; exit 1
}
PORT="$(port_of Qwen-Qwen3-0.6B.jinja)"
THINKING_PORT="$(port_of Qwen-QwQ-32B.jinja)"
node "$(dirname "$0")/$CLIENT" "http://127.0.0.1:$PORT" "$CACHE/node_modules/$PACKAGE/index.mjs" \
  "http://127.0.0.1:$THINKING_PORT"
for pid in "${PIDS[@]}"; do
  kill -TERM "$pid"
  wait "$pid"
done
echo "both vtc serve processes exited 0 after SIGTERM"
