// AVX2 (+FMA, F16C) attention kernels; attention.cpp dispatches to them after
// run-time detection. Compiled with -ffp-contract=off: every fused
// multiply-add below is written out, as in float_avx2.cpp.
//
// one_row_block_avx2: ggml's one-row flash-attention loop for a block of
// query rows that share one kv head (the query heads of a GQA group, times a
// few tokens). Each cache row's K and V are converted from f16 once and used
// by every row of the block; per row the arithmetic is exactly that of
// FloatKernels::dot_f16 (ggml's 4-accumulator order of 8 or 16 lanes),
// scale_f16 and mad_f16 (or scale / mad_f32_f16 with an f32 accumulator).
// The f16 accumulator is held as floats rounded through f16 after every
// update, which is the same value as storing it.
//
// tiled_block_avx2: ggml_compute_forward_flash_attn_ext_tiled for up to 64
// tokens of every query head of one kv head. For each tile of 64 cache rows
// (aligned to row 0): K is converted to f32 and transposed (kt[d][row]) and V
// converted to f32, once for the whole GQA group; then per head
//   scores[i][c] = ((0 + q[i][0]*k[c][0]) + q[i][1]*k[c][1]) + ...  (one FMA
//                  chain in d order, q in f32), times scale, softcap tanh,
//                  plus the ALiBi bias slope(h) * distance (ggml's mask add);
//                  masked and padding entries are -inf;
//   tile_max per row; a row whose entries are all -inf is left alone;
//   M' = max(M, tile_max); if M' > M: ms = expf(M - M'), acc *= ms, S *= ms;
//   P = v_expf(scores - M') (ggml_v_expf), summed per 8 (AVX2 build) or 16
//       (AVX-512 build) lanes in ggml's horizontal order, each group sum
//       added in double, then S = float(S + that double);
//   acc[i][d] = fma chain over the tile's rows in order of P[i][c]*v[c][d].
// With sinks, each row folds its head's sink in after the last tile
// (attention_apply_sink). The output is acc * (1/S) (0 when S == 0).
// Every step is elementwise or a fixed-order chain per output, so register
// blocking, the grouping of heads and tokens and the thread split do not
// change any bit.
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/cpu/kernels/attention_internal.h"
#include "runtime/cpu/kernels/avx2_expf.h"

namespace vtc::cpu::detail {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }
inline uint16_t f2h(float f) { return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT)); }
inline float round_f16(float f) { return h2f(f2h(f)); }
inline __m256 load_h(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m256 round_f16(__m256 v) { return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)); }

// f16 (or f32) row -> f32.
void row_to_f32(const uint8_t* src, bool f16, float* dst, int64_t n) {
  if (!f16) {
    std::memcpy(dst, src, size_t(n) * 4);
    return;
  }
  const auto* h = reinterpret_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_h(h + i));
  for (; i < n; ++i) dst[i] = h2f(h[i]);
}

// ---- one-row kernel -------------------------------------------------------

// dot_f16_l8 / dot_f16_l16 of float_avx2.cpp on rows already converted to
// f32 (exact): the same FMA chains, reductions and double-precision tail.
float dot_l8(const float* k, const float* q, int64_t n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  const int64_t np = n & ~int64_t{31};
  for (int64_t i = 0; i < np; i += 32)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j)
      acc[j] = _mm256_fmadd_ps(_mm256_loadu_ps(k + i + 8 * j), _mm256_loadu_ps(q + i + 8 * j), acc[j]);
  const __m256 r = _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3]));
  const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(r), _mm256_extractf128_ps(r, 1));
  const __m128 t1 = _mm_hadd_ps(t0, t0);
  double sum = _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
  for (int64_t i = np; i < n; ++i) sum += static_cast<double>(k[i] * q[i]);
  return static_cast<float>(sum);
}

