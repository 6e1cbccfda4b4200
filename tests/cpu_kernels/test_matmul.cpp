// Quantized matmul and embedding lookup against double references.
//
// Two references per case:
//  - "exact": W dequantized by dequantize_row, x in f32, dot in double. The
//    candidate differs by ggml's activation quantization, so the tolerance
//    depends on the activation type (ggml's test-backend-ops uses 5e-4 for
//    mul_mat with q8 activations).
//  - "ggml": the same, but x first converted exactly like the candidate
//    (scalar quantizer) and dequantized; only float reassociation and the
//    q8_1 sum rounding remain, so the tolerance is tight. This pins down the
//    integer arithmetic of every dot kernel.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "frontends/gguf/dequant.h"
#include "kernel_test_util.h"
#include "runtime/cpu/kernels/internal.h"
#include "runtime/cpu/kernels/kernels.h"
#include "support/error.h"

using namespace vtc;
using namespace vtc::cpu;
using namespace vtc::cpu::test;

namespace {

struct Shape {
  int64_t rows, cols, n_tokens;
};

const GgmlType kNativeTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                                 GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K,
                                 GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS,
                                 GgmlType::MXFP4};
const GgmlType kFallbackTypes[] = {GgmlType::IQ3_XXS, GgmlType::IQ3_S};

bool is_k_type(GgmlType t) { return ggml_traits(t).block_size == 256; }

// Shapes: rows not divisible by 2 or 3 or the row tile, one and several
// tokens, more tokens than a token tile.
std::vector<Shape> shapes_for(GgmlType t) {
  std::vector<Shape> s = {{1, 256, 1}, {17, 512, 1}, {33, 256, 3}, {64, 1024, 7}, {13, 768, 20}};
  if (!is_k_type(t)) {
    s.push_back({5, 96, 2});
    s.push_back({40, 32, 1});
  }
  if (ggml_traits(t).block_size == 1) s.push_back({3, 37, 2});  // vector tails
  return s;
}

double exact_tolerance(GgmlType t) {
  switch (matmul_activation_type(t)) {
    case GgmlType::F32: return 1e-10;
    case GgmlType::F16: return 1e-6;
    case GgmlType::BF16: return 1e-4;
    default: return 5e-4;
  }
}

std::vector<float> run_matmul(GgmlType t, const std::vector<uint8_t>& w, const Shape& s, const std::vector<float>& x,
                              ThreadPool& pool) {
  Guarded y(static_cast<size_t>(s.rows * s.n_tokens));
  matmul(t, w.data(), s.rows, s.cols, x.data(), s.n_tokens, y.data(), pool);
  REQUIRE(y.intact());
  return y.values();
}

}  // namespace

TEST_CASE("matmul: every native type and shape vs double references", "[matmul]") {
  ThreadPool pool(2);
  for (GgmlType t : kNativeTypes) {
    REQUIRE(matmul_native(t));
    for (const Shape& s : shapes_for(t)) {
      for (Isa isa : available_isas()) {
        IsaScope scope(isa);
        const auto w = random_weights(t, s.rows, s.cols, 1000 + static_cast<uint32_t>(s.rows));
        const auto x = random_floats(static_cast<size_t>(s.cols * s.n_tokens), 7 + static_cast<uint32_t>(s.cols));
        const auto wf = dequant_all(t, w, s.rows, s.cols);
        const auto y = run_matmul(t, w, s, x, pool);
        const double e_exact = nmse(y, reference(wf, x, s.rows, s.cols, s.n_tokens));
        const double e_ggml =
            nmse(y, reference(wf, activations_as_seen(t, x, s.cols, s.n_tokens), s.rows, s.cols, s.n_tokens));
        INFO(fmt::format("{} {}x{} tokens={} isa={}: nmse exact {:.3g} ggml-emulated {:.3g}", ggml_type_name(t), s.rows,
                         s.cols, s.n_tokens, isa_name(isa), e_exact, e_ggml));
        CHECK(e_exact < exact_tolerance(t));
        const bool q8_1 = matmul_activation_type(t) == GgmlType::Q8_1;  // m*s uses an f16 sum
        CHECK(e_ggml < (q8_1 ? 1e-6 : 1e-10));
      }
    }
  }
}

