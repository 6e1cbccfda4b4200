#!/usr/bin/env bash
# The table of every architecture llama.cpp's own model generator writes
# (tests/test-llama-archs, built by tests/reference/build-archs.sh) and what
# `vtc run` does with each file: supported, out of scope (refused with the
# reason, architectures.def's VTC_ARCH_OUT_OF_SCOPE rows), or not yet
# (refused as unsupported). docs/running.md holds the table between its
# arch-table markers; the ctest test "docs: the architecture table is what
# vtc run does" runs this script with --check.
#
#   scripts/arch-table.sh GENERATOR VTC            print the table
#   scripts/arch-table.sh GENERATOR VTC --check F  compare with F's block; exit 1 naming each difference
#   scripts/arch-table.sh GENERATOR VTC --write F  replace F's block
#
# A file of a supported architecture in a variant vtc does not run is
# "refused" with vtc's message (refact-moe: its experts are never applied).
# A supported file must also be in the llama-archs suite
# (tests/e2e/llama_archs.cpp names its stem), where its logits and tokens
# are checked against llama.cpp; one that is not, or a file vtc fails on
# in any other way than a refusal, makes the table's row say so, and
# --check fails on it.
set -uo pipefail

GEN="${1:?usage: arch-table.sh GENERATOR VTC [--check FILE | --write FILE]}"
VTC="${2:?usage: arch-table.sh GENERATOR VTC [--check FILE | --write FILE]}"
MODE="${3:-}" DOC="${4:-}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SUITE="$ROOT/tests/e2e/llama_archs.cpp"
BEGIN='<!-- arch-table begin (scripts/arch-table.sh --write docs/running.md) -->'
END='<!-- arch-table end -->'

[[ -x "$GEN" ]] || { echo "arch-table.sh: no generator at $GEN (tests/reference/build-archs.sh builds it)" >&2; exit 2; }
[[ -x "$VTC" ]] || { echo "arch-table.sh: no vtc binary at $VTC" >&2; exit 2; }
case "$MODE" in
  "") ;;
  --check|--write) [[ -f "$DOC" ]] || { echo "arch-table.sh: $MODE needs an existing file, got '$DOC'" >&2; exit 2; } ;;
  *) echo "arch-table.sh: unknown option '$MODE' (--check FILE or --write FILE)" >&2; exit 2 ;;
esac

dir="$(mktemp -d "${TMPDIR:-/tmp}/vtc-arch-table.XXXXXX")"
trap 'rm -rf "$dir"' EXIT
"$GEN" -s 1 -o "$dir" >"$dir/generator.log" 2>&1 || { echo "arch-table.sh: $GEN failed:" >&2; tail -5 "$dir/generator.log" >&2; exit 2; }

# One row per generated file: | stem | architecture | what vtc does |
status_of() {
  local file="$1" stem="$2" out rc
  out="$(timeout 120 "$VTC" run "$file" --tokens 1,2,3 -n 2 --temp 0 -t 1 -q 2>&1)"
  rc=$?
  if [[ $rc -eq 0 ]]; then
    if grep -q "\"$stem\"" "$SUITE"; then echo "supported"; else echo "runs, but is not in the llama-archs suite"; fi
  elif [[ "$out" == *"is out of scope for vtc: "* ]]; then
    echo "out of scope: ${out##*is out of scope for vtc: }" | head -1
  elif [[ "$out" == *"is not supported (supported:"* ]]; then
    echo "not yet"
  elif [[ "$(echo "$out" | tail -1)" == "vtc: error: "* ]]; then
    # A clear refusal of this file's variant of a supported architecture.
    echo "refused: $(echo "$out" | tail -1 | sed "s|^vtc: error: $dir/[^:]*: ||" | cut -c1-200)"
  else
    echo "fails (exit $rc): $(echo "$out" | tail -1 | sed "s|$dir/||g" | cut -c1-160)"
  fi
}

table="$dir/table.md"
{
  echo "$BEGIN"
  echo
  echo "| generator file | \`general.architecture\` | \`vtc run\` |"
  echo "|---|---|---|"
  supported=0 total=0 scope=0 refused=0
  for f in "$dir"/*.gguf; do
    stem="$(basename "$f" .gguf)"
    arch="$stem"
    arch="${arch%-dense}" arch="${arch%-moe}"
    status="$(status_of "$f" "$stem")"
    total=$((total + 1))
    [[ "$status" == supported ]] && supported=$((supported + 1))
    [[ "$status" == "out of scope"* ]] && scope=$((scope + 1))
    [[ "$status" == "refused:"* ]] && refused=$((refused + 1))
    echo "| \`$stem\` | \`$arch\` | $status |"
  done
  echo
  echo "$supported of $total files supported, $scope out of scope, $refused refused (a variant of a supported architecture that vtc does not run), $((total - supported - scope - refused)) not yet."
  echo
  echo "$END"
} >"$table"

case "$MODE" in
  "") cat "$table" ;;
  --write)
    grep -qF "$BEGIN" "$DOC" && grep -qF "$END" "$DOC" || { echo "arch-table.sh: $DOC has no arch-table markers" >&2; exit 2; }
    awk -v begin="$BEGIN" -v end="$END" -v table="$table" '
      $0 == begin { while ((getline line < table) > 0) print line; skip = 1; next }
      $0 == end { skip = 0; next }
      !skip { print }' "$DOC" >"$dir/doc.new" && cat "$dir/doc.new" >"$DOC"
    grep -E "^[0-9]+ of [0-9]+ files" "$table"
    ;;
  --check)
    awk -v begin="$BEGIN" -v end="$END" '$0 == begin { on = 1 } on { print } $0 == end { on = 0 }' "$DOC" >"$dir/doc.md"
    failed=0
    if ! diff -u "$dir/doc.md" "$table" >"$dir/diff.txt"; then
      echo "arch-table.sh: $DOC's architecture table differs from what vtc run does (- the docs, + vtc):"
      grep -E '^[-+]\|' "$dir/diff.txt" || cat "$dir/diff.txt"
      echo "run: scripts/arch-table.sh GENERATOR VTC --write $DOC"
      failed=1
    fi
    if grep -E '\| (fails|runs, but)' "$table"; then
      echo "arch-table.sh: the rows above are neither supported nor refused"
      failed=1
    fi
    [[ $failed -eq 0 ]] && grep -E "^[0-9]+ of [0-9]+ files" "$table"
    exit $failed
    ;;
esac
