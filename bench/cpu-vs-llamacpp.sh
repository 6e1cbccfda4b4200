#!/usr/bin/env bash
# vtc against llama.cpp on the CPU, in one run, on one machine (issue 15).
#
#   bench/cpu-vs-llamacpp.sh [--reps N] [--threads "1 2"] [--types "Q8_0 Q4_K_M Q4_0 F16 BF16"]
#                            [--serve-type Q4_K_M] [--serve-seconds S] [--no-serve]
#                            [--quick] [--arch llama] [--size 0.56b] [--workdir DIR] [--regen] [--keep-runs]
#                            [--report-only] [--pp N] [--depths "16 4096 16384"] [--cache-types "f16 q8_0"]
#                            [--only-depth]
#
# What it does:
# 1. Model: `vtc gen-model --size 0.56b --type f16` (llama, 1280 wide, 20
#    layers, 20/4 heads of 64, FF 5120, the 32000-token SPM vocab), written
#    once to the work dir and reused (--regen writes it again). --arch picks
#    another gen-model architecture at that size (the state space rows of
#    issue 44: `--arch mamba2 --size 0.5b --types F16`, and lfm2).
# 2. Quantized copies by the reference, `vtc-ref quantize IN OUT TYPE`, also
#    cached (remade when older than the f16 file). F16 is the generated file.
# 3. Rounds: for each repetition, for each thread count: the DRAM read
#    bandwidth (`vtc bench --memory-bandwidth`: streaming 32-byte reads of a
#    1 GiB buffer, 5 passes), then for each type one
#    `vtc bench MODEL -r 1 --batch-rows 8 --vs-reference --json F`, which
#    runs vtc and llama.cpp (via vtc-ref) one after the other, each after a
#    warm-up, with the order of the two engines alternating between rounds.
#    So the engines are interleaved repetition by repetition and share
#    whatever the machine's neighbours do. Then (unless --no-serve) the
#    serving figure: `vtc serve` on the --serve-type model with --parallel 8
#    and that many threads, loaded by scripts/serve_load.mjs (completions of
#    64 tokens, back to back) first from 1 client, then from 8, for
#    --serve-seconds each; the figure is the 8 clients' generated tok/s over
#    the 1 client's.
# 4. Which kernels each engine ran (vtc's ISA level, the instruction sets of
#    llama.cpp's loaded CPU backend), then one markdown table on stdout: per type and thread count, pp512 and
#    tg128 (tok/s) and the cost of a decode step of 8 rows (8 sequences, one
#    token each, after 64 prompt tokens each) over a step of 1 row, for both
#    engines: medians over the repetitions, vtc / llama.cpp, the spread
#    (max / min over the repetitions) of each engine, and tg as % of the
#    roofline. Roofline tok/s = median bandwidth at that thread count /
#    bytes of weights one token reads, where those bytes are the sum of every
#    tensor in the file except token_embd (a token reads one row of it):
#    the matmul weights plus the f32 norm gains (under 0.1%). Then the
#    serving table: per thread count, 1-client and 8-client tok/s and
#    their ratio (medians and spreads over the repetitions).
#
# 5. With --depths: decode at depth. Per type, cache type (--cache-types,
#    `-ctk T -ctv T` for both engines), thread count and depth D, one
#    `vtc bench MODEL -p 0 -n 0 --batch-rows 1 --batch-context D
#    --batch-steps 16 --vs-reference`: both engines prefill D tokens, then
#    time one-token decode steps at depth D..D+16. Its table gives the step
#    time of each engine beside the step's bandwidth floor: (bytes of
#    weights one token reads + D x the KV cache's bytes per position, which
#    vtc bench reports for the cache type) / the median bandwidth of that
#    thread count, and the prefill of those D tokens in tok/s for both
#    engines (issue 43's "prefill of 16384 tokens": each engine's own
#    batching, timed once per round). --only-depth skips the pp/tg/batch
#    rounds and serving.
#
# The binaries are copied into WORKDIR/bin first (a rebuild during the run
# cannot mix two builds). Progress goes to stderr; each invocation's log
# and JSON are kept under WORKDIR/runs/ (removed at the start of the next
# run unless --keep-runs). --report-only runs nothing and prints the table
# from the JSON already there: for an interrupted run, pass the number of
# rounds that finished as --reps, with the same --types, --threads, --quick.
# Environment: VTC (default build/tools/vtc/vtc), VTC_REF_TOOL (default
# build/bin/vtc-ref). Build them with
#   cmake --build build --target vtc vtc-ref
# Needs bash, python3 (the aggregation) and the fetched llama.cpp reference.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VTC="${VTC:-$ROOT/build/tools/vtc/vtc}"
VTC_REF="${VTC_REF_TOOL:-$ROOT/build/bin/vtc-ref}"
REPS=3
THREADS="1 2"
TYPES="Q8_0 Q4_K_M Q4_0 F16 BF16"
SERVE_TYPE="Q4_K_M" SERVE_SECONDS=20 SERVE=1
SIZE="0.56b" ARCH="llama"
WORKDIR="${VTC_BENCH_DIR:-$HOME/.cache/vtc/cpu-bench}"
PP=512 TG=128 BATCH_ROWS=8 BATCH_CONTEXT=64 BATCH_STEPS=16 BW_MIB=1024
DEPTHS="" CACHE_TYPES="f16" DEPTH_STEPS=16 ONLY_DEPTH=0
REGEN=0 KEEP_RUNS=0 QUICK=0 REPORT_ONLY=0