TEST_CASE("matmul: row-dequantizing fallback types", "[matmul]") {
  ThreadPool pool(3);
  for (GgmlType t : kFallbackTypes) {
    REQUIRE_FALSE(matmul_native(t));
    REQUIRE(matmul_supported(t));
    for (const Shape& s : shapes_for(t)) {
      const auto w = random_weights(t, s.rows, s.cols, 99);
      const auto x = random_floats(static_cast<size_t>(s.cols * s.n_tokens), 5);
      const auto y = run_matmul(t, w, s, x, pool);
      const double e = nmse(y, reference(dequant_all(t, w, s.rows, s.cols), x, s.rows, s.cols, s.n_tokens));
      INFO(fmt::format("{} {}x{} tokens={}: nmse {:.3g}", ggml_type_name(t), s.rows, s.cols, s.n_tokens, e));
      CHECK(e < 1e-10);
    }
  }
}

TEST_CASE("matmul: thread counts 1, 2, 3 give bit-identical results", "[matmul][threads]") {
  ThreadPool p1(1), p2(2), p3(3);
  const Shape shapes[] = {{37, 512, 1}, {50, 256, 19}};
  for (GgmlType t : kNativeTypes) {
    for (const Shape& s : shapes) {
      const auto w = random_weights(t, s.rows, s.cols, 3);
      const auto x = random_floats(static_cast<size_t>(s.cols * s.n_tokens), 4);
      const auto y1 = run_matmul(t, w, s, x, p1);
      INFO(fmt::format("{} {}x{} tokens={}", ggml_type_name(t), s.rows, s.cols, s.n_tokens));
      CHECK(bitwise_equal(y1, run_matmul(t, w, s, x, p2)));
      CHECK(bitwise_equal(y1, run_matmul(t, w, s, x, p3)));
    }
  }
}

TEST_CASE("matmul: scalar and every SIMD level agree", "[matmul][isa]") {
  if (simd_isas().empty()) {
    WARN("SKIPPED: AVX2 is not available here; only the scalar kernels were tested");
    return;
  }
  ThreadPool pool(2);
  const Shape s{29, 768, 5};
  for (GgmlType t : kNativeTypes) {
    const auto w = random_weights(t, s.rows, s.cols, 11);
    const auto x = random_floats(static_cast<size_t>(s.cols * s.n_tokens), 12);
    std::vector<float> ys;
    {
      IsaScope scope(Isa::Scalar);
      ys = run_matmul(t, w, s, x, pool);
    }
    for (Isa isa : simd_isas()) {
      IsaScope scope(isa);
      const std::vector<float> yv = run_matmul(t, w, s, x, pool);
      const double e = nmse(yv, ys);
      INFO(fmt::format("{}: nmse {} vs scalar {:.3g}", ggml_type_name(t), isa_name(isa), e));
      CHECK(e < 1e-11);
    }
    // Super-block types: same integer sums; the AVX2 kernels combine them in
    // ggml's x86 lane order (test_kquant_order.cpp), the scalar ones once per
    // super-block, so they agree up to float reassociation only.
  }
}

// F16 and BF16 from AVX-512 VNNI up (with the reference's 16-lane builds),
// and BF16 from AVX512-BF16 up in any case, follow the reference's two
// paths, which sum differently: llamafile's tinyBLAS for batches (the
// tiles) and ggml_vec_dot_f16/bf16 for one token (the dot);
// test_float_avx512.cpp checks each against its own order.
bool batch_differs_by_design(Isa isa, GgmlType t) {
  if (t != GgmlType::F16 && t != GgmlType::BF16) return false;
  return (t == GgmlType::BF16 && isa >= Isa::Avx512Bf16) ||
         (isa >= Isa::Avx512Vnni && detail::reference_lanes() == 16);
}