float dot_l16(const float* k, const float* q, int64_t n) {
  __m256 lo[4], hi[4];
  for (int j = 0; j < 4; ++j) lo[j] = hi[j] = _mm256_setzero_ps();
  const int64_t np = n & ~int64_t{63};
  for (int64_t i = 0; i < np; i += 64)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      lo[j] = _mm256_fmadd_ps(_mm256_loadu_ps(k + i + 16 * j), _mm256_loadu_ps(q + i + 16 * j), lo[j]);
      hi[j] = _mm256_fmadd_ps(_mm256_loadu_ps(k + i + 16 * j + 8), _mm256_loadu_ps(q + i + 16 * j + 8), hi[j]);
    }
  const __m256 rlo = _mm256_add_ps(_mm256_add_ps(lo[0], lo[2]), _mm256_add_ps(lo[1], lo[3]));
  const __m256 rhi = _mm256_add_ps(_mm256_add_ps(hi[0], hi[2]), _mm256_add_ps(hi[1], hi[3]));
  const __m256 t8 = _mm256_add_ps(rlo, rhi);
  const __m128 t4 = _mm_add_ps(_mm256_castps256_ps128(t8), _mm256_extractf128_ps(t8, 1));
  const __m128 t2 = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));
  double sum = _mm_cvtss_f32(_mm_add_ss(t2, _mm_shuffle_ps(t2, t2, 1)));
  for (int64_t i = np; i < n; ++i) sum += static_cast<double>(k[i] * q[i]);
  return static_cast<float>(sum);
}

// acc = f16(acc * s) or acc * s.
void scale_acc(float* acc, float s, int64_t n, bool acc16) {
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 y = _mm256_mul_ps(_mm256_loadu_ps(acc + i), vs);
    _mm256_storeu_ps(acc + i, acc16 ? round_f16(y) : y);
  }
  for (; i < n; ++i) acc[i] = acc16 ? round_f16(acc[i] * s) : acc[i] * s;
}

// acc = f16(v * s + acc) or v * s + acc, one rounding for the FMA.
void mad_acc(float* acc, const float* v, float s, int64_t n, bool acc16) {
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 y = _mm256_fmadd_ps(_mm256_loadu_ps(v + i), vs, _mm256_loadu_ps(acc + i));
    _mm256_storeu_ps(acc + i, acc16 ? round_f16(y) : y);
  }
  for (; i < n; ++i) acc[i] = acc16 ? round_f16(__builtin_fmaf(v[i], s, acc[i])) : __builtin_fmaf(v[i], s, acc[i]);
}

constexpr int64_t kPrefetchRows = 6;

inline void prefetch_bytes(const uint8_t* p, size_t n) {
  for (size_t off = 0; off < n; off += 64) _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
}

bool block_sees_row(const AttentionJob& job, int64_t t0, int64_t t1, int64_t j) {
  for (int64_t t = t0; t < t1; ++t)
    if (job.visible[t * job.n_kv + j] != 0) return true;
  return false;
}

}  // namespace

namespace {

constexpr int64_t kOneRowChunk = 32;  // cache rows converted per pass

// One query row's online softmax over a chunk's visible cache rows, in key
// order (ggml's one-row update): s = dot * scale (softcapped, plus the ALiBi
// bias); a new maximum rescales the accumulator by ms = exp(M_old - M) and
// the key weighs 1, else it weighs vs = exp(s - M); S = S * ms + vs.
// Kept per key for the accumulator pass: whether it rescales, ms and vs.
struct ChunkWeights {
  int64_t n = 0;               // visible keys of the chunk
  int64_t at[kOneRowChunk];    // their index in the chunk
  float score[kOneRowChunk];   // the dot, replaced by vs in chunk_softmax
  float ms[kOneRowChunk];      // the rescale factor (where rescale[i])
  bool rescale[kOneRowChunk];
};

void chunk_scores(const AttentionJob& job, const float* qr, const float* kf, const int64_t* keys, int64_t n,
                  const uint8_t* vis, ChunkWeights& w) {
  const bool l16 = job.ref_lanes == 16;
  w.n = 0;
  for (int64_t c = 0; c < n; ++c) {
    if (vis[keys[c]] == 0) continue;
    w.at[w.n] = c;
    w.score[w.n++] = l16 ? dot_l16(kf + c * job.dk, qr, job.dk) : dot_l8(kf + c * job.dk, qr, job.dk);
  }
}

void chunk_softmax(const AttentionJob& job, const int64_t* keys, const float* alibi, float slope, float& M, float& S,
                   ChunkWeights& w) {
  float m = M, sum = S;
  for (int64_t i = 0; i < w.n; ++i) {
    float s = w.score[i] * job.scale;
    if (job.softcap != 0.0f) s = job.softcap * std::tanh(s);
    if (alibi != nullptr) s += slope * alibi[keys[w.at[i]]];
    float ms = 1.0f, vs = 1.0f;
    w.rescale[i] = s > m;
    if (w.rescale[i]) {
      const float m_old = m;
      m = s;
      ms = std::exp(m_old - m);
    } else {
      vs = std::exp(s - m);
    }
    w.ms[i] = ms;
    w.score[i] = vs;
    sum = sum * ms + vs;
  }
  M = m;
  S = sum;
}

// acc = round(acc * ms) where the key rescales, then acc = round(v * vs +
// acc), key by key. dv == 64: the accumulator lives in 8 registers.
template <bool kAcc16>
void chunk_accumulate_dv64(const float* vf, const ChunkWeights& w, float* acc) {
  __m256 a[8];
  #pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) a[i] = _mm256_loadu_ps(acc + 8 * i);
  for (int64_t k = 0; k < w.n; ++k) {
    if (w.rescale[k]) {
      const __m256 vms = _mm256_set1_ps(w.ms[k]);
      #pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) a[i] = kAcc16 ? round_f16(_mm256_mul_ps(a[i], vms)) : _mm256_mul_ps(a[i], vms);
    }
    const __m256 vvs = _mm256_set1_ps(w.score[k]);
    const float* v = vf + w.at[k] * 64;
    #pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const __m256 y = _mm256_fmadd_ps(_mm256_loadu_ps(v + 8 * i), vvs, a[i]);
      a[i] = kAcc16 ? round_f16(y) : y;
    }
  }
  #pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) _mm256_storeu_ps(acc + 8 * i, a[i]);
}

