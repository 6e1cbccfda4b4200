#!/usr/bin/env bash
# Issue 41: special tokens written in a prompt are parsed as llama.cpp
# parses them (llama-completion and llama-server tokenize a text prompt
# with add_special = true, parse_special = true): `vtc run -p TEXT`, a
# string prompt of `vtc serve`'s /v1/completions, and /tokenize with
# "parse_special": true all give the reference's ids for a chat-marked
# prompt on a generated qwen3 (the reference's qwen2 vocabulary, where
# <|im_start|> and <|im_end|> are single special tokens).
#   special_tokens_test.sh VTC VTC_REF WORK_DIR
# The reference ids: `vtc-ref tokenize VOCAB.gguf` (special tokens parsed,
# BOS added as the vocabulary says). vtc run's ids: its --dump-logits
# F.json "prompt"; vtc serve's: usage.prompt_tokens (a count) and /tokenize.
# Exit 77 (SKIPPED) with the reason when vtc-ref or the vocabulary is absent.
set -euo pipefail
VTC="$1"
VTC_REF="$2"
WORK="$3"
[[ -x "$VTC_REF" ]] || { echo "SKIPPED: vtc-ref (the llama.cpp reference harness) is not built"; exit 77; }
VOCAB="${VTC_REF_CACHE:-$HOME/.cache/vtc/llama-ref}/llama.cpp/models/ggml-vocab-qwen2.gguf"
[[ -f "$VOCAB" ]] || { echo "SKIPPED: the llama.cpp reference (vocab $VOCAB) is not fetched"; exit 77; }
if command -v python3 >/dev/null; then
  jget() {  # jget FILE KEY...: the value (a list: space-separated)
    python3 -c 'import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2:]: v = v[k]
print(" ".join(map(str, v)) if isinstance(v, list) else v)' "$@"
  }
elif command -v node >/dev/null; then
  jget() { node -e 'let v=JSON.parse(require("fs").readFileSync(process.argv[1],"utf8")); for (const k of process.argv.slice(2)) v=v[k]; console.log(Array.isArray(v)?v.join(" "):v)' "$@"; }
else
  echo "SKIPPED: neither python3 nor node is installed (to read JSON)"; exit 77
fi

mkdir -p "$WORK"
TMP="$(mktemp -d)"
PID=""
trap '[[ -n "$PID" ]] && kill $PID 2>/dev/null; wait 2>/dev/null; rm -rf "$TMP"' EXIT

MODEL="$WORK/special-tokens-tiny-qwen3.gguf"
[[ -f "$MODEL" ]] || { "$VTC" gen-model --arch qwen3 --size tiny --seed 42 -q -o "$MODEL.$$.gguf" && mv "$MODEL.$$.gguf" "$MODEL"; }

PROMPT=$'<|im_start|>user\nhi<|im_end|>\n'
printf '%s' "$PROMPT" > "$TMP/prompt.txt"
EXPECTED="$("$VTC_REF" tokenize "$VOCAB" < "$TMP/prompt.txt" | tr -s ' \n' ' ' | sed 's/ *$//')"
N_EXPECTED=$(wc -w <<<"$EXPECTED")
AS_TEXT="$("$VTC_REF" tokenize "$VOCAB" --no-special < "$TMP/prompt.txt" | tr -s ' \n' ' ' | sed 's/ *$//')"
echo "reference ids (special tokens parsed): $EXPECTED"
# The markers must be single tokens, or the test would not tell parsed from unparsed.
[[ "$EXPECTED" != "$AS_TEXT" ]] || { echo "FAIL: the reference gives the same ids with and without parse_special"; exit 1; }

status=0
check() {  # check WHAT GOT WANT
  if [[ "$2" == "$3" ]]; then echo "ok   | $1 | $2"
  else echo "FAIL | $1 | got: $2 | want: $3"; status=1; fi
}

# vtc run -p TEXT
"$VTC" run "$MODEL" -p "$PROMPT" -n 1 --temp 0 -t 2 --dump-logits "$TMP/run.f32" >"$TMP/run.out" 2>"$TMP/run.err" ||
  { echo "FAIL: vtc run exited non-zero:"; cat "$TMP/run.err"; exit 1; }
check "vtc run -p: prompt ids" "$(jget "$TMP/run.f32.json" prompt)" "$EXPECTED"

# vtc serve: /v1/completions with a string prompt, and /tokenize (the port
# from its "listening on" line, once it says "serve: ready")
"$VTC" serve "$MODEL" --port 0 -t 2 2>"$TMP/serve.log" &
PID=$!
PORT=""
for _ in $(seq 600); do
  grep -q 'serve: ready' "$TMP/serve.log" && PORT="$(grep -o 'listening on http://[^ ]*' "$TMP/serve.log" | sed 's/.*://')" && break
  kill -0 $PID 2>/dev/null || break
  sleep 0.05
done
[[ -n "$PORT" ]] || { echo "FAIL: vtc serve did not start:"; cat "$TMP/serve.log"; exit 1; }
post() {  # post PATH BODY OUT
  local code
  code=$(curl -s -o "$3" -w '%{http_code}' -H 'Content-Type: application/json' -d "$2" "http://127.0.0.1:$PORT$1")
  [[ "$code" == 200 ]] || { echo "FAIL: POST $1 -> $code: $(cat "$3")"; status=1; return 1; }
}
JSON_PROMPT='"<|im_start|>user\nhi<|im_end|>\n"'
if post /v1/completions "{\"prompt\": $JSON_PROMPT, \"max_tokens\": 1, \"temperature\": 0}" "$TMP/completion.json"; then
  check "vtc serve /v1/completions: usage.prompt_tokens" "$(jget "$TMP/completion.json" usage prompt_tokens)" "$N_EXPECTED"
fi
if post /tokenize "{\"content\": $JSON_PROMPT, \"add_special\": true, \"parse_special\": true}" "$TMP/tokenize.json"; then
  check "vtc serve /tokenize parse_special: ids" "$(jget "$TMP/tokenize.json" tokens)" "$EXPECTED"
fi
kill -TERM $PID
wait $PID || true
PID=""
[[ $status == 0 ]] && echo "special tokens in prompts: all equal the reference"
exit $status