usage() {
  cat <<EOF
usage: bench/cpu-vs-llamacpp.sh [options]
  --reps N         repetitions per engine, type and thread count; medians are reported (default $REPS)
  --threads LIST   thread counts, e.g. "1 2" (default "$THREADS")
  --types LIST     model types: F16 and any vtc-ref quantize type (default "$TYPES")
  --quick          smoke test: pp64, tg16, 4 steps per batched figure, 256 MiB bandwidth buffer
  --serve-type T   the model type of the serving figure (default $SERVE_TYPE; must be in --types or F16)
  --serve-seconds S  seconds of load from 1 and from 8 clients (default $SERVE_SECONDS)
  --no-serve       skip the serving figure
  --size S         vtc gen-model size (default $SIZE; "tiny" for a fast smoke run)
  --arch A         vtc gen-model architecture (default $ARCH; e.g. mamba2, lfm2, jamba, nemotron_h, qwen35)
  --workdir DIR    where models, logs and JSON go (default \$VTC_BENCH_DIR or ~/.cache/vtc/cpu-bench)
  --regen          regenerate the f16 model and the quantized copies
  --keep-runs      keep the previous runs' logs and JSON in DIR/runs
  --report-only    run nothing: print the table from the JSON in DIR/runs (--reps: the rounds that finished)
  --pp N           prompt tokens of the pp figure (default $PP; e.g. 16384 for a long prefill)
  --depths LIST    decode at depth: one-token steps after D cached tokens, e.g. "16 4096 16384", beside the
                   bandwidth floor (default: none)
  --cache-types L  KV cache types of the depth table, as -ctk/-ctv for both engines (default "$CACHE_TYPES")
  --only-depth     only the bandwidth and the depth table (no pp/tg/batch rounds, no serving)
  -h, --help       this text
Prints one markdown table (stdout) with pp$PP, tg$TG and the ${BATCH_ROWS}-row decode step cost for vtc and
llama.cpp; progress on stderr. Binaries: \$VTC (default build/tools/vtc/vtc), \$VTC_REF_TOOL
(default build/bin/vtc-ref).
EOF
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --reps) REPS="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --types) TYPES="$2"; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --size) SIZE="$2"; shift 2 ;;
    --arch) ARCH="$2"; shift 2 ;;
    --serve-type) SERVE_TYPE="$2"; shift 2 ;;
    --serve-seconds) SERVE_SECONDS="$2"; shift 2 ;;
    --no-serve) SERVE=0; shift ;;
    --workdir) WORKDIR="$2"; shift 2 ;;
    --regen) REGEN=1; shift ;;
    --keep-runs) KEEP_RUNS=1; shift ;;
    --report-only) REPORT_ONLY=1; shift ;;
    --pp) PP="$2"; shift 2 ;;
    --depths) DEPTHS="$2"; shift 2 ;;
    --cache-types) CACHE_TYPES="$2"; shift 2 ;;
    --only-depth) ONLY_DEPTH=1 SERVE=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "cpu-vs-llamacpp: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
