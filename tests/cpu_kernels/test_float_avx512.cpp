// AVX-512 F16 and AVX512-BF16 BF16 matmul kernels (gemm_float_avx512.cpp,
// gemm_bf16_avx512.cpp).
//
// F16: the AVX-512 dot and tiles must give the AVX2 table's bits.
// BF16: the AVX512-BF16 tiles must give llama.cpp's prompt path (llamafile's
// tinyBLAS over vdpbf16ps) and the dot its one-token path
// (ggml_vec_dot_bf16), each emulated here in scalar code from the
// instruction's definition (Intel SDM: two FMAs per lane, odd pair first,
// denormal inputs as zero, denormal results flushed), and both close to a
// double reference.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "frontends/gguf/dequant.h"
#include "kernel_test_util.h"
#include "runtime/cpu/kernels/internal.h"
#include "runtime/cpu/kernels/kernels.h"

using namespace vtc;
using namespace vtc::cpu;
using namespace vtc::cpu::test;

namespace {

constexpr int kF16 = static_cast<int>(GgmlType::F16);
constexpr int kBF16 = static_cast<int>(GgmlType::BF16);

// Column counts: below one 8/32/64-value step, at and around each, long rows
// with every kind of tail.
const int64_t kCols[] = {1, 5, 8, 15, 16, 31, 32, 33, 40, 63, 64, 65, 72, 96, 100, 127, 1024, 1280, 1283, 1304};

std::vector<uint16_t> to_16bit(GgmlType t, const std::vector<float>& f) {
  std::vector<uint16_t> h(f.size());
  for (size_t i = 0; i < f.size(); ++i) h[i] = t == GgmlType::F16 ? fp32_to_fp16(f[i]) : fp32_to_bf16(f[i]);
  return h;
}

// Weights with a spread of magnitudes (and, for bf16, some denormals and
// values whose products underflow, where vdpbf16ps flushes).
std::vector<uint16_t> weights_16bit(GgmlType t, int64_t rows, int64_t cols, uint32_t seed) {
  auto f = random_floats(static_cast<size_t>(rows * cols), seed, -2.0f, 2.0f);
  for (size_t i = 0; i < f.size(); i += 37) f[i] *= 1e-3f;
  if (t == GgmlType::BF16)
    for (size_t i = 5; i < f.size(); i += 101) f[i] *= (i % 2 ? 1e-38f : 1e-20f);
  return to_16bit(t, f);
}

std::vector<float> activations_f32(int64_t cols, int64_t n_tokens, uint32_t seed, bool tiny) {
  auto x = random_floats(static_cast<size_t>(cols * n_tokens), seed, -3.0f, 3.0f);
  if (tiny)
    for (size_t i = 3; i < x.size(); i += 53) x[i] *= (i % 2 ? 1e-39f : 1e-19f);
  return x;
}

// ----- scalar emulation of the reference's BF16 sums -------------------------

float bf(uint16_t h) { return bf16_to_fp32(h); }
float flush(float f) { return std::fpclassify(f) == FP_SUBNORMAL ? std::copysign(0.0f, f) : f; }

// One 32-bit lane of vdpbf16ps: c += a[1]*b[1], then c += a[0]*b[0], each
// one FMA, denormals in as zero and out flushed.
float dpbf16_lane(float c, const uint16_t* a, const uint16_t* b) {
  c = flush(std::fma(flush(bf(a[1])), flush(bf(b[1])), flush(c)));
  return flush(std::fma(flush(bf(a[0])), flush(bf(b[0])), c));
}
void dpbf16(float (&c)[16], const uint16_t* a, const uint16_t* b) {
  for (int j = 0; j < 16; ++j) c[j] = dpbf16_lane(c[j], a + 2 * j, b + 2 * j);
}
// _mm512_reduce_add_ps: 16 -> 8 -> 4, then (0 + 2) + (1 + 3).
float reduce_add(const float (&c)[16]) {
  float s8[8], s4[4];
  for (int i = 0; i < 8; ++i) s8[i] = c[i] + c[i + 8];
  for (int i = 0; i < 4; ++i) s4[i] = s8[i] + s8[i + 4];
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}
// llamafile's tinyBLAS<32, __m512, __m512bh>: one accumulator per output.
float tinyblas_bf16(int64_t n, const uint16_t* w, const uint16_t* x) {
  float c[16] = {};
  for (int64_t l = 0; l < n; l += 32) dpbf16(c, w + l, x + l);
  return reduce_add(c);
}
// ggml_vec_dot_bf16, __AVX512BF16__ build.
float vec_dot_bf16(int64_t n, const uint16_t* w, const uint16_t* x) {
  float c1[16] = {}, c2[16] = {};
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    dpbf16(c1, w + i, x + i);
    dpbf16(c2, w + i + 32, x + i + 32);
  }
  double sum = 0.0;
  sum += static_cast<double>(reduce_add(c1));
  sum += static_cast<double>(reduce_add(c2));
  for (; i < n; ++i) sum += static_cast<double>(bf(w[i]) * bf(x[i]));
  return static_cast<float>(sum);
}
// The reference's order for (row, token) as matmul picks it: tinyBLAS for
// two or more tokens when k % 32 == 0, else vec_dot, as llama.cpp's mul_mat;
// except that for rows % 4 != 0, where the reference takes vec_dot for all
// rows, matmul takes it for the last rows % 4 only.
float expected_bf16(int64_t n_tokens, int64_t rows, int64_t cols, int64_t r, const uint16_t* w, const uint16_t* x) {
  const bool sgemm = n_tokens >= 2 && cols % 32 == 0 && r < rows - rows % 4;
  return sgemm ? tinyblas_bf16(cols, w, x) : vec_dot_bf16(cols, w, x);
}

