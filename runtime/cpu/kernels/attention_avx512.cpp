// AVX-512 attention kernels (F/BW/VL/DQ; attention.cpp calls them from the
// avx512vnni level up). Compiled with -ffp-contract=off: every fused
// multiply-add below is written out. The rules of internal.h hold here: an
// anonymous namespace, C headers and immintrin only (no std::vector or
// std::min: their out-of-line copies compiled here could be the ones the
// linker keeps; attention_internal.h's two helpers are static).
//
// Both kernels give the bits of their attention_avx2.cpp counterparts (and so
// of the reference's order described there) for either reference SIMD width:
// every step is an elementwise operation or a fixed-order chain per output,
// done here 16 lanes at a time. (Scores that are NaN, from NaN or inf in q
// or K, are outside this promise: the maxima reduce in another order.)
//
// tiled_block_avx512 (64+ query rows): per tile of 64 cache rows, K is
// converted to f32 and transposed once for the GQA group, V converted; then
// per head, per block of up to 6 query rows, the block's 6 x 64 scores live
// in 24 zmm registers (one FMA chain over d per score, from 0), are scaled,
// softcapped and masked there; the rows' maxima, weights (ggml_v_expf in the
// AVX2 or AVX-512 rounding, per ref_lanes) and sums (8- or 16-lane
// horizontal sums in ggml's order, added in double), then the rescales
// (expf) follow, and the weights go straight into P.V for the same rows (one
// FMA chain per output over the tile's rows, up to 4 zmm of V columns at a
// time).
//
// one_row_block_avx512 (fewer rows, decode, split-KV chunks): the one-row
// online softmax with the f16 (or f32) V accumulator, bit for bit that of
// ggml's per-row loop. Per chunk of 64 cache rows the K/V rows are converted
// once; then (A) every score of the block's rows, 16 cache rows at a time
// (ggml's 4-accumulator dot of 8 or 16 lanes; the horizontal sums by a
// transposing tree with the same lane pairs), (B) per query row the
// reference's comparisons with M, its expf calls and its S updates, in
// order, and (C) the accumulators, in registers, cache row by cache row:
// per query row the chain of operations is the reference's, only the
// independent parts are batched. With resume it continues a chunk (the
// split-KV caller runs 256-row slices, every kv head per slice).
#include "runtime/cpu/kernels/avx512_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cpu/kernels/attention_internal.h"

namespace vtc::cpu::detail {
namespace {

constexpr float kNegInf = -__builtin_inff();

inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

// A growable 64-byte aligned scratch array (kept per thread).
template <class T>
struct Scratch {
  T* p = nullptr;
  size_t cap = 0;
  T* get(size_t n) {
    if (n > cap) {
      free(p);
      p = static_cast<T*>(aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64));
      if (p == nullptr) abort();
      cap = n;
    }
    return p;
  }
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { free(p); }
};
constexpr int kTq = int(kAttentionTileQ);
constexpr int kTkv = int(kAttentionTileKV);
static_assert(kTkv == 64, "a tile row of scores is 4 zmm registers and its visibility one 64-bit mask");

inline __mmask16 tail_mask(int64_t n) { return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1u); }
inline __mmask64 tail_mask64(int64_t n) { return n >= 64 ? ~__mmask64(0) : (__mmask64(1) << n) - 1; }

inline __m512 round_f16(__m512 v) { return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)); }

// f16 (or f32) row -> f32.
__attribute__((always_inline)) inline void row_to_f32(const uint8_t* src, bool f16, float* dst, int64_t n) {
  if (!f16) {
    memcpy(dst, src, size_t(n) * 4);
    return;
  }
  const auto* h = reinterpret_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i))));
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, h + i)));
  }
}

// ---- ggml_v_expf, 16 lanes: v_expf_l16 (avx512_common.h) ------------------

// The AVX2 build's ggml_v_expf (avx2_expf.h's v_expf_avx2), lane for lane:
// the polynomial without the 1, then k + k*j with k = 2^n, and the special
// scalings for |n| > 126.
inline __m512 v_expf_l8(__m512 x) {
  const __m512 r = _mm512_set1_ps(0x1.8p23f);
  const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
  const __m512 n = _mm512_sub_ps(z, r);
  const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                                    _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
  const __m512i e = _mm512_slli_epi32(_mm512_castps_si512(z), 23);
  const __m512 k = _mm512_castsi512_ps(_mm512_add_epi32(e, _mm512_castps_si512(_mm512_set1_ps(1))));
  const __m512 absn = _mm512_abs_ps(n);
  const __mmask16 c = _mm512_cmp_ps_mask(absn, _mm512_set1_ps(126), _CMP_GT_OQ);
  const __m512 u = _mm512_mul_ps(b, b);
  const __m512 j = _mm512_fmadd_ps(
      _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                      _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
      u, _mm512_mul_ps(_mm512_set1_ps(0x1.ffffecp-1f), b));
  const __m512 fast = _mm512_fmadd_ps(k, j, k);
  if (c == 0) return fast;
  const __mmask16 le0 = _mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ);
  const __m512i g = _mm512_maskz_mov_epi32(le0, _mm512_set1_epi32(static_cast<int>(0x82000000u)));
  const __m512 s1 = _mm512_castsi512_ps(_mm512_add_epi32(g, _mm512_set1_epi32(0x7f000000)));
  const __m512 s2 = _mm512_castsi512_ps(_mm512_sub_epi32(e, g));
  const __mmask16 d = _mm512_cmp_ps_mask(absn, _mm512_set1_ps(192), _CMP_GT_OQ);
  const __m512 mid = _mm512_mask_blend_ps(c, fast, _mm512_mul_ps(_mm512_fmadd_ps(s2, j, s2), s1));
  return _mm512_mask_blend_ps(d, mid, _mm512_mul_ps(s1, s1));
}

