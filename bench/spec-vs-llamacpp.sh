#!/usr/bin/env bash
# Speculative decoding, vtc against llama.cpp, in one run on one machine
# (issue 45, acceptance item 4; docs/speculative.md, "Figures").
#
#   bench/spec-vs-llamacpp.sh [--reps N] [--threads N] [-n N] [--size 0.56b] [--arch llama]
#                             [--type Q8_0] [--draft-type Q4_0] [--draft-max N] [--draft-p-min P]
#                             [--passage N] [--copies N] [--workloads "repeat random sampled"]
#                             [--llama-ngram "lookup ngram-simple ngram-map-k ngram-mod"]
#                             [--no-verify-cost] [--workdir DIR] [--build-only]
#
# What it does:
# 1. llama.cpp's tools: llama-lookup and llama-speculative-simple, built
#    from the pinned reference source (tests/reference/fetch.sh) with its
#    default Release flags (-O3, GGML_NATIVE on), static libraries, into
#    <reference cache>/spec-tools-build/<reference commit>: once per
#    reference, about 10 minutes on 2 cores (--build-only stops there).
# 2. Models: `vtc gen-model --arch A --size S --type f16` (shared with
#    bench/cpu-vs-llamacpp.sh's work dir), the target quantized to --type
#    and the draft to --draft-type by the reference (`vtc-ref quantize`):
#    the draft is a lower-bit quantization of the same weights.
# 3. Prompts, as text (llama.cpp's tools take text; vtc tokenizes the same
#    file as `vtc run -p` does): `repeat` = the text of --passage random ids
#    (vtc-ref detokenize), --copies times; `random` = the text of passage x
#    copies random ids. Greedy decoding of a random-weight model falls into
#    cycles and a repeated passage makes the continuation repeat: the
#    n-gram drafter's case. `random` is a prompt where drafts should fail,
#    but greedy output of a random model still repeats itself in places;
#    `sampled` is the `random` prompt sampled at temperature 1 (seeded,
#    llama.cpp's default top-k/top-p/min-p: `vtc bench --spec-temp 1`),
#    whose output does not repeat: the natural-text case, where drafts
#    fail. vtc only (its goal is against vtc's own off).
# 4. Rounds: for each repetition and workload, one `vtc bench --spec
#    ngram,draft -r 1` (off, ngram, draft interleaved after a warm-up; on
#    `random` and `sampled` ngram only), then llama.cpp's (not on `sampled`): llama-lookup --draft-max 0
#    (its plain decode: off; --spec-draft-n-max 0), llama-lookup (its n-gram cache), and
#    llama-speculative-simple with each --spec-type of --llama-ngram, and
#    with -md DRAFT --spec-type draft-simple (repeat only). All greedy
#    (--temp 0 --top-k 1), the same -n, threads (-t and -tb), draft length
#    (--spec-draft-n-max: this reference removed --draft-max) and
#    --draft-p-min. Run it on a quiet machine: llama.cpp's threads spin at
#    their barriers and slow down many times over when another process
#    takes a core (a 1-row decode loop measured 2 tok/s beside a compile).
#    tok/s: the decode after the prompt, as each tool prints it ("decoded N
#    tokens in S seconds"; vtc counts the same span).
# 5. Unless --no-verify-cost: `vtc bench --verify-cost --vs-reference`: a
#    verify step of 1 + k rows (k = 0..8) against a 1-row decode step, both
#    engines, medians of --reps.
# 6. A markdown table on stdout: per workload, engine and mode the median
#    tok/s (min-max), the ratio to that engine's off and to vtc's off, the
#    acceptance and vtc's accepted draft tokens per verify step; then the
#    goals of the issue with the measured ratios, then the verify cost.
# Environment: VTC (default build/tools/vtc/vtc), VTC_REF_TOOL (default
# build/bin/vtc-ref), VTC_REF_CACHE (default ~/.cache/vtc/llama-ref).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VTC="${VTC:-$ROOT/build/tools/vtc/vtc}"
VTC_REF="${VTC_REF_TOOL:-$ROOT/build/bin/vtc-ref}"
REF_CACHE="${VTC_REF_CACHE:-$HOME/.cache/vtc/llama-ref}"
WORKDIR="${VTC_BENCH_DIR:-$HOME/.cache/vtc/cpu-bench}"
REPS=3 THREADS=2 N=128 SIZE=0.56b ARCH=llama TYPE=Q8_0 DRAFT_TYPE=Q4_0 DRAFT_MAX=16 P_MIN=0
PASSAGE=32 COPIES=8 WORKLOADS="repeat random sampled" LLAMA_NGRAM="lookup ngram-simple ngram-map-k ngram-mod"
VERIFY_COST=1 BUILD_ONLY=0

usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --reps) REPS="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    -n) N="$2"; shift 2 ;;
    --size) SIZE="$2"; shift 2 ;;
    --arch) ARCH="$2"; shift 2 ;;
    --type) TYPE="$2"; shift 2 ;;
    --draft-type) DRAFT_TYPE="$2"; shift 2 ;;
    --draft-max) DRAFT_MAX="$2"; shift 2 ;;
    --draft-p-min) P_MIN="$2"; shift 2 ;;
    --passage) PASSAGE="$2"; shift 2 ;;
    --copies) COPIES="$2"; shift 2 ;;
    --workloads) WORKLOADS="$2"; shift 2 ;;
    --llama-ngram) LLAMA_NGRAM="$2"; shift 2 ;;
    --no-verify-cost) VERIFY_COST=0; shift ;;
    --workdir) WORKDIR="$2"; shift 2 ;;
    --build-only) BUILD_ONLY=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "spec-vs-llamacpp: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
done
say() { echo "spec-vs-llamacpp: $*" >&2; }

# --- llama.cpp's tools ------------------------------------------------------
SRC="$REF_CACHE/llama.cpp"
[[ -f "$SRC/examples/lookup/lookup.cpp" ]] || { say "no reference source in $SRC; run tests/reference/fetch.sh"; exit 1; }
REF_COMMIT="$(git -C "$SRC" rev-parse HEAD)"
TOOLS="$REF_CACHE/spec-tools-build/$REF_COMMIT"
if [[ ! -x "$TOOLS/bin/llama-lookup" || ! -x "$TOOLS/bin/llama-speculative-simple" ]]; then
  say "building llama-lookup and llama-speculative-simple from $SRC ($REF_COMMIT) into $TOOLS"
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  rm -rf "$TOOLS.tmp"
  cmake -S "$SRC" -B "$TOOLS.tmp" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=OFF \
    -DLLAMA_BUILD_APP=OFF -DBUILD_SHARED_LIBS=OFF "${launcher[@]}" >&2
  cmake --build "$TOOLS.tmp" --target llama-lookup llama-speculative-simple --parallel "$(nproc)" >&2
  rm -rf "$TOOLS"
  mv "$TOOLS.tmp" "$TOOLS"
fi
[[ $BUILD_ONLY == 0 ]] || { echo "$TOOLS/bin"; exit 0; }
LOOKUP="$TOOLS/bin/llama-lookup" SPEC_SIMPLE="$TOOLS/bin/llama-speculative-simple"

for bin in "$VTC" "$VTC_REF"; do
  [[ -x "$bin" ]] || { say "$bin is missing; build it: cmake --build build --target vtc vtc-ref"; exit 1; }
done
command -v python3 >/dev/null || { say "needs python3"; exit 1; }
mkdir -p "$WORKDIR"
RUNS="$WORKDIR/spec-runs"
rm -rf "$RUNS" && mkdir -p "$RUNS"
START=$(date +%s)

# --- models -----------------------------------------------------------------
F16="$WORKDIR/$ARCH-$SIZE-f16.gguf"
if [[ ! -s "$F16" ]]; then
  say "generating $F16 (vtc gen-model --arch $ARCH --size $SIZE --type f16)"
  "$VTC" gen-model --arch "$ARCH" --size "$SIZE" --type f16 -q -o "$F16.tmp" >&2
  mv "$F16.tmp" "$F16"
