// Interleaved-8 weights: the repacking from ggml's row layout, and the
// scalar kernels (the reference the AVX2 ones must match bit for bit).
//
// Why interleave. A decode step is one activation row against every weight
// row. Row by row, each Q4_K superblock costs a scale unpacking, a mins
// product and a horizontal sum for 256 multiply-adds, and the int8 dot is
// bound by those instructions, not by memory (~9 GB/s of weights per core
// against ~14 GB/s of DRAM). With 8 rows interleaved (internal.h,
// BlockQ4_0x8 / BlockQ4_Kx8), one 32-byte load holds 4 quants of each of 8
// rows, a broadcast of 4 activation bytes multiplies all of them
// (vpmaddubsw), the products of a sub-block add up in 16 bits, one
// vpmaddwd applies the 8 rows' scales, and the 8 results come out in the 8
// lanes of one register: no horizontal sum, and the scales and mins of 8
// rows are unpacked with a few vector ops.
//
// The layout is a byte permutation (same size as the rows), so `vtc compile
// --pack` can store it in place of the GGUF's tensor data and a load is an
// mmap again.
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "runtime/cpu/kernels/internal.h"
#include "runtime/cpu/kernels/kernels.h"
#include "support/error.h"

namespace vtc::cpu {

using detail::BlockQ4_0;
using detail::BlockQ4_0x8;
using detail::BlockQ4_K;
using detail::BlockQ4_Kx8;
using detail::BlockQ6_K;
using detail::BlockQ6_Kx8;
using detail::BlockQ8_0;
using detail::BlockQ8_0W;
using detail::BlockQ8_0x8;
using detail::BlockQ8_K;

bool matmul_layout_supported(GgmlType wtype, WeightLayout layout, int64_t rows) {
  if (layout == WeightLayout::Rows) return matmul_supported(wtype);
  return weight_layout_supports(layout, wtype) && rows >= 0 && rows % weight_layout_rows(layout) == 0;
}

namespace {

void repack_q4_0_group(const BlockQ4_0* const row[8], int64_t n_blocks, BlockQ4_0x8* out) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    BlockQ4_0x8& o = out[b];
    for (int r = 0; r < 8; ++r) {
      const BlockQ4_0& src = row[r][b];
      o.d[r] = src.d;
      for (int c = 0; c < 4; ++c) std::memcpy(o.qs + 32 * c + 4 * r, src.qs + 4 * c, 4);
    }
  }
}

void repack_q4_k_group(const BlockQ4_K* const row[8], int64_t n_blocks, BlockQ4_Kx8* out) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    BlockQ4_Kx8& o = out[b];
    for (int r = 0; r < 8; ++r) {
      const BlockQ4_K& src = row[r][b];
      o.d[r] = src.d;
      o.dmin[r] = src.dmin;
      for (int k = 0; k < 12; ++k) o.scales[8 * k + r] = src.scales[k];
      for (int p = 0; p < 4; ++p)
        for (int c = 0; c < 8; ++c) std::memcpy(o.qs + 256 * p + 32 * c + 4 * r, src.qs + 32 * p + 4 * c, 4);
    }
  }
}

void repack_q6_k_group(const BlockQ6_K* const row[8], int64_t n_blocks, BlockQ6_Kx8* out) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    BlockQ6_Kx8& o = out[b];
    for (int r = 0; r < 8; ++r) {
      const BlockQ6_K& src = row[r][b];
      o.d[r] = src.d;
      for (int s = 0; s < 16; ++s) o.scales[8 * s + r] = src.scales[s];
      for (int h = 0; h < 2; ++h) {
        for (int c = 0; c < 16; ++c) std::memcpy(o.ql + 512 * h + 32 * c + 4 * r, src.ql + 64 * h + 4 * c, 4);
        for (int c = 0; c < 8; ++c) std::memcpy(o.qh + 256 * h + 32 * c + 4 * r, src.qh + 32 * h + 4 * c, 4);
      }
    }
  }
}

