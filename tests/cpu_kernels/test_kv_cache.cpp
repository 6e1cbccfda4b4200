// KV cache rows (runtime/cpu/kernels/kv_cache.cpp) and attention over caches
// of every KV cache type. The end-to-end check against llama.cpp is
// tests/e2e/test_kv_cache_types.cpp; these pin the pieces:
// - quantize_kv_row on hand-computed blocks (q4_0, q4_1, q5_0, q5_1, q8_0,
//   iq4_nl), and the round trip error of every type on random rows;
// - hadamard_rows against H_n x in double, H_n H_n x = x, and the blocks;
// - the iq4_nl K dot in the reference's two-accumulator order against a
//   transcription of it, and its sum against the exact integer dot;
// - attention() with every K type against five V types, against a double
//   reference on the dequantized caches, at every ISA level the machine
//   has, and bit for bit across 1 and 2 threads.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <vector>

#include "frontends/gguf/dequant.h"
#include "runtime/cpu/kernels/attention_internal.h"
#include "runtime/cpu/kernels/internal.h"
#include "runtime/cpu/kernels/kernels.h"
#include "runtime/cpu/thread_pool.h"
#include "support/kv_cache_type.h"
#include "tests/cpu_kernels/kernel_test_util.h"

using namespace vtc;
using namespace vtc::cpu;

namespace {

std::vector<uint8_t> quantized(GgmlType t, const std::vector<float>& x) {
  std::vector<uint8_t> out(*ggml_bytes_for(t, x.size()));
  quantize_kv_row(t, x.data(), out.data(), int64_t(x.size()));
  return out;
}

std::vector<float> round_trip(GgmlType t, const std::vector<float>& x) {
  const auto q = quantized(t, x);
  std::vector<float> y(x.size());
  dequantize_row(t, q.data(), y.data(), int64_t(x.size()));
  return y;
}

}  // namespace

TEST_CASE("kv cache: q4_0 and q5_0 blocks by hand", "[cpu][kv_cache]") {
  // x_j = j - 16: the value of largest magnitude is -16, so q4_0's d =
  // -16 / -8 = 2 and q = trunc(x / 2 + 8.5): j = 0 -> 0, j = 31 -> 16 -> 15.
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[size_t(j)] = float(j - 16);
  const auto q4 = quantized(GgmlType::Q4_0, x);
  CHECK(fp16_to_fp32(uint16_t(q4[0] | q4[1] << 8)) == 2.0f);
  auto code4 = [&](int j) { return j < 16 ? q4[2 + size_t(j)] & 0x0F : q4[2 + size_t(j - 16)] >> 4; };
  CHECK(code4(0) == 0);    // -16 / 2 + 8.5 = 0.5
  CHECK(code4(1) == 1);    // -15 / 2 + 8.5 = 1.0
  CHECK(code4(17) == 9);   // 1 / 2 + 8.5 = 9.0
  CHECK(code4(31) == 15);  // 15 / 2 + 8.5 = 16 -> min(15, 16)
  // q5_0: d = -16 / -16 = 1, q = trunc(x + 16.5): j -> j, bit 4 in qh.
  const auto q5 = quantized(GgmlType::Q5_0, x);
  CHECK(fp16_to_fp32(uint16_t(q5[0] | q5[1] << 8)) == 1.0f);
  uint32_t qh;
  std::memcpy(&qh, q5.data() + 2, 4);
  CHECK(qh == 0xFFFF0000u);  // codes 16..31 have bit 4
  CHECK((q5[6] & 0x0F) == 0);
  CHECK((q5[6 + 15] >> 4) == (31 & 0x0F));
}