void chunk_accumulate(const AttentionJob& job, const float* vf, const ChunkWeights& w, float* acc) {
  if (job.dv == 64) return job.acc16 ? chunk_accumulate_dv64<true>(vf, w, acc) : chunk_accumulate_dv64<false>(vf, w, acc);
  for (int64_t k = 0; k < w.n; ++k) {
    if (w.rescale[k]) scale_acc(acc, w.ms[k], job.dv, job.acc16);
    mad_acc(acc, vf + w.at[k] * job.dv, w.score[k], job.dv, job.acc16);
  }
}

// One query row over the n converted cache rows keys[0..n) (their K in
// kf[c * dk], V in vf[c * dv]); vis is the row's token's visibility row,
// alibi its ALiBi distance row (null: none) and slope its head's slope.
// Three passes, each in key order, with the arithmetic of ggml's one-row
// loop: the dots, the softmax (scalars), the accumulator. Why: in one loop
// the dot and exp calls spilled the accumulator around each call (no vector
// register survives a call) and a key cost ~100 cycles.
void row_pass(const AttentionJob& job, const float* qr, const float* kf, const float* vf, const int64_t* keys,
              int64_t n, const uint8_t* vis, const float* alibi, float slope, float& M, float& S, float* acc) {
  ChunkWeights w;
  chunk_scores(job, qr, kf, keys, n, vis, w);
  chunk_softmax(job, keys, alibi, slope, M, S, w);
  chunk_accumulate(job, vf, w, acc);
}

}  // namespace