// ggml_vec_soft_max_f32's horizontal sums: 8 lanes as
// ((0+4)+(2+6)) + ((1+5)+(3+7)); 16 lanes as _mm512_reduce_add_ps
// (i + i+8, then + i+4, then (0+2) + (1+3)).
inline float hsum_l8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float hsum_l16(__m512 v) {
  const __m256 t8 = _mm256_add_ps(_mm512_extractf32x8_ps(v, 1), _mm512_castps512_ps256(v));
  const __m128 t4 = _mm_add_ps(_mm256_extractf128_ps(t8, 1), _mm256_castps256_ps128(t8));
  const __m128 t2 = _mm_add_ps(t4, _mm_shuffle_ps(t4, t4, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm_cvtss_f32(t2) + _mm_cvtss_f32(_mm_shuffle_ps(t2, t2, 1));
}

// ---- tiled kernel -------------------------------------------------------------

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
  Scratch<float> kt_buf, vt_buf;
  float* kt = nullptr;
  float* vt = nullptr;
  alignas(64) float krows[8 * 256];  // 8 converted K rows (dk <= 256; larger: krows_big)
  Scratch<float> krows_big;
  void pack(const AttentionJob& job, int64_t hk, int64_t ic, int64_t n_rows) {
    const int64_t dk = job.dk, dv = job.dv, es = job.f16 ? 2 : 4;
    kt = kt_buf.get(size_t(dk * kTkv));
    vt = vt_buf.get(size_t(kTkv * dv));
    float* kr = dk <= 256 ? krows : krows_big.get(size_t(8 * dk));
    for (int64_t c0 = 0; c0 < kTkv; c0 += 8) {
      for (int64_t c = c0; c < c0 + 8; ++c) {
        float* dst = kr + (c - c0) * dk;
        if (c >= n_rows) {
          memset(dst, 0, size_t(dk) * 4);
          continue;
        }
        const int64_t phys = attention_physical_row(job, ic + c);
        row_to_f32(job.k + size_t((phys * job.n_head_kv + hk) * dk * es), job.f16, dst, dk);
        row_to_f32(job.v + size_t((phys * job.n_head_kv + hk) * dv * es), job.f16, vt + c * dv, dv);
      }
      int64_t d = 0;
      for (; d + 8 <= dk; d += 8) {
        __m256 r[8];
        for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(kr + i * dk + d);
        transpose8(r);
        for (int i = 0; i < 8; ++i) _mm256_storeu_ps(kt + (d + i) * kTkv + c0, r[i]);
      }
      for (; d < dk; ++d)
        for (int i = 0; i < 8; ++i) kt[d * kTkv + c0 + i] = kr[i * dk + d];
    }
  }
};

// What one (head, tile) pass needs besides the rows' own data.
struct TilePass {
  const AttentionJob* job;
  const float* kt;   // [dk][64]
  const float* vt;   // [n_rows][dv]
  int64_t ic, n_rows;
  bool l16;
  float alibi_slope;  // the head's ALiBi slope (used where job->alibi_dist is set)
};

// The RM rows' 64 scores each (registers) -> weights in p[i][0..64):
// scaled, softcapped, ALiBi-biased, masked to -inf; M, S and the rows' acc updated as the
// reference does between its two GEMMs. A row that sees none of the tile
// gets zero weights and keeps M, S and acc. Done in phases over the rows
// (maxima, weights and sums, then the rescales), which keeps the rows'
// latency chains side by side and the expf calls (which clobber every
// vector register) after the scores' last use; per row the operations and
// their order are the reference's: S *= ms, then S += the tile's sum.
template <int RM>
__attribute__((always_inline)) inline void softmax_block(const TilePass& tp, int64_t t_first, __m512 (&s)[RM][4],
                                                         float* M, float* S, float* acc, float* p) {
  const AttentionJob& job = *tp.job;
  const __m512 vscale = _mm512_set1_ps(job.scale), ninf = _mm512_set1_ps(kNegInf);
  const __mmask64 in_tile = tail_mask64(tp.n_rows);
  float tile_max[RM];
  #pragma GCC unroll 8
  for (int i = 0; i < RM; ++i) {
    const uint8_t* vis = job.visible + (t_first + i) * job.n_kv + tp.ic;
    const __mmask64 keep = _mm512_test_epi8_mask(_mm512_maskz_loadu_epi8(in_tile, vis), _mm512_set1_epi8(-1));
    __m512 vmax = ninf;
    #pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      __m512 x = _mm512_mul_ps(s[i][j], vscale);
      if (job.softcap != 0.0f) {
        alignas(64) float tmp[16];
        _mm512_store_ps(tmp, x);
        for (float& v : tmp) v = tanhf(v) * job.softcap;
        x = _mm512_load_ps(tmp);
      }
      if (job.alibi_dist != nullptr) {
        const float* dist = job.alibi_dist + (t_first + i) * job.n_kv + tp.ic + 16 * j;
        x = _mm512_add_ps(x, _mm512_mul_ps(_mm512_set1_ps(tp.alibi_slope),
                                           _mm512_maskz_loadu_ps(__mmask16(in_tile >> (16 * j)), dist)));
      }
      s[i][j] = _mm512_mask_blend_ps(__mmask16(keep >> (16 * j)), ninf, x);
      vmax = _mm512_max_ps(vmax, s[i][j]);
    }
    tile_max[i] = _mm512_reduce_max_ps(vmax);
  }
  float m_new[RM];
  double sum[RM];
  #pragma GCC unroll 8
  for (int i = 0; i < RM; ++i) {
    float* pr = p + i * kTkv;
    if (tile_max[i] == kNegInf) {
      #pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) _mm512_storeu_ps(pr + 16 * j, _mm512_setzero_ps());
      continue;
    }
    m_new[i] = fmaxf(M[i], tile_max[i]);
    const __m512 vm = _mm512_set1_ps(m_new[i]);
    double sm = 0.0;
    #pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m512 x = _mm512_sub_ps(s[i][j], vm);
      if (tp.l16) {
        const __m512 e = v_expf_l16(x);
        _mm512_storeu_ps(pr + 16 * j, e);
        sm += static_cast<double>(hsum_l16(e));
      } else {
        const __m512 e = v_expf_l8(x);
        _mm512_storeu_ps(pr + 16 * j, e);
        sm += static_cast<double>(hsum_l8(_mm512_castps512_ps256(e)));
        sm += static_cast<double>(hsum_l8(_mm512_extractf32x8_ps(e, 1)));
      }
    }
    sum[i] = sm;
  }
  for (int i = 0; i < RM; ++i) {
    if (tile_max[i] == kNegInf) continue;
    if (m_new[i] > M[i]) {
      const float ms = expf(M[i] - m_new[i]);
      const __m512 vms = _mm512_set1_ps(ms);
      float* ar = acc + i * job.dv;
      for (int64_t d = 0; d < job.dv; d += 16) {
        const __mmask16 m = tail_mask(job.dv - d);
        _mm512_mask_storeu_ps(ar + d, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, ar + d), vms));
      }
      S[i] *= ms;
    }
    M[i] = m_new[i];
    S[i] += sum[i];
  }
}