TEST_CASE("kv cache: q4_1, q5_1 and q8_0 blocks by hand", "[cpu][kv_cache]") {
  // x_j = 0.5 j + 1: min 1, max 16.5; q4_1's d = 15.5 / 15, q = trunc((x - 1) / d + 0.5).
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[size_t(j)] = 0.5f * float(j) + 1.0f;
  const auto q41 = quantized(GgmlType::Q4_1, x);
  const float d41 = 15.5f / 15.0f;
  CHECK(fp16_to_fp32(uint16_t(q41[0] | q41[1] << 8)) == fp16_to_fp32(fp32_to_fp16(d41)));
  CHECK(fp16_to_fp32(uint16_t(q41[2] | q41[3] << 8)) == 1.0f);
  for (int j : {0, 7, 16, 31}) {
    const int want = std::min(15, int((x[size_t(j)] - 1.0f) * (1.0f / d41) + 0.5f));
    const int got = j < 16 ? q41[4 + size_t(j)] & 0x0F : q41[4 + size_t(j - 16)] >> 4;
    CHECK(got == want);
  }
  // q5_1: d = 15.5 / 31 = 0.5 exactly: code j for x_j.
  const auto q51 = quantized(GgmlType::Q5_1, x);
  CHECK(fp16_to_fp32(uint16_t(q51[0] | q51[1] << 8)) == 0.5f);
  uint32_t qh;
  std::memcpy(&qh, q51.data() + 4, 4);
  CHECK(qh == 0xFFFF0000u);
  CHECK((q51[8 + 3] & 0x0F) == 3);
  // q8_0: amax 16.5, d = 16.5 / 127, x_31 -> 127.
  const auto q8 = quantized(GgmlType::Q8_0, x);
  CHECK(int8_t(q8[2 + 31]) == 127);
}

TEST_CASE("kv cache: iq4_nl picks the nearest codebook entries and a least-squares scale", "[cpu][kv_cache]") {
  // x = the codebook itself, twice, times 0.01: the largest magnitude is
  // -1.27 (code 0), so d0 = 0.01, every value maps to its own entry and the
  // least-squares d is 0.01 (to f16).
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[size_t(j)] = 0.01f * float(detail::kIq4nlValues[j % 16]);
  const auto q = quantized(GgmlType::IQ4_NL, x);
  CHECK(std::fabs(fp16_to_fp32(uint16_t(q[0] | q[1] << 8)) - 0.01f) < 1e-5f);
  for (int j = 0; j < 16; ++j) {
    CHECK((q[2 + size_t(j)] & 0x0F) == j);
    CHECK((q[2 + size_t(j)] >> 4) == j);
  }
}

TEST_CASE("kv cache: every type's round trip stays within its step", "[cpu][kv_cache]") {
  const auto x = test::random_floats(256, 7, -2.0f, 2.0f);
  struct Bound {
    GgmlType t;
    double max_err;  // relative to the row's largest magnitude
  };
  for (Bound b : {Bound{GgmlType::F32, 0}, Bound{GgmlType::F16, 1e-3}, Bound{GgmlType::BF16, 8e-3},
                  Bound{GgmlType::Q8_0, 1.0 / 127}, Bound{GgmlType::Q4_0, 1.0 / 8}, Bound{GgmlType::Q4_1, 1.0 / 15},
                  Bound{GgmlType::Q5_0, 1.0 / 16}, Bound{GgmlType::Q5_1, 1.0 / 31}, Bound{GgmlType::IQ4_NL, 0.12}}) {
    const auto y = round_trip(b.t, x);
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, double(std::fabs(y[i] - x[i])) / 2.0);
    INFO(ggml_type_name(b.t) << ": worst error " << worst << " of the range");
    CHECK(worst <= b.max_err);
  }
  CHECK_THROWS_WITH(quantized(GgmlType::Q4_K, x), Catch::Contains("not a cache type"));
}

TEST_CASE("hadamard: H x in double, its own inverse, and per block", "[cpu][kv_cache]") {
  for (int64_t n : {2, 64, 128, 256}) {
    const auto x = test::random_floats(size_t(3 * n), uint32_t(n));
    std::vector<float> y(x.size()), z(x.size());
    hadamard_rows(x.data(), y.data(), int64_t(x.size()), n);
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t i = 0; i < n; ++i) {
        double want = 0;
        for (int64_t j = 0; j < n; ++j) want += (std::popcount(uint64_t(i & j)) % 2 ? -1.0 : 1.0) * x[size_t(b * n + j)];
        want /= std::sqrt(double(n));
        CHECK(std::fabs(y[size_t(b * n + i)] - want) < 1e-5);
      }
    hadamard_rows(y.data(), z.data(), int64_t(y.size()), n);
    CHECK(test::nmse(z, x) < 1e-12);
  }
  std::vector<float> x(48);
  CHECK_THROWS_WITH(hadamard_rows(x.data(), x.data(), 48, 32), Catch::Contains("power of two"));
}