std::vector<float> run_matmul(GgmlType t, const std::vector<uint16_t>& w, int64_t rows, int64_t cols,
                              const std::vector<float>& x, int64_t n_tokens, ThreadPool& pool) {
  Guarded y(static_cast<size_t>(rows * n_tokens));
  matmul(t, w.data(), rows, cols, x.data(), n_tokens, y.data(), pool);
  REQUIRE(y.intact());
  return y.values();
}

bool has_avx512_f16() { return isa_supported(Isa::Avx512Vnni) && isa_supported(Isa::Avx2); }

}  // namespace

TEST_CASE("avx512 f16: dot and tiles give the AVX2 table's bits", "[matmul][isa][gemm][avx512]") {
  if (!has_avx512_f16()) {
    WARN("SKIPPED: no AVX-512 (F/BW/VL/DQ/VNNI) here; the AVX-512 F16 kernels were not tested");
    return;
  }
  const auto& a2 = detail::quant_kernels(Isa::Avx2);
  for (Isa isa : {Isa::Avx512Vnni, Isa::Avx512Bf16}) {
    if (!isa_supported(isa)) continue;
    const auto& k = detail::quant_kernels(isa);
    const detail::GemmKernels& g = k.gemm[kF16];
    REQUIRE(k.dot[kF16] != a2.dot[kF16]);  // the level really has its own kernels
    REQUIRE(g.fn[1] != a2.gemm[kF16].fn[1]);
    REQUIRE(g.widened_x);
    REQUIRE(g.rows >= 1);
    REQUIRE(g.toks >= 1);
    for (int64_t cols : kCols) {
      const auto w = weights_16bit(GgmlType::F16, g.rows, cols, 10 + static_cast<uint32_t>(cols));
      for (int nt = 1; nt <= g.toks; ++nt) {
        const auto xf = activations_f32(cols, nt, 20 + static_cast<uint32_t>(nt), false);
        std::vector<uint16_t> xh(xf.size());
        std::vector<float> xw(xf.size());
        for (int t = 0; t < nt; ++t) {
          a2.quantize[static_cast<int>(detail::ActType::F16)](xf.data() + t * cols, xh.data() + t * cols, cols);
          dequantize_row(GgmlType::F16, xh.data() + t * cols, xw.data() + t * cols, cols);
        }
        const int64_t y_stride = g.rows + 5;
        Guarded y(static_cast<size_t>(y_stride * nt));
        g.fn[nt](cols, w.data(), cols * 2, xw.data(), cols * 4, y.data(), y_stride);
        REQUIRE(y.intact());
        const auto got = y.values();
        std::vector<float> want(got.size(), -12345.0f), dot(got.size(), -12345.0f);
        for (int t = 0; t < nt; ++t)
          for (int r = 0; r < g.rows; ++r) {
            const size_t i = static_cast<size_t>(t * y_stride + r);
            want[i] = a2.dot[kF16](cols, w.data() + r * cols, xh.data() + t * cols);
            dot[i] = k.dot[kF16](cols, w.data() + r * cols, xh.data() + t * cols);
          }
        INFO(fmt::format("{} f16 tile {}x{} cols {}", isa_name(isa), g.rows, nt, cols));
        CHECK(bitwise_equal(got, want));  // the gaps between tile rows stay untouched too
        CHECK(bitwise_equal(dot, want));
      }
    }
  }
}

