#!/usr/bin/env bash
# Resident memory of `vtc serve` against llama.cpp with the same settings
# (issue 43, acceptance 4), in one run on one machine.
#
#   bench/serve-memory.sh MODEL.gguf [--ctx-size 32768] [--parallel 4] [--fills "0 4096"]
#                         [--cache-type T] [--threads 2]
#
# For each fill T (prompt tokens per sequence):
# - vtc: `vtc serve MODEL --ctx-size C --parallel P -ctk T -ctv T`, then P
#   completions at once, each a prompt of T token ids and max_tokens 1 (for
#   T = 0 one request of 8 tokens, the warm-up); then VmRSS and VmHWM of the
#   server process from /proc.
# - llama.cpp: `vtc-ref memory MODEL --ctx-size C --parallel P --fill T`,
#   the library set up as `llama-server -c C -np P` sets itself up (the
#   prebuilt package has no llama-server binary): one context of C
#   positions shared by P sequences, n_batch 2048, n_ubatch 512, the model
#   mmapped, a warm-up decode; then T tokens in each sequence.
# The two engines read --ctx-size differently: llama-server's is the total,
# split among the slots (C / P per request), vtc's is per request (its KV
# pool has P x C positions of address space, resident as rows are written).
# So a fill must fit C / P, and at equal fills both hold the same tokens.
# Prints one markdown table (MiB) and the ratio vtc / llama.cpp per fill.
# Binaries: $VTC (default build/tools/vtc/vtc), $VTC_REF_TOOL (default
# build/bin/vtc-ref). Needs curl and python3.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VTC="${VTC:-$ROOT/build/tools/vtc/vtc}"
VTC_REF="${VTC_REF_TOOL:-$ROOT/build/bin/vtc-ref}"
CTX=32768 PAR=4 FILLS="0 4096" CACHE=f16 THREADS=2 MODEL=""

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ctx-size) CTX="$2"; shift 2 ;;
    --parallel) PAR="$2"; shift 2 ;;
    --fills) FILLS="$2"; shift 2 ;;
    --cache-type) CACHE="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "serve-memory: unknown option $1" >&2; exit 2 ;;
    *) [[ -z "$MODEL" ]] || { echo "serve-memory: one MODEL only" >&2; exit 2; }; MODEL="$1"; shift ;;
  esac
done
[[ -n "$MODEL" && -f "$MODEL" ]] || { echo "serve-memory: give a MODEL.gguf that exists (--help)" >&2; exit 2; }
for bin in "$VTC" "$VTC_REF"; do
  [[ -x "$bin" ]] || { echo "serve-memory: $bin is missing; build it: cmake --build build --target vtc vtc-ref" >&2; exit 1; }
done
for f in $FILLS; do
  (( f + 1 <= CTX / PAR )) || { echo "serve-memory: fill $f does not fit llama-server's slot of $((CTX / PAR)) positions" >&2; exit 2; }
done
say() { echo "serve-memory: $*" >&2; }
WORK="$(mktemp -d)"
SERVER_PID=""
trap '[[ -z "$SERVER_PID" ]] || kill "$SERVER_PID" 2>/dev/null; rm -rf "$WORK"' EXIT

# VmRSS and VmHWM of a process, in bytes: "rss hwm".
resident() { awk '/^VmRSS:/ {r = $2 * 1024} /^VmHWM:/ {h = $2 * 1024} END {print r, h}' "/proc/$1/status"; }

vtc_round() {  # fill -> WORK/vtc-FILL: "rss hwm"
  local fill="$1" log="$WORK/serve-$1.log" port=""
  "$VTC" serve "$MODEL" --port 0 --ctx-size "$CTX" --parallel "$PAR" -t "$THREADS" -ctk "$CACHE" -ctv "$CACHE" >"$log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1200); do
    port="$(grep -o 'listening on http://[^ ]*' "$log" | sed 's/.*://' || true)"
    [[ -n "$port" ]] && curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
    kill -0 "$SERVER_PID" 2>/dev/null || { say "vtc serve exited:"; tail -5 "$log" >&2; exit 1; }
    sleep 0.1
  done
  [[ -n "$port" ]] || { say "vtc serve did not start"; exit 1; }
  local n_vocab seqs
  n_vocab="$(curl -sf "http://127.0.0.1:$port/v1/models" | python3 -c 'import json,sys; m=json.load(sys.stdin)["data"][0]; print(m.get("meta", {}).get("n_vocab", 32000))')"
  seqs=$(( fill > 0 ? PAR : 1 ))
  for s in $(seq 0 $((seqs - 1))); do
    python3 - "$fill" "$s" "$n_vocab" >"$WORK/req-$s.json" <<'EOF'
import json, sys
fill, s, n_vocab = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
n = fill if fill > 0 else 8
print(json.dumps({"prompt": [(((s * n + i) * 7919 + 13) % n_vocab) for i in range(n)], "max_tokens": 1}))
EOF
    curl -sf "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
      --data-binary "@$WORK/req-$s.json" -o "$WORK/resp-$s.json" &
  done
  for job in $(jobs -p); do
    [[ "$job" == "$SERVER_PID" ]] || wait "$job" || { say "a completion failed"; exit 1; }
  done
  resident "$SERVER_PID" >"$WORK/vtc-$fill"
  kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || true; SERVER_PID=""
}

ref_round() {  # fill -> "rss hwm"
  "$VTC_REF" memory "$MODEL" --ctx-size "$CTX" --parallel "$PAR" --fill "$1" --threads "$THREADS" \
    --cache-type-k "$CACHE" --cache-type-v "$CACHE" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["rss_bytes"], j["hwm_bytes"])'
}

rows=""
for fill in $FILLS; do
  say "fill $fill: vtc serve --ctx-size $CTX --parallel $PAR -ctk $CACHE -ctv $CACHE"
  vtc_round "$fill"
  read -r v_rss v_hwm <"$WORK/vtc-$fill"
  say "fill $fill: llama.cpp (vtc-ref memory)"
  read -r l_rss l_hwm < <(ref_round "$fill")
  rows+="$fill $v_rss $v_hwm $l_rss $l_hwm"$'\n'
done
python3 - "$MODEL" "$CTX" "$PAR" "$CACHE" <<EOF
import sys
model, ctx, par, cache = sys.argv[1:]
mib = lambda b: int(b) / 2**20
print(f"| fill per sequence | vtc RSS MiB | llama.cpp RSS MiB | vtc / llama.cpp | vtc peak MiB | llama.cpp peak MiB |")
print("|---|---|---|---|---|---|")
for line in """$rows""".strip().splitlines():
    f, vr, vh, lr, lh = line.split()
    print(f"| {f} | {mib(vr):.0f} | {mib(lr):.0f} | {int(vr) / int(lr):.2f} | {mib(vh):.0f} | {mib(lh):.0f} |")
print()
print(f"{model}; --ctx-size {ctx} --parallel {par}, K and V {cache}. RSS after the fill (VmRSS), peak = VmHWM.")
EOF
