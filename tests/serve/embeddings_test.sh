#!/usr/bin/env bash
# `vtc serve --embeddings` against llama.cpp's embeddings (issue 29): for a
# generated llama, qwen3 and bert (an encoder: bidirectional attention,
# token-type and position embeddings, layer norms, GELU, bge's WordPiece
# vocabulary), every pooling mode (none, mean, cls, last), each a server of
# its own, compared by embeddings_ref.mjs with vtc-ref's answer for the
# same file and inputs; then the endpoint's errors. For the decoders the
# step bound is 16 tokens, so the longer inputs are read in several @embed
# steps, shared with the other inputs of the request; an encoder reads
# each input whole in one step (64 tokens here).
#   embeddings_test.sh VTC VTC_REF WORK_DIR
# Exit 77 (SKIPPED) with the reason when node, vtc-ref or the reference's
# vocabulary is absent.
set -euo pipefail
VTC="$1"
VTC_REF="$2"
WORK="$3"
HERE="$(cd "$(dirname "$0")" && pwd)"
command -v node >/dev/null || { echo "SKIPPED: node is not installed"; exit 77; }
[[ -x "$VTC_REF" ]] || { echo "SKIPPED: vtc-ref (the llama.cpp reference harness) is not built"; exit 77; }
REF="${VTC_REF_CACHE:-$HOME/.cache/vtc/llama-ref}/llama.cpp"
[[ -f "$REF/models/ggml-vocab-llama-spm.gguf" ]] || { echo "SKIPPED: the llama.cpp reference (vocab) is not fetched"; exit 77; }
OPENAI="${VTC_OPENAI_CACHE:-$HOME/.cache/vtc/openai-npm}/node_modules/openai/index.mjs"
[[ -f "$OPENAI" ]] || { echo "note: the openai npm package is absent: its client's case is left out"; OPENAI=""; }

mkdir -p "$WORK"
PID=""
LOG="$(mktemp)"
trap '[[ -n "$PID" ]] && kill $PID 2>/dev/null; rm -f "$LOG"' EXIT

STEP=16
start() {  # start MODEL ARGS...: sets PID and PORT (step bound $STEP)
  "$VTC" serve "$@" --port 0 -t 2 --parallel 4 --max-step-tokens $STEP 2>"$LOG" &
  PID=$!
  PORT=""
  for _ in $(seq 600); do
    grep -q 'serve: ready' "$LOG" && PORT="$(grep -o 'listening on http://[^ ]*' "$LOG" | sed 's/.*://')" && break
    kill -0 $PID 2>/dev/null || break
    sleep 0.05
  done
  [[ -n "$PORT" ]] || { echo "vtc serve did not start:"; cat "$LOG"; exit 1; }
}
stop() {
  kill -TERM $PID
  wait $PID
  PID=""
}

status=0
for arch in llama qwen3 bert; do
  STEP=16
  [[ $arch == bert ]] && STEP=64
  MODEL="$WORK/embd-tiny-$arch.gguf"
  [[ -f "$MODEL" ]] || "$VTC" gen-model --arch $arch --size tiny --seed 42 -q -o "$MODEL"
  for pooling in none mean cls last; do
    "$VTC_REF" embeddings "$MODEL" --pooling $pooling < "$HERE/embeddings_inputs.json" > "$WORK/embd-ref-$arch-$pooling.json"
    # last also checks --embd-normalize on the command line (-1: none).
    norm=2
    [[ $pooling == last ]] && norm=-1
    start "$MODEL" --embeddings --pooling $pooling --embd-normalize $norm
    node "$HERE/embeddings_ref.mjs" "http://127.0.0.1:$PORT" "$WORK/embd-ref-$arch-$pooling.json" $pooling $norm \
      "$arch $pooling" $OPENAI || status=1
    stop
  done
done

# Without --pooling both take the file's <arch>.pooling_type (written here:
# 1, mean); a file whose pooling is rank (4, a reranker) is refused at start-up.
node "$HERE/gguf_set_pooling.mjs" "$WORK/embd-tiny-llama.gguf" "$WORK/embd-tiny-llama-filemean.gguf" 1
"$VTC_REF" embeddings "$WORK/embd-tiny-llama-filemean.gguf" < "$HERE/embeddings_inputs.json" > "$WORK/embd-ref-llama-filemean.json"
grep -q '"pooling":1' "$WORK/embd-ref-llama-filemean.json" || { echo "the reference did not take the file's pooling"; status=1; }
start "$WORK/embd-tiny-llama-filemean.gguf" --embeddings
grep -q "embeddings: pooling mean" "$LOG" || { echo "vtc did not take the file's pooling:"; cat "$LOG"; status=1; }
node "$HERE/embeddings_ref.mjs" "http://127.0.0.1:$PORT" "$WORK/embd-ref-llama-filemean.json" mean 2 "llama file's pooling" || status=1
stop
node "$HERE/gguf_set_pooling.mjs" "$WORK/embd-tiny-llama.gguf" "$WORK/embd-tiny-llama-rank.gguf" 4
if "$VTC" serve "$WORK/embd-tiny-llama-rank.gguf" --embeddings --port 0 -t 2 2>"$LOG" ||
   ! grep -q "pooling_type is rank" "$LOG"; then
  echo "errors | a rank-pooling file | FAIL:"; cat "$LOG"; status=1