int act_slot(GgmlType at) {
  switch (at) {
    case GgmlType::Q8_0: return static_cast<int>(detail::ActType::Q8_0);
    case GgmlType::Q8_1: return static_cast<int>(detail::ActType::Q8_1);
    case GgmlType::Q8_K: return static_cast<int>(detail::ActType::Q8_K);
    case GgmlType::F16: return static_cast<int>(detail::ActType::F16);
    case GgmlType::BF16: return static_cast<int>(detail::ActType::BF16);
    default: return static_cast<int>(detail::ActType::F32);
  }
}

TEST_CASE("matmul: the AVX-VNNI tiles are bit-identical to the AVX2 ones", "[matmul][isa][gemm]") {
  if (!isa_supported(Isa::AvxVnni)) {
    WARN("SKIPPED: no AVX-VNNI here; the AVX-VNNI kernels were not tested");
    return;
  }
  const auto& a = *detail::avx2_quant_kernels_novnni();
  const auto& v = detail::quant_kernels(Isa::AvxVnni);
  const int slot = static_cast<int>(GgmlType::Q8_0);
  REQUIRE(v.gemm[slot].fn[1] != a.gemm[slot].fn[1]);  // the VNNI table really has its own tiles
  REQUIRE(v.gemm[slot].rows == a.gemm[slot].rows);
  const int rows = a.gemm[slot].rows, cols = 2048;
  for (uint32_t seed = 0; seed < 8; ++seed) {
    auto w = random_weights(GgmlType::Q8_0, rows, cols, 40 + seed);
    const size_t stride = w.size() / size_t(rows);
    for (size_t r = 0; r < size_t(rows); ++r)  // extreme codes, -128 included, in the first block of each row
      for (size_t i = 0; i < 32; ++i) w[r * stride + 2 + i] = static_cast<uint8_t>(seed % 2 ? 0x80 : (i % 2 ? 0x81 : 0x7f));
    for (int nt = 1; nt <= a.gemm[slot].toks; ++nt) {
      auto xf = random_floats(size_t(cols * nt), 50 + seed, -3.0f, 3.0f);
      for (int i = 0; i < 32; ++i) xf[static_cast<size_t>(i)] = i % 2 ? 1e3f : -1e3f;  // codes +-127
      std::vector<uint8_t> xq(size_t(cols / 32 * 34 * nt));
      for (int t = 0; t < nt; ++t)
        a.quantize[static_cast<int>(detail::ActType::Q8_0)](xf.data() + t * cols, xq.data() + t * cols / 32 * 34, cols);
      std::vector<float> ya(size_t(rows * nt)), yv(size_t(rows * nt));
      a.gemm[slot].fn[nt](cols, w.data(), int64_t(stride), xq.data(), cols / 32 * 34, ya.data(), rows);
      v.gemm[slot].fn[nt](cols, w.data(), int64_t(stride), xq.data(), cols / 32 * 34, yv.data(), rows);
      INFO(fmt::format("avx-vnni vs avx2 q8_0 tile, seed {} tokens {}", seed, nt));
      CHECK(bitwise_equal(ya, yv));
    }
  }
}

namespace {

// Whether two levels' tables hold the same kernels in every slot but `skip`.
bool same_kernels_except(const detail::QuantKernels& a, const detail::QuantKernels& b, int skip) {
  for (int i = 0; i < static_cast<int>(detail::ActType::Count); ++i)
    if (a.quantize[i] != b.quantize[i]) return false;
  for (int s = 0; s < detail::kTypeSlots; ++s) {
    if (s == skip) continue;
    const auto &ga = a.gemm[s], &gb = b.gemm[s];
    const auto &pa = a.x8[s], &pb = b.x8[s];
    if (a.dot[s] != b.dot[s] || ga.rows != gb.rows || ga.toks != gb.toks || ga.widened_x != gb.widened_x ||
        ga.one_token != gb.one_token || pa.toks != pb.toks || pa.fn4_each_token != pb.fn4_each_token)
      return false;
    for (int k = 0; k <= detail::kMaxGemmToks; ++k)
      if (ga.fn[k] != gb.fn[k] || pa.fn[k] != pb.fn[k] || pa.fn16[k] != pb.fn16[k]) return false;
  }
  return true;
}

}  // namespace