fi
model_path() { [[ "$1" == F16 ]] && echo "$F16" || echo "$WORKDIR/$ARCH-$SIZE-$1.gguf"; }
for t in "$TYPE" "$DRAFT_TYPE"; do
  out="$(model_path "$t")"
  [[ "$t" == F16 || ( -s "$out" && "$out" -nt "$F16" ) ]] && continue
  say "quantizing to $t (vtc-ref quantize)"
  "$VTC_REF" quantize "$F16" "$out.tmp" "$t" >&2
  mv "$out.tmp" "$out"
done
MODEL="$(model_path "$TYPE")" DRAFT="$(model_path "$DRAFT_TYPE")"

# --- prompts ----------------------------------------------------------------
prompt_ids() {  # count seed: random ids of ordinary tokens
  python3 -c "import random,sys; r=random.Random($2); print(' '.join(str(r.randrange(1000, 30000)) for _ in range($1)))"
}
PROMPT_repeat="$RUNS/prompt-repeat.txt" PROMPT_random="$RUNS/prompt-random.txt" PROMPT_sampled="$RUNS/prompt-random.txt"
passage="$(prompt_ids "$PASSAGE" 1 | "$VTC_REF" detokenize "$MODEL")"
for _ in $(seq "$COPIES"); do printf '%s ' "$passage"; done >"$PROMPT_repeat"
prompt_ids $((PASSAGE * COPIES)) 2 | "$VTC_REF" detokenize "$MODEL" >"$PROMPT_random"

# --- rounds -----------------------------------------------------------------
CTX=$(( PASSAGE * COPIES * 2 + N + DRAFT_MAX + 64 ))
common=(-m "$MODEL" -n "$N" -t "$THREADS" -tb "$THREADS" -c "$CTX" --temp 0 --top-k 1 --spec-draft-n-max "$DRAFT_MAX")
llama_run() {  # name workload rep tool args...
  local name="$1" w="$2" rep="$3" tool="$4"; shift 4
  local log="$RUNS/llama-$name-$w-r$rep.log"
  "$tool" "$@" >"$log" 2>&1 || { say "llama.cpp $name failed:"; tail -20 "$log" >&2; exit 1; }
  grep -E 'decoded +[0-9]+ tokens' "$log" | tail -1 | sed "s/^/    llama.cpp $name: /" >&2
}
for rep in $(seq "$REPS"); do
  for w in $WORKLOADS; do
    prompt_var="PROMPT_$w"; prompt="${!prompt_var}"
    modes=ngram,draft; [[ $w != repeat ]] && modes=ngram
    sampling=(); [[ $w == sampled ]] && sampling=(--spec-temp 1 --spec-seed "$rep")
    say "rep $rep/$REPS, $w: vtc off,$modes"
    "$VTC" bench "$MODEL" --spec "$modes" --draft-model "$DRAFT" --draft-max "$DRAFT_MAX" --draft-p-min "$P_MIN" "${sampling[@]}" \
      --prompt-file "$prompt" -n "$N" -r 1 -t "$THREADS" --json "$RUNS/vtc-$w-r$rep.json" \
      >"$RUNS/vtc-$w-r$rep.log" 2>&1 || { say "vtc failed:"; tail -20 "$RUNS/vtc-$w-r$rep.log" >&2; exit 1; }
    grep '^| [a-z]' "$RUNS/vtc-$w-r$rep.log" | sed 's/^/    vtc /' >&2
    [[ $w == sampled ]] && continue
    say "rep $rep/$REPS, $w: llama.cpp off, $LLAMA_NGRAM$([[ $w == repeat ]] && echo ", draft")"
    llama_run off "$w" "$rep" "$LOOKUP" "${common[@]}" -f "$prompt" --spec-draft-n-max 0
    for t in $LLAMA_NGRAM; do
      if [[ $t == lookup ]]; then llama_run lookup "$w" "$rep" "$LOOKUP" "${common[@]}" -f "$prompt"
      else llama_run "$t" "$w" "$rep" "$SPEC_SIMPLE" "${common[@]}" -f "$prompt" --spec-type "$t"; fi
    done
    [[ $w == repeat ]] && llama_run draft "$w" "$rep" "$SPEC_SIMPLE" "${common[@]}" -f "$prompt" -md "$DRAFT" --spec-type draft-simple \
      --draft-p-min "$P_MIN"
  done
