#include "runtime/diff/compare.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

#include "ir/step_interface.h"
#include "support/error.h"

namespace vtc::diff {
namespace {

Row make_row(std::string name, std::string op, std::vector<std::string> users = {}) {
  Row row;
  row.is_state = op == "state";
  row.name = std::move(name);
  row.op = std::move(op);
  row.users = std::move(users);
  return row;
}

Row judge(Row row, const HostTensor& a, const HostTensor& b, const Tolerances& tol) {
  row.dtype = a.elem == b.elem ? a.elem.name() : a.elem.name() + "/" + b.elem.name();
  row.shape = a.shape == b.shape ? format_shape(a.shape) : format_shape(a.shape) + "/" + format_shape(b.shape);
  row.tolerance = std::max(tol.of(a.elem), tol.of(b.elem));
  const std::vector<double> va = widen(a), vb = widen(b);
  row.a = fingerprint(va);
  row.b = fingerprint(vb);
  if (va.size() != vb.size()) {
    row.verdict = Verdict::Diverged;
    row.rel_l2 = INFINITY;
    row.why = fmt::format("{} elements against {}", va.size(), vb.size());
    return row;
  }
  const ValueComparison c = compare_values(va, vb);
  row.rel_l2 = c.rel_l2;
  row.nonfinite_mismatches = c.nonfinite_mismatches;
  if (c.nonfinite_mismatches > 0) {
    row.verdict = Verdict::Diverged;
    row.why = fmt::format("{} positions disagree on NaN/Inf", c.nonfinite_mismatches);
  } else if (!(c.rel_l2 <= row.tolerance)) {
    row.verdict = Verdict::Diverged;
    row.why = fmt::format("rel-L2 {:.3g} > tolerance {:.3g} ({})", c.rel_l2, row.tolerance, row.dtype);
  }
  return row;
}

Row one_sided(Row row, const HostTensor& t, bool in_a) {
  row.dtype = t.elem.name();
  row.shape = format_shape(t.shape);
  (in_a ? row.a : row.b) = fingerprint(widen(t));
  row.verdict = in_a ? Verdict::OnlyA : Verdict::OnlyB;
  return row;
}

void compare_taps(const StepOutput& a, const StepOutput& b, const Tolerances& tol, std::vector<Row>& rows) {
  std::map<std::string, const Observed*> in_b;
  for (const Observed& o : b.taps) in_b[o.key] = &o;
  for (const Observed& o : a.taps) {
    Row row = make_row(o.name, o.op, o.users);
    auto it = in_b.find(o.key);
    if (it == in_b.end()) {
      rows.push_back(one_sided(std::move(row), o.value, true));
      continue;
    }
    rows.push_back(judge(std::move(row), o.value, it->second->value, tol));
    in_b.erase(it);
  }
  for (const Observed& o : b.taps)
    if (in_b.count(o.key)) rows.push_back(one_sided(make_row(o.name, o.op, o.users), o.value, false));
}

void compare_states(const StepOutput& a, const StepOutput& b, const Tolerances& tol, std::vector<Row>& rows) {
  std::map<std::string, const StateSnapshot*> in_b;
  for (const StateSnapshot& s : b.states) in_b[s.name] = &s;
  auto missing = [&](const StateSnapshot& s, bool in_a) {
    Row row = one_sided(make_row(s.name, "state"), s.value, in_a);
    row.verdict = Verdict::Diverged;
    row.why = fmt::format("declared only in arm {}", in_a ? "A" : "B");
    rows.push_back(std::move(row));
  };
  for (const StateSnapshot& s : a.states) {
    auto it = in_b.find(s.name);
    if (it == in_b.end()) {
      missing(s, true);
      continue;
    }
    rows.push_back(judge(make_row(s.name, "state"), s.value, it->second->value, tol));
    in_b.erase(it);
  }
  for (const StateSnapshot& s : b.states)
    if (in_b.count(s.name)) missing(s, false);
}

// The greedy id `sample` drew, when the step has exactly one.
std::optional<int32_t> sampled_id(const StepOutput& out) {
  for (const Observed& o : out.taps)
    if (o.op == "sample" && o.value.elem.kind() == ir::ElemType::I32 && o.value.numel() == 1) return o.value.i32_data()[0];
  return std::nullopt;
}

// Two arms whose logits agree within tolerance can still pick different
// greedy ids when two logits are closer than that tolerance (tiny random
// models have many near-ties). Such a pick, and the @last_ids that stores
// it, is accepted, with the gap in the row's `why`, when each arm's own
// logits put the two ids within f32 tolerance x the largest |logit| of
// arm A. A sampler that picks a wrong id leaves a larger gap and still
// diverges.
void accept_near_ties(const StepOutput& a, const StepOutput& b, const Tolerances& tol, std::vector<Row>& rows) {
  const std::optional<int32_t> ia = sampled_id(a), ib = sampled_id(b);
  if (!ia || !ib || *ia == *ib || a.logits.size() != b.logits.size()) return;
  const auto n = int32_t(a.logits.size());
  if (*ia < 0 || *ib < 0 || *ia >= n || *ib >= n) return;
  double scale = 0;
  for (float v : a.logits) scale = std::max(scale, double(std::fabs(v)));
  const double gap = std::max(double(a.logits[size_t(*ia)]) - a.logits[size_t(*ib)],
                              double(b.logits[size_t(*ib)]) - b.logits[size_t(*ia)]);
  if (!(gap <= tol.f32 * scale)) return;
  for (Row& r : rows)
    if (r.verdict == Verdict::Diverged && (r.op == "sample" || r.name == ir::step_value(ir::StepKind::Decode, ir::step::kLastIds).ref())) {
      r.verdict = Verdict::Ok;
      r.rel_l2 = 0;  // the ids' own rel-L2 says nothing about the logits
      r.why = fmt::format("near-tie: ids {} and {} are {:.3g} apart, within f32 tolerance x max|logit| {:.3g}", *ia, *ib,
                          gap, tol.f32 * scale);
    }
}

}  // namespace

double Tolerances::of(ir::ElemType elem) const {
  switch (elem.kind()) {
    case ir::ElemType::F32: return f32;
    case ir::ElemType::F16: return f16;
    case ir::ElemType::BF16: return bf16;
    default: return integer;
  }
}

void Tolerances::set(const std::string& spec) {
  const size_t eq = spec.find('=');
  const std::string key = spec.substr(0, eq);
  double* slot = key == "f32" ? &f32 : key == "f16" ? &f16 : key == "bf16" ? &bf16 : key == "int" ? &integer : nullptr;
  if (eq == std::string::npos || !slot)
    throw Error(fmt::format("--tol '{}': expected DTYPE=VALUE with DTYPE one of f32, f16, bf16, int", spec));
  try {
    size_t used = 0;
    const std::string value = spec.substr(eq + 1);
    const double v = std::stod(value, &used);
    if (used != value.size() || !(v >= 0) || !std::isfinite(v)) throw std::invalid_argument(value);
    *slot = v;
  } catch (const std::exception&) {
    throw Error(fmt::format("--tol '{}': the tolerance must be a finite number >= 0", spec));
  }
}

std::string verdict_name(Verdict v) {
  switch (v) {
    case Verdict::Ok: return "ok";
    case Verdict::Diverged: return "DIVERGED";
    case Verdict::OnlyA: return "only-A";
    case Verdict::OnlyB: return "only-B";
  }
  return "?";
}

const Row* StepComparison::first_divergence() const {
  for (const Row& r : rows)
    if (r.verdict == Verdict::Diverged) return &r;
  return nullptr;
}

int StepComparison::count(Verdict v) const {
  int n = 0;
  for (const Row& r : rows) n += r.verdict == v;
  return n;
}

double StepComparison::max_rel_l2() const {
  double m = 0;
  for (const Row& r : rows)
    if ((r.verdict == Verdict::Ok || r.verdict == Verdict::Diverged) && std::isfinite(r.rel_l2)) m = std::max(m, r.rel_l2);
  return m;
}

StepComparison compare_step(int step, const StepOutput& a, const StepOutput& b, const Tolerances& tolerances) {
  StepComparison c{step, {}};
  compare_taps(a, b, tolerances, c.rows);
  compare_states(a, b, tolerances, c.rows);
  accept_near_ties(a, b, tolerances, c.rows);
  return c;
}

}  // namespace vtc::diff
