// The AVX-512 attention kernels (attention_avx512.cpp) against the AVX2 ones
// at the same reference width (8 and 16 lanes), bit for bit on each path:
// one-row (fewer than 64 query rows), tiled (64+ rows) and split-KV decode,
// over odd token counts, head sizes 32..576 (K) and 32..512 (V), GQA, paged
// caches, sliding windows, chunks, sinks, softcap, bidirectional masks and
// queries that see nothing; f16 (both accumulators) and f32 caches; 1 to 4 threads; sentinels
// around every output. The tiled path is also checked against a double
// reference. Machines without AVX-512 report the cases as skipped.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "frontends/gguf/dequant.h"
#include "kernel_test_util.h"
#include "runtime/cpu/kernels/attention_internal.h"
#include "runtime/cpu/kernels/kernels.h"

using namespace vtc;
using namespace vtc::cpu;
using namespace vtc::cpu::test;

namespace {

bool have_avx512() {
  const auto isas = supported_isas();
  return std::find(isas.begin(), isas.end(), Isa::Avx512Vnni) != isas.end();
}

struct Shape {
  int64_t n_tokens, n_head, n_head_kv, dk, dv, n_kv;
  int64_t page_size = 0;  // 0: dense
  int32_t n_swa = 0;
  int32_t n_chunk = 0;
  float softcap = 0.0f;
  bool sinks = false;
  bool causal = true;
  int64_t first_pos = -1;  // position of the first query token; -1: n_kv - n_tokens
};

struct Problem {
  AttentionParams p;
  int64_t dv = 0;
  std::vector<float> q, kf, vf, sinks;  // kf, vf: logical rows as stored values
  std::vector<uint8_t> k, v;            // physical rows
  std::vector<int32_t> qpos, table;
};

Problem make_problem(const Shape& s, GgmlType kvt, bool acc16, uint32_t seed) {
  Problem pr;
  AttentionParams& p = pr.p;
  p.n_tokens = s.n_tokens;
  p.n_head = s.n_head;
  p.n_head_kv = s.n_head_kv;
  p.head_dim = s.dk;
  p.head_dim_v = s.dv;
  p.n_kv = s.n_kv;
  p.k_type = p.v_type = kvt;
  p.depth_kernel = false;  // the reference's one-row order, pinned
  p.scale = 1.0f / std::sqrt(float(s.dk));
  p.softcap = s.softcap;
  p.n_swa = s.n_swa;
  p.n_chunk = s.n_chunk;
  p.causal = s.causal;
  p.f16_accumulator = acc16;
  pr.dv = s.dv;
  pr.q = random_floats(size_t(s.n_tokens * s.n_head * s.dk), seed, -2.0f, 2.0f);
  const auto kraw = random_floats(size_t(s.n_kv * s.n_head_kv * s.dk), seed + 1, -2.0f, 2.0f);
  const auto vraw = random_floats(size_t(s.n_kv * s.n_head_kv * s.dv), seed + 2);
  const int64_t es = kvt == GgmlType::F32 ? 4 : 2, krow = s.n_head_kv * s.dk, vrow = s.n_head_kv * s.dv;
  int64_t n_phys = s.n_kv;
  if (s.page_size > 0) {  // pages in reverse order after one spare page
    const int64_t n_pages = (s.n_kv + s.page_size - 1) / s.page_size;
    for (int64_t i = 0; i < n_pages; ++i) pr.table.push_back(int32_t(n_pages - i));
    n_phys = (n_pages + 1) * s.page_size;
    p.page_table = pr.table.data();
    p.page_size = s.page_size;
  }
  pr.k.assign(size_t(n_phys * krow * es), 0xff);  // NaN bytes in unused rows
  pr.v.assign(size_t(n_phys * vrow * es), 0xff);
  pr.kf.resize(kraw.size());
  pr.vf.resize(vraw.size());
  auto store = [&](const float* src, int64_t n, uint8_t* dst, float* stored) {
    for (int64_t i = 0; i < n; ++i) {
      if (kvt == GgmlType::F32) {
        std::memcpy(dst + 4 * i, src + i, 4);
        stored[i] = src[i];
      } else {
        const uint16_t h = fp32_to_fp16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
        stored[i] = fp16_to_fp32(h);
      }
    }
  };
  for (int64_t j = 0; j < s.n_kv; ++j) {
    const int64_t r = s.page_size > 0 ? pr.table[size_t(j / s.page_size)] * s.page_size + j % s.page_size : j;
    store(kraw.data() + j * krow, krow, pr.k.data() + r * krow * es, pr.kf.data() + j * krow);
    store(vraw.data() + j * vrow, vrow, pr.v.data() + r * vrow * es, pr.vf.data() + j * vrow);
  }
  const int64_t first = s.first_pos >= 0 ? s.first_pos : s.n_kv - s.n_tokens;
  for (int64_t t = 0; t < s.n_tokens; ++t) pr.qpos.push_back(int32_t(first + t));
  if (s.sinks) {
    pr.sinks = random_floats(size_t(s.n_head), seed + 3, -1.0f, 3.0f);
    p.sinks = pr.sinks.data();
  }
  return pr;
}

bool key_visible(const Problem& pr, int64_t t, int64_t j) {
  const AttentionParams& p = pr.p;
  const int64_t qp = pr.qpos[size_t(t)];
  if (p.causal && j > qp) return false;
  if (p.n_swa > 0 && qp - j >= p.n_swa) return false;
  if (p.n_chunk > 0 && j < (qp / p.n_chunk) * p.n_chunk) return false;
  return true;
}

// Softmax attention in double over the stored values, sinks in the
// denominator.
std::vector<double> reference_of(const Problem& pr) {
  const AttentionParams& p = pr.p;
  const int64_t dk = p.head_dim, dv = pr.dv, group = p.n_head / p.n_head_kv;
  std::vector<double> out(size_t(p.n_tokens * p.n_head * dv), 0.0), s(size_t(p.n_kv));
  for (int64_t t = 0; t < p.n_tokens; ++t)
    for (int64_t h = 0; h < p.n_head; ++h) {
      const int64_t hk = h / group;
      double m = p.sinks != nullptr ? double(p.sinks[h]) : -1e300, sum = 0;
      bool any = false;
      for (int64_t j = 0; j < p.n_kv; ++j) {
        if (!key_visible(pr, t, j)) continue;
        double d = 0;
        for (int64_t i = 0; i < dk; ++i)
          d += double(pr.q[size_t((t * p.n_head + h) * dk + i)]) * pr.kf[size_t((j * p.n_head_kv + hk) * dk + i)];
        d *= p.scale;
        if (p.softcap != 0) d = p.softcap * std::tanh(d / p.softcap);
        s[size_t(j)] = d;
        m = std::max(m, d);
        any = true;
      }
      if (!any) continue;
      for (int64_t j = 0; j < p.n_kv; ++j)
        if (key_visible(pr, t, j)) sum += std::exp(s[size_t(j)] - m);
      if (p.sinks != nullptr) sum += std::exp(double(p.sinks[h]) - m);
      for (int64_t j = 0; j < p.n_kv; ++j) {
        if (!key_visible(pr, t, j)) continue;
        const double w = std::exp(s[size_t(j)] - m) / sum;
        for (int64_t i = 0; i < dv; ++i)
          out[size_t((t * p.n_head + h) * dv + i)] += w * pr.vf[size_t((j * p.n_head_kv + hk) * dv + i)];
      }
    }
  return out;
}

std::vector<float> run(const Problem& pr, Isa isa, int threads, int lanes) {
  IsaScope scope(isa);
  ThreadPool pool(threads);
  Guarded out(size_t(pr.p.n_tokens * pr.p.n_head * pr.dv));
  detail::attention_with_lanes(pr.q.data(), pr.k.data(), pr.v.data(), pr.qpos.data(), nullptr, pr.p, out.data(),
                               pool, lanes);
  REQUIRE(out.intact());
  return out.values();
}

std::string describe(const Shape& s, GgmlType kvt, bool acc16, int lanes) {
  return fmt::format("{} tok (first pos {}), {}/{} heads, dk {} dv {}, n_kv {}, page {}, swa {}, chunk {}, softcap {}, "
                     "sinks {}, causal {}, {} acc16={} lanes {}",
                     s.n_tokens, s.first_pos, s.n_head, s.n_head_kv, s.dk, s.dv, s.n_kv, s.page_size, s.n_swa,
                     s.n_chunk, s.softcap, s.sinks, s.causal, ggml_type_name(kvt), acc16, lanes);
}

// avx512 == avx2 bit for bit, for both reference widths, every cache type,
// 1..4 threads (the split-KV path depends on the thread count: each count
// is compared with the AVX2 run of the same count). tiled: also the double
// reference.
void check_shape(const Shape& s, bool tiled) {
  for (int lanes : {8, 16})
    for (GgmlType kvt : {GgmlType::F16, GgmlType::F32})
      for (bool acc16 : {true, false}) {
        if (kvt == GgmlType::F32 && !acc16) continue;
        if (tiled && s.dv % lanes != 0) continue;  // the one-row path then: covered by the one-row shapes
        const Problem pr = make_problem(s, kvt, acc16, uint32_t(s.n_tokens * 131 + s.n_kv * 7 + s.dk));
        INFO(describe(s, kvt, acc16, lanes));
        std::vector<float> first;
        for (int threads = 1; threads <= 4; ++threads) {
          INFO(threads << " threads");
          const auto want = run(pr, Isa::Avx2, threads, lanes);
          const auto got = run(pr, Isa::Avx512Vnni, threads, lanes);
          CHECK(bitwise_equal(got, want));
          if (threads == 1) first = got;
          // Thread-blind paths: all but split-KV, which a step of fewer than
          // 64 tokens takes past 256 keys (each row as decode would).
          else if (!(s.n_tokens < 64 && s.n_kv > 256)) CHECK(bitwise_equal(got, first));
        }
        if (tiled) {
          const double e = nmse(first, reference_of(pr));
          INFO(fmt::format("nmse {:.3g}", e));
          CHECK(e < 1e-10);
        }
      }
}

bool skip_without_avx512() {
  if (have_avx512()) return false;
  WARN("SKIPPED: this machine has no AVX-512 (avx512vnni level)");
  return true;
}

}  // namespace

