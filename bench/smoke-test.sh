#!/usr/bin/env bash
# ctest smoke test of bench/cpu-vs-llamacpp.sh: one quick round on the tiny
# model (a few seconds), then checks the table: one row per test for every
# type and thread count, medians positive, ratios and roofline
# shares numbers (roofline only for tg), spreads >= 1, the kernels line and
# the serving table (vtc serve --parallel 8, 1 and 8 clients); then the
# depth table (--only-depth, two cache types) with its floor column;
# --help exits 0 and an unknown option exits 2.
#   bench/smoke-test.sh WORKDIR   (VTC and VTC_REF_TOOL name the binaries)
set -euo pipefail
SCRIPT="$(dirname "$0")/cpu-vs-llamacpp.sh"
WORK="$1"
fail() { echo "smoke-test: $*" >&2; exit 1; }

"$SCRIPT" --help | grep -q -- '--quick' || fail "--help does not list --quick"
set +e; "$SCRIPT" --no-such-option 2>/dev/null; rc=$?; set -e
[[ $rc == 2 ]] || fail "an unknown option exited $rc, not 2"

out="$("$SCRIPT" --size tiny --quick --reps 1 --threads "1 2" --types "Q8_0 F16" --serve-type Q8_0 --workdir "$WORK")"
echo "$out"
for t in Q8_0 F16; do
  for th in 1 2; do
    for test in "pp64 tok/s" "tg16 tok/s (roofline" "step8 / step1" "step1 ms"; do
      n=$(grep -cF "| $t | $th | $test" <<<"$out" || true)
      [[ $n == 1 ]] || fail "expected one '$t | $th | $test' row, found $n"
    done
  done
done
grep -qE '^Kernels: vtc (scalar|avx2|avxvnni|avx512vnni|avx512bf16)(;| )' <<<"$out" || fail "no 'Kernels: vtc <level>' line"
grep -qE "llama.cpp's CPU backend built for [A-Z]" <<<"$out" || fail "the reference's CPU backend is not named"
# The serving table: | threads | 1 client | 8 clients | ratio | spread |, one row per thread count.
for th in 1 2; do
  grep -qE "^\| $th \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|$" <<<"$out" || fail "no serving row for $th threads"
done
# Rows: | type | threads | test | vtc | llama.cpp | ratio | spread | spread | %roof | %roof |
python3 - "$out" <<'PY' || fail "a cell of the table is not what it should be"
import sys
rows = [l.split("|")[1:-1] for l in sys.argv[1].splitlines() if l.startswith("| Q8_0 |") or l.startswith("| F16 |")]
assert len(rows) == 16, len(rows)
for r in rows:
    c = [x.strip() for x in r]
    tg = c[2].startswith("tg")
    assert float(c[3]) > 0 and float(c[4]) > 0, c           # the medians
    assert float(c[5]) >= 0, c                               # vtc / llama.cpp (2 decimals)
    assert float(c[6]) >= 1 and float(c[7]) >= 1, c          # spreads: max / min
    assert (float(c[8]) >= 0 and float(c[9]) >= 0) if tg else c[8:10] == ["", ""], c
PY
# The depth table: | type | cache | threads | depth | vtc | llama.cpp | ratio | floor | vtc/floor | llama/floor | spreads |
depth="$("$SCRIPT" --size tiny --quick --reps 1 --threads 1 --types Q8_0 --only-depth --depths 40 --cache-types "f16 bf16" \
  --workdir "$WORK")"
echo "$depth"
python3 - "$depth" <<'PY' || fail "the depth table is not what it should be"
import sys
rows = [[x.strip() for x in l.split("|")[1:-1]] for l in sys.argv[1].splitlines() if l.startswith("| Q8_0 |")]
assert [r[1] for r in rows] == ["f16", "bf16"], rows
for c in rows:
    assert c[2] == "1" and c[3] == "40", c
    assert all(float(x) > 0 for x in c[4:10]), c                   # steps, ratio, floor, multiples of it
    step, floor, ratio = float(c[4]), float(c[7]), float(c[8])   # vtc / floor, within the cells' rounding
    assert (step - 0.005) / (floor + 0.005) - 0.005 <= ratio <= (step + 0.005) / (floor - 0.005) + 0.005, c
    assert float(c[10]) >= 1 and float(c[11]) >= 1, c
assert "KV: f16 256 bytes per position; bf16 256 bytes per position" in sys.argv[1], "the KV bytes note"
PY
echo "smoke-test: ok"