bool one_row_block_avx2(const AttentionJob& job, int64_t hk, int64_t t0, int64_t t1, int64_t j0, int64_t j1,
                        float* M, float* S, float* acc) {
  if (!job.f16 || job.typed) return false;
  const int64_t G = job.group, dk = job.dk, dv = job.dv, rows = (t1 - t0) * G;
  thread_local std::vector<float> qf, kf, vf;
  thread_local std::vector<int64_t> keys;
  qf.resize(size_t(rows * dk));
  kf.resize(size_t(kOneRowChunk * dk));
  vf.resize(size_t(kOneRowChunk * dv));
  keys.resize(size_t(kOneRowChunk));
  // q rounded to f16 (what ggml's K.q dot reads), held as floats.
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = job.q + ((t0 + r / G) * job.n_head + hk * G + r % G) * dk;
    float* dst = qf.data() + r * dk;
    int64_t i = 0;
    for (; i + 8 <= dk; i += 8) _mm256_storeu_ps(dst + i, round_f16(_mm256_loadu_ps(src + i)));
    for (; i < dk; ++i) dst[i] = round_f16(src[i]);
  }
  std::fill(M, M + rows, kNegInf);
  std::fill(S, S + rows, 0.0f);
  std::fill(acc, acc + rows * dv, 0.0f);
  const size_t k_bytes = size_t(dk) * 2, v_bytes = size_t(dv) * 2;
  for (int64_t c0 = j0; c0 < j1; c0 += kOneRowChunk) {
    // Convert the chunk's rows that some row of the block sees, once.
    int64_t n = 0;
    for (int64_t j = c0; j < std::min(j1, c0 + kOneRowChunk); ++j) {
      if (j + kPrefetchRows < j1) {  // the rows' K/V slices are far apart: help the hardware prefetcher
        const int64_t ahead = attention_physical_row(job, j + kPrefetchRows);
        prefetch_bytes(job.k + size_t((ahead * job.n_head_kv + hk) * dk) * 2, k_bytes);
        prefetch_bytes(job.v + size_t((ahead * job.n_head_kv + hk) * dv) * 2, v_bytes);
      }
      if (!block_sees_row(job, t0, t1, j)) continue;
      const int64_t phys = attention_physical_row(job, j);
      row_to_f32(job.k + size_t((phys * job.n_head_kv + hk) * dk) * 2, true, kf.data() + n * dk, dk);
      row_to_f32(job.v + size_t((phys * job.n_head_kv + hk) * dv) * 2, true, vf.data() + n * dv, dv);
      keys[size_t(n++)] = j;
    }
    if (n == 0) continue;
    // Then each row of the block runs over them in order.
    for (int64_t r = 0; r < rows; ++r)
      row_pass(job, qf.data() + r * dk, kf.data(), vf.data(), keys.data(), n, job.visible + (t0 + r / G) * job.n_kv,
               attention_alibi_row(job, t0 + r / G), attention_alibi_slope(job, hk * G + r % G), M[r], S[r],
               acc + r * dv);
  }
  return true;
}