done
if [[ $VERIFY_COST == 1 ]]; then
  say "verify cost, vtc and llama.cpp (vtc bench --verify-cost --vs-reference)"
  "$VTC" bench "$MODEL" --verify-cost --vs-reference --ref-tool "$VTC_REF" -r "$REPS" -t "$THREADS" \
    --batch-context 64 --batch-steps 8 --json "$RUNS/verify-cost.json" >"$RUNS/verify-cost.log" 2>&1 \
    || { say "verify cost failed:"; tail -20 "$RUNS/verify-cost.log" >&2; exit 1; }
fi
say "done in $(( $(date +%s) - START )) s"

# --- the table --------------------------------------------------------------
CPU="$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores"
COMMIT="$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
python3 - "$RUNS" "$REPS" "$WORKLOADS" "$LLAMA_NGRAM" "$VERIFY_COST" "$ARCH $SIZE" "$TYPE" "$DRAFT_TYPE" "$N" \
  "$THREADS" "$DRAFT_MAX" "$P_MIN" "$PASSAGE" "$COPIES" "$CPU" "$COMMIT" "$REF_COMMIT" "$(( $(date +%s) - START ))" <<'EOF'
import json, re, statistics, sys
(runs, reps, workloads, llama_ngram, verify_cost, size, ttype, dtype, n, threads, draft_max, p_min, passage, copies,
 cpu, commit, ref_commit, secs) = sys.argv[1:]
reps, workloads, llama_ngram = int(reps), workloads.split(), llama_ngram.split()

def med(v): return statistics.median(v) if v else float("nan")
def fmt(x, d=2): return "n/a" if x != x else f"{x:.{d}f}"

def llama(name, w, r):
    text = open(f"{runs}/llama-{name}-{w}-r{r}.log", errors="replace").read()
    m = re.findall(r"decoded +(\d+) tokens in +([\d.]+) seconds", text)
    toks, secs = int(m[-1][0]), float(m[-1][1])
    drafted = re.search(r"n_drafted +=\s*(\d+)", text)
    accepted = re.search(r"n_accept +=\s*(\d+)", text)
    return toks / secs, int(drafted.group(1)) if drafted else 0, int(accepted.group(1)) if accepted else 0, toks

def vtc(w):
    out = {}
    for r in range(1, reps + 1):
        j = json.load(open(f"{runs}/vtc-{w}-r{r}.json"))
        for mode, m in j["spec"]["modes"].items():
            o = out.setdefault(mode, {"tok_s": [], "draft_n": 0, "acc": 0, "vsteps": 0, "same": True, "gen": m["generated"]})
            o["tok_s"] += m["tok_s"]
            o["draft_n"] += m["draft_n"]; o["acc"] += m["draft_n_accepted"]; o["vsteps"] += m["verify_steps"]
            o["same"] &= m["same_tokens_as_off"]
        prompt = j["spec"]["prompt_tokens"]
    return out, prompt

