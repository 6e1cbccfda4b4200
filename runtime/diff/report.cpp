#include "runtime/diff/report.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <vector>

namespace vtc::diff {
namespace {

constexpr size_t kColumns = 9;
using Line = std::array<std::string, kColumns>;

std::string rel_text(const Row& r) {
  if (r.verdict == Verdict::OnlyA || r.verdict == Verdict::OnlyB) return "-";
  if (std::isinf(r.rel_l2)) return "inf";
  return fmt::format("{:.3g}", r.rel_l2);
}

Line row_line(const Row& r) {
  auto fp = [](const std::optional<Fingerprint>& f) { return f ? format_fingerprint(*f) : std::string("-"); };
  return {r.name, r.op, r.dtype, r.shape, fp(r.a), fp(r.b), rel_text(r),
          r.verdict == Verdict::OnlyA || r.verdict == Verdict::OnlyB ? "-" : fmt::format("{:.3g}", r.tolerance),
          verdict_name(r.verdict)};
}

}  // namespace

void print_step_table(std::FILE* out, const StepComparison& step, const std::string& header, const std::string& arm_a,
                      const std::string& arm_b, const ReportOptions& options) {
  std::vector<Line> lines = {
      Line{"tensor", "op", "dtype", "shape", "fingerprint " + arm_a, "fingerprint " + arm_b, "rel-L2", "tol", "verdict"}};
  for (const Row& r : step.rows)
    if (!options.only_divergent || r.verdict == Verdict::Diverged) lines.push_back(row_line(r));
  std::array<size_t, kColumns> width{};
  for (const Line& l : lines)
    for (size_t c = 0; c < kColumns; ++c) width[c] = std::max(width[c], l[c].size());
  fmt::print(out, "== step {}: {}\n", step.step, header);
  for (const Line& l : lines) {
    std::string text;
    for (size_t c = 0; c < kColumns; ++c) text += fmt::format("{:<{}}", l[c], c + 1 < kColumns ? width[c] + 2 : 0);
    fmt::print(out, "{}\n", text);
  }
  fmt::print(out, "step {}: {} compared, {} diverged, {} only in {}, {} only in {}, max rel-L2 {:.3g}\n", step.step,
             step.count(Verdict::Ok) + step.count(Verdict::Diverged), step.count(Verdict::Diverged),
             step.count(Verdict::OnlyA), arm_a, step.count(Verdict::OnlyB), arm_b, step.max_rel_l2());
  for (const Row& r : step.rows)
    if (r.verdict == Verdict::Ok && !r.why.empty()) fmt::print(out, "  {} ok: {}\n", r.name, r.why);
}

std::string describe_divergence(int step, const Row& row) {
  std::string where = row.is_state ? fmt::format("state {}", row.name) : fmt::format("{} (op {}", row.name, row.op);
  if (!row.is_state) where += row.users.empty() ? ")" : fmt::format(", read by {})", fmt::join(row.users, ", "));
  return fmt::format("first divergence: step {}, {}: {}", step, where, row.why);
}

}  // namespace vtc::diff