// tests/e2e/isa_sweep.sh does not sweep avx512vnni where the machine's
// level is avx512bf16, because the two tables differ in the bf16 slot
// alone. A kernel added to one level only fails this, and the sweep must
// then run everything under both.
TEST_CASE("matmul: the AVX512-BF16 level differs from AVX-512 VNNI in the bf16 kernels alone", "[matmul][isa]") {
  if (!isa_supported(Isa::Avx512Bf16)) {
    WARN("SKIPPED: no AVX512-BF16 here; the sweep runs every test under each level this machine has");
    return;
  }
  const auto& vnni = detail::quant_kernels(Isa::Avx512Vnni);
  const auto& bf16 = detail::quant_kernels(Isa::Avx512Bf16);
  const int slot = static_cast<int>(GgmlType::BF16);
  CHECK(vnni.dot[slot] != bf16.dot[slot]);
  CHECK(same_kernels_except(vnni, bf16, slot));
  CHECK_FALSE(same_kernels_except(vnni, detail::quant_kernels(Isa::Avx2), slot));  // the comparison sees a change
}

// Activations of `cols` values for each of n_tokens rows, converted by `k`
// to the activation type of `t`; the row stride in bytes goes to x_row.
std::vector<uint8_t> quantized_activations(const detail::QuantKernels& k, GgmlType t, int64_t cols, int64_t n_tokens,
                                           uint32_t seed, int64_t& x_row) {
  const GgmlType at = matmul_activation_type(t);
  const auto& tr = ggml_traits(at);
  x_row = cols / tr.block_size * tr.block_bytes;
  const auto xf = random_floats(static_cast<size_t>(cols * n_tokens), seed, -2.0f, 2.0f);
  std::vector<uint8_t> xq(static_cast<size_t>(x_row * n_tokens));
  for (int64_t i = 0; i < n_tokens; ++i) k.quantize[act_slot(at)](xf.data() + i * cols, xq.data() + i * x_row, cols);
  return xq;
}

TEST_CASE("matmul: register-blocked tiles are bit-identical to the dot kernels", "[matmul][isa][gemm]") {
  if (simd_isas().empty()) {
    WARN("SKIPPED: AVX2 is not available here; the SIMD tiles were not tested");
    return;
  }
  for (Isa isa : simd_isas()) {
  INFO(isa_name(isa));
  const auto& k = detail::quant_kernels(isa);
  int tested = 0;
  for (GgmlType t : kNativeTypes) {
    const int slot = static_cast<int>(t);
    const detail::GemmKernels& g = k.gemm[slot];
    if (g.rows == 0 || batch_differs_by_design(isa, t)) continue;
    const int64_t block = ggml_traits(t).block_size;
    // One block, an odd number of blocks, and (16-bit types) vector tails.
    std::vector<int64_t> col_counts = {block, 3 * block, 1024};
    if (block == 1) col_counts.insert(col_counts.end(), {37, 72, 100});
    for (int64_t cols : col_counts) {
      for (int nt = 1; nt <= g.toks; ++nt) {
        const auto w = random_weights(t, g.rows, cols, 60 + static_cast<uint32_t>(cols));
        const int64_t w_row = static_cast<int64_t>(w.size()) / g.rows;
        int64_t x_row = 0;
        const auto xq = quantized_activations(k, t, cols, nt, 61 + static_cast<uint32_t>(nt), x_row);
        // Tiles with widened_x read the converted activations as f32.
        std::vector<float> xw;
        if (g.widened_x) {
          xw.resize(static_cast<size_t>(cols * nt));
          for (int tok = 0; tok < nt; ++tok)
            dequantize_row(matmul_activation_type(t), xq.data() + tok * x_row, xw.data() + tok * cols, cols);
        }
        const int64_t y_stride = g.rows + 3;  // a y row wider than the tile: the gaps stay untouched
        Guarded y(static_cast<size_t>(y_stride * nt));
        if (g.widened_x) g.fn[nt](cols, w.data(), w_row, xw.data(), cols * 4, y.data(), y_stride);
        else g.fn[nt](cols, w.data(), w_row, xq.data(), x_row, y.data(), y_stride);
        REQUIRE(y.intact());
        const auto got = y.values();
        std::vector<float> want(got.size(), -12345.0f), have(got.size(), -12345.0f);
        for (int tok = 0; tok < nt; ++tok)
          for (int r = 0; r < g.rows; ++r) {
            const size_t i = static_cast<size_t>(tok * y_stride + r);
            want[i] = k.dot[slot](cols, w.data() + r * w_row, xq.data() + tok * x_row);
            have[i] = got[i];
          }
        INFO(fmt::format("{} tile {}x{} cols {}", ggml_type_name(t), g.rows, nt, cols));
        CHECK(bitwise_equal(have, want));
        CHECK(bitwise_equal(got, have));  // nothing written outside the tile's outputs
        ++tested;
      }
    }
  }
  CHECK(tested >= 8 * 3);  // q8_0, q4_0, q5_0, iq4_nl, q4_K, q6_K, f16, bf16 at least
  }
}

