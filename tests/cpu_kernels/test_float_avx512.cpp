// AVX-512 F16 and BF16 matmul kernels (gemm_float_avx512.cpp: F16, and BF16
// without AVX512-BF16; gemm_bf16_avx512.cpp: BF16 with it).
//
// Both follow llama.cpp's two paths on its AVX-512 build: the tiles (2 or
// more tokens) llamafile's tinyBLAS, the dot (one token) ggml_vec_dot_f16 /
// ggml_vec_dot_bf16 (on the AVX-512F build without AVX512-BF16: bf16 widened
// to f32 and FMAs over 16-lane vectors). Each order is emulated here in
// scalar code from its definition: FMAs on f32 lanes, _mm512_reduce_add_ps's pairing, double
// leftovers; for bf16 vdpbf16ps as the Intel SDM defines it (two FMAs per
// lane, odd pair first, denormal inputs as zero, denormal results flushed).
// The kernels must give those bits exactly, and be close to a double
// reference. F16, and BF16 at AVX-512 VNNI, keep the AVX2 kernels where
// reference_lanes() is 8 (checked by the VTC_CPU_REF_LANES=8 run of these
// cases, CMakeLists.txt).
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

// Column counts: below one 16/32/64-value step, at and around each, long
// rows with every kind of tail.
const int64_t kCols[] = {1, 5, 8, 15, 16, 31, 32, 33, 40, 48, 63, 64, 65, 72, 96, 100, 127, 1024, 1280, 1283, 1304};

// Weights with a spread of magnitudes (and, for bf16, some denormals and
// values whose products underflow, where vdpbf16ps flushes).
std::vector<uint16_t> weights_16bit(GgmlType t, int64_t rows, int64_t cols, uint32_t seed) {
  auto f = random_floats(static_cast<size_t>(rows * cols), seed, -2.0f, 2.0f);
  for (size_t i = 0; i < f.size(); i += 37) f[i] *= 1e-3f;
  if (t == GgmlType::BF16)
    for (size_t i = 5; i < f.size(); i += 101) f[i] *= (i % 2 ? 1e-38f : 1e-20f);
  std::vector<uint16_t> h(f.size());
  for (size_t i = 0; i < f.size(); ++i) h[i] = t == GgmlType::F16 ? fp32_to_fp16(f[i]) : fp32_to_bf16(f[i]);
  return h;
}

std::vector<float> activations_f32(GgmlType t, int64_t cols, int64_t n_tokens, uint32_t seed, bool tiny) {
  auto x = random_floats(static_cast<size_t>(cols * n_tokens), seed, -3.0f, 3.0f);
  if (tiny)  // f16: below its normal range; bf16: denormal
    for (size_t i = 3; i < x.size(); i += 53) x[i] *= t == GgmlType::F16 ? 1e-6f : (i % 2 ? 1e-39f : 1e-19f);
  return x;
}

// ----- scalar emulation of the reference's sums ------------------------------

// The reference's three 16-bit orders on AVX-512: f16 widened to f32, bf16
// widened to f32 (its build without AVX512-BF16), bf16 through vdpbf16ps.
enum class Sum { F16, Bf16Wide, Bf16Dp };

Sum sum_of(GgmlType t, Isa isa) {
  if (t == GgmlType::F16) return Sum::F16;
  return isa >= Isa::Avx512Bf16 ? Sum::Bf16Dp : Sum::Bf16Wide;
}

float widen(GgmlType t, uint16_t h) { return t == GgmlType::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h); }
float widen(Sum s, uint16_t h) { return widen(s == Sum::F16 ? GgmlType::F16 : GgmlType::BF16, h); }
float flush(float f) { return std::fpclassify(f) == FP_SUBNORMAL ? std::copysign(0.0f, f) : f; }

// One 32-bit lane of vdpbf16ps: c += a[1]*b[1], then c += a[0]*b[0], each
// one FMA, denormals in as zero and out flushed.
float dpbf16_lane(float c, const uint16_t* a, const uint16_t* b) {
  c = flush(std::fma(flush(bf16_to_fp32(a[1])), flush(bf16_to_fp32(b[1])), flush(c)));
  return flush(std::fma(flush(bf16_to_fp32(a[0])), flush(bf16_to_fp32(b[0])), c));
}
// One step of a 16-lane accumulator over the values at w, x: 16 widened
// values (one FMA per lane) or 32 bf16 values (vdpbf16ps).
void step(Sum s, float (&c)[16], const uint16_t* w, const uint16_t* x) {
  for (int j = 0; j < 16; ++j)
    c[j] = s == Sum::Bf16Dp ? dpbf16_lane(c[j], w + 2 * j, x + 2 * j) : std::fma(widen(s, w[j]), widen(s, x[j]), c[j]);
}
int step_values(Sum s) { return s == Sum::Bf16Dp ? 32 : 16; }

