// The AVX-512 VNNI Rows-layout kernels (quant_avx512.cpp) against the AVX2
// table, bit for bit: dots, tiles (each with gaps and sentinels around its
// outputs), and whole matmuls at the avx512vnni level (rows not a multiple
// of the tile, odd block counts, 1 to 33 tokens, 1 to 4 threads). Weights
// carry extreme codes (Q8_0 -128 and +-127, nibbles 0 and 15, Q6_K 0 and
// 63 with scales -128 and 127, 6-bit K scales and mins 0 and 63) and the
// activations the quantizers' extreme codes +-127.
#include <catch2/catch.hpp>

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

const GgmlType kTypes[] = {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::IQ4_NL,
                           GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

int act_slot(GgmlType t) {
  return static_cast<int>(ggml_traits(t).block_size == 256 ? detail::ActType::Q8_K : detail::ActType::Q8_0);
}

// Random weights with every `every`-th block (from block `first`) set to
// one of the type's extreme patterns (its scales left as random_weights
// made them, except Q6_K's and the K types' sub-block scales).
std::vector<uint8_t> extreme_weights(GgmlType t, int64_t rows, int64_t cols, uint32_t seed) {
  auto w = random_weights(t, rows, cols, seed);
  const auto& tr = ggml_traits(t);
  const int64_t n_blocks = rows * cols / tr.block_size;
  for (int64_t b = seed % 3; b < n_blocks; b += 3) {
    uint8_t* p = w.data() + b * tr.block_bytes;
    const int kind = static_cast<int>((b + seed) % 4);
    switch (t) {
      case GgmlType::Q8_0:  // qs at 2..33: -128, +127, -127 and a mix
        for (int i = 0; i < 32; ++i)
          p[2 + i] = kind == 0 ? 0x80 : kind == 1 ? 0x7f : kind == 2 ? 0x81 : (i % 3 == 0 ? 0x80 : i % 3 == 1 ? 0x7f : 0x81);
        break;
      case GgmlType::Q4_0:
      case GgmlType::IQ4_NL:  // qs at 2..17
        std::memset(p + 2, kind % 2 ? 0xff : 0x00, 16);
        break;
      case GgmlType::Q5_0:  // qh at 2..5, qs at 6..21
        std::memset(p + 2, kind % 2 ? 0xff : 0x00, 4);
        std::memset(p + 6, kind / 2 ? 0xff : 0x00, 16);
        break;
      case GgmlType::Q4_K:  // scales 4..15, qs 16..143
      case GgmlType::Q5_K:  // scales 4..15, qh 16..47, qs 48..175
        std::memset(p + 4, kind % 2 ? 0xff : 0x00, 12);
        std::memset(p + 16, kind / 2 ? 0xff : 0x00, static_cast<size_t>(tr.block_bytes - 16));
        break;
      case GgmlType::Q6_K:  // ql 0..127, qh 128..191, scales 192..207
        std::memset(p, kind % 2 ? 0xff : 0x00, 192);
        for (int s = 0; s < 16; ++s) p[192 + s] = static_cast<uint8_t>(kind / 2 ? (s % 2 ? 0x80 : 0x7f) : 0x80);
        break;
      default: break;
    }
  }
  return w;
}

// n_tokens activation rows of `cols` values with some +-large values
// (codes +-127 after quantization), as floats.
std::vector<float> extreme_floats(int64_t cols, int64_t n_tokens, uint32_t seed) {
  auto x = random_floats(static_cast<size_t>(cols * n_tokens), seed, -2.0f, 2.0f);
  for (size_t i = 0; i < x.size(); i += 7) x[i] = i % 2 ? 1e3f : -1e3f;
  return x;
}

std::vector<uint8_t> quantize_rows(const detail::QuantKernels& k, GgmlType t, const std::vector<float>& x, int64_t cols,
                                   int64_t n_tokens, int64_t& x_row) {
  const auto& tr = ggml_traits(matmul_activation_type(t));
  x_row = cols / tr.block_size * tr.block_bytes;
  std::vector<uint8_t> xq(static_cast<size_t>(x_row * n_tokens));
  for (int64_t i = 0; i < n_tokens; ++i) k.quantize[act_slot(t)](x.data() + i * cols, xq.data() + i * x_row, cols);
  return xq;
}

bool have_avx512() {
  if (isa_supported(Isa::Avx512Vnni)) return true;
  WARN("SKIPPED: no AVX-512 VNNI here; the AVX-512 Rows-layout kernels were not tested");
  return false;
}

}  // namespace