// acc[i][d0 .. d0 + 16*NZ) += sum over the tile's rows c of p[i][c] * vt[c][d],
// one FMA chain per output in c order; the last zmm is masked by last.
template <int RM, int NZ>
inline void pv_cols(const float* p, const float* vt, int64_t n_rows, int64_t dv, int64_t d0, __mmask16 last,
                    float* acc) {
  __m512 a[RM][NZ];
  #pragma GCC unroll 8
  for (int i = 0; i < RM; ++i)
    #pragma GCC unroll 4
    for (int z = 0; z < NZ; ++z)
      a[i][z] = _mm512_maskz_loadu_ps(z == NZ - 1 ? last : __mmask16(0xffff), acc + i * dv + d0 + 16 * z);
  for (int64_t c = 0; c < n_rows; ++c) {
    __m512 v[NZ];
    #pragma GCC unroll 4
    for (int z = 0; z < NZ; ++z)
      v[z] = _mm512_maskz_loadu_ps(z == NZ - 1 ? last : __mmask16(0xffff), vt + c * dv + d0 + 16 * z);
    #pragma GCC unroll 8
    for (int i = 0; i < RM; ++i) {
      const __m512 w = _mm512_set1_ps(p[i * kTkv + c]);
      #pragma GCC unroll 4
      for (int z = 0; z < NZ; ++z) a[i][z] = _mm512_fmadd_ps(v[z], w, a[i][z]);
    }
  }
  #pragma GCC unroll 8
  for (int i = 0; i < RM; ++i)
    #pragma GCC unroll 4
    for (int z = 0; z < NZ; ++z)
      _mm512_mask_storeu_ps(acc + i * dv + d0 + 16 * z, z == NZ - 1 ? last : __mmask16(0xffff), a[i][z]);
}

