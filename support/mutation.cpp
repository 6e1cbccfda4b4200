#include "support/mutation.h"

#include <cstdlib>
#include <string>

#include "support/error.h"

namespace vtc {
namespace {

Mutation parse_mutation() {
  const char* env = std::getenv("VTC_MUTATION");
  if (!env || !*env) return Mutation::None;
  const std::string name(env);
  if (name == "ssm_scan_decay") return Mutation::SsmScanDecay;
  if (name == "conv_ring_shift") return Mutation::ConvRingShift;
  if (name == "mrope_section") return Mutation::MropeSection;
  if (name == "alibi_slope") return Mutation::AlibiSlope;
  if (name == "spec_keep_rejected_row") return Mutation::SpecKeepRejectedRow;
  if (name == "spec_skip_state_restore") return Mutation::SpecSkipStateRestore;
  if (name == "spec_accept_every_draft") return Mutation::SpecAcceptEveryDraft;
  if (name == "spec_verify_rows_one_pass") return Mutation::SpecVerifyRowsOnePass;
  throw Error("VTC_MUTATION='" + name +
              "' is not a known mutation (ssm_scan_decay, conv_ring_shift, mrope_section, alibi_slope, spec_keep_rejected_row, "
              "spec_skip_state_restore, spec_accept_every_draft, spec_verify_rows_one_pass); unset it for "
              "normal runs");
}

}  // namespace

Mutation active_mutation() {
  static const Mutation m = parse_mutation();
  return m;
}

}  // namespace vtc