else echo "errors | a rank-pooling file is refused at start-up | $(tail -1 "$LOG") | ok"; fi

# Errors: an input longer than the context names itself; an empty input;
# a bad encoding_format; and a server without --embeddings says how to start.
MODEL="$WORK/embd-tiny-llama.gguf"
check() {  # check WHAT EXPECTED_STATUS PATTERN BODY
  local out code
  out="$(curl -s -w '\n%{http_code}' -X POST "http://127.0.0.1:$PORT/v1/embeddings" -H 'content-type: application/json' -d "$4")"
  code="${out##*$'\n'}"
  if [[ "$code" == "$2" ]] && grep -q -- "$3" <<<"$out"; then echo "errors | $1 | $code | ok"
  else echo "errors | $1 | got $code: $out | FAIL"; status=1; fi
}
# The encoder: an input longer than one step is refused (it cannot be
# split), generation endpoints answer 501, and without --embeddings the
# server refuses to start, saying why.
STEP=16
start "$WORK/embd-tiny-bert.gguf" --embeddings
check "bert: input longer than one step" 400 "input\[1\] has 20 tokens, more than one step reads (16)" \
  "{\"input\": [[101, 102], [$(printf '2000,%.0s' $(seq 19))102]]}"
code="$(curl -s -o "$WORK/bert-501.json" -w '%{http_code}' -X POST "http://127.0.0.1:$PORT/v1/chat/completions" \
  -H 'content-type: application/json' -d '{"messages": [{"role": "user", "content": "hi"}]}')"
if [[ "$code" == 501 ]] && grep -q "is an encoder" "$WORK/bert-501.json"; then echo "errors | bert: chat completions | 501 | ok"
else echo "errors | bert: chat completions | got $code: $(cat "$WORK/bert-501.json") | FAIL"; status=1; fi
stop
if "$VTC" serve "$WORK/embd-tiny-bert.gguf" --port 0 -t 2 2>"$LOG" || ! grep -q "is an encoder.*--embeddings" "$LOG"; then
  echo "errors | bert without --embeddings | FAIL:"; cat "$LOG"; status=1
else echo "errors | bert without --embeddings is refused at start-up | ok"; fi
STEP=16

start "$MODEL" --embeddings --pooling mean -c 64
long="$(printf '1,%.0s' $(seq 80))1"
check "input longer than the context" 400 "input\[1\] has 81 tokens, more than the context (64)" "{\"input\": [[1,2], [$long]]}"
check "empty token list" 400 "input\[0\] is empty" '{"input": [[], [1]]}'
check "token id outside the vocabulary" 400 "input\[0\]: token id 99999999 is outside the vocabulary" '{"input": [[99999999]]}'
check "encoding_format" 400 "encoding_format" '{"input": "x", "encoding_format": "int8"}'
check "no input" 400 "'input' is required" '{"model": "m"}'
check "dimensions other than the width" 400 "dimensions" '{"input": "x", "dimensions": 3}'
# Completions are still served beside embeddings, and /metrics counts the endpoint.
code="$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$PORT/v1/completions" -H 'content-type: application/json' \
  -d '{"prompt": "Hello", "max_tokens": 4}')"
[[ "$code" == 200 ]] && echo "errors | a completion on an --embeddings server | 200 | ok" ||
  { echo "errors | a completion on an --embeddings server | got $code | FAIL"; status=1; }
# The body is read whole before grep: with pipefail, `curl | grep -q` fails
# when grep exits at the match and curl is still writing (SIGPIPE). A
# request is counted once its response is sent, so a few reads are allowed.
labelled=""
for _ in 1 2 3 4 5 6 7 8 9 10; do
  metrics="$(curl -s "http://127.0.0.1:$PORT/metrics")"
  if grep -qF 'vtc_requests_total{endpoint="/v1/embeddings",status="400"}' <<<"$metrics"; then labelled=1; break; fi
  sleep 0.2
done
if [[ -n "$labelled" ]]; then echo "errors | /metrics labels /v1/embeddings | ok"
else echo "errors | /metrics labels /v1/embeddings | FAIL"; status=1; fi
stop
start "$MODEL"
check "server without --embeddings" 501 "Start it with \`--embeddings\`" '{"input": "x"}'
stop
exit $status