TEST_CASE("kv cache: the iq4_nl K dot sums as the reference's vec_dot", "[cpu][kv_cache]") {
  for (int64_t n : {32, 64, 96, 128}) {
    const auto k = quantized(GgmlType::IQ4_NL, test::random_floats(size_t(n), 11));
    std::vector<uint8_t> q(*ggml_bytes_for(GgmlType::Q8_0, uint64_t(n)));
    detail::active_quant_kernels().quantize[int(detail::ActType::Q8_0)](test::random_floats(size_t(n), 12).data(),
                                                                        q.data(), n);
    const auto* kb = reinterpret_cast<const detail::BlockIQ4_NL*>(k.data());
    const auto* qb = reinterpret_cast<const detail::BlockQ8_0*>(q.data());
    double exact = 0;
    for (int64_t b = 0; b < n / 32; ++b) {
      int32_t isum = 0;
      for (int j = 0; j < 32; ++j)
        isum += detail::kIq4nlValues[j < 16 ? kb[b].qs[j] & 0x0F : kb[b].qs[j - 16] >> 4] * qb[b].qs[j];
      exact += double(fp16_to_fp32(kb[b].d)) * double(fp16_to_fp32(qb[b].d)) * isum;
    }
    const float got = detail::kv_dot_iq4_nl(n, k.data(), q.data());
    INFO("n = " << n);
    CHECK(std::fabs(double(got) - exact) <= 1e-5 * std::max(1.0, std::fabs(exact)));
  }
}

namespace {

// Random K rows whose magnitude varies by key (x0.25 to x3.25): a q8_0
// block's scale then differs from key to key, as in a real cache, so an
// error in a per-key term of the dot does not cancel in the softmax.
std::vector<float> keys_of_varied_scale(int64_t n_kv, int64_t row, uint32_t seed) {
  auto k = test::random_floats(size_t(n_kv * row), seed);
  for (int64_t j = 0; j < n_kv; ++j)
    for (int64_t i = 0; i < row; ++i) k[size_t(j * row + i)] *= 0.25f + 0.5f * float(j % 7);
  return k;
}

// Double reference: softmax(scale q.k) v over the dequantized caches, q as
// given (the kernel rounds q to K's dot type; the tolerance covers it).
std::vector<double> attention_reference(const std::vector<float>& q, const std::vector<float>& k,
                                        const std::vector<float>& v, int64_t T, int64_t H, int64_t Hkv, int64_t D,
                                        int64_t n_kv, float scale) {
  std::vector<double> out(size_t(T * H * D), 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t hk = h / (H / Hkv), last = n_kv - T + t;
      std::vector<double> s(size_t(last + 1));
      double m = -1e300, sum = 0;
      for (int64_t j = 0; j <= last; ++j) {
        double d = 0;
        for (int64_t i = 0; i < D; ++i) d += double(q[size_t((t * H + h) * D + i)]) * k[size_t((j * Hkv + hk) * D + i)];
        s[size_t(j)] = d * scale, m = std::max(m, s[size_t(j)]);
      }
      for (double& e : s) e = std::exp(e - m), sum += e;
      for (int64_t j = 0; j <= last; ++j)
        for (int64_t i = 0; i < D; ++i) out[size_t((t * H + h) * D + i)] += s[size_t(j)] / sum * v[size_t((j * Hkv + hk) * D + i)];
    }
  return out;
}

}  // namespace