TEST_CASE("attention avx512: one-row path (1 to 33 tokens) bit-identical to avx2", "[attention][avx512]") {
  if (skip_without_avx512()) return;
  const Shape shapes[] = {
      {1, 4, 4, 64, 64, 37},
      {1, 20, 4, 64, 64, 1},
      {1, 16, 2, 64, 64, 200, 16},
      {2, 8, 1, 128, 128, 70},
      {3, 8, 4, 36, 36, 45},
      {4, 20, 4, 64, 64, 4, 0, 0, 0, 0.f, true},
      {5, 12, 3, 64, 64, 133, 32},
      {7, 8, 2, 80, 80, 90, 0, 0, 0, 20.f},
      {8, 10, 2, 64, 64, 300, 16, 50},
      {9, 16, 4, 64, 64, 9},
      {11, 6, 3, 64, 48, 60, 0, 0, 16},
      {13, 4, 2, 64, 48, 77, 16, 8},
      {16, 8, 8, 32, 32, 40},
      {17, 16, 2, 64, 64, 150, 64, 0, 0, 0.f, true},
      {21, 5, 1, 128, 128, 21, 0, 0, 0, 0.f, false, false},
      {25, 20, 4, 80, 80, 100, 0, 0, 0, 0.f, true},
      {31, 4, 4, 40, 40, 31},
      {33, 20, 4, 64, 64, 97, 16},
      {5, 8, 2, 64, 64, 30, 0, 4, 0, 0.f, false, true, 40},  // queries past a window that starts after the cache
      {3, 4, 2, 256, 256, 70, 16},
      {2, 8, 1, 192, 128, 90},
      {1, 4, 1, 576, 512, 40},
  };
  for (const Shape& s : shapes) check_shape(s, false);
}

