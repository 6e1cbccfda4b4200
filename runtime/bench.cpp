#include "runtime/bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <thread>

#include "frontends/gguf/gguf.h"
#include "runtime/session.h"
#include "support/error.h"

namespace vtc {

using clock_type = std::chrono::steady_clock;

namespace {
double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

}  // namespace

std::vector<int32_t> bench_tokens(int64_t n, int64_t first, int64_t n_vocab) {
  std::vector<int32_t> ids(size_t(std::max<int64_t>(n, 0)));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(((first + int64_t(i)) * 7919 + 13) % n_vocab);
  return ids;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double spread(const std::vector<double>& v) {
  if (v.empty()) return 0;
  auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return *lo > 0 ? *hi / *lo : 0;
}

double BenchFigures::pp_median() const { return median(pp_tokens_per_s); }
double BenchFigures::tg_median() const { return median(tg_tokens_per_s); }
double BenchFigures::step1_median() const { return median(step1_ms); }
double BenchFigures::stepn_median() const { return median(stepn_ms); }

BenchFigures bench_session(Session& session, const BenchSpec& spec, const BenchProgress& progress) {
  if (spec.prompt_tokens + 1 > session.n_ctx() || spec.gen_tokens + 1 > session.n_ctx())
    throw Error(fmt::format("bench: pp{} / tg{} need a context of at least {} (have {})", spec.prompt_tokens,
                            spec.gen_tokens, std::max(spec.prompt_tokens, spec.gen_tokens) + 1, session.n_ctx()));
  const std::vector<int32_t> prompt = bench_tokens(spec.prompt_tokens, 0, session.n_vocab());
  BenchFigures f;
  for (int rep = -1; rep < spec.repetitions; ++rep) {  // rep -1 warms up caches and pages
    session.reset(0);
    auto t0 = clock_type::now();
    if (spec.prompt_tokens > 0) session.prefill(0, prompt, 0);
    double pp = seconds_since(t0);
    session.reset(0);
    session.set_last_id(0, 1);
    t0 = clock_type::now();
    const std::vector<int32_t> slot0{0};
    const DeviceSampling greedy = DeviceSampling::greedy();
    for (int32_t i = 0; i < spec.gen_tokens; ++i) session.decode_sampled(slot0, std::vector<int32_t>{i}, {&greedy, 1});
    session.finish_sampled();
    double tg = seconds_since(t0);
    if (rep < 0) continue;
    if (spec.prompt_tokens > 0) f.pp_tokens_per_s.push_back(spec.prompt_tokens / pp);
    if (spec.gen_tokens > 0) f.tg_tokens_per_s.push_back(spec.gen_tokens / tg);
    if (progress)
      progress(fmt::format("rep {}/{}: pp{} {:.2f} tok/s, tg{} {:.2f} tok/s ({})", rep + 1, spec.repetitions,
                           spec.prompt_tokens, spec.prompt_tokens / pp, spec.gen_tokens, spec.gen_tokens / tg,
                           target_name(session.target())));
  }
  return f;
}

int64_t batch_step_context(const BenchSpec& spec) {
  return int64_t{spec.batch_context} + 2 * int64_t{spec.batch_steps} * (spec.repetitions + 1) + 1;
}

namespace {
// `steps` decode steps of the rows (slots[i] at pos[i], then one further);
// returns ms per step.
double time_steps(Session& session, int32_t steps, const std::vector<int32_t>& slots, std::vector<int32_t>& pos) {
  const std::vector<int32_t> tokens(slots.size(), 1);
  auto t0 = clock_type::now();
  for (int32_t k = 0; k < steps; ++k) {
    session.decode(slots, tokens, pos);
    for (int32_t& p : pos) ++p;
  }
  return 1e3 * seconds_since(t0) / steps;
}
}  // namespace

void bench_batch_step(Session& session, const BenchSpec& spec, BenchFigures& f, const BenchProgress& progress,
                      const std::function<void()>& context_ready) {
  const int32_t rows = spec.batch_rows, ctx = spec.batch_context, steps = spec.batch_steps;
  if (rows < 1 || ctx < 1 || steps < 1)
    throw Error(fmt::format("bench: the batched step needs rows, context and steps >= 1 (got {}, {}, {})", rows, ctx, steps));
  if (batch_step_context(spec) > session.n_ctx())
    throw Error(fmt::format("bench: the batched step needs a context of {} (have {})", batch_step_context(spec),
                            session.n_ctx()));
  const auto prefill_start = clock_type::now();
  for (int32_t b = 0; b < rows; ++b) {
    session.reset(b);
    session.prefill(b, bench_tokens(ctx, int64_t{b} * ctx, session.n_vocab()), 0);
  }
  f.context_prefill_ms = 1e3 * seconds_since(prefill_start);
  if (progress)
    progress(fmt::format("context: {} x {} tokens prefilled in {:.1f} s ({:.1f} tok/s)", rows, ctx,
                         f.context_prefill_ms / 1e3, 1e3 * double(rows) * ctx / f.context_prefill_ms));
  if (context_ready) context_ready();
  std::vector<int32_t> slots(static_cast<size_t>(rows)), pos(static_cast<size_t>(rows), ctx);
  std::iota(slots.begin(), slots.end(), 0);
  std::vector<int32_t> pos0{ctx};  // slot 0 also holds the 1-row steps' tokens
  for (int rep = -1; rep < spec.repetitions; ++rep) {  // rep -1 warms up
    const double one = time_steps(session, steps, {0}, pos0);
    pos[0] = pos0[0];
    const double many = time_steps(session, steps, slots, pos);
    pos0[0] = pos[0];
    if (rep < 0) continue;
    f.step1_ms.push_back(one);
    f.stepn_ms.push_back(many);
    if (progress)
      progress(fmt::format("rep {}/{}: decode step of 1 row {:.2f} ms, of {} rows {:.2f} ms ({:.2f}x)", rep + 1,
                           spec.repetitions, one, rows, many, many / one));
  }
}

uint64_t weight_bytes_per_token(const gguf::GgufFile& file) {
  bool has_output = false;
  for (const auto& t : file.tensors()) has_output = has_output || t.name == "output.weight";
  uint64_t bytes = 0;
  for (const auto& t : file.tensors())
    if (t.name != "token_embd.weight" || !has_output) bytes += t.n_bytes;
  return bytes;
}

namespace {
// 32-byte vectors (two 16-byte loads where the build has no AVX).
using Vec = uint64_t __attribute__((vector_size(32)));

uint64_t sum_slice(const uint8_t* p, uint64_t bytes) {
  const Vec* v = reinterpret_cast<const Vec*>(p);
  const uint64_t n = bytes / sizeof(Vec);
  Vec a{}, b{}, c{}, d{};
  for (uint64_t i = 0; i + 4 <= n; i += 4) {
    a += v[i];
    b += v[i + 1];
    c += v[i + 2];
    d += v[i + 3];
  }
  a += b + c + d;
  return a[0] + a[1] + a[2] + a[3];
}

// Runs fn(thread_index) on `threads` threads; returns the wall time.
template <class Fn>
double run_threads(int threads, const Fn& fn) {
  auto t0 = clock_type::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(fn, t);
  for (auto& th : pool) th.join();
  return seconds_since(t0);
}
}  // namespace

std::vector<double> measure_read_bandwidth(const BandwidthSpec& spec) {
  if (spec.threads < 1 || spec.repetitions < 1) throw Error("bench: bandwidth needs threads and repetitions >= 1");
  const uint64_t unit = 4 * sizeof(Vec);
  const uint64_t slice = spec.bytes / uint64_t(spec.threads) / unit * unit;
  if (slice == 0) throw Error("bench: the bandwidth buffer is too small for the threads");
  std::unique_ptr<uint8_t, decltype(&std::free)> buf(
      static_cast<uint8_t*>(std::aligned_alloc(64, slice * uint64_t(spec.threads))), &std::free);
  if (!buf) throw Error(fmt::format("bench: cannot allocate {} bytes for the bandwidth buffer", spec.bytes));
  uint8_t* base = buf.get();
  // First touch by the reading thread; nonzero so no page is a shared zero page.
  run_threads(spec.threads, [&](int t) { std::memset(base + uint64_t(t) * slice, 1, slice); });
  std::atomic<uint64_t> sink{0};  // an atomic add: the sums cannot be optimised away
  auto pass = [&](int t) { sink += sum_slice(base + uint64_t(t) * slice, slice); };
  std::vector<double> gbps;
  for (int rep = -1; rep < spec.repetitions; ++rep) {
    const double s = run_threads(spec.threads, pass);
    if (rep >= 0) gbps.push_back(double(slice) * spec.threads / s / 1e9);
  }
  return gbps;
}

}  // namespace vtc