TEST_CASE("attention: every pair of KV cache types against a double reference, threads and ISA levels alike",
          "[cpu][kv_cache][attention]") {
  const int64_t T = 5, H = 4, Hkv = 2, D = 64, n_kv = 40;
  const auto q = test::random_floats(size_t(T * H * D), 1);
  const auto kf = test::random_floats(size_t(n_kv * Hkv * D), 2), vf = test::random_floats(size_t(n_kv * Hkv * D), 3);
  std::vector<int32_t> q_pos(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) q_pos[size_t(t)] = int32_t(n_kv - T + t);
  for (GgmlType kt : kv_cache_types())
    for (GgmlType vt : {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_1, GgmlType::IQ4_NL, GgmlType::BF16}) {
      const auto k = quantized(kt, kf), v = quantized(vt, vf);
      const auto kd = round_trip(kt, kf), vd = round_trip(vt, vf);
      const auto want = attention_reference(q, kd, vd, T, H, Hkv, D, n_kv, 0.125f);
      AttentionParams p;
      p.n_tokens = T, p.n_head = H, p.n_head_kv = Hkv, p.head_dim = D, p.n_kv = n_kv, p.scale = 0.125f;
      p.k_type = kt, p.v_type = vt;
      for (Isa isa : test::available_isas()) {
        std::vector<float> first;
        for (int threads : {1, 2}) {
          test::IsaScope scope(isa);
          ThreadPool pool(threads);
          std::vector<float> out(size_t(T * H * D));
          attention(q.data(), k.data(), v.data(), q_pos.data(), nullptr, p, out.data(), pool);
          INFO(ggml_type_name(kt) << " / " << ggml_type_name(vt) << ", " << isa_name(isa) << ", " << threads << " threads");
          // q rounded to q8_0 (or f16/bf16) for the dot, an f16 V accumulator: 1e-4.
          CHECK(test::nmse(out, want) < 1e-4);
          // Rows are independent of the thread count: the same bits.
          if (first.empty()) first = out;
          CHECK(test::bitwise_equal(out, first));
        }
      }
    }
}

TEST_CASE("attention: decode at depth (the f32 tile kernel past 1024 keys) against a double reference",
          "[cpu][kv_cache][attention]") {
  // 1500 keys (a short last tile), 2 kv heads of 32 to 256 values (the
  // kernel is compiled per head size: tiles of 64, 32 and 16 keys), each
  // with 1, 5, 7 or 8 query heads (AVX-512 accumulates the values 6 heads
  // at a time, then the rest; AVX2 takes the heads in batches of up to 5,
  // 7 as 4 + 3 and 8 as 4 + 4); f16 and q8_0 halves, every ISA level and 1
  // or 2 threads (the chunks differ, so only the tolerance is shared).
  const int64_t D = GENERATE(32, 64, 96, 128, 160, 256);
  const int64_t G = GENERATE(1, 5, 7, 8);
  const int64_t Hkv = 2, H = G * Hkv, n_kv = 1500;
  const auto q = test::random_floats(size_t(H * D), 21);
  const auto kf = keys_of_varied_scale(n_kv, Hkv * D, 22), vf = test::random_floats(size_t(n_kv * Hkv * D), 23);
  const int32_t pos = int32_t(n_kv - 1);
  for (GgmlType kt : {GgmlType::F16, GgmlType::Q8_0})
    for (GgmlType vt : {GgmlType::F16, GgmlType::Q8_0}) {
      const auto k = quantized(kt, kf), v = quantized(vt, vf);
      const auto want = attention_reference(q, round_trip(kt, kf), round_trip(vt, vf), 1, H, Hkv, D, n_kv, 0.125f);
      AttentionParams p;
      p.n_tokens = 1, p.n_head = H, p.n_head_kv = Hkv, p.head_dim = D, p.n_kv = n_kv, p.scale = 0.125f;
      p.k_type = kt, p.v_type = vt;
      for (Isa isa : test::available_isas())
        for (int threads : {1, 2}) {
          test::IsaScope scope(isa);
          ThreadPool pool(threads);
          std::vector<float> out(size_t(H * D));
          attention(q.data(), k.data(), v.data(), &pos, nullptr, p, out.data(), pool);
          INFO(ggml_type_name(kt) << " / " << ggml_type_name(vt) << ", " << isa_name(isa) << ", " << threads
                                  << " threads, head " << D << ", group " << G);
          // The tile kernel (AVX2 levels and up) accumulates in f32: far
          // closer than the one-row loop's f16 accumulator, so this also
          // fails if the kernel is bypassed there. A q8_0 K (the query
          // quantized to q8_0 for the dot) measures up to 3.6e-5; the
          // AVX-512 integer dot with its 128 x sum(q) correction off by one
          // sum measured 1.6e-4.
          const bool tiles = isa >= Isa::Avx2;
          CHECK(test::nmse(out, want) < (tiles ? (kt == GgmlType::Q8_0 ? 6e-5 : 1e-6) : 1e-4));
        }
    }
}