template <int RM>
void pv_block(const float* p, const float* vt, int64_t n_rows, int64_t dv, float* acc) {
  for (int64_t d0 = 0; d0 < dv; d0 += 64) {
    const int64_t w = imin(64, dv - d0), nz = (w + 15) / 16;
    const __mmask16 last = tail_mask(w - 16 * (nz - 1));
    switch (nz) {
      case 4: pv_cols<RM, 4>(p, vt, n_rows, dv, d0, last, acc); break;
      case 3: pv_cols<RM, 3>(p, vt, n_rows, dv, d0, last, acc); break;
      case 2: pv_cols<RM, 2>(p, vt, n_rows, dv, d0, last, acc); break;
      default: pv_cols<RM, 1>(p, vt, n_rows, dv, d0, last, acc); break;
    }
  }
}

// RM query rows (q rows dk floats apart, tile rows i0..i0+RM) of one head:
// scores, softmax and P.V for one cache tile.
template <int RM>
void tile_rows(const TilePass& tp, const float* q, int64_t t_first, float* M, float* S, float* acc, float* p) {
  const AttentionJob& job = *tp.job;
  const int64_t dk = job.dk, dv = job.dv;
  __m512 s[RM][4];
  #pragma GCC unroll 8
  for (int i = 0; i < RM; ++i)
    #pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) s[i][j] = _mm512_setzero_ps();
  for (int64_t d = 0; d < dk; ++d) {
    const float* kr = tp.kt + d * kTkv;
    const __m512 k0 = _mm512_loadu_ps(kr), k1 = _mm512_loadu_ps(kr + 16), k2 = _mm512_loadu_ps(kr + 32),
                 k3 = _mm512_loadu_ps(kr + 48);
    #pragma GCC unroll 8
    for (int i = 0; i < RM; ++i) {
      const __m512 qv = _mm512_set1_ps(q[i * dk + d]);
      s[i][0] = _mm512_fmadd_ps(k0, qv, s[i][0]);
      s[i][1] = _mm512_fmadd_ps(k1, qv, s[i][1]);
      s[i][2] = _mm512_fmadd_ps(k2, qv, s[i][2]);
      s[i][3] = _mm512_fmadd_ps(k3, qv, s[i][3]);
    }
  }
  softmax_block<RM>(tp, t_first, s, M, S, acc, p);
  pv_block<RM>(p, tp.vt, tp.n_rows, dv, acc);
}

constexpr int kRowBlock = 6;  // 24 score registers + 4 of K

void tile_head(const TilePass& tp, const float* q, int64_t t0, int64_t n_q, float* M, float* S, float* acc, float* p) {
  const int64_t dk = tp.job->dk, dv = tp.job->dv;
  int64_t i = 0;
  for (; i + kRowBlock <= n_q; i += kRowBlock)
    tile_rows<kRowBlock>(tp, q + i * dk, t0 + i, M + i, S + i, acc + i * dv, p);
  switch (n_q - i) {
    case 5: tile_rows<5>(tp, q + i * dk, t0 + i, M + i, S + i, acc + i * dv, p); break;
    case 4: tile_rows<4>(tp, q + i * dk, t0 + i, M + i, S + i, acc + i * dv, p); break;
    case 3: tile_rows<3>(tp, q + i * dk, t0 + i, M + i, S + i, acc + i * dv, p); break;
    case 2: tile_rows<2>(tp, q + i * dk, t0 + i, M + i, S + i, acc + i * dv, p); break;
    case 1: tile_rows<1>(tp, q + i * dk, t0 + i, M + i, S + i, acc + i * dv, p); break;
    default: break;
  }
}

bool tile_has_visible(const AttentionJob& job, int64_t t0, int64_t t1, int64_t ic, int64_t n_rows) {
  for (int64_t t = t0; t < t1; ++t)
    if (job.first_visible[t] < ic + n_rows && job.last_visible[t] >= ic) return true;
  return false;
}

struct TiledScratch {
  KvTile tile;
  Scratch<float> q, acc, M, S;  // q: [head of group][token][dk], contiguous
  alignas(64) float p[kRowBlock * kTkv];
};

}  // namespace

