#include "serve/engine/speculative/draft_policy.h"

#include <algorithm>
#include <cmath>

namespace vtc::serve {
namespace {
constexpr double kDecay = 0.95;        // per verify step, for acceptance
constexpr double kStepDecay = 0.98;    // per step, for the cost fit
constexpr double kPriorWeight = 2.0;   // draft tokens' worth of prior
constexpr double kMinGain = 1.02;      // a k must beat plain decoding by 2%

// Expected tokens out of a verify step with k drafts (the bonus included).
double expected_tokens(double alpha, int32_t k) {
  if (alpha >= 1.0) return double(k + 1);
  return (1.0 - std::pow(alpha, k + 1)) / (1.0 - alpha);
}
}  // namespace

double DraftPolicy::Sequence::alpha() const {
  return (accepted + kPriorAccept * kPriorWeight) / (tried + kPriorWeight);
}

namespace {
// The least-squares line seconds = a + b rows through decayed sums, when
// the rows varied enough to fit one and it is a cost (a > 0, b >= 0).
bool fit_line(double sw, double sx, double sy, double sxx, double sxy, double& a, double& b) {
  if (sw <= 0) return false;
  const double mean_x = sx / sw, var_x = sxx / sw - mean_x * mean_x;
  if (var_x < 0.25) return false;
  b = (sxy / sw - mean_x * sy / sw) / var_x;
  a = sy / sw - b * mean_x;
  return a > 0 && b >= 0;
}
}  // namespace

double DraftPolicy::row_cost() const {
  double a = 0, b = 0;
  return fit_line(sw_, sx_, sy_, sxx_, sxy_, a, b) ? b / a : kPriorRowCost;
}

double DraftPolicy::fixed_seconds() const {
  double a = 0, b = 0;
  if (fit_line(sw_, sx_, sy_, sxx_, sxy_, a, b)) return a;
  // No fit yet: the mean step split as the prior says, mean = a (1 + c rows).
  return sw_ > 0 ? (sy_ / sw_) / (1.0 + kPriorRowCost * sx_ / sw_) : 0.0;
}

double DraftPolicy::draft_cost() const {
  const double a = fixed_seconds();
  if (draft_steps_ <= 0 || !(a > 0)) return 0.0;
  return draft_seconds_ / draft_steps_ / a;
}

void DraftPolicy::drafted(int32_t steps, double seconds) {
  if (steps <= 0 || !(seconds >= 0)) return;
  draft_steps_ = draft_steps_ * kStepDecay + steps;
  draft_seconds_ = draft_seconds_ * kStepDecay + seconds;
}

void DraftPolicy::step_timed(int32_t rows, double seconds) {
  if (rows <= 0 || !(seconds > 0)) return;
  sw_ = sw_ * kStepDecay + 1;
  sx_ = sx_ * kStepDecay + rows;
  sy_ = sy_ * kStepDecay + seconds;
  sxx_ = sxx_ * kStepDecay + double(rows) * rows;
  sxy_ = sxy_ * kStepDecay + rows * seconds;
}

int32_t DraftPolicy::choose(const Sequence& seq, int32_t available, int32_t n_min, int32_t n_max, int32_t rows,
                            int32_t outputs) const {
  const int32_t hi = std::min(available, n_max);
  if (hi <= 0 || hi < n_min || seq.plain_left > 0) return 0;
  // Time in units of the fixed cost a: the step now takes 1 + c R for
  // `outputs` tokens; k more rows add (c + d) k for E(k) - 1 more.
  const double c = row_cost(), d = draft_cost(), alpha = seq.alpha();
  const double base_rate = double(std::max(outputs, 1)) / (1.0 + c * std::max(rows, 1));
  int32_t best = 0;
  double best_rate = base_rate * kMinGain;
  for (int32_t k = std::max(n_min, 1); k <= hi; ++k) {
    const double rate =
        (std::max(outputs, 1) + expected_tokens(alpha, k) - 1.0) / (1.0 + c * (std::max(rows, 1) + k) + d * k);
    if (rate > best_rate) best = k, best_rate = rate;
  }
  return best;
}

int32_t DraftPolicy::length(Sequence& seq, int32_t available, int32_t n_min, int32_t n_max, int32_t rows,
                            int32_t outputs) const {
  const int32_t k = choose(seq, available, n_min, n_max, rows, outputs);
  if (k == 0 && available > 0) declined(seq);
  return k;
}

void DraftPolicy::decoded_plainly(Sequence& seq) const {
  if (seq.plain_left > 0) --seq.plain_left;
}

void DraftPolicy::declined(Sequence& seq) const {
  seq.plain_left = seq.backoff;
  seq.backoff = std::min(seq.backoff * 2, kProbeMax);
  // The probe after the pause starts from a fresh, short record.
  seq.accepted = seq.tried = 0;
}

void DraftPolicy::verified(Sequence& seq, int32_t k, int32_t accepted) const {
  if (k <= 0) return;
  const int32_t tried = accepted + (accepted < k ? 1 : 0);
  seq.accepted = seq.accepted * kDecay + accepted;
  seq.tried = seq.tried * kDecay + tried;
  if (accepted > 0) seq.backoff = kProbeAfter;
}

}  // namespace vtc::serve
