// Deliberate faults for the standing mutation test (issue 44; ctest
// "mutation: a broken op per family turns llama-archs red", script
// tests/e2e/mutation_check.sh). VTC_MUTATION=<name> makes one op of a
// family compute a wrong value on the CPU, so the test can show that the
// llama-archs suite goes red and names the architecture. Unset (every
// normal run) it costs one predictable branch per kernel call, never per
// element. The names:
//   ssm_scan_decay   the selective scan's decay exp(d A) uses d/2 (mamba, jamba, ...)
//   conv_ring_shift  causal_conv1d keeps its history one row too late (lfm2, mamba, ...)
//   mrope_section    multi-section rope reads its sections in dims, not pairs (qwen3vl, ...)
//   alibi_slope      ALiBi's slopes are those of head h - 1 (bloom, mpt, ...)
// and for speculative decoding (serve/engine/speculative/; ctest
// "speculative: a broken rollback turns exactness red"):
//   spec_keep_rejected_row  after a rejection, the first rejected draft row stays in the KV context
//   spec_skip_state_restore after a rejection, recurrent states keep the rejected rows
//   spec_accept_every_draft every draft token is accepted, whatever the target drew
//   spec_verify_rows_one_pass a few query rows at depth attend in one pass, not each as decode
//                           would (runtime/cpu/kernels/attention.cpp, use_rows_as_decode)
#pragma once

namespace vtc {

enum class Mutation {
  None,
  SsmScanDecay,
  ConvRingShift,
  MropeSection,
  AlibiSlope,
  SpecKeepRejectedRow,
  SpecSkipStateRestore,
  SpecAcceptEveryDraft,
  SpecVerifyRowsOnePass,
};

// The mutation VTC_MUTATION names, read once; an unknown name throws an
// Error listing the known ones.
Mutation active_mutation();

inline bool mutated(Mutation m) { return active_mutation() == m; }

}  // namespace vtc