bool tiled_block_avx512(const AttentionJob& job, int64_t hk, int64_t t0, int64_t t1) {
  const int64_t G = job.group, n_q = t1 - t0, dk = job.dk, dv = job.dv;
  if (job.typed || n_q > kTq) return false;
  thread_local TiledScratch ws;
  float* acc_all = ws.acc.get(size_t(G * kTq * dv));
  float* M_all = ws.M.get(size_t(G * kTq));
  float* S_all = ws.S.get(size_t(G * kTq));
  float* q_all = ws.q.get(size_t(G * kTq * dk));
  memset(acc_all, 0, size_t(G * kTq * dv) * 4);
  for (int64_t i = 0; i < G * kTq; ++i) M_all[i] = kNegInf, S_all[i] = 0.0f;
  // Contiguous copies of the q rows (in place they lie n_head * dk floats
  // apart, often a multiple of 4 KiB: the same few L1 sets).
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = 0; i < n_q; ++i)
      memcpy(q_all + (g * kTq + i) * dk, job.q + ((t0 + i) * job.n_head + hk * G + g) * dk, size_t(dk) * 4);
  TilePass tp{&job, nullptr, nullptr, 0, 0, job.ref_lanes == 16, 0.0f};
  for (int64_t ic = 0; ic < job.n_kv; ic += kTkv) {
    const int64_t n_rows = imin(kTkv, job.n_kv - ic);
    if (!tile_has_visible(job, t0, t1, ic, n_rows)) continue;
    ws.tile.pack(job, hk, ic, n_rows);
    tp.kt = ws.tile.kt;
    tp.vt = ws.tile.vt;
    tp.ic = ic;
    tp.n_rows = n_rows;
    for (int64_t g = 0; g < G; ++g) {
      tp.alibi_slope = attention_alibi_slope(job, hk * G + g);
      tile_head(tp, q_all + g * kTq * dk, t0, n_q, M_all + g * kTq, S_all + g * kTq, acc_all + g * kTq * dv, ws.p);
    }
  }
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = 0; i < n_q; ++i) {
      float* acc = acc_all + (g * kTq + i) * dv;
      if (job.sinks != nullptr) attention_apply_sink(job.sinks[hk * G + g], M_all[g * kTq + i], S_all[g * kTq + i], acc, dv);
      const float S = S_all[g * kTq + i];
      const __m512 vi = _mm512_set1_ps(S == 0.0f ? 0.0f : 1.0f / S);
      float* out = job.out + ((t0 + i) * job.n_head + hk * G + g) * dv;
      for (int64_t d = 0; d < dv; d += 16) {
        const __mmask16 m = tail_mask(dv - d);
        _mm512_mask_storeu_ps(out + d, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, acc + d), vi));
      }
    }
  return true;
}

namespace {

// ---- one-row kernel -------------------------------------------------------

// FloatKernels::dot_f16 (8 lanes: 4 accumulators of 8 over steps of 32
// values; 16 lanes: 4 of 16 over steps of 64, then (acc0 + acc2) +
// (acc1 + acc3), the horizontal sum, and the n % step tail added in double)
// on rows already converted to f32 (exact), 16 cache rows at a time: each
// row's lane vector as the AVX2 kernel builds it, then the 16 horizontal
// sums together by a transposing tree that adds the same pairs of lanes:
// i + i+8, i + i+4, then (16 lanes) i + i+2 and 0 + 1, or (8 lanes, two
// hadds) 2i + 2i+1 twice.
template <bool kL16>
inline __m512 dot_lanes(const float* k, const float* q, int64_t np) {
  if (kL16) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < np; i += 64) {
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(k + i), _mm512_loadu_ps(q + i), a0);
      a1 = _mm512_fmadd_ps(_mm512_loadu_ps(k + i + 16), _mm512_loadu_ps(q + i + 16), a1);
      a2 = _mm512_fmadd_ps(_mm512_loadu_ps(k + i + 32), _mm512_loadu_ps(q + i + 32), a2);
      a3 = _mm512_fmadd_ps(_mm512_loadu_ps(k + i + 48), _mm512_loadu_ps(q + i + 48), a3);
    }
    return _mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3));
  }
  __m512 a01 = _mm512_setzero_ps(), a23 = a01;
  for (int64_t i = 0; i < np; i += 32) {
    a01 = _mm512_fmadd_ps(_mm512_loadu_ps(k + i), _mm512_loadu_ps(q + i), a01);
    a23 = _mm512_fmadd_ps(_mm512_loadu_ps(k + i + 16), _mm512_loadu_ps(q + i + 16), a23);
  }
  return _mm512_add_ps(a01, a23);  // acc0+acc2 | acc1+acc3: the AVX2 r is its halves' sum
}

// x[0..16): lane vectors of 16 cache rows -> their 16 sums, in row order.
template <bool kL16>
inline __m512 hsum16(__m512 x[16]) {
  __m512 y[8], z[4], w[2];
  for (int k = 0; k < 8; ++k)  // lanes i + i+8: row k in the low half, row k+8 in the high half
    y[k] = _mm512_add_ps(_mm512_shuffle_f32x4(x[k], x[k + 8], 0x44), _mm512_shuffle_f32x4(x[k], x[k + 8], 0xee));
  for (int k = 0; k < 4; ++k)  // i + i+4: 128-bit lanes hold rows k, k+8, k+4, k+12
    z[k] = _mm512_add_ps(_mm512_shuffle_f32x4(y[k], y[k + 4], 0x88), _mm512_shuffle_f32x4(y[k], y[k + 4], 0xdd));
  for (int k = 0; k < 2; ++k)
    w[k] = kL16 ? _mm512_add_ps(_mm512_shuffle_ps(z[k], z[k + 2], 0x44), _mm512_shuffle_ps(z[k], z[k + 2], 0xee))
                : _mm512_add_ps(_mm512_shuffle_ps(z[k], z[k + 2], 0x88), _mm512_shuffle_ps(z[k], z[k + 2], 0xdd));
  const __m512 f = _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], 0x88), _mm512_shuffle_ps(w[0], w[1], 0xdd));
  // lane 4L + e holds row [0, 8, 4, 12][L] + [0, 2, 1, 3][e]
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15), f);
}