TEST_CASE("avx512 f16: matmul of 1 to 33 tokens gives the AVX2 level's bits on 1 to 4 threads",
          "[matmul][isa][gemm][avx512][threads]") {
  if (!has_avx512_f16()) {
    WARN("SKIPPED: no AVX-512 (F/BW/VL/DQ/VNNI) here; the AVX-512 F16 matmul was not tested");
    return;
  }
  const int64_t rows = 37;
  for (int64_t cols : {int64_t{1283}, int64_t{96}}) {
    const auto w = weights_16bit(GgmlType::F16, rows, cols, 30 + static_cast<uint32_t>(cols));
    for (int64_t n_tokens = 1; n_tokens <= 33; n_tokens += (n_tokens < 9 ? 1 : 8)) {
      const auto x = activations_f32(cols, n_tokens, 31 + static_cast<uint32_t>(n_tokens), false);
      ThreadPool p1(1);
      std::vector<float> want;
      {
        IsaScope scope(Isa::Avx2);
        want = run_matmul(GgmlType::F16, w, rows, cols, x, n_tokens, p1);
      }
      for (Isa isa : {Isa::Avx512Vnni, Isa::Avx512Bf16}) {
        if (!isa_supported(isa)) continue;
        IsaScope scope(isa);
        for (int threads = 1; threads <= 4; ++threads) {
          ThreadPool pool(threads);
          INFO(fmt::format("{} cols {} tokens {} threads {}", isa_name(isa), cols, n_tokens, threads));
          CHECK(bitwise_equal(run_matmul(GgmlType::F16, w, rows, cols, x, n_tokens, pool), want));
        }
      }
    }
  }
}

TEST_CASE("avx512bf16 bf16: the dot follows ggml_vec_dot_bf16 and the tiles tinyBLAS bit for bit",
          "[matmul][isa][gemm][avx512]") {
  if (!isa_supported(Isa::Avx512Bf16)) {
    WARN("SKIPPED: no AVX512-BF16 here; the BF16 dpbf16 kernels were not tested");
    return;
  }
  const auto& k = detail::quant_kernels(Isa::Avx512Bf16);
  const auto& below = detail::quant_kernels(Isa::Avx512Vnni);
  const detail::GemmKernels& g = k.gemm[kBF16];
  REQUIRE(k.dot[kBF16] != below.dot[kBF16]);
  REQUIRE(g.fn[1] != below.gemm[kBF16].fn[1]);
  REQUIRE(!g.widened_x);  // one token takes the dot, as the reference's vec_dot
  REQUIRE(g.rows >= 1);
  REQUIRE(g.toks >= 2);
  const auto quantize = k.quantize[static_cast<int>(detail::ActType::BF16)];
  for (int64_t cols : kCols) {
    const auto w = weights_16bit(GgmlType::BF16, g.rows, cols, 40 + static_cast<uint32_t>(cols));
    for (int nt = 1; nt <= g.toks; ++nt) {
      const auto xf = activations_f32(cols, nt, 50 + static_cast<uint32_t>(nt), true);
      std::vector<uint16_t> xh(xf.size());
      for (int t = 0; t < nt; ++t) quantize(xf.data() + t * cols, xh.data() + t * cols, cols);
      const int64_t y_stride = g.rows + 5;
      Guarded y(static_cast<size_t>(y_stride * nt));
      g.fn[nt](cols, w.data(), cols * 2, xh.data(), cols * 2, y.data(), y_stride);
      REQUIRE(y.intact());
      const auto got = y.values();
      std::vector<float> want(got.size(), -12345.0f), dot(got.size(), -12345.0f), want_dot(got.size(), -12345.0f);
      for (int t = 0; t < nt; ++t)
        for (int r = 0; r < g.rows; ++r) {
          const size_t i = static_cast<size_t>(t * y_stride + r);
          const uint16_t* wr = w.data() + r * cols;
          const uint16_t* xt = xh.data() + t * cols;
          // A tile serves a batch of 2+ tokens: tinyBLAS when cols % 32 == 0.
          want[i] = cols % 32 == 0 ? tinyblas_bf16(cols, wr, xt) : vec_dot_bf16(cols, wr, xt);
          dot[i] = k.dot[kBF16](cols, wr, xt);
          want_dot[i] = vec_dot_bf16(cols, wr, xt);
        }
      INFO(fmt::format("bf16 tile {}x{} cols {}", g.rows, nt, cols));
      CHECK(bitwise_equal(got, want));
      CHECK(bitwise_equal(dot, want_dot));
    }
  }
}