TEST_CASE("attention avx512: tiled path (64+ rows) bit-identical to avx2 and near the double reference",
          "[attention][avx512]") {
  if (skip_without_avx512()) return;
  const Shape shapes[] = {
      {64, 4, 2, 64, 64, 64},
      {65, 8, 1, 64, 64, 65, 16},
      {100, 4, 4, 64, 64, 300, 32},
      {130, 20, 4, 64, 64, 130},
      {70, 8, 4, 128, 128, 200, 0, 50},
      {96, 4, 2, 40, 40, 150},
      {80, 4, 1, 64, 64, 90, 0, 0, 0, 25.f},
      {66, 2, 2, 36, 64, 120, 16},
      {77, 6, 2, 80, 80, 77, 0, 0, 32},
      {129, 5, 1, 64, 64, 129, 0, 0, 0, 0.f, true},
      {64, 4, 4, 128, 128, 64, 0, 0, 0, 0.f, false, false},
      {200, 20, 4, 64, 64, 200, 16, 70, 0, 0.f, true},
      {72, 4, 2, 64, 64, 72, 0, 0, 0, 0.f, false, true, 200},  // positions past the cache: every key visible
      {64, 4, 2, 256, 256, 100, 16},
      {65, 4, 1, 192, 128, 65},
      {64, 2, 1, 576, 512, 64},
  };
  for (const Shape& s : shapes) check_shape(s, true);
}

