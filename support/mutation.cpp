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
  throw Error("VTC_MUTATION='" + name +
              "' is not a known mutation (ssm_scan_decay, conv_ring_shift, mrope_section, alibi_slope); unset it for "
              "normal runs");
}

}  // namespace

Mutation active_mutation() {
  static const Mutation m = parse_mutation();
  return m;
}

}  // namespace vtc