TEST_CASE("avx512bf16 bf16: matmul of 1 to 33 tokens gives the reference's bits on 1 to 4 threads",
          "[matmul][isa][gemm][avx512][threads]") {
  if (!isa_supported(Isa::Avx512Bf16)) {
    WARN("SKIPPED: no AVX512-BF16 here; the BF16 dpbf16 matmul was not tested");
    return;
  }
  IsaScope scope(Isa::Avx512Bf16);
  const auto quantize = detail::quant_kernels(Isa::Avx512Bf16).quantize[static_cast<int>(detail::ActType::BF16)];
  struct Shape {
    int64_t rows, cols;
  };
  // Rows a multiple of 4 and not (expected_bf16), cols with and without
  // tinyBLAS's k % 32 == 0.
  for (const Shape s : {Shape{40, 1280}, Shape{37, 96}, Shape{21, 1283}, Shape{8, 33}}) {
    const auto w = weights_16bit(GgmlType::BF16, s.rows, s.cols, 60 + static_cast<uint32_t>(s.cols));
    const auto wf = dequant_all(GgmlType::BF16, std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(w.data()),
                                reinterpret_cast<const uint8_t*>(w.data() + w.size())), s.rows, s.cols);
    for (int64_t n_tokens = 1; n_tokens <= 33; n_tokens += (n_tokens < 9 ? 1 : 8)) {
      const auto x = activations_f32(s.cols, n_tokens, 61 + static_cast<uint32_t>(n_tokens), n_tokens % 2 == 1);
      std::vector<uint16_t> xh(x.size());
      for (int64_t t = 0; t < n_tokens; ++t) quantize(x.data() + t * s.cols, xh.data() + t * s.cols, s.cols);
      std::vector<float> want(static_cast<size_t>(s.rows * n_tokens));
      for (int64_t t = 0; t < n_tokens; ++t)
        for (int64_t r = 0; r < s.rows; ++r)
          want[static_cast<size_t>(t * s.rows + r)] =
              expected_bf16(n_tokens, s.rows, s.cols, r, w.data() + r * s.cols, xh.data() + t * s.cols);
      // And close to the exact sum of the bf16 values.
      std::vector<float> xs(x.size());
      for (size_t i = 0; i < x.size(); ++i) xs[i] = bf(xh[i]);
      const auto exact = reference(wf, xs, s.rows, s.cols, n_tokens);
      for (int threads = 1; threads <= 4; ++threads) {
        ThreadPool pool(threads);
        const auto got = run_matmul(GgmlType::BF16, w, s.rows, s.cols, x, n_tokens, pool);
        INFO(fmt::format("{}x{} tokens {} threads {}", s.rows, s.cols, n_tokens, threads));
        CHECK(bitwise_equal(got, want));
        CHECK(nmse(got, exact) < 1e-10);
      }
    }
  }
}
