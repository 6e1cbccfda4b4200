#!/usr/bin/env bash
# Compares the f32 logits of two vtc binaries, bit for bit, on every f32
# test model: a 24-token prompt (all prompt rows) plus 8 greedy decode
# steps (one row each), through `vtc run --dump-logits`.
#   bench/logits-bitwise.sh OLD_VTC NEW_VTC [MODEL_DIR]
# MODEL_DIR defaults to build/test-data/e2e (written by the e2e tests);
# VTC_MODELS="*.gguf" takes the quantized ones too.
# Prints one line per model and exits 1 if any model differs.
set -euo pipefail
old=$1 new=$2
dir=${3:-build/test-data/e2e}
tokens=$(seq -s, 1 24)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for model in "$dir"/${VTC_MODELS:-*-f32.gguf}; do
  name=$(basename "$model" .gguf)
  for bin in old new; do
    "${!bin}" run "$model" --tokens "$tokens" -n 8 --temp 0 -t 2 -q --dump-logits "$tmp/$name.$bin" >/dev/null 2>"$tmp/$name.$bin.log" ||
      { echo "$name: $bin failed: $(tail -1 "$tmp/$name.$bin.log")"; status=1; continue 2; }
  done
  if cmp -s "$tmp/$name.old" "$tmp/$name.new"; then
    echo "$name: identical ($(stat -c %s "$tmp/$name.new") bytes of f32 logits)"
  else
    echo "$name: DIFFERENT"
    status=1
  fi
done
exit $status
