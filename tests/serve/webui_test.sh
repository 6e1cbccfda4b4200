#!/usr/bin/env bash
# The built-in web chat (serve/webui/index.html) in a real browser: headless
# Chromium, driven over the DevTools protocol by webui_browser.mjs, loads
# GET / from `vtc serve --api-key`, chats, stops a long generation and checks
# /metrics counted it cancelled. Exit 77 (SKIPPED) with the reason only when
# node, the reference vocabulary or a startable Chromium is missing
# (scripts/install-deps.sh installs Debian's `chromium`).
#   webui_test.sh VTC_BINARY WORK_DIR SCREENSHOT_PATH
set -euo pipefail
VTC="$1"
WORK="$2"
SCREENSHOT="$3"
command -v node >/dev/null || { echo "SKIPPED: node is not installed"; exit 77; }
CHROMIUM="${VTC_CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}"
[[ -n "$CHROMIUM" ]] || { echo "SKIPPED: chromium is not installed (apt-get install chromium; scripts/install-deps.sh)"; exit 77; }
REF="${VTC_REF_CACHE:-$HOME/.cache/vtc/llama-ref}/llama.cpp"
[[ -f "$REF/models/ggml-vocab-llama-spm.gguf" ]] || { echo "SKIPPED: the llama.cpp reference (vocab) is not fetched"; exit 77; }
# A reasoning model's template (Qwen3: think blocks, tool calls).
TEMPLATE="$REF/models/templates/Qwen-Qwen3-0.6B.jinja"

mkdir -p "$WORK" "$(dirname "$SCREENSHOT")"
MODEL="$WORK/webui-tiny-llama.gguf"
[[ -f "$MODEL" ]] || { "$VTC" gen-model --arch llama --size tiny --seed 42 -q -o "$MODEL.$$.gguf" && mv "$MODEL.$$.gguf" "$MODEL"; }
LOG="$(mktemp)"
# -c 4096: room for a long generation to be stopped in the middle of.
"$VTC" serve "$MODEL" --port 0 -t 2 -c 4096 --api-key webui-key --chat-template-file "$TEMPLATE" 2>"$LOG" &
PID=$!
trap 'kill $PID 2>/dev/null || true; rm -f "$LOG"' EXIT
PORT=""
for _ in $(seq 200); do
  PORT="$(grep -o 'listening on http://[^ ]*' "$LOG" | sed 's/.*://' || true)"
  [[ -n "$PORT" ]] && break
  sleep 0.05
done
[[ -n "$PORT" ]] || { echo "vtc serve did not start:"; cat "$LOG"; exit 1; }
node "$(dirname "$0")/webui_browser.mjs" "$CHROMIUM" "http://127.0.0.1:$PORT" webui-key "$SCREENSHOT"

# --no-webui: / is the unknown-URL 404 (and, with a key set, asks for the key first).
kill -TERM $PID
wait $PID
"$VTC" serve "$MODEL" --port 0 -t 2 --no-webui 2>"$LOG" &
PID=$!
PORT=""
for _ in $(seq 200); do
  PORT="$(grep -o 'listening on http://[^ ]*' "$LOG" | sed 's/.*://' || true)"
  [[ -n "$PORT" ]] && break
  sleep 0.05
done
[[ -n "$PORT" ]] || { echo "vtc serve --no-webui did not start:"; cat "$LOG"; exit 1; }
node -e '
  const url = process.argv[1];
  (async () => {
    for (let i = 0; i < 200; i++) {
      const health = await fetch(url + "/health").catch(() => null);
      if (health && health.ok) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const res = await fetch(url + "/");
    const body = await res.json();
    if (res.status !== 404 || body.error.code !== "unknown_url") throw new Error(`--no-webui: GET / gave ${res.status} ${JSON.stringify(body)}`);
    console.log("--no-webui: GET / is 404 unknown_url");
  })().catch((e) => { console.error(e.message); process.exit(1); });
' "http://127.0.0.1:$PORT"
kill -TERM $PID
wait $PID
echo "PASS"