TEST_CASE("attention: a prompt at depth (tokens past 1024 keys) through the tile kernel against a double reference",
          "[cpu][kv_cache][attention]") {
  // The last T of 1100 positions attend causally: 40 tokens (under the
  // tiled path's 64, every pair of types) and 70 (f16/f16 takes the tiled
  // path; the pairs with a q8_0 half take the kernel per token, as a
  // prompt into a quantized cache does). Token t reads 1031 + t keys.
  const int64_t T = GENERATE(40, 70), D = GENERATE(64, 128);
  const int64_t Hkv = 2, H = 5 * Hkv, n_kv = 1100;
  const auto q = test::random_floats(size_t(T * H * D), 24);
  const auto kf = keys_of_varied_scale(n_kv, Hkv * D, 25), vf = test::random_floats(size_t(n_kv * Hkv * D), 26);
  std::vector<int32_t> q_pos(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) q_pos[size_t(t)] = int32_t(n_kv - T + t);
  for (GgmlType kt : {GgmlType::F16, GgmlType::Q8_0})
    for (GgmlType vt : {GgmlType::F16, GgmlType::Q8_0}) {
      const auto k = quantized(kt, kf), v = quantized(vt, vf);
      const auto want = attention_reference(q, round_trip(kt, kf), round_trip(vt, vf), T, H, Hkv, D, n_kv, 0.125f);
      AttentionParams p;
      p.n_tokens = T, p.n_head = H, p.n_head_kv = Hkv, p.head_dim = D, p.n_kv = n_kv, p.scale = 0.125f;
      p.k_type = kt, p.v_type = vt;
      for (Isa isa : test::available_isas())
        for (int threads : {1, 2}) {
          test::IsaScope scope(isa);
          ThreadPool pool(threads);
          std::vector<float> out(size_t(T * H * D));
          attention(q.data(), k.data(), v.data(), q_pos.data(), nullptr, p, out.data(), pool);
          INFO(ggml_type_name(kt) << " / " << ggml_type_name(vt) << ", " << isa_name(isa) << ", " << threads
                                  << " threads, " << T << " tokens, head " << D);
          // The kernel (AVX2 levels and up) accumulates V in f32: far closer
          // than the one-row loop with an f16 V (its accumulator rounds to
          // f16 at every key), so this also fails if the kernel is bypassed.
          const bool kernel = isa >= Isa::Avx2 && !(kt == GgmlType::F16 && vt == GgmlType::F16 && T >= 64);
          CHECK(test::nmse(out, want) < (kernel ? (kt == GgmlType::Q8_0 ? 6e-5 : 1e-6) : 1e-4));
        }
    }
}

// The depth benches below run every cache type, or only the one named in
// VTC_DEPTH_BENCH_TYPE (f16 or q8_0).
static bool depth_bench_runs(GgmlType t) {
  const char* only = std::getenv("VTC_DEPTH_BENCH_TYPE");
  return only == nullptr || std::string(only) == ggml_type_name(t);
}

// Not a gate (hidden tag): the time of one decode step's attention at
// depth on the 0.56B bench model's shape (20 layers of 20 query and 4 kv
// heads of 64), each layer's cache its own buffer so the rows come from
// DRAM, as in `vtc bench --batch-context D`; with the bytes read, and
// what they cost at a bandwidth given in VTC_BENCH_GBPS (default 50).
// VTC_BENCH_CACHED=1 runs every layer on the first layer's buffers, so
// the rows come from the caches at 4096 keys: the compute alone.
// VTC_BENCH_THREADS: the pool's threads (default 2).
//   build/tests/cpu_kernels/test_cpu_kernels "[.depth-bench]"
TEST_CASE("attention at depth timing: one decode step of the bench model's 20 layers", "[.depth-bench]") {
  const int64_t H = 20, Hkv = 4, D = 64, layers = 20;
  const double gbps = std::getenv("VTC_BENCH_GBPS") ? std::atof(std::getenv("VTC_BENCH_GBPS")) : 50.0;
  const bool cached = std::getenv("VTC_BENCH_CACHED") != nullptr;
  const int threads = std::getenv("VTC_BENCH_THREADS") ? std::atoi(std::getenv("VTC_BENCH_THREADS")) : 2;
  const auto q = test::random_floats(size_t(H * D), 31);
  const int64_t only_depth = std::getenv("NKV") ? std::atoi(std::getenv("NKV")) : 0;  // that depth alone
  for (int64_t n_kv : {4096, 16384})
    for (GgmlType t : {GgmlType::F16, GgmlType::Q8_0}) {
      if ((only_depth != 0 && n_kv != only_depth) || !depth_bench_runs(t)) continue;
      const auto rows = test::random_floats(size_t(n_kv * Hkv * D), 32);
      const auto one = quantized(t, rows);
      std::vector<std::vector<uint8_t>> k(size_t(layers), one), v(size_t(layers), one);
      AttentionParams p;
      p.n_tokens = 1, p.n_head = H, p.n_head_kv = Hkv, p.head_dim = D, p.n_kv = n_kv, p.scale = 0.125f;
      p.k_type = p.v_type = t;
      const int32_t pos = int32_t(n_kv - 1);
      ThreadPool pool(threads);
      std::vector<float> out(size_t(H * D));
      std::vector<double> ms;
      for (int rep = 0; rep < 6; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int64_t l = 0; l < layers; ++l) {
          const size_t buffers = cached ? 0 : size_t(l);
          attention(q.data(), k[buffers].data(), v[buffers].data(), &pos, nullptr, p, out.data(), pool);
        }
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(ms.begin(), ms.end());
      const double bytes = 2.0 * double(layers) * double(one.size());
      WARN(fmt::format("{} keys, {}: {:.2f} ms for {} layers (median of 6, {} threads); {:.1f} MB read, {:.2f} ms at {:.0f} GB/s",
                       n_kv, ggml_type_name(t), ms[3], layers, threads, bytes / 1e6, bytes / gbps / 1e6, gbps));
    }
}