// sr[c] = dot(kf row c, qr) for c < n, as dot_l16 / dot_l8 give them.
template <bool kL16>
void dots(const float* kf, const float* qr, int64_t dk, int64_t n, float* sr) {
  const int64_t np = dk & (kL16 ? ~int64_t{63} : ~int64_t{31});
  for (int64_t c0 = 0; c0 < n; c0 += 16) {
    const int64_t nk = imin(16, n - c0);
    __m512 x[16];
    for (int64_t c = 0; c < 16; ++c) x[c] = c < nk ? dot_lanes<kL16>(kf + (c0 + c) * dk, qr, np) : _mm512_setzero_ps();
    _mm512_mask_storeu_ps(sr + c0, tail_mask(nk), hsum16<kL16>(x));
    if (np == dk) continue;
    for (int64_t c = 0; c < nk; ++c) {  // the tail, in double
      const float* k = kf + (c0 + c) * dk;
      double sum = sr[c0 + c];
      for (int64_t i = np; i < dk; ++i) sum += static_cast<double>(k[i] * qr[i]);
      sr[c0 + c] = static_cast<float>(sum);
    }
  }
}

constexpr int64_t kOneRowChunk = 64;  // cache rows converted per pass
constexpr int64_t kPrefetchRows = 16;

inline void prefetch_bytes(const uint8_t* p, size_t n) {
  for (size_t off = 0; off < n; off += 64) _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
}

// attention_physical_row without a division per row when the page size is
// a power of two (the same value).
struct PhysRow {
  const int32_t* table;
  int64_t size;
  int shift = -1;
  explicit PhysRow(const AttentionJob& job) : table(job.page_table), size(job.page_size) {
    if (table != nullptr && size > 0 && (size & (size - 1)) == 0) shift = __builtin_ctzll(uint64_t(size));
  }
  int64_t operator()(int64_t j) const {
    if (table == nullptr) return j;
    if (shift >= 0) return (int64_t(table[j >> shift]) << shift) + (j & (size - 1));
    return int64_t(table[j / size]) * size + j % size;
  }
};

// Per query row and converted cache row: what the online softmax does there.
enum StepKind : uint8_t { kSkip = 0, kAdd = 1, kNewMax = 2 };

struct OneRowScratch {
  Scratch<float> qf_buf, kf_buf, vf_buf, scores_buf, e_buf;
  Scratch<uint8_t> kind_buf;
  float *qf = nullptr, *kf = nullptr, *vf = nullptr, *scores = nullptr, *e = nullptr;
  uint8_t* kind = nullptr;
  int64_t keys[kOneRowChunk];
};

// Phase B for one query row over the chunk's n cache rows: the reference's
// comparisons with the running maximum, its expf calls and its S updates,
// in order; leaves per cache row the kind of step and its expf value e (ms
// on a new maximum, where vs is 1; else vs, where ms is 1). Three loops, so
// that no loop-carried value lives across the expf calls (the calls clobber
// every vector register, and M and S would go through memory).
void softmax_steps(const uint8_t* vis, const int64_t* keys, const float* sc, int64_t n, float& M_io, float& S_io,
                   uint8_t* kind, float* e) {
  float M = M_io;
  for (int64_t c = 0; c < n; ++c) {
    if (vis[keys[c]] == 0) {
      kind[c] = kSkip;
      continue;
    }
    const float s = sc[c];
    if (s > M) {
      e[c] = M - s;  // ms = expf(m_old - s)
      M = s;
      kind[c] = kNewMax;
    } else {
      e[c] = s - M;  // vs = expf(s - M)
      kind[c] = kAdd;
    }
  }
  M_io = M;
  for (int64_t c = 0; c < n; ++c)
    if (kind[c] != kSkip) e[c] = expf(e[c]);
  float S = S_io;
  for (int64_t c = 0; c < n; ++c) {
    if (kind[c] == kSkip) continue;
    const float ms = kind[c] == kNewMax ? e[c] : 1.0f, vs = kind[c] == kNewMax ? 1.0f : e[c];
    S = S * ms + vs;
  }
  S_io = S;
}