void repack_q8_0_group(const BlockQ8_0W* const row[8], int64_t n_blocks, BlockQ8_0x8* out) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    BlockQ8_0x8& o = out[b];
    for (int r = 0; r < 8; ++r) {
      o.d[r] = row[r][b].d;
      for (int c = 0; c < 8; ++c) std::memcpy(o.qs + 32 * c + 4 * r, row[r][b].qs + 4 * c, 4);
    }
  }
}

// Group g's 8 row pointers, as blocks of type Block.
template <typename Block>
void group_rows(const uint8_t* group, int64_t row_bytes, const Block* row[8]) {
  for (int r = 0; r < 8; ++r) row[r] = reinterpret_cast<const Block*>(group + r * row_bytes);
}

}  // namespace

void repack_weight(GgmlType wtype, WeightLayout layout, const void* src, int64_t rows, int64_t cols, void* dst) {
  if (!matmul_layout_supported(wtype, layout, rows))
    throw Error(fmt::format("repack_weight: a {}-row {} weight cannot be stored in the {} layout", rows,
                            ggml_type_name(wtype), weight_layout_name(layout)));
  const auto& tr = ggml_traits(wtype);
  if (cols < 0 || cols % tr.block_size != 0)
    throw Error(fmt::format("repack_weight: {} columns is not a whole number of {}-value {} blocks", cols,
                            tr.block_size, tr.name));
  const int64_t n_blocks = cols / tr.block_size, row_bytes = n_blocks * tr.block_bytes;
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  if (layout == WeightLayout::Rows) {
    std::memcpy(d, s, static_cast<size_t>(rows * row_bytes));
    return;
  }
  for (int64_t g = 0; g < rows / 8; ++g) {
    const uint8_t* group = s + g * 8 * row_bytes;
    uint8_t* out = d + g * 8 * row_bytes;
    if (wtype == GgmlType::Q4_0) {
      const BlockQ4_0* row[8];
      group_rows(group, row_bytes, row);
      repack_q4_0_group(row, n_blocks, reinterpret_cast<BlockQ4_0x8*>(out));
    } else if (wtype == GgmlType::Q8_0) {
      const BlockQ8_0W* row[8];
      group_rows(group, row_bytes, row);
      repack_q8_0_group(row, n_blocks, reinterpret_cast<BlockQ8_0x8*>(out));
    } else if (wtype == GgmlType::Q4_K) {
      const BlockQ4_K* row[8];
      group_rows(group, row_bytes, row);
      repack_q4_k_group(row, n_blocks, reinterpret_cast<BlockQ4_Kx8*>(out));
    } else {
      const BlockQ6_K* row[8];
      group_rows(group, row_bytes, row);
      repack_q6_k_group(row, n_blocks, reinterpret_cast<BlockQ6_Kx8*>(out));
    }
  }
}

