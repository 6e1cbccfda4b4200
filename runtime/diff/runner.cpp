#include "runtime/diff/runner.h"

#include <fmt/format.h>

#include <algorithm>

#include "runtime/diff/arm.h"
#include "runtime/diff/inject.h"
#include "support/error.h"

namespace vtc::diff {
namespace {

int32_t greedy(const std::vector<float>& logits) {
  if (logits.empty()) throw Error("diff: arm A returned no logits");
  return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

void check_options(const DiffOptions& o) {
  if (o.arms.size() != 2) throw Error(fmt::format("diff: --arms takes exactly two arms, A,B (got {})", o.arms.size()));
  if (o.arms[0] == o.arms[1] && o.inject.empty())
    throw Error(fmt::format("diff: both arms are '{}'; compare two different arms", o.arms[0]));
  if (o.prompt.empty()) throw Error("diff: the prompt is empty");
  if (o.steps < 0) throw Error(fmt::format("diff: --steps must be >= 0 (got {})", o.steps));
  const int64_t need = int64_t(o.prompt.size()) + o.steps;
  if (o.n_ctx > 0 && o.n_ctx < need)
    throw Error(fmt::format("diff: --ctx-size {} cannot hold the {} prompt tokens and {} decode steps", o.n_ctx,
                            o.prompt.size(), o.steps));
}

}  // namespace

DiffResult run_diff(const DiffOptions& o, std::FILE* out) {
  check_options(o);
  const int64_t need = int64_t(o.prompt.size()) + o.steps;
  const ArmConfig config{o.model, o.threads, o.n_ctx > 0 ? o.n_ctx : (need + 15) / 16 * 16, o.tap, o.cache_k, o.cache_v};
  std::unique_ptr<Arm> a = make_arm(o.arms[0], config);
  std::unique_ptr<Arm> b = make_arm(o.arms[1], config);
  if (!o.inject.empty()) b = inject_bug(o.inject, std::move(b));
  fmt::print(out, "vtc diff {}\n  A = {}: {}\n  B = {}: {}\n", o.model, a->name(), a->describe(), b->name(),
             b->describe());

  DiffResult result;
  int32_t position = int32_t(o.prompt.size());
  for (int step = 0; step <= o.steps; ++step) {
    std::string header;
    StepOutput sa, sb;
    if (step == 0) {
      header = fmt::format("prefill, {} prompt tokens", o.prompt.size());
      sa = a->prefill(o.prompt);
      sb = b->prefill(o.prompt);
    } else {
      const int32_t token = result.tokens.back();
      header = fmt::format("decode, token {} at position {}", token, position);
      sa = a->decode(token, position);
      sb = b->decode(token, position);
      ++position;
    }
    result.tokens.push_back(greedy(sa.logits));
    const StepComparison cmp = compare_step(step, sa, sb, o.tolerances);
    print_step_table(out, cmp, header, a->name(), b->name(), o.report);
    result.steps_run = step + 1;
    if (const Row* row = cmp.first_divergence(); row && !result.diverged) {
      result.diverged = true;
      result.first_step = step;
      result.first_name = row->name;
      result.first_op = row->op;
      result.first_line = describe_divergence(step, *row);
      if (!o.keep_going) break;
    }
  }
  result.tokens.pop_back();  // the token after the last step was not fed
  if (result.diverged) fmt::print(out, "{}\n", result.first_line);
  else fmt::print(out, "no divergence: {} steps (prefill + {} decode), tokens {}\n", result.steps_run, result.steps_run - 1,
                  fmt::join(result.tokens, ","));
  return result;
}

}  // namespace vtc::diff
