#!/usr/bin/env bash
# Quick start: install what is missing, build vtc, generate the default
# synthetic model (tiny llama with the reference's real SPM vocab), and run
# vtc's main job on it: inspect the file, generate from a prompt on the CPU
# interpreter, compile it to a .vtc artifact, then serve that over the
# OpenAI-compatible API and query it.
# (Random weights: the text is gibberish, the machinery is real.)
#
# The server is stopped after a self-check unless VTC_KEEP_SERVING=1, in
# which case it keeps running on http://127.0.0.1:${VTC_PORT:-8080} until
# Ctrl-C. To serve by hand:  ./build/tools/vtc/vtc serve models/vtc-tiny-llama.vtc
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash tests/reference/fetch.sh >/dev/null   # real vocabularies come from the llama.cpp reference
bash scripts/build.sh --target vtc   # only what the quick start runs; scripts/test.sh builds the rest
VTC=./build/tools/vtc/vtc
PORT="${VTC_PORT:-8080}"
mkdir -p models
"$VTC" gen-model --arch llama --size tiny --seed 42 -o models/vtc-tiny-llama.gguf
"$VTC" inspect models/vtc-tiny-llama.gguf
"$VTC" run models/vtc-tiny-llama.gguf -p "Once upon a time" -n 32 --temp 0

# Compile once (IR, passes, memory plan -> a .vtc artifact), then serve it.
"$VTC" compile models/vtc-tiny-llama.gguf -o models/vtc-tiny-llama.vtc
MODEL=models/vtc-tiny-llama.vtc
if [[ "${VTC_KEEP_SERVING:-0}" == 1 ]]; then
  echo "Serving $MODEL; in another terminal:"
  echo "  curl -s http://127.0.0.1:$PORT/v1/completions -H 'Content-Type: application/json' -d '{\"prompt\": \"Once upon a time\", \"max_tokens\": 16}'"
  exec "$VTC" serve "$MODEL" --port "$PORT"
fi
"$VTC" serve "$MODEL" --port "$PORT" &
PID=$!
trap 'kill $PID 2>/dev/null || true' EXIT
for _ in $(seq 300); do
  curl -sf --max-time 2 "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
  # A start-up failure ends vtc serve at once, with its reason on stderr.
  kill -0 $PID 2>/dev/null || { wait $PID || true; echo "quickstart: vtc serve exited before it was ready" >&2; exit 1; }
  sleep 0.1
done
CURL="curl -s http://127.0.0.1:$PORT/v1/completions -H 'Content-Type: application/json' -d '{\"prompt\": \"Once upon a time\", \"max_tokens\": 16, \"temperature\": 0}'"
echo "Self-check: $CURL"
eval "$CURL"
echo
kill -TERM $PID
wait $PID
trap - EXIT
echo "Server stopped after the self-check. Keep it running with: VTC_KEEP_SERVING=1 bash scripts/quickstart.sh"
echo "or: $VTC serve $MODEL --port $PORT   and then paste:"
echo "  $CURL"