TEST_CASE("matmul: a batch of 1 to 17 tokens gives each token the bits of a one-token matmul",
          "[matmul][gemm][threads]") {
  // Batches go through the tiles; single tokens through dot. Rows not
  // a multiple of any tile, K tails of odd block counts, 1 to 4 threads.
  const GgmlType types[] = {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::IQ4_NL, GgmlType::Q4_K,
                            GgmlType::Q6_K, GgmlType::F16,  GgmlType::BF16, GgmlType::Q5_K, GgmlType::MXFP4};
  for (Isa isa : available_isas()) {
    IsaScope scope(isa);
    for (int threads = 1; threads <= 4; ++threads) {
      ThreadPool pool(threads);
      for (GgmlType t : types) {
        if (batch_differs_by_design(isa, t)) continue;
        const int64_t block = ggml_traits(t).block_size == 1 ? 32 : ggml_traits(t).block_size;
        const int64_t rows = 37, cols = 3 * block;
        const auto w = random_weights(t, rows, cols, 70 + static_cast<uint32_t>(threads));
        for (int64_t n_tokens : {2, 3, 5, 8, 17}) {
          const Shape s{rows, cols, n_tokens};
          const auto x = random_floats(static_cast<size_t>(cols * n_tokens), 71 + static_cast<uint32_t>(n_tokens));
          const auto batch = run_matmul(t, w, s, x, pool);
          std::vector<float> one_by_one;
          for (int64_t tok = 0; tok < n_tokens; ++tok) {
            const std::vector<float> xt(x.begin() + tok * cols, x.begin() + (tok + 1) * cols);
            const auto yt = run_matmul(t, w, Shape{rows, cols, 1}, xt, pool);
            one_by_one.insert(one_by_one.end(), yt.begin(), yt.end());
          }
          INFO(fmt::format("{} isa {} threads {} tokens {}", ggml_type_name(t), isa_name(isa), threads, n_tokens));
          CHECK(bitwise_equal(batch, one_by_one));
        }
      }
    }
  }
}