// Not a gate (hidden tag): the depth kernel alone, one thread, on a cache
// small enough to stay in L2 (NKV keys, default 256): its compute per key,
// in nanoseconds and in cycles at VTC_BENCH_GHZ (default 3.3) per 16 keys
// of one kv head (the 0.56B bench model's shape: 20 query and 4 kv heads
// of 64; f16, then q8_0 K and V).
//   build/tests/cpu_kernels/test_cpu_kernels "[.depth-kernel-bench]"
TEST_CASE("attention at depth timing: the tile kernel's compute per key", "[.depth-kernel-bench]") {
  const int64_t H = 20, Hkv = 4, D = 64;
  const int64_t n_kv = std::getenv("NKV") ? std::atoi(std::getenv("NKV")) : 256;
  const double ghz = std::getenv("VTC_BENCH_GHZ") ? std::atof(std::getenv("VTC_BENCH_GHZ")) : 3.3;
  const auto q = test::random_floats(size_t(H * D), 31);
  for (GgmlType t : {GgmlType::F16, GgmlType::Q8_0}) {
    if (!depth_bench_runs(t)) continue;
    const auto k = quantized(t, test::random_floats(size_t(n_kv * Hkv * D), 32));
    const auto v = quantized(t, test::random_floats(size_t(n_kv * Hkv * D), 33));
    const std::vector<uint8_t> visible(size_t(n_kv), 1);
    detail::AttentionJob job;
    job.q = q.data(), job.k = k.data(), job.v = v.data(), job.visible = visible.data();
    job.n_tokens = 1, job.n_head = H, job.n_head_kv = Hkv, job.group = H / Hkv, job.dk = job.dv = D, job.n_kv = n_kv;
    job.k_type = job.v_type = t, job.scale = 0.125f;
    job.k_head_bytes = job.v_head_bytes = int64_t(*ggml_bytes_for(t, uint64_t(D)));
    std::vector<float> M(H), S(H), acc(H * D);
    // The active level's kernel (calling the AVX-512 one on an AVX2 core faults).
    const auto kernel = active_isa() >= Isa::Avx512Vnni ? detail::depth_block_avx512 : detail::depth_block_avx2;
    if (active_isa() < Isa::Avx2 || !kernel(job, 0, n_kv, M.data(), S.data(), acc.data(), false)) {
      WARN("SKIPPED: no depth kernel at this level or in this build");
      return;
    }
    const int reps = int(std::max<int64_t>(1, 20000 * 256 / n_kv));
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) kernel(job, 0, n_kv, M.data(), S.data(), acc.data(), false);
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / reps / double(n_kv);
    WARN(fmt::format("{} keys, {}, {}: {:.1f} ns per key (all {} heads), {:.0f} cycles at {} GHz per 16 keys of a kv head",
                     n_kv, ggml_type_name(t), isa_name(active_isa()), ns, H, ns * 16 / double(Hkv) * ghz, ghz));
  }
}