TEST_CASE("attention avx512: split-KV decode bit-identical to avx2 for 1 to 4 threads", "[attention][avx512]") {
  if (skip_without_avx512()) return;
  const Shape shapes[] = {
      {1, 16, 2, 64, 64, 257},
      {1, 8, 8, 64, 64, 700, 16},
      {1, 8, 1, 128, 128, 1100, 0, 300},
      {1, 20, 4, 64, 64, 600, 32, 0, 0, 0.f, true},
      {1, 20, 4, 80, 80, 513, 0, 0, 128},
      {1, 4, 2, 64, 64, 4096, 16},
  };
  for (const Shape& s : shapes) check_shape(s, false);
}

// Timing, not a test: ./test_cpu_kernels "[.attention-avx512-bench]"
// (VTC_BENCH_THREADS, default 2; VTC_BENCH_WHAT=pp|decode|decode20). avx2 and avx512
// alternate, best of N each.
TEST_CASE("attention avx512 timing: pp512 and decode vs avx2", "[.attention-avx512-bench]") {
  if (skip_without_avx512()) return;
  const int n_threads = std::getenv("VTC_BENCH_THREADS") ? std::atoi(std::getenv("VTC_BENCH_THREADS")) : 2;
  ThreadPool pool(n_threads);
  auto time_ms = [&](const Problem& pr, Isa isa) {
    IsaScope scope(isa);
    std::vector<float> out(size_t(pr.p.n_tokens * pr.p.n_head * pr.dv));
    const auto t0 = std::chrono::steady_clock::now();
    attention(pr.q.data(), pr.k.data(), pr.v.data(), pr.qpos.data(), nullptr, pr.p, out.data(), pool);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  auto compare = [&](const char* what, const Problem& pr, int reps) {
    double best[2] = {1e300, 1e300};
    const bool only512 = std::getenv("VTC_BENCH_ONLY_AVX512") != nullptr;  // for profiling
    for (int r = 0; r < reps; ++r)
      for (int i = only512 ? 1 : 0; i < 2; ++i)
        best[i] = std::min(best[i], time_ms(pr, i == 0 ? Isa::Avx2 : Isa::Avx512Vnni));
    fmt::print("{}: avx2 {:.4f} ms, avx512 {:.4f} ms, x{:.2f} ({} threads)\n", what, best[0], best[1],
               best[0] / best[1], n_threads);
  };
  const char* what = std::getenv("VTC_BENCH_WHAT");  // "pp", "decode" or unset (both)
  if (what == nullptr || std::string(what) == "pp")
    compare("pp512 20/4 heads", make_problem({512, 20, 4, 64, 64, 512, 16}, GgmlType::F16, true, 1), 20);
  if (what == nullptr || std::string(what) == "decode")
    for (int64_t n_kv : {1, 256, 1024, 4096})
      compare(fmt::format("decode 20/4 heads, {} cached", n_kv).c_str(),
              make_problem({1, 20, 4, 64, 64, n_kv, 16}, GgmlType::F16, true, 2), 100);
  if (what != nullptr && std::string(what) == "decode20") {  // 20 layers' caches (80 MiB): read from DRAM
    std::vector<Problem> layers;
    for (uint32_t l = 0; l < 20; ++l) layers.push_back(make_problem({1, 20, 4, 64, 64, 4096, 16}, GgmlType::F16, true, 10 + l));
    double best[2] = {1e300, 1e300};
    for (int r = 0; r < 10; ++r)
      for (int i = 0; i < 2; ++i) {
        double ms = 0;
        for (const Problem& pr : layers) ms += time_ms(pr, i == 0 ? Isa::Avx2 : Isa::Avx512Vnni);
        best[i] = std::min(best[i], ms);
      }
    fmt::print("decode 20 layers x 4096 cached: avx2 {:.3f} ms, avx512 {:.3f} ms, x{:.2f} ({} threads)\n", best[0],
               best[1], best[0] / best[1], n_threads);
  }
}
