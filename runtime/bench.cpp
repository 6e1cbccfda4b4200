#include "runtime/bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "runtime/cpu/session.h"
#include "support/error.h"

namespace vtc {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double BenchFigures::pp_median() const { return median(pp_tokens_per_s); }
double BenchFigures::tg_median() const { return median(tg_tokens_per_s); }

BenchFigures bench_session(cpu::Session& session, const BenchSpec& spec,
                           const std::function<void(const std::string&)>& progress) {
  if (spec.prompt_tokens + 1 > session.n_ctx() || spec.gen_tokens + 1 > session.n_ctx())
    throw Error(fmt::format("bench: pp{} / tg{} need a context of at least {} (have {})", spec.prompt_tokens,
                            spec.gen_tokens, std::max(spec.prompt_tokens, spec.gen_tokens) + 1, session.n_ctx()));
  using clock = std::chrono::steady_clock;
  // Token ids as llama-bench uses them: arbitrary in-vocabulary values.
  std::vector<int32_t> prompt(size_t(spec.prompt_tokens));
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 7919 + 13) % size_t(session.n_vocab()));
  BenchFigures f;
  for (int rep = -1; rep < spec.repetitions; ++rep) {  // rep -1 warms up caches and pages
    session.reset(0);
    auto t0 = clock::now();
    if (spec.prompt_tokens > 0) session.prefill(0, prompt, 0);
    double pp = std::chrono::duration<double>(clock::now() - t0).count();
    session.reset(0);
    t0 = clock::now();
    int32_t token = 1;
    for (int32_t i = 0; i < spec.gen_tokens; ++i)
      session.decode(std::vector<int32_t>{0}, std::vector<int32_t>{token}, std::vector<int32_t>{i});
    double tg = std::chrono::duration<double>(clock::now() - t0).count();
    if (rep < 0) continue;
    if (spec.prompt_tokens > 0) f.pp_tokens_per_s.push_back(spec.prompt_tokens / pp);
    if (spec.gen_tokens > 0) f.tg_tokens_per_s.push_back(spec.gen_tokens / tg);
    if (progress)
      progress(fmt::format("rep {}/{}: pp{} {:.2f} tok/s, tg{} {:.2f} tok/s", rep + 1, spec.repetitions,
                           spec.prompt_tokens, spec.prompt_tokens / pp, spec.gen_tokens, spec.gen_tokens / tg));
  }
  return f;
}

}  // namespace vtc
