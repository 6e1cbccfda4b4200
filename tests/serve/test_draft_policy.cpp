// serve/engine/speculative/draft_policy.h: the adaptive draft length.
// Each expected value is worked out by hand from the header's rule (time
// in units of the step's fixed cost a: a step of R rows costs 1 + c R,
// k drafts add (c + d) k and E(k) - 1 tokens; a k must beat plain
// decoding's rate by 2%), not by the policy.
#include <catch2/catch.hpp>

#include "serve/engine/speculative/draft_policy.h"

using vtc::serve::DraftPolicy;

namespace {

// A record whose acceptance is accepted / tried plus the prior (one
// accepted of two): alpha = (accepted + 1) / (tried + 2).
DraftPolicy::Sequence record(double accepted, double tried) {
  DraftPolicy::Sequence s;
  s.accepted = accepted;
  s.tried = tried;
  return s;
}

// Steps that cost exactly a + b rows seconds, rows 1 and 5 in turn.
void time_steps(DraftPolicy& p, double a, double b) {
  for (int i = 0; i < 20; ++i) {
    const int rows = i % 2 == 0 ? 1 : 5;
    p.step_timed(rows, a + b * rows);
  }
}

}  // namespace

TEST_CASE("draft policy: the step cost is fitted from timed steps", "[serve][spec]") {
  DraftPolicy p;
  CHECK(p.row_cost() == Approx(DraftPolicy::kPriorRowCost));  // nothing timed: the prior
  CHECK(p.draft_cost() == 0.0);
  time_steps(p, 0.02, 0.01);
  CHECK(p.row_cost() == Approx(0.5).epsilon(1e-6));  // b / a
  p.drafted(4, 4 * 0.016);                            // 16 ms a draft token: 0.8 a
  CHECK(p.draft_cost() == Approx(0.8).epsilon(1e-6));
}

TEST_CASE("draft policy: accepted drafts grow to n_max, failing ones stop and probe again", "[serve][spec]") {
  DraftPolicy p;  // c = 0.3 (the prior), d = 0 (n-gram drafts are free)
  // alpha = 91/92: E(k) is nearly k + 1 and the rate (E(k)) / (1.3 + 0.3 k)
  // grows with k up to n_max.
  DraftPolicy::Sequence good = record(90, 90);
  CHECK(p.choose(good, 16, 0, 16, 1, 1) == 16);
  CHECK(p.choose(good, 5, 0, 16, 1, 1) == 5);   // no more than the drafter has
  CHECK(p.choose(good, 16, 0, 3, 1, 1) == 3);   // nor than n_max
  CHECK(p.choose(good, 2, 3, 16, 1, 1) == 0);   // nor fewer than n_min

  // alpha = 1/12: E(1) = 1.083 over 1.6 is 0.68 a token, below plain
  // decoding's 1 / 1.3 = 0.77: declined, then 8 plain tokens, then a probe
  // from a fresh record (alpha 0.5: E(1) / 1.6 = 0.94).
  DraftPolicy::Sequence bad = record(0, 10);
  CHECK(p.length(bad, 8, 0, 16, 1, 1) == 0);
  CHECK(bad.plain_left == DraftPolicy::kProbeAfter);
  CHECK(bad.backoff == 2 * DraftPolicy::kProbeAfter);
  for (int i = 0; i < DraftPolicy::kProbeAfter; ++i) {
    CHECK(p.choose(bad, 8, 0, 16, 1, 1) == 0);  // still pausing
    p.decoded_plainly(bad);
  }
  CHECK(p.choose(bad, 8, 0, 16, 1, 1) > 0);
  // A probe that fails again pauses twice as long.
  p.verified(bad, 1, 0);
  p.verified(bad, 1, 0);
  p.verified(bad, 1, 0);
  CHECK(p.length(bad, 8, 0, 16, 1, 1) == 0);
  CHECK(bad.plain_left == 2 * DraftPolicy::kProbeAfter);
}

TEST_CASE("draft policy: a loaded step speculates less than an idle one", "[serve][spec]") {
  DraftPolicy p;  // c = 0.3
  // alpha = 7/12 (0.58): idle, k = 1 gives 1.58 / 1.6 = 0.99 a token
  // against 0.77; in a step of 64 rows and 64 outputs plain decoding makes
  // 64 / 20.2 = 3.17 a token, and k = 1 only 64.58 / 20.5 = 3.15.
  const DraftPolicy::Sequence s = record(6, 10);
  CHECK(p.choose(s, 8, 0, 16, 1, 1) > 0);
  CHECK(p.choose(s, 8, 0, 16, 64, 64) == 0);
}

TEST_CASE("draft policy: a draft model that costs nearly a target step is declined", "[serve][spec]") {
  // a = 10 ms, b = 3 ms (c = 0.3); alpha = 86/102 = 0.84 (a lower-bit
  // copy of the target agrees often).
  const DraftPolicy::Sequence s = record(85, 100);
  DraftPolicy costly;
  time_steps(costly, 0.010, 0.003);
  costly.drafted(4, 4 * 0.008);  // d = 0.8: k = 1 makes 1.84 / 2.4 = 0.77 a token, k = 4 3.66 / 5.7 = 0.64
  CHECK(costly.choose(s, 16, 0, 16, 1, 1) == 0);
  DraftPolicy cheap;
  time_steps(cheap, 0.010, 0.003);
  cheap.drafted(4, 4 * 0.0001);  // d = 0.01: k = 4 makes 3.66 / 2.54 = 1.44 a token
  CHECK(cheap.choose(s, 16, 0, 16, 1, 1) >= 4);
}