namespace detail {
namespace {

float h2f(uint16_t h) { return fp16_table()[h]; }

// The scalar kernels: one driver walks tokens, rows and blocks; each type's
// Step adds block b of row r against token t's activation block into
// acc[0] (and the Q4_K mins into acc[1]); the result is acc[0] - acc[1].
template <typename WBlock, typename XBlock, typename Step>
void scalar_x8(int nt, int64_t n_blocks, const void* vw, const void* vx, int64_t x_stride, const int32_t* block_sums,
               int64_t sums_stride, float* y, int64_t y_stride, Step step) {
  const auto* w = static_cast<const WBlock*>(vw);
  for (int t = 0; t < nt; ++t) {
    const auto* x = reinterpret_cast<const XBlock*>(static_cast<const uint8_t*>(vx) + t * x_stride);
    const int32_t* sums = block_sums != nullptr ? block_sums + t * sums_stride : nullptr;
    for (int r = 0; r < 8; ++r) {
      float acc[2] = {0.0f, 0.0f};
      for (int64_t b = 0; b < n_blocks; ++b) step(w[b], x[b], sums != nullptr ? sums[b] : 0, r, acc);
      y[t * y_stride + r] = acc[0] - acc[1];
    }
  }
}

// The quant of row r at value v of a Q4_0 x8 block (0..15).
int q4_0_x8_code(const BlockQ4_0x8& b, int r, int v) {
  const int half = v / 16, c = (v % 16) / 4, i = v % 4;
  const uint8_t byte = b.qs[32 * c + 4 * r + i];
  return half ? byte >> 4 : byte & 0x0f;
}

template <int NT>
void q4_0_x8_scalar(int64_t n_blocks, const void* vw, const void* vx, int64_t x_stride, const int32_t* block_sums,
                    int64_t sums_stride, float* y, int64_t y_stride) {
  scalar_x8<BlockQ4_0x8, BlockQ8_0>(
      NT, n_blocks, vw, vx, x_stride, block_sums, sums_stride, y, y_stride,
      [](const BlockQ4_0x8& w, const BlockQ8_0& x, int32_t block_sum, int r, float* acc) {
        int32_t isum = 0;
        for (int v = 0; v < 32; ++v) isum += q4_0_x8_code(w, r, v) * x.qs[v];
        acc[0] = std::fma(h2f(w.d[r]) * h2f(x.d), static_cast<float>(isum - 8 * block_sum), acc[0]);
      });
}

template <int NT>
void q8_0_x8_scalar(int64_t n_blocks, const void* vw, const void* vx, int64_t x_stride, const int32_t*, int64_t,
                    float* y, int64_t y_stride) {
  scalar_x8<BlockQ8_0x8, BlockQ8_0>(NT, n_blocks, vw, vx, x_stride, nullptr, 0, y, y_stride,
                                     [](const BlockQ8_0x8& w, const BlockQ8_0& x, int32_t, int r, float* acc) {
                                       int32_t isum = 0;
                                       for (int v = 0; v < 32; ++v) isum += w.qs[32 * (v / 4) + 4 * r + v % 4] * x.qs[v];
                                       acc[0] = std::fma(h2f(w.d[r]) * h2f(x.d), static_cast<float>(isum), acc[0]);
                                     });
}

// Row r's 6-bit scale and min of sub-block j (ggml's get_scale_min_k4 on
// the de-interleaved scale bytes).
void q4_k_x8_scale_min(const BlockQ4_Kx8& b, int r, int j, int& sc, int& mn) {
  auto q = [&](int k) { return int(b.scales[8 * k + r]); };
  if (j < 4) {
    sc = q(j) & 63;
    mn = q(j + 4) & 63;
  } else {
    sc = (q(j + 4) & 0x0f) | ((q(j - 4) >> 6) << 4);
    mn = (q(j + 4) >> 4) | ((q(j) >> 6) << 4);
  }
}

int q4_k_x8_code(const BlockQ4_Kx8& b, int r, int v) {
  const int p = v / 64, half = (v % 64) / 32, c = (v % 32) / 4, i = v % 4;
  const uint8_t byte = b.qs[256 * p + 32 * c + 4 * r + i];
  return half ? byte >> 4 : byte & 0x0f;
}

// Groups of 4 tokens accumulate per pair of sub-blocks, fewer per
// superblock (internal.h, PackedFn); kPerPair false: 4 tokens per
// superblock too (PackedKernels::fn4_each_token).
template <int NT, bool kPerPair = NT == 4>
void q4_k_x8_scalar(int64_t n_blocks, const void* vw, const void* vx, int64_t x_stride, const int32_t*, int64_t,
                    float* y, int64_t y_stride) {
  constexpr int kPairsPerStep = kPerPair ? 1 : 4;
  scalar_x8<BlockQ4_Kx8, BlockQ8_K>(
      NT, n_blocks, vw, vx, x_stride, nullptr, 0, y, y_stride,
      [](const BlockQ4_Kx8& w, const BlockQ8_K& x, int32_t, int r, float* acc) {
        const float d = h2f(w.d[r]) * x.d, dmin = h2f(w.dmin[r]) * x.d;
        for (int p0 = 0; p0 < 4; p0 += kPairsPerStep) {
          int32_t isum = 0, msum = 0;
          for (int j = 2 * p0; j < 2 * (p0 + kPairsPerStep); ++j) {
            int sc = 0, mn = 0;
            q4_k_x8_scale_min(w, r, j, sc, mn);
            int32_t sub = 0;
            for (int v = 32 * j; v < 32 * j + 32; ++v) sub += q4_k_x8_code(w, r, v) * x.qs[v];
            isum += sc * sub;
            msum += mn * (x.bsums[2 * j] + x.bsums[2 * j + 1]);
          }
          acc[0] = std::fma(d, static_cast<float>(isum), acc[0]);
          acc[1] = std::fma(dmin, static_cast<float>(msum), acc[1]);
        }
      });
}

// Row r's 6-bit code (0..63) at value v of a Q6_K x8 block.
int q6_k_x8_code(const BlockQ6_Kx8& b, int r, int v) {
  const int h = v / 128, q = (v % 128) / 32, l = v % 32, c = l / 4, i = l % 4;
  const uint8_t lo = b.ql[512 * h + 32 * (c + 8 * (q & 1)) + 4 * r + i];
  const uint8_t hi = b.qh[256 * h + 32 * c + 4 * r + i];
  return ((q < 2 ? lo & 0x0f : lo >> 4) | (((hi >> (2 * q)) & 3) << 4));
}

template <int NT>
void q6_k_x8_scalar(int64_t n_blocks, const void* vw, const void* vx, int64_t x_stride, const int32_t*, int64_t,
                    float* y, int64_t y_stride) {
  scalar_x8<BlockQ6_Kx8, BlockQ8_K>(NT, n_blocks, vw, vx, x_stride, nullptr, 0, y, y_stride,
                                     [](const BlockQ6_Kx8& w, const BlockQ8_K& x, int32_t, int r, float* acc) {
                                       int32_t isum = 0, offset = 0;
                                       for (int s = 0; s < 16; ++s) {
                                         const int sc = w.scales[8 * s + r];
                                         int32_t sub = 0;
                                         for (int v = 16 * s; v < 16 * s + 16; ++v) sub += q6_k_x8_code(w, r, v) * x.qs[v];
                                         isum += sc * sub;
                                         offset += sc * x.bsums[s];
                                       }
                                       acc[0] = std::fma(h2f(w.d[r]) * x.d, static_cast<float>(isum - 32 * offset), acc[0]);
                                     });
}

template <template <int> class Kernel>
PackedKernels make_packed() {
  PackedKernels k{};
  k.toks = kMaxGemmToks;
  k.fn[1] = Kernel<1>::fn;
  k.fn[2] = Kernel<2>::fn;
  k.fn[3] = Kernel<3>::fn;
  k.fn[4] = Kernel<4>::fn;
  return k;
}
static_assert(kMaxGemmToks == 4, "make_packed fills fn[1..4]");

template <int NT>
struct Q4_0Scalar {
  static constexpr PackedFn fn = q4_0_x8_scalar<NT>;
};
template <int NT>
struct Q4_KScalar {
  static constexpr PackedFn fn = q4_k_x8_scalar<NT>;
};
template <int NT>
struct Q8_0Scalar {
  static constexpr PackedFn fn = q8_0_x8_scalar<NT>;
};
template <int NT>
struct Q6_KScalar {
  static constexpr PackedFn fn = q6_k_x8_scalar<NT>;
};

}  // namespace

void add_scalar_x8_kernels(QuantKernels& t) {
  t.x8[kSlotQ4_0] = make_packed<Q4_0Scalar>();
  t.x8[kSlotQ4_K] = make_packed<Q4_KScalar>();
  t.x8[kSlotQ4_K].fn4_each_token = q4_k_x8_scalar<4, false>;
  t.x8[kSlotQ6_K] = make_packed<Q6_KScalar>();
  t.x8[kSlotQ8_0] = make_packed<Q8_0Scalar>();
}

}  // namespace detail
}  // namespace vtc::cpu