TEST_CASE("matmul: activation quantizers are bit-identical across ISAs", "[matmul][isa]") {
  if (simd_isas().empty()) {
    WARN("SKIPPED: AVX2 is not available here");
    return;
  }
  for (Isa isa : simd_isas()) {
  INFO(isa_name(isa));
  const auto& sk = detail::scalar_quant_kernels();
  const auto& vk = detail::quant_kernels(isa);
  const int64_t n = 1024;
  auto x = random_floats(static_cast<size_t>(n), 21, -3.0f, 3.0f);
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(64 + i)] = 0.0f;                // an all-zero block
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(128 + i)] = (i - 16) * 0.5f;  // ties at .5
  for (int a = 0; a < static_cast<int>(detail::ActType::Count); ++a) {
    const size_t bytes = static_cast<size_t>(n) * 8;
    std::vector<uint8_t> ys(bytes, 0), yv(bytes, 0);
    sk.quantize[a](x.data(), ys.data(), n);
    vk.quantize[a](x.data(), yv.data(), n);
    INFO("activation type " << a);
    CHECK(std::memcmp(ys.data(), yv.data(), bytes) == 0);
  }
  // q8_K super-blocks that stress the vector quantizer: the largest |x| as
  // both -a and +a (the first one's sign decides), ties at .5 after
  // scaling (max 127: iscale -1), a NaN, huge and subnormal values, zeros.
  const int64_t nk = 256 * 7;
  auto xk = random_floats(static_cast<size_t>(nk), 22, -3.0f, 3.0f);
  auto block = [&](int b) { return xk.data() + 256 * b; };
  std::fill(block(1), block(2), 0.0f);
  block(2)[10] = -5.0f, block(2)[200] = 5.0f;
  block(3)[7] = 5.0f, block(3)[9] = -5.0f;
  for (int i = 0; i < 256; ++i) block(4)[i] = static_cast<float>(i % 255 - 127) + (i % 2 ? 0.5f : 0.0f);
  block(4)[0] = 127.0f;
  block(5)[17] = std::numeric_limits<float>::quiet_NaN();
  for (int i = 0; i < 256; ++i) block(6)[i] = (i % 3 ? 1e30f : 1e-40f) * (i % 2 ? -1.0f : 1.0f);
  const int q8k = static_cast<int>(detail::ActType::Q8_K);
  std::vector<detail::BlockQ8_K> ks(7), kv(7);
  sk.quantize[q8k](xk.data(), ks.data(), nk);
  vk.quantize[q8k](xk.data(), kv.data(), nk);
  for (int b = 0; b < 7; ++b) {
    INFO("q8_K super-block " << b);
    CHECK(std::memcmp(&ks[size_t(b)], &kv[size_t(b)], sizeof(detail::BlockQ8_K)) == 0);
  }
  CHECK(ks[2].d > 0.0f);  // max is -5: iscale = 127/5 > 0, d = 5/127
  CHECK(ks[3].d < 0.0f);
  }
}

TEST_CASE("matmul: q8_0 activation quantization follows ggml", "[matmul]") {
  // amax = 2 -> d = 2/127, q = round-half-even(x * 127/2).
  std::vector<float> x(32, 0.0f);
  x[0] = 2.0f;
  x[1] = -2.0f;
  x[2] = 1.0f;                  // 63.5 -> 64 (even)
  x[3] = 3.0f / 127.0f;          // 1.5 -> 2
  x[4] = 5.0f / 127.0f;          // 2.5 -> 2
  for (Isa isa : available_isas()) {
    IsaScope scope(isa);
    const auto& k = detail::active_quant_kernels();
    detail::BlockQ8_0 b{};
    k.quantize[static_cast<int>(detail::ActType::Q8_0)](x.data(), &b, 32);
    INFO(isa_name(isa));
    CHECK(b.d == fp32_to_fp16(2.0f / 127.f));
    CHECK(b.qs[0] == 127);
    CHECK(b.qs[1] == -127);
    CHECK(b.qs[2] == 64);
    CHECK(b.qs[3] == 2);
    CHECK(b.qs[4] == 2);
    CHECK(b.qs[5] == 0);
  }
}

