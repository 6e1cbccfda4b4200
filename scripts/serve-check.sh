#!/usr/bin/env bash
# serve-check.sh VTC MODEL TARGET [REFERENCE_TARGET]: `vtc serve --target
# TARGET` with 8 slots answers 8 concurrent greedy completions exactly as it
# answers each of them alone, and as `vtc serve --target REFERENCE_TARGET`
# (default cpu) answers them alone. Prints one line per prompt and a verdict;
# exit 0 when every text matches, 1 otherwise, 77 when the server cannot
# start on TARGET (the reason is printed), or 1 with SERVE_CHECK_REQUIRE=1
# (where it must start: the simulated device, ctest serve-check.sim). Used
# by scripts/gpu-check with TARGET=cuda; runs anywhere with TARGET=cpu (a
# check of the check). SERVE_CHECK_PREFIX=1 starts every prompt with the
# same preamble of about 60 tokens, so the prefix cache shares its pages
# between the requests (a model with recurrent state only up to a
# checkpoint of its states, docs/serving.md) and the verdict covers prefix reuse;
# the prompt tokens each server reused are printed from /metrics.
set -uo pipefail
VTC=$1 MODEL=$2 TARGET=$3 REF=${4:-cpu}
TMP=$(mktemp -d)
PID=
trap '[[ -n $PID ]] && kill "$PID" 2>/dev/null; rm -rf "$TMP"' EXIT
PROMPTS=("Once upon a time" "The capital of France is" "1, 2, 3, 4," "In the beginning" \
         "The quick brown fox" "def main():" "Hello, my name is" "Water boils at")
if [[ ${SERVE_CHECK_PREFIX:-0} == 1 ]]; then
  PREAMBLE="You are a careful writer. Read the opening below and continue it in the same style, keeping its tone, \
its tense and its vocabulary, and do not repeat the opening itself. Write plain sentences without lists. Opening: "
  for i in "${!PROMPTS[@]}"; do PROMPTS[i]="$PREAMBLE${PROMPTS[i]}"; done
  PREAMBLE_LABEL="(preamble) "
fi

# start TARGET [ARGS...]: a server on a free port; sets PORT and PID, or
# returns 1. $TARGET_ARGS go to the TARGET's server only (e.g.
# "--device-sampling on", to check the device-sampled path against the
# host-sampled one on the same target).
start() {
  "$VTC" serve "$MODEL" --target "$1" --parallel 8 --port 0 -c 256 "${@:2}" >"$TMP/serve-$1.log" 2>&1 &
  PID=$!
  for _ in $(seq 600); do
    PORT=$(sed -n 's/^serve: listening on http:\/\/[^:]*:\([0-9]*\) .*/\1/p' "$TMP/serve-$1.log" | head -1)
    if [[ -n $PORT ]] && curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then return 0; fi
    kill -0 "$PID" 2>/dev/null || { PID=; return 1; }
    sleep 0.2
  done
  return 1
}
# stop NAME: note the prompt tokens the server reused from its prefix cache
# into $TMP/NAME.cached, then stop it.
stop() {
  curl -s "http://127.0.0.1:$PORT/metrics" | sed -n 's/^vtc_prompt_tokens_cached_total \([0-9]*\).*/\1/p' >"$TMP/$1.cached"
  kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; PID=
}

# complete I OUT: prompt I's greedy completion text into OUT.
complete() {
  curl -s "http://127.0.0.1:$PORT/v1/completions" -H 'Content-Type: application/json' \
    -d "{\"prompt\": \"${PROMPTS[$1]}\", \"max_tokens\": 24, \"temperature\": 0}" |
    sed -n 's/.*"text":"\(\([^"\\]\|\\.\)*\)".*/\1/p' >"$2"
}

solo() {  # solo NAME: every prompt alone, in turn
  for i in "${!PROMPTS[@]}"; do complete "$i" "$TMP/$1.$i"; done
}

start "$REF" || { echo "serve-check: the $REF server did not start: $(tail -1 "$TMP/serve-$REF.log")"; exit 1; }
solo ref
stop ref
if ! start "$TARGET" ${TARGET_ARGS:-}; then
  why=$(tail -1 "$TMP/serve-$TARGET.log")
  [[ -n $PID ]] && why="not ready after 2 minutes (last line: $why)"
  [[ ${SERVE_CHECK_REQUIRE:-0} == 1 ]] && { echo "serve-check: FAIL: the $TARGET server did not start: $why"; exit 1; }
  echo "SKIPPED: the $TARGET server did not start: $why"
  exit 77
fi
solo solo
clients=()
for i in "${!PROMPTS[@]}"; do complete "$i" "$TMP/conc.$i" & clients+=($!); done
wait "${clients[@]}"
stop target
status=0
for i in "${!PROMPTS[@]}"; do
  verdict=same
  if ! cmp -s "$TMP/ref.$i" "$TMP/solo.$i"; then verdict="differs from $REF"; status=1; fi
  if ! cmp -s "$TMP/solo.$i" "$TMP/conc.$i"; then verdict="concurrent differs from solo"; status=1; fi
  [[ -s $TMP/ref.$i ]] || { verdict="empty completion"; status=1; }
  printf 'serve-check: %-26s %s: %s\n' "${PREAMBLE_LABEL:-}\"${PROMPTS[$i]#"${PREAMBLE:-}"}\"" "$verdict" "$(cut -c1-60 "$TMP/conc.$i")"
done
echo "serve-check: prompt tokens reused from the prefix cache: $REF server $(cat "$TMP/ref.cached"), $TARGET server $(cat "$TMP/target.cached")"
[[ $status == 0 ]] && echo "serve-check: 8 concurrent greedy requests on $TARGET equal their solo runs and $REF's: PASS" ||
  echo "serve-check: FAIL"
exit $status