// Phase C: the accumulators of RG query rows, columns [d0, d0 + 16 NZ) (the
// last zmm masked by last), over the chunk's n cache rows: on a new maximum
// acc = f16(acc * ms), then acc = f16(v * vs + acc) (unrounded with an f32
// accumulator). The columns are independent, so the work is split by
// columns and rows to keep the accumulators in registers.
template <bool kAcc16, int RG, int NZ>
void acc_pass(const OneRowScratch& ws, const int64_t* rows, int64_t n, int64_t dv, int64_t d0, __mmask16 last,
              float* acc) {
  __m512 a[RG][NZ];
  #pragma GCC unroll 8
  for (int g = 0; g < RG; ++g)
    #pragma GCC unroll 4
    for (int z = 0; z < NZ; ++z)
      a[g][z] = _mm512_maskz_loadu_ps(z == NZ - 1 ? last : __mmask16(0xffff), acc + rows[g] * dv + d0 + 16 * z);
  for (int64_t c = 0; c < n; ++c) {
    __m512 v[NZ];
    #pragma GCC unroll 4
    for (int z = 0; z < NZ; ++z)
      v[z] = _mm512_maskz_loadu_ps(z == NZ - 1 ? last : __mmask16(0xffff), ws.vf + c * dv + d0 + 16 * z);
    #pragma GCC unroll 8
    for (int g = 0; g < RG; ++g) {
      const int64_t i = rows[g] * kOneRowChunk + c;
      const uint8_t k = ws.kind[i];
      if (k == kSkip) continue;
      __m512 vvs = _mm512_set1_ps(ws.e[i]);
      if (k == kNewMax) {
        #pragma GCC unroll 4
        for (int z = 0; z < NZ; ++z) a[g][z] = kAcc16 ? round_f16(_mm512_mul_ps(a[g][z], vvs)) : _mm512_mul_ps(a[g][z], vvs);
        vvs = _mm512_set1_ps(1.0f);
      }
      #pragma GCC unroll 4
      for (int z = 0; z < NZ; ++z) {
        const __m512 y = _mm512_fmadd_ps(v[z], vvs, a[g][z]);
        a[g][z] = kAcc16 ? round_f16(y) : y;
      }
    }
  }
  #pragma GCC unroll 8
  for (int g = 0; g < RG; ++g)
    #pragma GCC unroll 4
    for (int z = 0; z < NZ; ++z)
      _mm512_mask_storeu_ps(acc + rows[g] * dv + d0 + 16 * z, z == NZ - 1 ? last : __mmask16(0xffff), a[g][z]);
}

template <bool kAcc16, int NZ>
void acc_pass_rows(const OneRowScratch& ws, const int64_t* rows, int64_t n_rows, int64_t n, int64_t dv, int64_t d0,
                   __mmask16 last, float* acc) {
  constexpr int kGroup = NZ >= 3 ? 5 : 8;  // up to 20 (or 16) accumulator registers
  int64_t i = 0;
  for (; i + kGroup <= n_rows; i += kGroup) acc_pass<kAcc16, kGroup, NZ>(ws, rows + i, n, dv, d0, last, acc);
  switch (n_rows - i) {
    case 7: acc_pass<kAcc16, 7, NZ>(ws, rows + i, n, dv, d0, last, acc); break;
    case 6: acc_pass<kAcc16, 6, NZ>(ws, rows + i, n, dv, d0, last, acc); break;
    case 5: acc_pass<kAcc16, 5, NZ>(ws, rows + i, n, dv, d0, last, acc); break;
    case 4: acc_pass<kAcc16, 4, NZ>(ws, rows + i, n, dv, d0, last, acc); break;
    case 3: acc_pass<kAcc16, 3, NZ>(ws, rows + i, n, dv, d0, last, acc); break;
    case 2: acc_pass<kAcc16, 2, NZ>(ws, rows + i, n, dv, d0, last, acc); break;
    case 1: acc_pass<kAcc16, 1, NZ>(ws, rows + i, n, dv, d0, last, acc); break;
    default: break;
  }
}

template <bool kAcc16>
void acc_update(const OneRowScratch& ws, const int64_t* rows, int64_t n_rows, int64_t n, int64_t dv, float* acc) {
  for (int64_t d0 = 0; d0 < dv; d0 += 64) {
    const int64_t w = imin(64, dv - d0), nz = (w + 15) / 16;
    const __mmask16 last = tail_mask(w - 16 * (nz - 1));
    switch (nz) {
      case 4: acc_pass_rows<kAcc16, 4>(ws, rows, n_rows, n, dv, d0, last, acc); break;
      case 3: acc_pass_rows<kAcc16, 3>(ws, rows, n_rows, n, dv, d0, last, acc); break;
      case 2: acc_pass_rows<kAcc16, 2>(ws, rows, n_rows, n, dv, d0, last, acc); break;
      default: acc_pass_rows<kAcc16, 1>(ws, rows, n_rows, n, dv, d0, last, acc); break;
    }
  }
}

}  // namespace