TEST_CASE("matmul: rejects bad input", "[matmul]") {
  ThreadPool pool(1);
  std::vector<uint8_t> w(4096);
  std::vector<float> x(512), y(16);
  CHECK_THROWS_AS(matmul(GgmlType::Q4_K, w.data(), 1, 128, x.data(), 1, y.data(), pool), Error);  // partial block
  CHECK_THROWS_AS(matmul(GgmlType::IQ2_XXS, w.data(), 1, 256, x.data(), 1, y.data(), pool), Error);
  CHECK_THROWS_AS(matmul(static_cast<GgmlType>(4), w.data(), 1, 32, x.data(), 1, y.data(), pool), Error);
  CHECK_NOTHROW(matmul(GgmlType::Q4_0, w.data(), 0, 32, x.data(), 1, y.data(), pool));
  CHECK(matmul_activation_type(GgmlType::Q4_1) == GgmlType::Q8_1);
  CHECK(matmul_activation_type(GgmlType::IQ4_NL) == GgmlType::Q8_0);
  CHECK(matmul_activation_type(GgmlType::IQ4_XS) == GgmlType::Q8_K);
  CHECK(matmul_activation_type(GgmlType::BF16) == GgmlType::BF16);
}

TEST_CASE("embed_rows: selected rows, bounds checked", "[embed]") {
  const GgmlType types[] = {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K};
  const int64_t n_rows = 11, cols = 512;
  for (GgmlType t : types) {
    const auto table = random_weights(t, n_rows, cols, 77);
    const auto all = dequant_all(t, table, n_rows, cols);
    const std::vector<int32_t> ids = {3, 0, 10, 3};
    Guarded out(ids.size() * cols);
    embed_rows(t, table.data(), n_rows, cols, ids.data(), static_cast<int64_t>(ids.size()), out.data());
    REQUIRE(out.intact());
    const auto got = out.values();
    INFO(ggml_type_name(t));
    for (size_t i = 0; i < ids.size(); ++i)
      CHECK(std::memcmp(got.data() + i * cols, all.data() + ids[i] * cols, cols * sizeof(float)) == 0);
    const std::vector<int32_t> bad = {1, 11};
    const std::vector<int32_t> neg = {-1};
    CHECK_THROWS_AS(embed_rows(t, table.data(), n_rows, cols, bad.data(), 2, out.data()), Error);
    CHECK_THROWS_AS(embed_rows(t, table.data(), n_rows, cols, neg.data(), 1, out.data()), Error);
  }
}

TEST_CASE("matmul_shared_input: the bits of separate matmuls, shared or not", "[matmul][gemm]") {
  // Q4_K and Q6_K share q8_K activations (one conversion, one parallel_for);
  // Q8_0 with Q4_K does not (they run one after the other); F32 and F16 too.
  const std::vector<std::vector<GgmlType>> groups = {
      {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q4_K}, {GgmlType::Q8_0, GgmlType::Q4_K}, {GgmlType::F16, GgmlType::F32}};
  const int64_t cols = 512;
  const int64_t rows[] = {48, 37, 16};
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (const auto& types : groups) {
      for (int64_t n_tokens : {1, 2, 9}) {
        const auto x = random_floats(static_cast<size_t>(cols * n_tokens), 80 + static_cast<uint32_t>(n_tokens));
        std::vector<std::vector<uint8_t>> ws;
        std::vector<Guarded> ys;
        std::vector<MatmulOutput> outs;
        for (size_t i = 0; i < types.size(); ++i) ws.push_back(random_weights(types[i], rows[i], cols, 81 + uint32_t(i)));
        for (size_t i = 0; i < types.size(); ++i) ys.emplace_back(static_cast<size_t>(rows[i] * n_tokens));
        for (size_t i = 0; i < types.size(); ++i) outs.push_back({types[i], ws[i].data(), rows[i], ys[i].data()});
        matmul_shared_input(outs.data(), outs.size(), cols, x.data(), n_tokens, pool);
        for (size_t i = 0; i < types.size(); ++i) {
          REQUIRE(ys[i].intact());
          const auto alone = run_matmul(types[i], ws[i], Shape{rows[i], cols, n_tokens}, x, pool);
          INFO(fmt::format("output {} ({}) of {}, tokens {}, threads {}", i, ggml_type_name(types[i]), types.size(),
                           n_tokens, threads));
          CHECK(bitwise_equal(ys[i].values(), alone));
        }
      }
    }
  }
}
