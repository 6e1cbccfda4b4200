#!/usr/bin/env bash
# Sampler parity with llama.cpp (issue 41): the same greedy request and the
# same seeded sampled request (temperature 0.9, top_k 40, top_p 0.95, min_p
# 0.05, seed 1234), each with repeat_penalty 1.3, presence_penalty 0.4,
# frequency_penalty 0.3, repeat_last_n 64 and a stop string, give the same
# tokens and text from `vtc run`, from `vtc serve` (/v1/completions) and
# from llama.cpp's sampler chain (vtc-chat-ref sample: common_sampler as
# llama-server builds it, the prompt accepted into its penalty window, its
# stop-string handling) on the logits vtc computed.
#
# On a tiny llama that vtc generates (random weights, the reference's
# llama-spm vocabulary), per request:
#   1. run vs llama.cpp, no stop: `vtc run -n N --dump-logits F` and
#      `vtc-chat-ref sample` over F: the same ids and text.
#   2. The stop string: ASCII letters that first occur a third or more into
#      that text, so it fires mid-generation (checked on the oracle).
#   3. run --stop vs llama.cpp: `vtc run --stop S` against the oracle over
#      step 1's rows with --stop S: ids up to the one completing S, the text
#      cut before S, finish_reason stop.
#   4. serve vs llama.cpp: the same request to /v1/completions (the prompt
#      as the ids vtc run used): the same text and finish_reason.
# Each check prints `leg | what | ok` or `| FAIL:` with the first differing
# token index.
#   sampler_parity_test.sh VTC VTC_CHAT_REF WORK_DIR
# Exit 77 (SKIPPED) with the reason when vtc-chat-ref, the reference's
# vocabulary, python3 or curl is absent.
set -uo pipefail
VTC="$1"
CHAT_REF="$2"
WORK="$3"
HERE="$(cd "$(dirname "$0")" && pwd)"
[[ -x "$CHAT_REF" ]] || { echo "SKIPPED: vtc-chat-ref (the llama.cpp reference's sampler) is not built"; exit 77; }
REF="${VTC_REF_CACHE:-$HOME/.cache/vtc/llama-ref}/llama.cpp"
[[ -f "$REF/models/ggml-vocab-llama-spm.gguf" ]] || { echo "SKIPPED: the llama.cpp reference (vocab) is not fetched"; exit 77; }
command -v python3 >/dev/null || { echo "SKIPPED: python3 is not installed"; exit 77; }
command -v curl >/dev/null || { echo "SKIPPED: curl is not installed"; exit 77; }

mkdir -p "$WORK"
MODEL="$WORK/parity-tiny-llama-tied.gguf"
if [[ ! -f "$MODEL" ]]; then
  "$VTC" gen-model --arch llama --size tiny --seed 42 --tied -q -o "$MODEL.$$.gguf" && mv "$MODEL.$$.gguf" "$MODEL" ||
    { echo "vtc gen-model failed"; exit 1; }
fi
PID=""
LOG="$WORK/serve.log"
trap '[[ -n "$PID" ]] && kill $PID 2>/dev/null' EXIT
COMPARE=(python3 "$HERE/compare.py")

N=48
PROMPT="Once upon a time"
PENALTIES=(--repeat-penalty 1.3 --presence-penalty 0.4 --frequency-penalty 0.3 --repeat-last-n 64)
declare -A TEMP=([greedy]=0 [sampled]=0.9)
declare -A SEED=([greedy]=42 [sampled]=1234)
declare -A STOP
status=0
fail() { echo "$1 | FAIL: $2"; status=1; }

for leg in greedy sampled; do
  ARGS=(--temp "${TEMP[$leg]}" --top-k 40 --top-p 0.95 --min-p 0.05 --seed "${SEED[$leg]}" "${PENALTIES[@]}")
  F="$WORK/$leg.f32"
  # 1. run vs llama.cpp, no stop.
  if ! "$VTC" run "$MODEL" -p "$PROMPT" -n $N -t 2 "${ARGS[@]}" --dump-logits "$F" >"$WORK/$leg.out" 2>"$WORK/$leg.err"; then
    fail "$leg: run vs llama.cpp" "vtc run failed: $(tail -3 "$WORK/$leg.err")"; continue
  fi
  # What vtc printed after the prompt (vtc run echoes the prompt first).
  python3 -c 'import sys; t=open(sys.argv[1],encoding="utf-8",errors="replace").read(); p=sys.argv[2]; sys.stdout.write(t[len(p):] if t.startswith(p) else t)' \
    "$WORK/$leg.out" "$PROMPT" >"$WORK/$leg.text"
  "$CHAT_REF" sample "$MODEL" "$F" "${ARGS[@]}" -n $N >"$WORK/$leg.oracle.json" ||
    { fail "$leg: run vs llama.cpp" "vtc-chat-ref sample failed"; continue; }
  "${COMPARE[@]}" run "$leg: run vs llama.cpp" "$WORK/$leg.oracle.json" "$F.json" "$WORK/$leg.text" || status=1

  # 2. A stop string that first occurs mid-way through llama.cpp's text.
  STOP[$leg]="$("${COMPARE[@]}" pick-stop "$WORK/$leg.oracle.json")" ||
    { fail "$leg: stop string" "no ASCII word in the last two thirds of the text"; continue; }
  S="${STOP[$leg]}"
  "$CHAT_REF" sample "$MODEL" "$F" "${ARGS[@]}" -n $N --stop "$S" >"$WORK/$leg.oracle-stop.json" ||
    { fail "$leg: stop string" "vtc-chat-ref sample --stop failed"; continue; }
  read -r stop_type n_ids < <(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["stop_type"], len(j["ids"]))' "$WORK/$leg.oracle-stop.json")
  if [[ "$stop_type" == word ]] && (( n_ids > 1 && n_ids < N )); then
    echo "$leg: stop string | '$S' fires at token $((n_ids - 1)) of $N in llama.cpp | ok"
  else
    fail "$leg: stop string" "'$S' does not fire mid-generation in llama.cpp (stop $stop_type after $n_ids tokens)"
  fi

  # 3. run --stop vs llama.cpp.
  if "$VTC" run "$MODEL" -p "$PROMPT" -n $N -t 2 "${ARGS[@]}" --stop "$S" --dump-logits "$WORK/$leg-stop.f32" \
       >"$WORK/$leg-stop.out" 2>"$WORK/$leg-stop.err"; then
    python3 -c 'import sys; t=open(sys.argv[1],encoding="utf-8",errors="replace").read(); p=sys.argv[2]; sys.stdout.write(t[len(p):] if t.startswith(p) else t)' \
      "$WORK/$leg-stop.out" "$PROMPT" >"$WORK/$leg-stop.text"
    "${COMPARE[@]}" run "$leg: run --stop vs llama.cpp" "$WORK/$leg.oracle-stop.json" "$WORK/$leg-stop.f32.json" \
      "$WORK/$leg-stop.text" || status=1
  else
    fail "$leg: run --stop vs llama.cpp" "vtc run --stop failed: $(tail -3 "$WORK/$leg-stop.err")"
  fi