bool one_row_block_avx512(const AttentionJob& job, int64_t hk, int64_t t0, int64_t t1, int64_t j0, int64_t j1,
                          float* M, float* S, float* acc, bool resume, bool whole_rows) {
  if (!job.f16 || job.typed) return false;
  const int64_t G = job.group, dk = job.dk, dv = job.dv, rows = (t1 - t0) * G;
  thread_local OneRowScratch ws;
  thread_local Scratch<int64_t> row_ids_buf;
  ws.qf = ws.qf_buf.get(size_t(rows * dk));
  ws.kf = ws.kf_buf.get(size_t(kOneRowChunk * dk));
  ws.vf = ws.vf_buf.get(size_t(kOneRowChunk * dv));
  ws.scores = ws.scores_buf.get(size_t(rows * kOneRowChunk));
  ws.e = ws.e_buf.get(size_t(rows * kOneRowChunk));
  ws.kind = ws.kind_buf.get(size_t(rows * kOneRowChunk));
  int64_t* row_ids = row_ids_buf.get(size_t(rows));
  for (int64_t r = 0; r < rows; ++r) row_ids[r] = r;
  // q rounded to f16 (what ggml's K.q dot reads), held as floats.
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = job.q + ((t0 + r / G) * job.n_head + hk * G + r % G) * dk;
    float* dst = ws.qf + r * dk;
    for (int64_t i = 0; i < dk; i += 16) {
      const __mmask16 m = tail_mask(dk - i);
      _mm512_mask_storeu_ps(dst + i, m, round_f16(_mm512_maskz_loadu_ps(m, src + i)));
    }
  }
  if (!resume) {
    for (int64_t r = 0; r < rows; ++r) M[r] = kNegInf, S[r] = 0.0f;
    memset(acc, 0, size_t(rows * dv) * 4);
  }
  const size_t k_bytes = size_t(dk) * 2 * (whole_rows ? job.n_head_kv : 1);
  const size_t v_bytes = size_t(dv) * 2 * (whole_rows ? job.n_head_kv : 1);
  const int64_t pf_head = whole_rows ? 0 : hk;
  const bool l16 = job.ref_lanes == 16;
  const PhysRow phys_row(job);
  for (int64_t c0 = j0; c0 < j1; c0 += kOneRowChunk) {
    // Convert the chunk's rows that some row of the block sees, once.
    int64_t n = 0;
    for (int64_t j = c0; j < imin(j1, c0 + kOneRowChunk); ++j) {
      if (j + kPrefetchRows < j1) {  // the rows' K/V slices are far apart: help the hardware prefetcher
        const int64_t ahead = phys_row(j + kPrefetchRows);
        prefetch_bytes(job.k + size_t((ahead * job.n_head_kv + pf_head) * dk) * 2, k_bytes);
        prefetch_bytes(job.v + size_t((ahead * job.n_head_kv + pf_head) * dv) * 2, v_bytes);
      }
      bool seen = false;
      for (int64_t t = t0; t < t1 && !seen; ++t) seen = job.visible[t * job.n_kv + j] != 0;
      if (!seen) continue;
      const int64_t phys = phys_row(j);
      row_to_f32(job.k + size_t((phys * job.n_head_kv + hk) * dk) * 2, true, ws.kf + n * dk, dk);
      row_to_f32(job.v + size_t((phys * job.n_head_kv + hk) * dv) * 2, true, ws.vf + n * dv, dv);
      ws.keys[n++] = j;
    }
    if (n == 0) continue;
    // A: every score (independent dot products; scaled, softcapped and
    // ALiBi-biased as the reference does before its comparison with M).
    for (int64_t r = 0; r < rows; ++r) {
      const float* qr = ws.qf + r * dk;
      float* sr = ws.scores + r * kOneRowChunk;
      if (l16) dots<true>(ws.kf, qr, dk, n, sr);
      else dots<false>(ws.kf, qr, dk, n, sr);
      for (int64_t c = 0; c < n; ++c) {
        float s = sr[c] * job.scale;
        if (job.softcap != 0.0f) s = job.softcap * tanhf(s);
        sr[c] = attention_add_alibi(job, s, t0 + r / G, hk * G + r % G, ws.keys[c]);
      }
    }
    // B: per row, the running maximum, the expf calls and S, in order.
    for (int64_t r = 0; r < rows; ++r)
      softmax_steps(job.visible + (t0 + r / G) * job.n_kv, ws.keys, ws.scores + r * kOneRowChunk, n, M[r], S[r],
                    ws.kind + r * kOneRowChunk, ws.e + r * kOneRowChunk);
    // C: the accumulators, in registers.
    if (job.acc16) acc_update<true>(ws, row_ids, rows, n, dv, acc);
    else acc_update<false>(ws, row_ids, rows, n, dv, acc);
  }
  return true;
}

}  // namespace vtc::cpu::detail
