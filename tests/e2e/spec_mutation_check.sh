#!/usr/bin/env bash
# spec_mutation_check.sh TEST_LLAMA_ARCHS_SPEC TEST_SERVE: speculative
# decoding's gates go red when its rollback or acceptance is broken on
# purpose (VTC_MUTATION, support/mutation.h). Each check passes without the
# mutation and fails with it, the failure naming the architecture and the
# first differing token (the exactness suite) or the chi-square p-value
# (the distribution test). Exit 1 when a mutation goes unnoticed.
set -uo pipefail
SPEC=$1
SERVE=$2
# mutation, architectures (VTC_LLAMA_ARCHS_ONLY), what the failure names,
# where (cpu, or sim: the CUDA executor on the simulated device, whose
# n-gram drafts and rollback run on the device: codegen/cuda/device_drafts.h)
CHECKS=(
  "spec_keep_rejected_row  llama,deepseek2 llama  cpu"   # a rejected draft's KV row stays in the context
  "spec_skip_state_restore qwen35,mamba2   qwen35 cpu"   # recurrent states keep the rejected rows
  "spec_skip_state_restore qwen35,mamba2   qwen35 sim"   # the same, restored on the device
  "spec_accept_every_draft llama,mamba2    llama  cpu"   # drafts kept whatever the target drew
  "spec_verify_rows_one_pass llama,qwen35  llama  cpu"   # verify rows at depth attend unlike decode
)
status=0
for row in "${CHECKS[@]}"; do
  read -r mutation archs named where <<<"$row"
  if [[ $where == sim ]]; then export VTC_CUDA_DEVICE=sim VTC_SPEC_FAMILIES=1; else unset VTC_CUDA_DEVICE VTC_SPEC_FAMILIES; fi
  if ! out=$(VTC_LLAMA_ARCHS_ONLY=$archs "$SPEC" 2>&1); then
    echo "spec-mutation-check: $archs fail without a mutation, so the check proves nothing:"
    echo "$out" | tail -20
    status=1
    continue
  fi
  out=$(VTC_MUTATION=$mutation VTC_LLAMA_ARCHS_ONLY=$archs "$SPEC" 2>&1)
  rc=$?
  first=$(grep -m1 "^FAILED: $named " <<<"$out")
  if [[ $rc == 0 ]]; then
    verdict="FAIL (the suite stayed green)"
  elif [[ -z $first ]]; then
    verdict="FAIL (red, but no failure naming $named; exit $rc)"
  else
    verdict="red: ${first#FAILED: }"
  fi
  [[ $verdict == FAIL* ]] && status=1
  echo "spec-mutation-check: $mutation ($where) -> $verdict"
done
unset VTC_CUDA_DEVICE VTC_SPEC_FAMILIES
# The distribution test against a sampler that keeps every draft.
dist="[spec-distribution]"
if ! "$SERVE" "$dist" >/dev/null 2>&1; then
  echo "spec-mutation-check: the distribution test fails without a mutation"
  status=1
else
  out=$(VTC_MUTATION=spec_accept_every_draft "$SERVE" "$dist" 2>&1)
  if [[ $? == 0 ]]; then
    echo "spec-mutation-check: spec_accept_every_draft -> FAIL (the chi-square test passed)"
    status=1
  else
    echo "spec-mutation-check: spec_accept_every_draft -> red: $(grep -m1 'chi-square [0-9]' <<<"$out" | sed 's/^ *//')"
  fi
fi
[[ $status == 0 ]] && echo "spec-mutation-check: every mutation turned a gate red: PASS" || echo "spec-mutation-check: FAIL"
exit $status
