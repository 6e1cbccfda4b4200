// How many draft tokens a sequence verifies in the next step: adaptive, so
// that speculation never costs more than it gains.
//
// Two things are measured online:
//   - the step's cost in rows: seconds = a + b * rows, a least-squares fit
//     over the recent steps (exponentially weighted; until the rows have
//     varied, a prior of b / a = kPriorRowCost, near this project's CPU
//     bench: a step of 8 rows costs 3.07x a step of 1, so b / a ~ 0.3);
//   - each sequence's acceptance: the chance alpha that a draft token is
//     accepted given the ones before it were, counted over the sequence's
//     recent verify steps (a accepted of k: a successes, and one failure
//     unless a == k), with a prior of kPriorAccept.
//   - a draft model's cost per draft token, d seconds per step it runs
//     (decayed over its draft calls; 0 until the first one, and for the
//     n-gram drafter, whose drafts are free).
// With k drafts a verify step yields E(k) = (1 - alpha^(k+1)) / (1 - alpha)
// tokens. In a step of R rows that hold T tokens of output, adding k draft
// rows raises the step's time by (b + d) k and its output by E(k) - 1; the
// rate of the whole step rises if (E(k) - 1) / ((b + d) k) > T / (a + b R).
// A draft model that costs nearly what the target does (a lower-bit copy
// of the same weights) therefore never pays and is declined. choose()
// takes the k in [n_min, n_max] with the best gain per second of the whole
// step and returns 0 when no k gains: a server under load (T and R large)
// speculates less, an idle one more, and a sequence whose drafts keep
// failing stops. After a stop it decodes kProbeAfter tokens plainly (the
// count doubling at each further stop, up to kProbeMax) and then probes
// with a short draft, so a sequence that becomes repetitive speculates
// again.
#pragma once

#include <cstdint>

namespace vtc::serve {

class DraftPolicy {
 public:
  static constexpr double kPriorRowCost = 0.3;  // b / a before measuring
  static constexpr double kPriorAccept = 0.5;
  static constexpr int32_t kProbeAfter = 8, kProbeMax = 256;

  // One sequence's acceptance record.
  struct Sequence {
    double accepted = 0, tried = 0;  // decayed counts of draft tokens
    int32_t plain_left = 0;          // tokens to decode plainly before probing
    int32_t backoff = kProbeAfter;
    double alpha() const;
  };

  // The draft length for `seq` in a step that already holds `rows` rows
  // making `outputs` tokens of output; the drafter has `available` tokens.
  int32_t choose(const Sequence& seq, int32_t available, int32_t n_min, int32_t n_max, int32_t rows,
                 int32_t outputs) const;
  // After a plain (undrafted) decode of `seq`.
  void decoded_plainly(Sequence& seq) const;
  // choose() said 0 while drafts were available: back off.
  void declined(Sequence& seq) const;
  // choose(), then declined() when it says 0 for an available draft: what
  // every caller does with a draft of `available` tokens.
  int32_t length(Sequence& seq, int32_t available, int32_t n_min, int32_t n_max, int32_t rows, int32_t outputs) const;
  // After verifying k drafts of which `accepted` matched.
  void verified(Sequence& seq, int32_t k, int32_t accepted) const;
  // After a step of `rows` rows that took `seconds`.
  void step_timed(int32_t rows, double seconds);
  // After the draft model ran `steps` steps (draft_steps, summed over the
  // jobs of one call) in `seconds`. draft_and_account (model_drafter.h)
  // calls it, and counts a draft cut short of n_min as a failed one
  // (verified(seq, 1, 0)), so a drafter that keeps giving nothing is
  // backed off from like one whose drafts are rejected.
  void drafted(int32_t steps, double seconds);

  // The fitted cost of one row beside the fixed cost, b / a.
  double row_cost() const;
  // A draft token's cost beside the fixed cost, d / a (0 before a draft
  // call or a step has been timed).
  double draft_cost() const;

 private:
  double fixed_seconds() const;  // a: the fit's, or the mean step's share
  double sw_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;  // decayed sums of (rows, seconds)
  double draft_steps_ = 0, draft_seconds_ = 0;           // decayed sums over draft calls
};

}  // namespace vtc::serve