// _mm512_reduce_add_ps: 16 -> 8 -> 4, then (0 + 2) + (1 + 3).
float reduce_add(const float (&c)[16]) {
  float s8[8], s4[4];
  for (int i = 0; i < 8; ++i) s8[i] = c[i] + c[i + 8];
  for (int i = 0; i < 4; ++i) s4[i] = s8[i] + s8[i + 4];
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

// llamafile's tinyBLAS: one 16-lane accumulator per output.
float tinyblas(Sum s, int64_t n, const uint16_t* w, const uint16_t* x) {
  float c[16] = {};
  for (int64_t l = 0; l < n; l += step_values(s)) step(s, c, w + l, x + l);
  return reduce_add(c);
}

// ggml_vec_dot_f16 (4 accumulators over 64 values, (0 + 2) + (1 + 3)) and
// ggml_vec_dot_bf16 (2 accumulators, over 64 values with vdpbf16ps, over 32
// without; reduced one by one and summed in double); leftovers in double.
float vec_dot(Sum s, int64_t n, const uint16_t* w, const uint16_t* x) {
  const int64_t chunk = s == Sum::Bf16Wide ? 32 : 64;
  const int accs = static_cast<int>(chunk / step_values(s));
  float c[4][16] = {};
  int64_t i = 0;
  for (; i + chunk <= n; i += chunk)
    for (int a = 0; a < accs; ++a) step(s, c[a], w + i + a * step_values(s), x + i + a * step_values(s));
  double sum = 0.0;
  if (s == Sum::F16) {
    float r[16];
    for (int j = 0; j < 16; ++j) r[j] = (c[0][j] + c[2][j]) + (c[1][j] + c[3][j]);
    sum = reduce_add(r);
  } else {
    sum += static_cast<double>(reduce_add(c[0]));
    sum += static_cast<double>(reduce_add(c[1]));
  }
  for (; i < n; ++i) sum += static_cast<double>(widen(s, w[i]) * widen(s, x[i]));
  return static_cast<float>(sum);
}

// The reference's order for one output of a tile (a batch of 2+ tokens):
// tinyBLAS when k is a multiple of its step, else vec_dot, as its mul_mat.
float tile_order(Sum s, int64_t n, const uint16_t* w, const uint16_t* x) {
  return n % step_values(s) == 0 ? tinyblas(s, n, w, x) : vec_dot(s, n, w, x);
}

// The reference's order for (row r, a token) as matmul picks it; except that
// for rows % 4 != 0, where the reference takes vec_dot for all rows, matmul
// takes it for the last rows % 4 only.
float matmul_order(Sum s, int64_t n_tokens, int64_t rows, int64_t n, int64_t r, const uint16_t* w,
                   const uint16_t* x) {
  return n_tokens >= 2 && r < rows - rows % 4 ? tile_order(s, n, w, x) : vec_dot(s, n, w, x);
}

struct Level {
  GgmlType type;
  Isa isa;    // the lowest level with these kernels
  Isa last;   // the highest
  Isa below;  // the level whose table it copies
};

// The levels whose table has these kernels, or a SKIPPED warning.
std::vector<Isa> levels_with(const Level& l) {
  std::vector<Isa> v;
  for (Isa isa : {Isa::Avx512Vnni, Isa::Avx512Bf16})
    if (isa >= l.isa && isa <= l.last && isa_supported(isa)) v.push_back(isa);
  if (v.empty())
    WARN(fmt::format("SKIPPED: no {} here; the AVX-512 {} kernels of that level were not tested", isa_name(l.isa),
                     ggml_type_name(l.type)));
  return v;
}

// The 16-lane f32 kernels (F16 from AVX-512 VNNI up, BF16 at AVX-512 VNNI)
// replace the AVX2 ones when the reference is its 16-lane build; else those
// levels keep the AVX2 kernels (checked here too). vdpbf16ps is always in
// place at its level.
bool kernels_in_place(GgmlType t, Isa isa) {
  if (detail::reference_lanes() == 16 || sum_of(t, isa) == Sum::Bf16Dp) return true;
  const auto& k = detail::quant_kernels(isa);
  const auto& a2 = detail::quant_kernels(Isa::Avx2);
  const int slot = static_cast<int>(t);
  CHECK(k.dot[slot] == a2.dot[slot]);
  CHECK(k.gemm[slot].fn[1] == a2.gemm[slot].fn[1]);
  WARN(fmt::format("reference_lanes() is 8: {} keeps the AVX2 {} kernels (checked)", isa_name(isa), ggml_type_name(t)));
  return false;
}

const Level kLevels[] = {{GgmlType::F16, Isa::Avx512Vnni, Isa::Avx512Bf16, Isa::Avx2},
                         {GgmlType::BF16, Isa::Avx512Vnni, Isa::Avx512Vnni, Isa::Avx2},
                         {GgmlType::BF16, Isa::Avx512Bf16, Isa::Avx512Bf16, Isa::Avx512Vnni}};

std::vector<float> run_matmul(GgmlType t, const std::vector<uint16_t>& w, int64_t rows, int64_t cols,
                              const std::vector<float>& x, int64_t n_tokens, ThreadPool& pool) {
  Guarded y(static_cast<size_t>(rows * n_tokens));
  matmul(t, w.data(), rows, cols, x.data(), n_tokens, y.data(), pool);
  REQUIRE(y.intact());
  return y.values();
}

detail::ActType act_of(GgmlType t) { return t == GgmlType::F16 ? detail::ActType::F16 : detail::ActType::BF16; }

}  // namespace