TEST_CASE("avx512 rows kernels: dots are bit-identical to the AVX2 table", "[matmul][isa][avx512]") {
  if (!have_avx512()) return;
  const auto& a = *detail::avx2_quant_kernels_novnni();
  const auto& v = detail::quant_kernels(Isa::Avx512Vnni);
  for (GgmlType t : kTypes) {
    const int slot = static_cast<int>(t);
    INFO(ggml_type_name(t));
    REQUIRE(v.dot[slot] != nullptr);
    REQUIRE(v.dot[slot] != a.dot[slot]);  // the AVX-512 table really has its own dot
    const int64_t block = ggml_traits(t).block_size;
    for (int64_t nb : {1, 2, 3, 5, 8, 33, 40}) {
      const int64_t cols = nb * block, rows = 5;
      for (uint32_t seed = 0; seed < 4; ++seed) {
        const auto w = extreme_weights(t, rows, cols, 100 + seed);
        const int64_t w_row = static_cast<int64_t>(w.size()) / rows;
        const auto xf = extreme_floats(cols, 2, 200 + seed);
        int64_t x_row = 0;
        const auto xq = quantize_rows(a, t, xf, cols, 2, x_row);
        for (int64_t r = 0; r < rows; ++r)
          for (int tok = 0; tok < 2; ++tok) {
            const float want = a.dot[slot](cols, w.data() + r * w_row, xq.data() + tok * x_row);
            const float got = v.dot[slot](cols, w.data() + r * w_row, xq.data() + tok * x_row);
            INFO(fmt::format("blocks {} seed {} row {} token {}: {} vs {}", nb, seed, r, tok, got, want));
            CHECK(std::memcmp(&got, &want, 4) == 0);
          }
      }
    }
  }
}

TEST_CASE("avx512 rows kernels: tiles are bit-identical to the AVX2 dots", "[matmul][isa][gemm][avx512]") {
  if (!have_avx512()) return;
  const auto& a = *detail::avx2_quant_kernels_novnni();
  const auto& v = detail::quant_kernels(Isa::Avx512Vnni);
  int tested = 0;
  for (GgmlType t : kTypes) {
    const int slot = static_cast<int>(t);
    const detail::GemmKernels& g = v.gemm[slot];
    INFO(ggml_type_name(t));
    if (t == GgmlType::Q8_0 || t == GgmlType::Q6_K) REQUIRE(g.rows > 0);
    if (g.rows == 0) continue;
    REQUIRE(g.toks >= 1);
    REQUIRE(g.toks <= detail::kMaxGemmToks);
    REQUIRE(!g.widened_x);
    if (a.gemm[slot].rows > 0) REQUIRE(g.fn[1] != a.gemm[slot].fn[1]);
    const int64_t block = ggml_traits(t).block_size;
    for (int64_t nb : {1, 3, 5, 40}) {
      const int64_t cols = nb * block;
      for (int nt = 1; nt <= g.toks; ++nt) {
        // Rows beyond the tile and a row stride with a gap: the tile must
        // read only its rows.
        const int64_t rows = g.rows + 1;
        const auto w = extreme_weights(t, rows, cols, 300 + static_cast<uint32_t>(nb + nt));
        const int64_t w_row = static_cast<int64_t>(w.size()) / rows;
        const auto xf = extreme_floats(cols, nt, 400 + static_cast<uint32_t>(nb * nt));
        int64_t x_row = 0;
        const auto xq = quantize_rows(a, t, xf, cols, nt, x_row);
        const int64_t y_stride = g.rows + 3;
        Guarded y(static_cast<size_t>(y_stride * nt));
        g.fn[nt](cols, w.data(), w_row, xq.data(), x_row, y.data(), y_stride);
        REQUIRE(y.intact());
        const auto got = y.values();
        std::vector<float> want(got.size(), -12345.0f);  // the gaps keep Guarded's poison
        for (int tok = 0; tok < nt; ++tok)
          for (int r = 0; r < g.rows; ++r)
            want[static_cast<size_t>(tok * y_stride + r)] = a.dot[slot](cols, w.data() + r * w_row, xq.data() + tok * x_row);
        INFO(fmt::format("tile {}x{} blocks {}", g.rows, nt, nb));
        CHECK(bitwise_equal(got, want));
        ++tested;
      }
    }
  }
  CHECK(tested >= 4 * 2);
}

TEST_CASE("avx512 rows kernels: matmul at avx512vnni gives the AVX2 level's bits", "[matmul][isa][threads][avx512]") {
  if (!have_avx512()) return;
  // Rows: fewer than a tile, not a multiple of the 8-row tiles or the
  // 16-row work items; odd block counts; 1 to 33 tokens (tile tails, 4-token
  // groups, several 16-token items); 1 to 4 threads.
  const int64_t row_counts[] = {1, 9, 37};
  const int64_t token_counts[] = {1, 2, 3, 4, 5, 7, 16, 17, 33};
  for (GgmlType t : kTypes) {
    const int64_t block = ggml_traits(t).block_size;
    for (int64_t rows : row_counts) {
      const int64_t cols = (block == 32 ? 5 : 3) * block;
      const auto w = extreme_weights(t, rows, cols, 500 + static_cast<uint32_t>(rows));
      for (int64_t n_tokens : token_counts) {
        const auto x = extreme_floats(cols, n_tokens, 600 + static_cast<uint32_t>(n_tokens));
        for (int threads = 1; threads <= 4; ++threads) {
          ThreadPool pool(threads);
          std::vector<float> out[2];
          const Isa isas[2] = {Isa::Avx2, Isa::Avx512Vnni};
          for (int k = 0; k < 2; ++k) {
            IsaScope scope(isas[k]);
            Guarded y(static_cast<size_t>(rows * n_tokens));
            matmul(t, w.data(), rows, cols, x.data(), n_tokens, y.data(), pool);
            REQUIRE(y.intact());
            out[k] = y.values();
          }
          INFO(fmt::format("{} rows {} cols {} tokens {} threads {}", ggml_type_name(t), rows, cols, n_tokens, threads));
          CHECK(bitwise_equal(out[0], out[1]));
        }
      }
    }
  }
}
