#!/usr/bin/env bash
# mutation_check.sh TEST_LLAMA_ARCHS: the standing mutation test of issue
# 44. For one new op per family, break it on purpose (VTC_MUTATION,
# support/mutation.h) and run the llama-archs case of an architecture that
# uses it: the case passes without the mutation and fails with it, and the
# failure names the architecture. Exit 1 when a mutation goes unnoticed.
set -uo pipefail
TEST=$1
# mutation, architecture, case (a Catch2 name pattern after "llama-archs ARCH: ")
CHECKS=(
  "ssm_scan_decay  mamba2   f32 and q8_0 match*"   # Mamba-2's scalar decay per head
  "ssm_scan_decay  jamba    f32 and q8_0 match*"   # Mamba-1's decay per element, in a hybrid
  "ssm_scan_decay  minimax-01 f32 and q8_0 match*" # lightning attention's per-head decay (through ssm_scan)
  "conv_ring_shift lfm2     f32 and q8_0 match*"   # LFM2's short convolutions
  "conv_ring_shift mamba    f32 and q8_0 match*"   # Mamba-1's conv ring
  "mrope_section   qwen3vl  attention-amplified*"  # the text towers' multi-section rope (interleaved)
  "mrope_section   qwen2vl  f32 and q8_0 match*"   # the same, in sections
  "alibi_slope     bloom    f32 and q8_0 match*"   # ALiBi
)
status=0
for row in "${CHECKS[@]}"; do
  read -r mutation arch pattern <<<"$row"
  filter="llama-archs $arch: $pattern"
  if ! out=$("$TEST" "$filter" 2>&1); then
    echo "mutation-check: $arch fails without a mutation, so the check proves nothing:"
    echo "$out" | tail -20
    status=1
    continue
  fi
  out=$(VTC_MUTATION=$mutation "$TEST" "$filter" 2>&1)
  rc=$?
  if grep -q "VTC_MUTATION=.*is not a known mutation" <<<"$out"; then
    verdict="FAIL (vtc does not know the mutation)"
  elif [[ $rc == 0 ]]; then
    verdict="FAIL (the suite stayed green)"
  elif ! grep -q "FAILED" <<<"$out" || ! grep -q "llama-archs $arch" <<<"$out"; then
    verdict="FAIL (red, but not a failed case naming $arch; exit $rc)"
  else
    verdict="red, naming $arch: $(grep -m1 "llama-archs $arch seed.*rel-L2" <<<"$out" | cut -c1-110)"
  fi
  [[ $verdict == FAIL* ]] && status=1
  echo "mutation-check: $mutation -> $verdict"
done
[[ $status == 0 ]] && echo "mutation-check: every mutation turned the suite red: PASS" || echo "mutation-check: FAIL"
exit $status