done

# 5. The whole vocabulary (top-k, top-p and min-p off: the server's
# defaults), where vtc's sampler takes its flat-array path.
leg=whole
ARGS=(--temp 0.9 --top-k 0 --top-p 1 --min-p 0 --seed 7 "${PENALTIES[@]}")
F="$WORK/$leg.f32"
if "$VTC" run "$MODEL" -p "$PROMPT" -n $N -t 2 "${ARGS[@]}" --dump-logits "$F" >"$WORK/$leg.out" 2>"$WORK/$leg.err"; then
  python3 -c 'import sys; t=open(sys.argv[1],encoding="utf-8",errors="replace").read(); p=sys.argv[2]; sys.stdout.write(t[len(p):] if t.startswith(p) else t)' \
    "$WORK/$leg.out" "$PROMPT" >"$WORK/$leg.text"
  if "$CHAT_REF" sample "$MODEL" "$F" "${ARGS[@]}" -n $N >"$WORK/$leg.oracle.json"; then
    "${COMPARE[@]}" run "$leg: run vs llama.cpp" "$WORK/$leg.oracle.json" "$F.json" "$WORK/$leg.text" || status=1
  else
    fail "$leg: run vs llama.cpp" "vtc-chat-ref sample failed"
  fi
else
  fail "$leg: run vs llama.cpp" "vtc run failed: $(tail -3 "$WORK/$leg.err")"
fi

# 4. serve vs llama.cpp: one server, both requests, the prompt as vtc run's ids.
"$VTC" serve "$MODEL" --port 0 -t 2 2>"$LOG" &
PID=$!
PORT=""
for _ in $(seq 600); do
  grep -q 'serve: ready' "$LOG" && PORT="$(grep -o 'listening on http://[^ ]*' "$LOG" | sed 's/.*://')" && break
  kill -0 $PID 2>/dev/null || break
  sleep 0.05
done
if [[ -z "$PORT" ]]; then
  fail "serve vs llama.cpp" "vtc serve did not start: $(tail -5 "$LOG")"
else
  for leg in greedy sampled; do
    [[ -f "$WORK/$leg.oracle-stop.json" && -n "${STOP[$leg]:-}" ]] || { fail "$leg: serve vs llama.cpp" "no oracle (see above)"; continue; }
    body="$(python3 -c '
import json, sys
prompt = json.load(open(sys.argv[1]))["prompt"]
print(json.dumps({"prompt": prompt, "max_tokens": int(sys.argv[2]), "temperature": float(sys.argv[3]),
                  "top_k": 40, "top_p": 0.95, "min_p": 0.05, "repeat_penalty": 1.3, "presence_penalty": 0.4,
                  "frequency_penalty": 0.3, "repeat_last_n": 64, "seed": int(sys.argv[4]), "stop": [sys.argv[5]]}))' \
      "$WORK/$leg.f32.json" $N "${TEMP[$leg]}" "${SEED[$leg]}" "${STOP[$leg]}")"
    echo "$body" >"$WORK/$leg.request.json"
    curl -s -X POST "http://127.0.0.1:$PORT/v1/completions" -H 'content-type: application/json' -d "$body" \
      >"$WORK/$leg.response.json"
    "${COMPARE[@]}" serve "$leg: serve vs llama.cpp" "$WORK/$leg.oracle-stop.json" "$WORK/$leg.response.json" || status=1
    if ! kill -0 $PID 2>/dev/null; then
      wait $PID
      fail "$leg: serve vs llama.cpp" "vtc serve died (exit $?) on the request $WORK/$leg.request.json: $(tail -3 "$LOG")"
      PID=""
      break
    fi
  done
  if [[ -n "$PID" ]]; then
    kill -TERM $PID
    wait $PID
    PID=""
  fi
fi
exit $status