namespace {

// ---- tiled kernel ---------------------------------------------------------

constexpr int kTq = int(kAttentionTileQ);
constexpr int kTkv = int(kAttentionTileKV);


// The horizontal sums of ggml_vec_soft_max_f32: 8 lanes as
// ((0+4)+(2+6)) + ((1+5)+(3+7)); 16 lanes as _mm512_reduce_add_ps
// (i + i+8, then + i+4, then (0+2) + (1+3)).
inline float hsum_l8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float hsum_l16(__m256 lo, __m256 hi) {
  const __m256 t8 = _mm256_add_ps(hi, lo);
  const __m128 t4 = _mm_add_ps(_mm256_extractf128_ps(t8, 1), _mm256_castps256_ps128(t8));
  const __m128 t2 = _mm_add_ps(t4, _mm_shuffle_ps(t4, t4, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm_cvtss_f32(t2) + _mm_cvtss_f32(_mm_shuffle_ps(t2, t2, 1));
}

// row = exp(row - max) over the 64 entries of a tile; returns their sum in
// ggml_vec_soft_max_f32's order.
double softmax_tile_row(float* row, float max, bool l16) {
  const __m256 vm = _mm256_set1_ps(max);
  double sum = 0.0;
  for (int c = 0; c < kTkv; c += l16 ? 16 : 8) {
    if (l16) {
      const __m256 lo = v_expf_avx512(_mm256_sub_ps(_mm256_loadu_ps(row + c), vm));
      const __m256 hi = v_expf_avx512(_mm256_sub_ps(_mm256_loadu_ps(row + c + 8), vm));
      _mm256_storeu_ps(row + c, lo);
      _mm256_storeu_ps(row + c + 8, hi);
      sum += static_cast<double>(hsum_l16(lo, hi));
    } else {
      const __m256 e = v_expf_avx2(_mm256_sub_ps(_mm256_loadu_ps(row + c), vm));
      _mm256_storeu_ps(row + c, e);
      sum += static_cast<double>(hsum_l8(e));
    }
  }
  return sum;
}

// 8x8 transpose of r[0..7] in place.
inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

// The converted K/V tile of one kv head: kt[d * 64 + c] = k[ic + c][d]
// (rows past the cache are zeros), vt[c * dv + d] = v[ic + c][d].
struct KvTile {
  std::vector<float> kt, vt, krows;  // krows: 8 converted K rows
  void pack(const AttentionJob& job, int64_t hk, int64_t ic, int64_t n_rows) {
    const int64_t dk = job.dk, dv = job.dv, es = job.f16 ? 2 : 4;
    kt.resize(size_t(dk * kTkv));
    vt.resize(size_t(kTkv * dv));
    krows.resize(size_t(8 * dk));
    for (int64_t c0 = 0; c0 < kTkv; c0 += 8) {
      for (int64_t c = c0; c < c0 + 8; ++c) {
        float* dst = krows.data() + (c - c0) * dk;
        if (c >= n_rows) {
          std::fill(dst, dst + dk, 0.0f);
          continue;
        }
        const int64_t phys = attention_physical_row(job, ic + c);
        row_to_f32(job.k + size_t((phys * job.n_head_kv + hk) * dk * es), job.f16, dst, dk);
        row_to_f32(job.v + size_t((phys * job.n_head_kv + hk) * dv * es), job.f16, vt.data() + c * dv, dv);
      }
      transpose_rows(c0, dk);
    }
  }

 private:
  void transpose_rows(int64_t c0, int64_t dk) {
    int64_t d = 0;
    for (; d + 8 <= dk; d += 8) {
      __m256 r[8];
      for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(krows.data() + i * dk + d);
      transpose8(r);
      for (int i = 0; i < 8; ++i) _mm256_storeu_ps(kt.data() + (d + i) * kTkv + c0, r[i]);
    }
    for (; d < dk; ++d)
      for (int i = 0; i < 8; ++i) kt[size_t(d * kTkv + c0 + i)] = krows[size_t(i * dk + d)];
  }
};

// scores[i][0..64) = q_i . kt (FMA chain over d from 0) for RM rows whose
// q rows are q_stride floats apart.
template <int RM>
void scores_rows(const float* q, int64_t q_stride, const float* kt, int64_t dk, float* scores) {
  for (int cb = 0; cb < kTkv; cb += 16) {
    __m256 acc[RM][2];
    #pragma GCC unroll 8
    for (int i = 0; i < RM; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    for (int64_t d = 0; d < dk; ++d) {
      const __m256 b0 = _mm256_loadu_ps(kt + d * kTkv + cb), b1 = _mm256_loadu_ps(kt + d * kTkv + cb + 8);
      #pragma GCC unroll 8
      for (int i = 0; i < RM; ++i) {
        const __m256 p = _mm256_broadcast_ss(q + i * q_stride + d);
        acc[i][0] = _mm256_fmadd_ps(b0, p, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps(b1, p, acc[i][1]);
      }
    }
    #pragma GCC unroll 8
    for (int i = 0; i < RM; ++i) {
      _mm256_storeu_ps(scores + i * kTkv + cb, acc[i][0]);
      _mm256_storeu_ps(scores + i * kTkv + cb + 8, acc[i][1]);
    }
  }
}

// acc[i][d] += sum over c < n_rows of p[i][c] * vt[c][d], one FMA chain per
// output in c order, for RM rows; dv is a multiple of 8.
template <int RM>
void pv_rows(const float* p, const float* vt, int64_t n_rows, int64_t dv, float* acc) {
  int64_t d0 = 0;
  for (; d0 + 16 <= dv; d0 += 16) {
    __m256 a[RM][2];
    #pragma GCC unroll 8
    for (int i = 0; i < RM; ++i) {
      a[i][0] = _mm256_loadu_ps(acc + i * dv + d0);
      a[i][1] = _mm256_loadu_ps(acc + i * dv + d0 + 8);
    }
    for (int64_t c = 0; c < n_rows; ++c) {
      const __m256 v0 = _mm256_loadu_ps(vt + c * dv + d0), v1 = _mm256_loadu_ps(vt + c * dv + d0 + 8);
      #pragma GCC unroll 8
      for (int i = 0; i < RM; ++i) {
        const __m256 w = _mm256_broadcast_ss(p + i * kTkv + c);
        a[i][0] = _mm256_fmadd_ps(v0, w, a[i][0]);
        a[i][1] = _mm256_fmadd_ps(v1, w, a[i][1]);
      }
    }
    #pragma GCC unroll 8
    for (int i = 0; i < RM; ++i) {
      _mm256_storeu_ps(acc + i * dv + d0, a[i][0]);
      _mm256_storeu_ps(acc + i * dv + d0 + 8, a[i][1]);
    }
  }
  for (; d0 < dv; d0 += 8) {
    __m256 a[RM];
    #pragma GCC unroll 8
    for (int i = 0; i < RM; ++i) a[i] = _mm256_loadu_ps(acc + i * dv + d0);
    for (int64_t c = 0; c < n_rows; ++c) {
      const __m256 v0 = _mm256_loadu_ps(vt + c * dv + d0);
      #pragma GCC unroll 8
      for (int i = 0; i < RM; ++i) a[i] = _mm256_fmadd_ps(v0, _mm256_broadcast_ss(p + i * kTkv + c), a[i]);
    }
    #pragma GCC unroll 8
    for (int i = 0; i < RM; ++i) _mm256_storeu_ps(acc + i * dv + d0, a[i]);
  }
}

constexpr int kRowBlock = 6;

void scores_tile(const float* q, int64_t q_stride, const float* kt, int64_t dk, int64_t n_q, float* scores) {
  int64_t i = 0;
  for (; i + kRowBlock <= n_q; i += kRowBlock) scores_rows<kRowBlock>(q + i * q_stride, q_stride, kt, dk, scores + i * kTkv);
  const float* qr = q + i * q_stride;
  float* sr = scores + i * kTkv;
  switch (n_q - i) {
    case 5: scores_rows<5>(qr, q_stride, kt, dk, sr); break;
    case 4: scores_rows<4>(qr, q_stride, kt, dk, sr); break;
    case 3: scores_rows<3>(qr, q_stride, kt, dk, sr); break;
    case 2: scores_rows<2>(qr, q_stride, kt, dk, sr); break;
    case 1: scores_rows<1>(qr, q_stride, kt, dk, sr); break;
    default: break;
  }
}

void pv_tile(const float* p, const float* vt, int64_t n_rows, int64_t dv, int64_t n_q, float* acc) {
  int64_t i = 0;
  for (; i + kRowBlock <= n_q; i += kRowBlock) pv_rows<kRowBlock>(p + i * kTkv, vt, n_rows, dv, acc + i * dv);
  const float* pr = p + i * kTkv;
  float* ar = acc + i * dv;
  switch (n_q - i) {
    case 5: pv_rows<5>(pr, vt, n_rows, dv, ar); break;
    case 4: pv_rows<4>(pr, vt, n_rows, dv, ar); break;
    case 3: pv_rows<3>(pr, vt, n_rows, dv, ar); break;
    case 2: pv_rows<2>(pr, vt, n_rows, dv, ar); break;
    case 1: pv_rows<1>(pr, vt, n_rows, dv, ar); break;
    default: break;
  }
}

// Scores of one query row -> scaled, softcapped, ALiBi-biased (alibi: the
// tile's distance row, null without; slope: the head's), masked (-inf) in
// place; returns their maximum.
float mask_scores_row(const AttentionJob& job, const uint8_t* vis, const float* alibi, float slope, int64_t n_rows,
                      float* row) {
  const __m256 vscale = _mm256_set1_ps(job.scale), ninf = _mm256_set1_ps(kNegInf), vslope = _mm256_set1_ps(slope);
  __m256 vmax = ninf;
  for (int64_t c = 0; c < kTkv; c += 8) {
    __m256 s = _mm256_mul_ps(_mm256_loadu_ps(row + c), vscale);
    if (job.softcap != 0.0f) {
      alignas(32) float tmp[8];
      _mm256_store_ps(tmp, s);
      for (float& x : tmp) x = std::tanh(x) * job.softcap;
      s = _mm256_load_ps(tmp);
    }
    if (alibi != nullptr) {
      alignas(32) float dist[8] = {};
      for (int64_t i = 0; i < 8 && c + i < n_rows; ++i) dist[i] = alibi[c + i];
      s = _mm256_add_ps(s, _mm256_mul_ps(vslope, _mm256_load_ps(dist)));
    }
    __m256 keep;
    if (c + 8 <= n_rows) {
      const __m256i bytes = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(vis + c)));
      keep = _mm256_castsi256_ps(_mm256_xor_si256(_mm256_cmpeq_epi32(bytes, _mm256_setzero_si256()),
                                                  _mm256_set1_epi32(-1)));
    } else {
      alignas(32) int32_t flags[8];
      for (int64_t i = 0; i < 8; ++i) flags[i] = c + i < n_rows && vis[c + i] != 0 ? -1 : 0;
      keep = _mm256_castsi256_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(flags)));
    }
    s = _mm256_blendv_ps(ninf, s, keep);
    _mm256_storeu_ps(row + c, s);
    vmax = _mm256_max_ps(vmax, s);
  }
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// Scores of one query row -> softmax weights, updating M, S and acc (the
// reference's per-row loop between its two GEMMs).
void softmax_update_row(const AttentionJob& job, int64_t t, int64_t h, int64_t ic, int64_t n_rows, float* row,
                        float& M, float& S, float* acc) {
  const float* alibi = attention_alibi_row(job, t);
  const float tile_max = mask_scores_row(job, job.visible + t * job.n_kv + ic, alibi != nullptr ? alibi + ic : nullptr,
                                         attention_alibi_slope(job, h), n_rows, row);
  if (tile_max == kNegInf) {
    std::fill(row, row + kTkv, 0.0f);
    return;
  }
  const float m_new = std::fmax(M, tile_max);
  if (m_new > M) {
    const float ms = std::exp(M - m_new);
    scale_acc(acc, ms, job.dv, false);
    S *= ms;
  }
  M = m_new;
  S += softmax_tile_row(row, m_new, job.ref_lanes == 16);
}

bool tile_has_visible(const AttentionJob& job, int64_t t0, int64_t t1, int64_t ic, int64_t n_rows) {
  for (int64_t t = t0; t < t1; ++t)
    if (job.first_visible[t] < ic + n_rows && job.last_visible[t] >= ic) return true;
  return false;
}

struct TiledScratch {
  KvTile tile;
  std::vector<float> q, scores, acc, M, S;  // q: [head of group][token][dk], contiguous
};

}  // namespace

bool tiled_block_avx2(const AttentionJob& job, int64_t hk, int64_t t0, int64_t t1) {
  const int64_t G = job.group, n_q = t1 - t0, dk = job.dk, dv = job.dv;
  if (job.typed || dv % 8 != 0 || n_q > kTq) return false;
  thread_local TiledScratch ws;
  ws.scores.resize(size_t(kTq * kTkv));
  ws.acc.assign(size_t(G * kTq * dv), 0.0f);
  ws.M.assign(size_t(G * kTq), kNegInf);
  ws.S.assign(size_t(G * kTq), 0.0f);
  // Contiguous copies of the q rows: in place they lie n_head * dk floats
  // apart, a multiple of 4 KiB for common shapes, which maps them all to the
  // same few L1 sets.
  ws.q.resize(size_t(G * kTq * dk));
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = 0; i < n_q; ++i)
      std::memcpy(ws.q.data() + (g * kTq + i) * dk, job.q + ((t0 + i) * job.n_head + hk * G + g) * dk,
                  size_t(dk) * 4);
  for (int64_t ic = 0; ic < job.n_kv; ic += kTkv) {
    const int64_t n_rows = std::min<int64_t>(kTkv, job.n_kv - ic);
    if (!tile_has_visible(job, t0, t1, ic, n_rows)) continue;
    ws.tile.pack(job, hk, ic, n_rows);
    for (int64_t g = 0; g < G; ++g) {
      float* acc = ws.acc.data() + g * kTq * dv;
      scores_tile(ws.q.data() + g * kTq * dk, dk, ws.tile.kt.data(), dk, n_q, ws.scores.data());
      for (int64_t i = 0; i < n_q; ++i)
        softmax_update_row(job, t0 + i, hk * G + g, ic, n_rows, ws.scores.data() + i * kTkv, ws.M[size_t(g * kTq + i)],
                           ws.S[size_t(g * kTq + i)], acc + i * dv);
      pv_tile(ws.scores.data(), ws.tile.vt.data(), n_rows, dv, n_q, acc);
    }
  }
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = 0; i < n_q; ++i) {
      if (job.sinks != nullptr)
        attention_apply_sink(job.sinks[hk * G + g], ws.M[size_t(g * kTq + i)], ws.S[size_t(g * kTq + i)],
                             ws.acc.data() + (g * kTq + i) * dv, dv);
      const float S = ws.S[size_t(g * kTq + i)];
      const float inv = S == 0.0f ? 0.0f : 1.0f / S;
      const float* acc = ws.acc.data() + (g * kTq + i) * dv;
      float* out = job.out + ((t0 + i) * job.n_head + hk * G + g) * dv;
      const __m256 vi = _mm256_set1_ps(inv);
      for (int64_t d = 0; d < dv; d += 8) _mm256_storeu_ps(out + d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), vi));
    }
  return true;
}

}  // namespace vtc::cpu::detail
