#!/usr/bin/env bash
# What each KV cache type costs in accuracy, vtc beside llama.cpp (issue 43,
# acceptance 1): the KL divergence of the next-token distributions with a
# quantized cache from those with the f16 cache, over every position of one
# prompt, as llama-perplexity --kl-divergence reports it.
#
#   bench/kv-cache-kl.sh MODEL.gguf [--tokens 512] [--threads 2]
#                        [--pairs "q8_0/q8_0 q4_0/q4_0 ..."]
#
# The prompt: N token ids (arbitrary in-vocabulary values, as llama-bench
# uses). Each engine's logits at every prompt position, once with -ctk f16
# -ctv f16 and once per pair (`vtc run --tokens ... -n 0 --dump-logits F -ctk
# K -ctv V` and `vtc-ref logits --tokens ... --logits-file F
# --cache-type-k K --cache-type-v V`, one batch of N); then
# build/bin/kl_divergence of each engine's pair run against its own f16
# run. A random-weight model's distributions are flatter than a trained
# one's, so the figures compare the types and the engines with each other,
# not with published perplexity runs. One markdown table on stdout.
# Binaries: $VTC (default build/tools/vtc/vtc), $VTC_REF_TOOL (default
# build/bin/vtc-ref), $KL_TOOL (default build/bin/kl_divergence).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VTC="${VTC:-$ROOT/build/tools/vtc/vtc}"
VTC_REF="${VTC_REF_TOOL:-$ROOT/build/bin/vtc-ref}"
KL="${KL_TOOL:-$ROOT/build/bin/kl_divergence}"
TOKENS=512 THREADS=2 MODEL=""
PAIRS="f32/f32 bf16/bf16 q8_0/q8_0 q5_1/q5_1 q5_0/q5_0 q4_1/q4_1 iq4_nl/iq4_nl q4_0/q4_0 q8_0/f16 q8_0/q4_0"

while [[ $# -gt 0 ]]; do
  case "$1" in
    --tokens) TOKENS="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --pairs) PAIRS="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "kv-cache-kl: unknown option $1" >&2; exit 2 ;;
    *) [[ -z "$MODEL" ]] || { echo "kv-cache-kl: one MODEL only" >&2; exit 2; }; MODEL="$1"; shift ;;
  esac
done
[[ -n "$MODEL" && -f "$MODEL" ]] || { echo "kv-cache-kl: give a MODEL.gguf that exists (--help)" >&2; exit 2; }
[[ "$TOKENS" =~ ^[1-9][0-9]*$ ]] || { echo "kv-cache-kl: --tokens must be a positive integer" >&2; exit 2; }
for bin in "$VTC" "$VTC_REF" "$KL"; do
  [[ -x "$bin" ]] || { echo "kv-cache-kl: $bin is missing; build it: cmake --build build --target vtc vtc-ref kl_divergence" >&2; exit 1; }
done
say() { echo "kv-cache-kl: $*" >&2; }
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# The vocabulary size, from the logits of a one-token run.
"$VTC" run "$MODEL" --tokens 1 -n 0 --dump-logits "$WORK/probe.f32" -t "$THREADS" >"$WORK/log" 2>&1 \
  || { tail -5 "$WORK/log" >&2; exit 1; }
N_VOCAB="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["n_vocab"])' "$WORK/probe.f32.json")"
IDS="$(python3 -c 'import sys; n, v = int(sys.argv[1]), int(sys.argv[2]); print(",".join(str((i * 7919 + 13) % v) for i in range(n)))' "$TOKENS" "$N_VOCAB")"

logits() {  # engine k v -> WORK/engine-k-v.f32
  local engine="$1" k="$2" v="$3" out="$WORK/$1-$2-$3.f32"
  [[ -s "$out" ]] && return 0
  say "$engine, K $k, V $v"
  if [[ "$engine" == vtc ]]; then
    "$VTC" run "$MODEL" --tokens "$IDS" -n 0 -t "$THREADS" -ctk "$k" -ctv "$v" --dump-logits "$out" >"$WORK/log" 2>&1 \
      || { tail -5 "$WORK/log" >&2; exit 1; }
  else
    "$VTC_REF" logits "$MODEL" --tokens "$IDS" --n-predict 0 --threads "$THREADS" --cache-type-k "$k" --cache-type-v "$v" \
      --logits-file "$out" >"$WORK/log" 2>&1 || { tail -5 "$WORK/log" >&2; exit 1; }
  fi
}

echo "| K / V | vtc mean KLD | llama.cpp mean KLD | vtc max KLD | llama.cpp max KLD | vtc same top-1 | llama.cpp same top-1 |"
echo "|---|---|---|---|---|---|---|"
for pair in $PAIRS; do
  k="${pair%/*}" v="${pair#*/}"
  cells=()
  for engine in vtc llama.cpp; do
    logits "$engine" f16 f16
    logits "$engine" "$k" "$v"
    cells+=("$("$KL" "$WORK/$engine-f16-f16.f32" "$WORK/$engine-$k-$v.f32" "$N_VOCAB")")
  done
  python3 - "$pair" "${cells[@]}" <<'EOF'
import json, sys
pair, ours, theirs = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
print(f"| {pair} | {ours['mean_kld']:.3g} | {theirs['mean_kld']:.3g} | {ours['max_kld']:.3g} | {theirs['max_kld']:.3g} "
      f"| {100 * ours['same_top1']:.1f}% | {100 * theirs['same_top1']:.1f}% |")
EOF
done
echo
echo "$(basename "$MODEL"): $TOKENS prompt positions, KL divergence from each engine's own f16-cache run; $THREADS threads."