goals = []
for w in workloads:
    v, prompt = vtc(w)
    names = [] if w == "sampled" else ["off"] + llama_ngram + (["draft"] if w == "repeat" else [])
    L = {}
    for name in names:
        rs = [llama(name, w, r) for r in range(1, reps + 1)]
        L[name] = {"tok_s": [x[0] for x in rs], "draft_n": sum(x[1] for x in rs), "acc": sum(x[2] for x in rs),
                   "gen": rs[0][3]}
    voff, loff = med(v["off"]["tok_s"]), med(L["off"]["tok_s"]) if L else float("nan")
    how = "sampled at temperature 1, seeded; vtc only" if w == "sampled" else "greedy"
    print(f"Workload `{w}` (prompt {prompt} tokens by vtc's count, {n} generated, {how}):")
    print()
    print("| engine | mode | tok/s | min-max | vs own off | vs vtc off | acceptance | accepted per verify step |")
    print("|---|---|---|---|---|---|---|---|")
    def row(engine, mode, d, own_off, per_step):
        t = d["tok_s"]
        acc = f"{100 * d['acc'] / d['draft_n']:.1f}% ({d['acc']}/{d['draft_n']})" if d["draft_n"] else "-"
        print(f"| {engine} | {mode} | {fmt(med(t))} | {fmt(min(t))}-{fmt(max(t))} | {fmt(med(t) / own_off)}x "
              f"| {fmt(med(t) / voff)}x | {acc} | {per_step} |")
    for mode, d in v.items():
        per = fmt(d["acc"] / d["vsteps"]) if d["vsteps"] else "-"
        if mode != "off" and not d["same"]: per += " (tokens differ from off!)"
        row("vtc", mode, d, voff, per)
    for name in names:
        label = {"off": "off (lookup --draft-max 0)", "lookup": "lookup (llama-lookup)",
                 "draft": "draft (speculative-simple -md)"}.get(name, f"{name} (speculative-simple)")
        row("llama.cpp", label, L[name], loff, "-")
    print()
    ng = [k for k in llama_ngram if k in L]
    best = max(ng, key=lambda k: med(L[k]["tok_s"])) if ng else None
    if "ngram" in v:
        r_off = med(v["ngram"]["tok_s"]) / voff
        if w == "repeat":
            goals.append(f"`{w}`: vtc ngram / vtc off = {fmt(r_off)} (goal >= 2)")
            if best:
                goals.append(f"`{w}`: vtc ngram / llama.cpp's best n-gram mode ({best}) = "
                             f"{fmt(med(v['ngram']['tok_s']) / med(L[best]['tok_s']))} (goal >= 1.3)")
        else:
            acc = 100 * v["ngram"]["acc"] / v["ngram"]["draft_n"] if v["ngram"]["draft_n"] else 0
            goals.append(f"`{w}`: vtc ngram / vtc off = {fmt(r_off)} at {acc:.1f}% acceptance (goal: >= 0.97 where "
                         f"acceptance < 10%)")
    if "draft" in v and "draft" in L:
        goals.append(f"`{w}`: vtc draft / vtc off = {fmt(med(v['draft']['tok_s']) / voff)}, vtc draft / llama.cpp "
                     f"draft = {fmt(med(v['draft']['tok_s']) / med(L['draft']['tok_s']))}")
print("Goals (issue 45, item 4): " + "; ".join(goals) + ".")
print()
if verify_cost == "1":
    j = json.load(open(f"{runs}/verify-cost.json"))["verify_cost"]
    d, ref = med(j["decode_ms"]), j.get("llama.cpp_ms")
    print("Verify step of 1 + k rows against a 1-row decode step (ms, mean of 8 steps after 64 tokens, "
          f"medians of {reps}):")
    print()
    print("| step | vtc ms | vtc / decode | llama.cpp ms | llama.cpp / decode |")
    print("|---|---|---|---|---|")
    print(f"| decode, 1 row | {fmt(d)} | 1.00 | {fmt(med(ref[0]))} | 1.00 |")
    for k, v in enumerate(j["verify_ms"]):
        print(f"| verify k = {k} ({k + 1} rows) | {fmt(med(v))} | {fmt(med(v) / d)} | {fmt(med(ref[k]))} "
              f"| {fmt(med(ref[k]) / med(ref[0]))} |")
    print()
print(f"Model: vtc gen-model {size}, target {ttype}, draft {dtype} (the same weights, quantized by the reference). "
      f"{threads} threads, draft-max {draft_max}, draft-p-min {p_min}; prompts: {passage} random ids as text x {copies} "
      f"(repeat), {int(passage) * int(copies)} random ids as text (random, and sampled at temperature 1). Medians of {reps} rounds, vtc and llama.cpp "
      f"in each round (vtc: `vtc bench --spec -r 1`, modes interleaved after a warm-up). vtc {commit}; llama.cpp "
      f"{ref_commit[:12]} (Release, GGML_NATIVE); {cpu}; {secs} s.")
EOF