TEST_CASE("avx512 f16 and bf16: dot = ggml vec_dot and tiles = tinyBLAS bit for bit",
          "[matmul][isa][gemm][avx512][float16]") {
  for (const Level& l : kLevels) {
    const int slot = static_cast<int>(l.type);
    for (Isa isa : levels_with(l)) {
      if (!kernels_in_place(l.type, isa)) continue;
      const Sum sum = sum_of(l.type, isa);
      const auto& k = detail::quant_kernels(isa);
      const auto& below = detail::quant_kernels(l.below);
      const detail::GemmKernels& g = k.gemm[slot];
      REQUIRE(k.dot[slot] != below.dot[slot]);  // the level really has its own kernels
      REQUIRE(g.fn[1] != below.gemm[slot].fn[1]);
      REQUIRE(!g.widened_x);  // one token takes the dot, as the reference's vec_dot
      REQUIRE(!g.one_token);
      REQUIRE(g.rows >= 1);
      REQUIRE(g.toks >= 2);
      const auto quantize = k.quantize[static_cast<int>(act_of(l.type))];
      for (int64_t cols : kCols) {
        const auto w = weights_16bit(l.type, g.rows, cols, 40 + static_cast<uint32_t>(cols));
        for (int nt = 1; nt <= g.toks; ++nt) {
          const auto xf = activations_f32(l.type, cols, nt, 50 + static_cast<uint32_t>(nt), true);
          std::vector<uint16_t> xh(xf.size());
          for (int t = 0; t < nt; ++t) quantize(xf.data() + t * cols, xh.data() + t * cols, cols);
          const int64_t y_stride = g.rows + 5;  // gaps between the tile's rows must stay untouched
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
              want[i] = tile_order(sum, cols, wr, xt);
              dot[i] = k.dot[slot](cols, wr, xt);
              want_dot[i] = vec_dot(sum, cols, wr, xt);
            }
          INFO(fmt::format("{} {} tile {}x{} cols {}", isa_name(isa), ggml_type_name(l.type), g.rows, nt, cols));
          CHECK(bitwise_equal(got, want));
          CHECK(bitwise_equal(dot, want_dot));
        }
      }
    }
  }
}

TEST_CASE("avx512 f16 and bf16: matmul of 1 to 33 tokens gives the reference's bits on 1 to 4 threads",
          "[matmul][isa][gemm][avx512][float16][threads]") {
  struct Shape {
    int64_t rows, cols;
  };
  // Rows a multiple of 4 and not (matmul_order), cols with and without
  // tinyBLAS's k % 16 / k % 32 == 0.
  const Shape shapes[] = {{40, 1280}, {37, 96}, {21, 1283}, {8, 33}, {12, 48}};
  for (const Level& l : kLevels) {
    for (Isa isa : levels_with(l)) {
      if (!kernels_in_place(l.type, isa)) continue;
      IsaScope scope(isa);
      const Sum sum = sum_of(l.type, isa);
      const auto quantize = detail::quant_kernels(isa).quantize[static_cast<int>(act_of(l.type))];
      for (const Shape s : shapes) {
        const auto w = weights_16bit(l.type, s.rows, s.cols, 60 + static_cast<uint32_t>(s.cols));
        std::vector<float> wf(w.size());
        for (size_t i = 0; i < w.size(); ++i) wf[i] = widen(l.type, w[i]);
        for (int64_t n_tokens = 1; n_tokens <= 33; n_tokens += (n_tokens < 9 ? 1 : 8)) {
          const auto x = activations_f32(l.type, s.cols, n_tokens, 61 + static_cast<uint32_t>(n_tokens), n_tokens % 2 == 1);
          std::vector<uint16_t> xh(x.size());
          for (int64_t t = 0; t < n_tokens; ++t) quantize(x.data() + t * s.cols, xh.data() + t * s.cols, s.cols);
          std::vector<float> want(static_cast<size_t>(s.rows * n_tokens)), xs(x.size());
          for (int64_t t = 0; t < n_tokens; ++t)
            for (int64_t r = 0; r < s.rows; ++r)
              want[static_cast<size_t>(t * s.rows + r)] =
                  matmul_order(sum, n_tokens, s.rows, s.cols, r, w.data() + r * s.cols, xh.data() + t * s.cols);
          for (size_t i = 0; i < x.size(); ++i) xs[i] = widen(l.type, xh[i]);
          const auto exact = reference(wf, xs, s.rows, s.cols, n_tokens);  // of the converted values, in double
          for (int threads = 1; threads <= 4; ++threads) {
            ThreadPool pool(threads);
            const auto got = run_matmul(l.type, w, s.rows, s.cols, x, n_tokens, pool);
            INFO(fmt::format("{} {} {}x{} tokens {} threads {}", isa_name(isa), ggml_type_name(l.type), s.rows,
                             s.cols, n_tokens, threads));
            CHECK(bitwise_equal(got, want));
            CHECK(nmse(got, exact) < 1e-10);
          }
        }
      }
    }
  }
}