done
if [[ $QUICK == 1 ]]; then PP=64 TG=16 BATCH_STEPS=4 BW_MIB=256 SERVE_SECONDS=4 DEPTH_STEPS=4; fi
[[ $ONLY_DEPTH == 0 || -n "$DEPTHS" ]] || { echo "cpu-vs-llamacpp: --only-depth needs --depths" >&2; exit 2; }
for d in $DEPTHS; do [[ "$d" =~ ^[1-9][0-9]*$ ]] || { echo "cpu-vs-llamacpp: --depths takes positive integers" >&2; exit 2; }; done
[[ "$PP" =~ ^[1-9][0-9]*$ ]] || { echo "cpu-vs-llamacpp: --pp must be a positive integer" >&2; exit 2; }
[[ $SERVE == 0 || " $TYPES F16 " == *" $SERVE_TYPE "* ]] \
  || { echo "cpu-vs-llamacpp: --serve-type $SERVE_TYPE is not among --types ($TYPES)" >&2; exit 2; }
[[ $SERVE == 0 ]] || command -v node >/dev/null || { echo "cpu-vs-llamacpp: the serving figure needs node (or --no-serve)" >&2; exit 1; }
[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || { echo "cpu-vs-llamacpp: --reps must be a positive integer" >&2; exit 2; }
for bin in "$VTC" "$VTC_REF"; do
  [[ -x "$bin" ]] || { echo "cpu-vs-llamacpp: $bin is missing; build it: cmake --build build --target vtc vtc-ref" >&2; exit 1; }
done
command -v python3 >/dev/null || { echo "cpu-vs-llamacpp: needs python3" >&2; exit 1; }

say() { echo "cpu-vs-llamacpp: $*" >&2; }
mkdir -p "$WORKDIR"
RUNS="$WORKDIR/runs"
[[ $KEEP_RUNS == 1 || $REPORT_ONLY == 1 ]] || rm -rf "$RUNS"
mkdir -p "$RUNS"
START=$(date +%s)
COMMIT="$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
CPU="$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //' || echo unknown), $(nproc) cores"
if [[ $REPORT_ONLY == 0 ]]; then
# A copy of each binary, so a rebuild during the run cannot mix two builds.
mkdir -p "$WORKDIR/bin"
cp "$VTC" "$WORKDIR/bin/vtc" && cp "$VTC_REF" "$WORKDIR/bin/vtc-ref"
VTC="$WORKDIR/bin/vtc" VTC_REF="$WORKDIR/bin/vtc-ref"

# --- models -----------------------------------------------------------------
F16="$WORKDIR/$ARCH-$SIZE-f16.gguf"
if [[ $REGEN == 1 || ! -s "$F16" ]]; then
  say "generating $F16 (vtc gen-model --arch $ARCH --size $SIZE --type f16)"
  "$VTC" gen-model --arch "$ARCH" --size "$SIZE" --type f16 -q -o "$F16.tmp" >&2
  mv "$F16.tmp" "$F16"
else
  say "reusing $F16"
fi
model_path() { [[ "$1" == F16 ]] && echo "$F16" || echo "$WORKDIR/$ARCH-$SIZE-$1.gguf"; }
for t in $TYPES; do
  [[ "$t" == F16 ]] && continue
  out="$(model_path "$t")"
  if [[ $REGEN == 1 || ! -s "$out" || "$F16" -nt "$out" ]]; then
    say "quantizing to $t (vtc-ref quantize)"
    "$VTC_REF" quantize "$F16" "$out.tmp" "$t" >&2 || { say "vtc-ref quantize $t failed"; exit 1; }
    mv "$out.tmp" "$out"
  else
    say "reusing $out"
  fi
done

# --- rounds -----------------------------------------------------------------
n_types=$(wc -w <<<"$TYPES"); n_threads=$(wc -w <<<"$THREADS")
n_depth=$(( $(wc -w <<<"$DEPTHS") * $(wc -w <<<"$CACHE_TYPES") ))
total=$((REPS * n_types * n_threads * ((1 - ONLY_DEPTH) + n_depth))); done_=0
for rep in $(seq "$REPS"); do
  for th in $THREADS; do
    bw="$RUNS/bw-t$th-r$rep"
    say "rep $rep/$REPS, $th threads: DRAM read bandwidth"
    "$VTC" bench --memory-bandwidth -t "$th" -r 5 --bandwidth-mib "$BW_MIB" --json "$bw.json" >"$bw.log" 2>&1 \
      || { cat "$bw.log" >&2; exit 1; }
    order=(); (( rep % 2 == 0 )) && order=(--reference-first)
    for t in $TYPES; do
      for c in $CACHE_TYPES; do
        for d in $DEPTHS; do
          run="$RUNS/depth-$t-$c-d$d-t$th-r$rep"
          done_=$((done_ + 1))
          say "[$done_/$total] rep $rep/$REPS, $t, cache $c, depth $d, $th threads: vtc and llama.cpp (${order[*]:-vtc first})"
          "$VTC" bench "$(model_path "$t")" -p 0 -n 0 -r 1 -t "$th" --batch-rows 1 --batch-context "$d" \
            --batch-steps "$DEPTH_STEPS" -ctk "$c" -ctv "$c" --vs-reference --ref-tool "$VTC_REF" "${order[@]}" \
            --json "$run.json" >"$run.log" 2>&1 || { say "failed:"; tail -20 "$run.log" >&2; exit 1; }
          grep '^| .* step1 ms' "$run.log" | sed 's/^/    /' >&2
        done
      done
    done
    [[ $ONLY_DEPTH == 0 ]] || continue
    for t in $TYPES; do
      run="$RUNS/$t-t$th-r$rep"
      done_=$((done_ + 1))
      say "[$done_/$total] rep $rep/$REPS, $t, $th threads: vtc and llama.cpp (${order[*]:-vtc first})"
      "$VTC" bench "$(model_path "$t")" -p "$PP" -n "$TG" -r 1 -t "$th" --batch-rows "$BATCH_ROWS" \
        --batch-context "$BATCH_CONTEXT" --batch-steps "$BATCH_STEPS" --vs-reference --ref-tool "$VTC_REF" \
        "${order[@]}" --json "$run.json" >"$run.log" 2>&1 || { say "failed:"; tail -20 "$run.log" >&2; exit 1; }
      grep '^|' "$run.log" | tail -n +3 | sed 's/^/    /' >&2
    done
  done
done

# --- serving: 1 client, then 8, against one `vtc serve --parallel 8` -------
serve_round() {  # threads rep
  local th="$1" rep="$2" out="$RUNS/serve-t$1-r$2" pid port=""
  say "rep $rep/$REPS, $th threads: vtc serve --parallel 8 on $SERVE_TYPE, 1 then 8 clients, ${SERVE_SECONDS} s each"
  "$VTC" serve "$(model_path "$SERVE_TYPE")" --port 0 --parallel 8 -t "$th" -c 1024 >"$out.log" 2>&1 &
  pid=$!
  for _ in $(seq 1200); do
    port="$(grep -o 'listening on http://[^ ]*' "$out.log" | sed 's/.*://' || true)"
    [[ -n "$port" ]] && curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || { say "vtc serve exited:"; tail -5 "$out.log" >&2; exit 1; }
    sleep 0.1
  done
  [[ -n "$port" ]] || { say "vtc serve did not start"; kill "$pid"; exit 1; }
  for c in 1 8; do
    VTC_LOAD_TEMPERATURE=0.8 node "$ROOT/scripts/serve_load.mjs" "http://127.0.0.1:$port" "$SERVE_SECONDS" "$c" 64 \
      >"$out-c$c.json" || { say "serve_load failed"; kill "$pid"; exit 1; }
    sed 's/^/    /' "$out-c$c.json" >&2
  done
  kill -TERM "$pid"; wait "$pid" || true
}
if [[ $SERVE == 1 ]]; then
  for rep in $(seq "$REPS"); do for th in $THREADS; do serve_round "$th" "$rep"; done; done
fi
say "done in $(( $(date +%s) - START )) s"
fi

# --- the table --------------------------------------------------------------
python3 - "$RUNS" "$TYPES" "$THREADS" "$REPS" "$PP" "$TG" "$BATCH_ROWS" "$BATCH_CONTEXT" "$ARCH $SIZE" \
  "$COMMIT" "$CPU" "$SERVE" "$SERVE_TYPE" "$SERVE_SECONDS" "$( [[ $REPORT_ONLY == 1 ]] && echo "table from earlier runs" || echo "$(( $(date +%s) - START )) s" )" \
  "$DEPTHS" "$CACHE_TYPES" "$ONLY_DEPTH" <<'EOF'
import json, statistics, sys
import os
(runs, types, threads, reps, pp, tg, rows, ctx, size, commit, cpu, serve, serve_type, serve_s, secs,
 depths, cache_types, only_depth) = sys.argv[1:]
types, threads, reps = types.split(), threads.split(), int(reps)
depths, cache_types = depths.split(), cache_types.split()

def load(name):
    with open(f"{runs}/{name}.json") as f:
        return json.load(f)

def med(v): return statistics.median(v) if v else float("nan")
def spread(v): return max(v) / min(v) if v and min(v) > 0 else float("nan")
def fmt(x, d=2): return "n/a" if x != x else f"{x:.{d}f}"

bw_med, bw_lines = {}, []
for th in threads:
    bw = [g for r in range(1, reps + 1) for g in load(f"bw-t{th}-r{r}")["memory_bandwidth"]["gb_per_s"]]
    bw_med[th] = med(bw)
    bw_lines.append(f"{th} threads: {bw_med[th]:.1f} GB/s (median of {len(bw)} passes over {reps} rounds, "
                    f"spread {spread(bw):.2f})")
first = load(f"depth-{types[0]}-{cache_types[0]}-d{depths[0]}-t{threads[0]}-r1" if only_depth == "1"
             else f"{types[0]}-t{threads[0]}-r1")
print(f"Kernels: vtc {first['vtc'].get('kernels', 'unknown')}; llama.cpp's CPU backend built for "
      f"{first['llama.cpp'].get('kernels', 'unknown')}.")
print()

def row(cells): print("| " + " | ".join(str(c) for c in cells) + " |")

def main_table():
    print(f"| type | threads | test | vtc | llama.cpp | vtc / llama.cpp | vtc spread | llama.cpp spread "
          f"| vtc % roofline | llama.cpp % roofline |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    notes = []
    for th in threads:
        for t in types:
            js = [load(f"{t}-t{th}-r{r}") for r in range(1, reps + 1)]
            wbytes = js[0]["weight_bytes_per_token"]
            roof = bw_med[th] * 1e9 / wbytes
            if th == threads[0]:
                notes.append(f"{t}: {wbytes / 1e6:.1f} MB of weights per token")
            def series(engine, key): return [x for j in js for x in j[engine][key]]
            def ratios(engine):
                return [n / o for j in js for n, o in zip(j[engine]["stepn_ms"], j[engine]["step1_ms"])]
            def test_row(test, v, l, pct):
                mv, ml = med(v), med(l)
                row([t, th, test, fmt(mv), fmt(ml), fmt(mv / ml), fmt(spread(v)), fmt(spread(l)),
                     fmt(100 * mv / roof, 0) if pct else "", fmt(100 * ml / roof, 0) if pct else ""])
            test_row(f"pp{pp} tok/s", series("vtc", "pp"), series("llama.cpp", "pp"), False)
            test_row(f"tg{tg} tok/s (roofline {roof:.1f})", series("vtc", "tg"), series("llama.cpp", "tg"), True)
            test_row(f"step{rows} / step1", ratios("vtc"), ratios("llama.cpp"), False)
            test_row("step1 ms", series("vtc", "step1_ms"), series("llama.cpp", "step1_ms"), False)
    print()
    print(f"Medians of {reps} repetitions per engine, vtc and llama.cpp interleaved (one `vtc bench --vs-reference "
          f"-r 1` per type and round, engine order alternating). Model: vtc gen-model {size}, quantized by "
          f"the reference. step{rows} / step1: ms of one decode step of {rows} rows ({rows} sequences, one token each, "
          f"after {ctx} prompt tokens each) over ms of a 1-row step; lower is better (1 = rows are free), and "
          f"so is step1 ms. Spread: max / min over the repetitions.")
    print("Roofline tok/s = bandwidth / bytes of weights per token (every tensor but token_embd: matmul weights "
          "+ norm gains): " + "; ".join(notes) + ".")

def depth_table():
    print("| type | cache | threads | depth | vtc step ms | llama.cpp step ms | llama.cpp / vtc | floor ms "
          "| vtc / floor | llama.cpp / floor | vtc spread | llama.cpp spread "
          "| prefill D tok/s vtc | llama.cpp | vtc / llama.cpp |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    kv_notes = {}
    for th in threads:
        for t in types:
            for c in cache_types:
                for d in depths:
                    js = [load(f"depth-{t}-{c}-d{d}-t{th}-r{r}") for r in range(1, reps + 1)]
                    wbytes, kv = js[0]["weight_bytes_per_token"], js[0]["kv_bytes_per_token"]
                    kv_notes[c] = f"{c} {kv} bytes per position"
                    floor = 1e3 * (wbytes + int(d) * kv) / (bw_med[th] * 1e9)
                    v = [x for j in js for x in j["vtc"]["step1_ms"]]
                    l = [x for j in js for x in j["llama.cpp"]["step1_ms"]]
                    mv, ml = med(v), med(l)
                    # the context's prefill in tok/s (once per round; older JSON has none)
                    def prefill_tok_s(engine):
                        return [1e3 * int(d) / j[engine]["context_prefill_ms"] for j in js
                                if "context_prefill_ms" in j[engine]]
                    pv, pl = prefill_tok_s("vtc"), prefill_tok_s("llama.cpp")
                    prefill = [fmt(med(pv), 1), fmt(med(pl), 1), fmt(med(pv) / med(pl))] if pv and pl else ["-"] * 3
                    row([t, c, th, d, fmt(mv), fmt(ml), fmt(ml / mv), fmt(floor), fmt(mv / floor), fmt(ml / floor),
                         fmt(spread(v)), fmt(spread(l))] + prefill)
    print()
    print(f"Decode at depth: one-token steps after D cached tokens (`vtc bench -p 0 -n 0 --batch-rows 1 "
          f"--batch-context D -ctk C -ctv C --vs-reference -r 1` per round, medians of {reps} rounds). Floor = "
          f"(bytes of weights per token + D x KV bytes per position) / the median bandwidth of that thread count; "
          f"KV: " + "; ".join(kv_notes.values()) + ". Prefill D: the D prompt tokens each engine runs before "
          f"those steps (one prompt, its engine's default batching, timed once per round, no warm-up before it), "
          f"medians of the rounds.")

if only_depth == "0":
    main_table()
if depths:
    if only_depth == "0":
        print()
    depth_table()
print("DRAM read bandwidth (vtc bench --memory-bandwidth, 32-byte streaming reads): " + "; ".join(bw_lines) + ".")
if serve == "1" and os.path.exists(f"{runs}/serve-t{threads[0]}-r1-c1.json"):
    print()
    print(f"Serving ({serve_type}, `vtc serve --parallel 8`, completions of 64 tokens back to back, {serve_s} s "
          f"per load): generated tok/s")
    print()
    print("| threads | 1 client | 8 clients | 8 clients / 1 | spread of the ratio |")
    print("|---|---|---|---|---|")
    for th in threads:
        one = [load(f"serve-t{th}-r{r}-c1")["generated_tokens_per_s"] for r in range(1, reps + 1)]
        eight = [load(f"serve-t{th}-r{r}-c8")["generated_tokens_per_s"] for r in range(1, reps + 1)]
        ratio = [e / o for e, o in zip(eight, one) if o > 0]
        print(f"| {th} | {fmt(med(one), 1)} | {fmt(med(eight), 1)} | {fmt(med(ratio))} | {fmt(spread(ratio))} |")
print()
print(f"vtc {commit}; {cpu}; {secs}.")
EOF
