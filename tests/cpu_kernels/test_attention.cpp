// Attention against a double reference (plain softmax attention over the
// stored K/V values), for f32 and f16 caches, GQA, causal masks with
// per-token positions, sliding windows and softcap; then each of the
// kernel's three paths (one-row, split-KV, tiled) over odd shapes, paged
// caches and selected positions, bit for bit against the previous kernel's
// formulas where the reference runs the one-row loop, on 1 to 4 threads.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "frontends/gguf/dequant.h"
#include "kernel_test_util.h"
#include "tests/cpu_kernels/interp_test_util.h"
#include "runtime/cpu/kernels/attention_internal.h"
#include "runtime/cpu/kernels/internal.h"
#include "runtime/cpu/kernels/kernels.h"
#include "support/alibi.h"

using namespace vtc;
using namespace vtc::cpu;
using namespace vtc::cpu::test;

namespace {

struct Cache {
  std::vector<uint8_t> k, v;
  std::vector<float> kf, vf;  // the stored values, as floats
};

Cache make_cache(GgmlType t, int64_t n_kv, int64_t n_head_kv, int64_t dk, int64_t dv, uint32_t seed) {
  Cache c;
  c.kf = random_floats(n_kv * n_head_kv * dk, seed, -2.0f, 2.0f);
  c.vf = random_floats(n_kv * n_head_kv * dv, seed + 1);
  auto store = [t](std::vector<float>& f, std::vector<uint8_t>& out) {
    if (t == GgmlType::F32) {
      out.resize(f.size() * 4);
      std::memcpy(out.data(), f.data(), out.size());
      return;
    }
    out.resize(f.size() * 2);
    for (size_t i = 0; i < f.size(); ++i) {
      const uint16_t h = fp32_to_fp16(f[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
      f[i] = fp16_to_fp32(h);
    }
  };
  store(c.kf, c.k);
  store(c.vf, c.v);
  return c;
}

std::vector<double> reference(const std::vector<float>& q, const Cache& c, const std::vector<int32_t>& qpos,
                              const std::vector<int32_t>* kvpos, const AttentionParams& p) {
  const int64_t dk = p.head_dim, dv = p.head_dim_v ? p.head_dim_v : p.head_dim;
  std::vector<double> out(p.n_tokens * p.n_head * dv, 0.0);
  for (int64_t t = 0; t < p.n_tokens; ++t)
    for (int64_t h = 0; h < p.n_head; ++h) {
      const int64_t hk = h / (p.n_head / p.n_head_kv);
      std::vector<double> s(p.n_kv);
      std::vector<bool> vis(p.n_kv);
      double m = -1e300;
      for (int64_t j = 0; j < p.n_kv; ++j) {
        const int32_t kp = kvpos ? (*kvpos)[j] : int32_t(j);
        vis[j] = kp <= qpos[t] && (p.n_swa == 0 || qpos[t] - kp < p.n_swa);
        if (!vis[j]) continue;
        double d = 0;
        for (int64_t i = 0; i < dk; ++i) d += double(q[(t * p.n_head + h) * dk + i]) * c.kf[(j * p.n_head_kv + hk) * dk + i];
        d *= p.scale;
        if (p.softcap != 0) d = p.softcap * std::tanh(d / p.softcap);
        s[j] = d;
        m = std::max(m, d);
      }
      double sum = 0;
      for (int64_t j = 0; j < p.n_kv; ++j)
        if (vis[j]) sum += std::exp(s[j] - m);
      if (sum == 0) continue;
      for (int64_t j = 0; j < p.n_kv; ++j) {
        if (!vis[j]) continue;
        const double w = std::exp(s[j] - m) / sum;
        for (int64_t i = 0; i < dv; ++i) out[(t * p.n_head + h) * dv + i] += w * c.vf[(j * p.n_head_kv + hk) * dv + i];
      }
    }
  return out;
}

struct Case {
  const char* name;
  int64_t n_tokens, n_head, n_head_kv, head_dim, n_kv;
  int32_t n_swa;
  float softcap;
  bool kv_pos_shuffled;
};

const Case kCases[] = {
    {"decode, MHA", 1, 4, 4, 64, 37, 0, 0.f, false},
    {"prefill, GQA 4:1", 9, 8, 2, 64, 9, 0, 0.f, false},
    {"prefill after cache, GQA 2:1", 5, 4, 2, 128, 40, 0, 0.f, false},
    {"sliding window", 12, 2, 1, 32, 12, 4, 0.f, false},
    {"softcap", 3, 2, 2, 64, 20, 0, 30.f, false},
    {"odd head dim, unordered cache rows", 4, 3, 1, 36, 23, 0, 0.f, true},
};

}  // namespace

TEST_CASE("attention vs double reference", "[attention]") {
  ThreadPool pool(3);
  for (Isa isa : available_isas()) {
    IsaScope scope(isa);
    for (const Case& cs : kCases) {
      for (GgmlType kvt : {GgmlType::F32, GgmlType::F16}) {
        for (bool acc16 : {true, false}) {
          if (kvt == GgmlType::F32 && !acc16) continue;
          AttentionParams p;
          p.n_tokens = cs.n_tokens;
          p.n_head = cs.n_head;
          p.n_head_kv = cs.n_head_kv;
          p.head_dim = cs.head_dim;
          p.n_kv = cs.n_kv;
          p.k_type = p.v_type = kvt;
          p.depth_kernel = false;  // the reference's one-row order, pinned
          p.scale = 1.0f / std::sqrt(float(cs.head_dim));
          p.softcap = cs.softcap;
          p.n_swa = cs.n_swa;
          p.f16_accumulator = acc16;
          const auto c = make_cache(kvt, p.n_kv, p.n_head_kv, p.head_dim, p.head_dim, 31);
          const auto q = random_floats(p.n_tokens * p.n_head * p.head_dim, 32, -2.0f, 2.0f);
          std::vector<int32_t> qpos(p.n_tokens), kvpos(p.n_kv);
          for (int64_t t = 0; t < p.n_tokens; ++t) qpos[t] = int32_t(p.n_kv - p.n_tokens + t);
          for (int64_t j = 0; j < p.n_kv; ++j) kvpos[j] = int32_t(cs.kv_pos_shuffled ? (j * 7) % p.n_kv : j);
          const std::vector<int32_t>* kvp = cs.kv_pos_shuffled ? &kvpos : nullptr;
          Guarded out(p.n_tokens * p.n_head * p.head_dim);
          attention(q.data(), c.k.data(), c.v.data(), qpos.data(), kvp ? kvp->data() : nullptr, p, out.data(), pool);
          REQUIRE(out.intact());
          const double e = nmse(out.values(), reference(q, c, qpos, kvp, p));
          // f32 cache: reassociation only. f16 cache: q is rounded to f16 for
          // the K dot (as ggml does) and, with the f16 accumulator, V sums
          // round to f16 at every step.
          const double tol = kvt == GgmlType::F32 ? 1e-11 : (acc16 ? 3e-6 : 1e-6);
          INFO(fmt::format("{} {} kv={} acc16={} nmse {:.3g}", isa_name(isa), cs.name, ggml_type_name(kvt), acc16, e));
          CHECK(e < tol);
        }
      }
    }
  }
}

TEST_CASE("attention: identical bits for 1, 2, 3 threads, zeros for masked-out queries", "[attention][threads]") {
  ThreadPool p1(1), p2(2), p3(3);
  AttentionParams p;
  p.n_tokens = 7;
  p.n_head = 6;
  p.n_head_kv = 2;
  p.head_dim = 64;
  p.n_kv = 30;
  p.k_type = p.v_type = GgmlType::F16;
  p.depth_kernel = false;  // the reference's one-row order, pinned
  p.scale = 0.125f;
  const auto c = make_cache(GgmlType::F16, p.n_kv, p.n_head_kv, p.head_dim, p.head_dim, 5);
  const auto q = random_floats(p.n_tokens * p.n_head * p.head_dim, 6);
  std::vector<int32_t> qpos = {-1, 23, 24, 25, 26, 27, 29};  // the first sees no key
  auto run = [&](ThreadPool& pool) {
    Guarded out(p.n_tokens * p.n_head * p.head_dim);
    attention(q.data(), c.k.data(), c.v.data(), qpos.data(), nullptr, p, out.data(), pool);
    REQUIRE(out.intact());
    return out.values();
  };
  const auto a = run(p1);
  CHECK(bitwise_equal(a, run(p2)));
  CHECK(bitwise_equal(a, run(p3)));
  for (int64_t i = 0; i < p.n_head * p.head_dim; ++i) CHECK(a[i] == 0.0f);
}

TEST_CASE("attention: scalar and every SIMD level agree", "[attention][isa]") {
  if (simd_isas().empty()) {
    WARN("SKIPPED: AVX2 is not available here");
    return;
  }
  ThreadPool pool(2);
  AttentionParams p;
  p.n_tokens = 4;
  p.n_head = 4;
  p.n_head_kv = 2;
  p.head_dim = 84;  // not a multiple of the vector width: exercises the tails
  p.n_kv = 50;
  p.scale = 0.088f;
  for (GgmlType kvt : {GgmlType::F32, GgmlType::F16}) {
    p.k_type = p.v_type = kvt;
    p.depth_kernel = false;  // the reference's one-row order, pinned
    const auto c = make_cache(kvt, p.n_kv, p.n_head_kv, p.head_dim, p.head_dim, 8);
    const auto q = random_floats(p.n_tokens * p.n_head * p.head_dim, 9);
    std::vector<int32_t> qpos = {46, 47, 48, 49};
    std::vector<float> ys, yv;
    for (Isa isa : available_isas()) {
      IsaScope scope(isa);
      std::vector<float> out(p.n_tokens * p.n_head * p.head_dim);
      attention(q.data(), c.k.data(), c.v.data(), qpos.data(), nullptr, p, out.data(), pool);
      (isa == Isa::Scalar ? ys : yv) = out;
    }
    INFO(ggml_type_name(kvt));
    CHECK(nmse(yv, ys) < (kvt == GgmlType::F32 ? 1e-12 : 1e-7));
  }
}

TEST_CASE("attention: rejects bad shapes and types", "[attention]") {
  ThreadPool pool(1);
  AttentionParams p;
  p.n_tokens = 1;
  p.n_head = 3;
  p.n_head_kv = 2;
  p.head_dim = 8;
  p.n_kv = 1;
  std::vector<float> q(64), out(64);
  std::vector<uint16_t> kv(64);
  const int32_t pos = 0;
  CHECK_THROWS(attention(q.data(), kv.data(), kv.data(), &pos, nullptr, p, out.data(), pool));
  p.n_head = 2;
  p.k_type = p.v_type = GgmlType::Q4_K;  // not a KV cache type
  CHECK_THROWS_WITH(attention(q.data(), kv.data(), kv.data(), &pos, nullptr, p, out.data(), pool),
                    Catch::Contains("not a KV cache type"));
  p.k_type = p.v_type = GgmlType::Q8_0;  // head_dim 8: not a whole q8_0 block
  CHECK_THROWS_WITH(attention(q.data(), kv.data(), kv.data(), &pos, nullptr, p, out.data(), pool),
                    Catch::Contains("not whole"));
}

// ---- The three paths (one-row, split-KV, tiled) ---------------------------
//
// A general problem (paged cache, GQA, masks, selected positions), run
// through attention() and checked against (a) a double reference by NMSE,
// (b) for the one-row and split-KV paths, a transcription of the previous
// kernel's per-row loop through the FloatKernels (bit for bit), and (c) the
// same call on 1 to 4 threads (bit for bit where the path is thread-blind).
namespace {

struct Problem {
  AttentionParams p;
  int64_t dv = 0;
  std::vector<float> q;
  std::vector<uint8_t> k, v;    // physical rows (through the page table when paged)
  std::vector<float> kf, vf;    // logical rows, as stored values
  std::vector<int32_t> qpos, table, selected;
};

void store_row(GgmlType t, const float* src, int64_t n, uint8_t* dst, float* stored) {
  for (int64_t i = 0; i < n; ++i) {
    if (t == GgmlType::F32) {
      std::memcpy(dst + 4 * i, src + i, 4);
      stored[i] = src[i];
    } else {
      const uint16_t h = fp32_to_fp16(src[i]);
      std::memcpy(dst + 2 * i, &h, 2);
      stored[i] = fp16_to_fp32(h);
    }
  }
}

struct Shape {
  int64_t n_tokens, n_head, n_head_kv, dk, dv, n_kv;
  int64_t page_size = 0;  // 0: dense
  int32_t n_swa = 0;
  float softcap = 0.0f;
  int64_t selected_width = 0;  // 0: none
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
  p.f16_accumulator = acc16;
  pr.dv = s.dv;
  pr.q = random_floats(size_t(s.n_tokens * s.n_head * s.dk), seed, -2.0f, 2.0f);
  const auto kraw = random_floats(size_t(s.n_kv * s.n_head_kv * s.dk), seed + 1, -2.0f, 2.0f);
  const auto vraw = random_floats(size_t(s.n_kv * s.n_head_kv * s.dv), seed + 2);
  const int64_t es = kvt == GgmlType::F32 ? 4 : 2, krow = s.n_head_kv * s.dk, vrow = s.n_head_kv * s.dv;
  int64_t n_phys = s.n_kv;
  if (s.page_size > 0) {  // pages in reverse order, one spare page at the front
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
  for (int64_t j = 0; j < s.n_kv; ++j) {
    const int64_t r = s.page_size > 0 ? pr.table[size_t(j / s.page_size)] * s.page_size + j % s.page_size : j;
    store_row(kvt, kraw.data() + j * krow, krow, pr.k.data() + r * krow * es, pr.kf.data() + j * krow);
    store_row(kvt, vraw.data() + j * vrow, vrow, pr.v.data() + r * vrow * es, pr.vf.data() + j * vrow);
  }
  for (int64_t t = 0; t < s.n_tokens; ++t) pr.qpos.push_back(int32_t(s.n_kv - s.n_tokens + t));
  if (s.selected_width > 0) {  // every third visible position, from the newest, padded with -1
    for (int64_t t = 0; t < s.n_tokens; ++t)
      for (int64_t i = 0; i < s.selected_width; ++i) {
        const int64_t pos = pr.qpos[size_t(t)] - 3 * i;
        pr.selected.push_back(pos >= 0 && i % 5 != 4 ? int32_t(pos) : -1);
      }
    p.selected = pr.selected.data();
    p.selected_width = s.selected_width;
  }
  return pr;
}

bool key_visible(const Problem& pr, int64_t t, int64_t j) {
  const AttentionParams& p = pr.p;
  const int32_t qp = pr.qpos[size_t(t)];
  if (j > qp || (p.n_swa > 0 && qp - j >= p.n_swa)) return false;
  if (p.selected == nullptr) return true;
  for (int64_t i = 0; i < p.selected_width; ++i)
    if (p.selected[t * p.selected_width + i] == j) return true;
  return false;
}

std::vector<double> reference_of(const Problem& pr) {
  const AttentionParams& p = pr.p;
  const int64_t dk = p.head_dim, dv = pr.dv, group = p.n_head / p.n_head_kv;
  std::vector<double> out(size_t(p.n_tokens * p.n_head * dv), 0.0);
  std::vector<double> s(size_t(p.n_kv));
  for (int64_t t = 0; t < p.n_tokens; ++t)
    for (int64_t h = 0; h < p.n_head; ++h) {
      const int64_t hk = h / group;
      double m = -1e300, sum = 0;
      for (int64_t j = 0; j < p.n_kv; ++j) {
        if (!key_visible(pr, t, j)) continue;
        double d = 0;
        for (int64_t i = 0; i < dk; ++i)
          d += double(pr.q[size_t((t * p.n_head + h) * dk + i)]) * pr.kf[size_t((j * p.n_head_kv + hk) * dk + i)];
        d *= p.scale;
        if (p.softcap != 0) d = p.softcap * std::tanh(d / p.softcap);
        s[size_t(j)] = d;
        m = std::max(m, d);
      }
      for (int64_t j = 0; j < p.n_kv; ++j)
        if (key_visible(pr, t, j)) sum += std::exp(s[size_t(j)] - m);
      if (sum == 0) continue;
      for (int64_t j = 0; j < p.n_kv; ++j) {
        if (!key_visible(pr, t, j)) continue;
        const double w = std::exp(s[size_t(j)] - m) / sum;
        for (int64_t i = 0; i < dv; ++i)
          out[size_t((t * p.n_head + h) * dv + i)] += w * pr.vf[size_t((j * p.n_head_kv + hk) * dv + i)];
      }
    }
  return out;
}

const detail::FloatKernels& float_table(int lanes) {
  if (active_isa() >= Isa::Avx2) return lanes == 16 ? *detail::avx2_float_kernels_l16() : *detail::avx2_float_kernels();
  return detail::scalar_float_kernels();
}

// The previous kernel's loop for one query row over cache rows [j0, j1),
// verbatim in its arithmetic: leaves M, S and the f32 accumulator.
void previous_one_row(const Problem& pr, const detail::FloatKernels& fk, int64_t t, int64_t h, int64_t j0,
                      int64_t j1, float& M, float& S, std::vector<float>& acc32) {
  const AttentionParams& p = pr.p;
  const int64_t dk = p.head_dim, dv = pr.dv, hkv = h / (p.n_head / p.n_head_kv);
  const bool f16 = p.k_type == GgmlType::F16, acc16 = f16 && p.f16_accumulator;
  const size_t es = f16 ? 2 : 4;
  float scale = p.scale;
  if (p.softcap != 0.0f) scale /= p.softcap;
  std::vector<uint16_t> acc16v(static_cast<size_t>(dv), 0), q16(static_cast<size_t>(dk));
  acc32.assign(size_t(dv), 0.0f);
  const float* qr = pr.q.data() + (t * p.n_head + h) * dk;
  if (f16) fk.f32_to_f16(qr, q16.data(), dk);
  M = -std::numeric_limits<float>::infinity();
  S = 0.0f;
  for (int64_t j = j0; j < j1; ++j) {
    if (!key_visible(pr, t, j)) continue;
    const int64_t r = p.page_table == nullptr ? j : int64_t(p.page_table[j / p.page_size]) * p.page_size + j % p.page_size;
    const uint8_t* kb = pr.k.data() + size_t((r * p.n_head_kv + hkv) * dk) * es;
    const uint8_t* vb = pr.v.data() + size_t((r * p.n_head_kv + hkv) * dv) * es;
    float s = f16 ? fk.dot_f16(reinterpret_cast<const uint16_t*>(kb), q16.data(), dk)
                  : fk.dot_f32(reinterpret_cast<const float*>(kb), qr, dk);
    s *= scale;
    if (p.softcap != 0.0f) s = p.softcap * std::tanh(s);
    float ms = 1.0f, vs = 1.0f;
    if (s > M) {
      const float m_old = M;
      M = s;
      ms = std::exp(m_old - M);
      if (acc16) fk.scale_f16(acc16v.data(), ms, dv);
      else fk.scale(acc32.data(), ms, acc32.data(), dv);
    } else {
      vs = std::exp(s - M);
    }
    if (acc16) fk.mad_f16(acc16v.data(), reinterpret_cast<const uint16_t*>(vb), vs, dv);
    else if (f16) fk.mad_f32_f16(acc32.data(), reinterpret_cast<const uint16_t*>(vb), vs, dv);
    else fk.mad_f32(acc32.data(), reinterpret_cast<const float*>(vb), vs, dv);
    S = S * ms + vs;
  }
  if (acc16)
    for (int64_t d = 0; d < dv; ++d) acc32[size_t(d)] = fp16_to_fp32(acc16v[size_t(d)]);
}

// The previous kernel's output; with n_chunks > 1 (one query row), the
// reference's split-KV: chunks of ceil(view / n_chunks) rows of the cache
// view (n_kv padded to 256), merged in order.
std::vector<float> previous_kernel(const Problem& pr, int lanes, int64_t n_chunks) {
  const AttentionParams& p = pr.p;
  const detail::FloatKernels& fk = float_table(lanes);
  const int64_t dv = pr.dv;
  std::vector<float> out(size_t(p.n_tokens * p.n_head * dv)), acc;
  const int64_t view = (p.n_kv + 255) / 256 * 256, chunk = (view + n_chunks - 1) / n_chunks;
  for (int64_t t = 0; t < p.n_tokens; ++t)
    for (int64_t h = 0; h < p.n_head; ++h) {
      float* o = out.data() + (t * p.n_head + h) * dv;
      if (n_chunks == 1) {
        float M, S;
        previous_one_row(pr, fk, t, h, 0, p.n_kv, M, S, acc);
        fk.scale(acc.data(), S == 0.0f ? 0.0f : 1.0f / S, o, dv);
        continue;
      }
      float Mf = -std::numeric_limits<float>::infinity(), Sf = 0.0f;
      std::vector<float> accf(size_t(dv), 0.0f);
      for (int64_t c = 0; c < n_chunks; ++c) {
        float M, S;
        previous_one_row(pr, fk, t, h, std::min(p.n_kv, c * chunk), std::min(p.n_kv, (c + 1) * chunk), M, S, acc);
        if (S == 0.0f) continue;
        const float m_new = std::fmax(Mf, M), so = std::exp(Mf - m_new), sn = std::exp(M - m_new);
        for (int64_t d = 0; d < dv; ++d) {
          const float a = accf[size_t(d)] * so, b = acc[size_t(d)] * sn;
          accf[size_t(d)] = a + b;
        }
        const float a = Sf * so, b = S * sn;
        Sf = a + b;
        Mf = m_new;
      }
      if (Sf != 0.0f) fk.scale(accf.data(), 1.0f / Sf, accf.data(), dv);
      std::copy(accf.begin(), accf.end(), o);
    }
  return out;
}

std::vector<float> run_attention(const Problem& pr, ThreadPool& pool, int lanes) {
  Guarded out(size_t(pr.p.n_tokens * pr.p.n_head * pr.dv));
  detail::attention_with_lanes(pr.q.data(), pr.k.data(), pr.v.data(), pr.qpos.data(), nullptr, pr.p, out.data(), pool,
                               lanes);
  REQUIRE(out.intact());
  return out.values();
}

std::string describe(const Shape& s, GgmlType kvt, bool acc16, int lanes) {
  return fmt::format("{} tok, {}/{} heads, dk {} dv {}, n_kv {}, page {}, swa {}, softcap {}, selected {}, {} acc16={} "
                     "lanes {} isa {}",
                     s.n_tokens, s.n_head, s.n_head_kv, s.dk, s.dv, s.n_kv, s.page_size, s.n_swa, s.softcap,
                     s.selected_width, ggml_type_name(kvt), acc16, lanes, isa_name(active_isa()));
}

// Few-row shapes (the one-row kernel): 1..17 tokens, GQA 1/2/4/8.
const Shape kOneRowShapes[] = {
    {1, 4, 4, 64, 64, 37},
    {1, 16, 2, 64, 64, 200, 16},
    {2, 8, 1, 128, 128, 70},
    {3, 8, 4, 36, 36, 45, 0, 0, 0.f, 0},
    {5, 12, 3, 64, 64, 133, 32, 0, 0.f, 0},
    {7, 8, 2, 80, 80, 90, 0, 0, 20.f},
    {9, 16, 4, 64, 64, 9},
    {13, 4, 2, 64, 48, 77, 16, 8},
    {16, 8, 8, 32, 32, 40, 0, 0, 0.f, 9},
    {17, 16, 2, 64, 64, 150, 64},
    {63, 4, 1, 64, 64, 100},
};

// 64+ rows (the tiled kernel, or the one-row one when dv is not a multiple
// of the reference's SIMD width).
const Shape kTiledShapes[] = {
    {64, 4, 2, 64, 64, 64},
    {65, 8, 1, 64, 64, 65, 16},
    {100, 4, 4, 64, 64, 300, 32},
    {130, 16, 2, 64, 64, 130},
    {70, 8, 4, 128, 128, 200, 0, 50},
    {96, 4, 2, 40, 40, 150, 0, 0, 0.f},  // dv 40: tiled on 8 lanes, one-row on 16
    {80, 4, 1, 64, 64, 90, 0, 0, 25.f},
    {66, 2, 2, 36, 64, 120, 16, 0, 0.f, 21},
};

// One row, long caches (split-KV from 257 rows: the padded view has 512).
const Shape kSplitShapes[] = {
    {1, 16, 2, 64, 64, 257},
    {1, 8, 8, 64, 64, 700, 16},
    {1, 8, 1, 128, 128, 1100, 0, 300},
    {1, 20, 4, 64, 64, 600, 32, 0, 0.f, 40},
};

double tolerance(GgmlType kvt, bool acc16, bool tiled, int64_t n_kv) {
  if (kvt == GgmlType::F32 || tiled) return 1e-10;  // f32 arithmetic, exact K/V values
  if (!acc16) return 2e-6;                          // q rounded to f16
  return n_kv <= 256 ? 5e-6 : 4e-5;                 // and the f16 accumulator's roundings add up
}

void check_shape(const Shape& s, GgmlType kvt, bool acc16, int lanes, bool tiled_rows, bool split_rows) {
  const Problem pr = make_problem(s, kvt, acc16, uint32_t(s.n_tokens * 131 + s.n_kv));
  const bool tiled = tiled_rows && (active_isa() < Isa::Avx2 || s.dv % lanes == 0);
  ThreadPool p1(1);
  const auto base = run_attention(pr, p1, lanes);
  INFO(describe(s, kvt, acc16, lanes));
  const double e = nmse(base, reference_of(pr));
  INFO(fmt::format("nmse {:.3g}", e));
  CHECK(e < tolerance(kvt, acc16, tiled, s.n_kv));
  if (!tiled) CHECK(bitwise_equal(base, previous_kernel(pr, lanes, 1)));
  for (int n = 2; n <= 4; ++n) {
    ThreadPool pool(n);
    const auto got = run_attention(pr, pool, lanes);
    INFO(n << " threads");
    if (split_rows) CHECK(bitwise_equal(got, previous_kernel(pr, lanes, n)));
    else CHECK(bitwise_equal(got, base));
  }
}

void check_shapes(const Shape* shapes, size_t n, bool tiled_rows, bool split_rows) {
  for (Isa isa : available_isas()) {
    IsaScope scope(isa);
    for (int lanes : {8, 16}) {
      if (isa == Isa::Scalar && lanes == 16) continue;  // the scalar table has one order
      for (size_t i = 0; i < n; ++i)
        for (GgmlType kvt : {GgmlType::F16, GgmlType::F32})
          for (bool acc16 : {true, false}) {
            if (kvt == GgmlType::F32 && !acc16) continue;
            check_shape(shapes[i], kvt, acc16, lanes, tiled_rows, split_rows);
          }
    }
  }
}

}  // namespace

TEST_CASE("attention, one-row path: previous kernel's bits, double reference, 1-4 threads", "[attention][paths]") {
  check_shapes(kOneRowShapes, std::size(kOneRowShapes), false, false);
}

TEST_CASE("attention, tiled path (64+ rows): double reference, 1-4 threads", "[attention][paths]") {
  check_shapes(kTiledShapes, std::size(kTiledShapes), true, false);
}

TEST_CASE("attention, split-KV decode: the reference's chunks and merge, 1-4 threads", "[attention][paths]") {
  check_shapes(kSplitShapes, std::size(kSplitShapes), false, true);
}

namespace {

// Softmax attention with sinks, in double, straight from the formula of
// docs/ir.md: p_j = exp(s_j - m) / (sum_i exp(s_i - m) + exp(sink_h - m)),
// m the maximum over the visible scores and the sink; the sink has no value.
std::vector<double> reference_with_sinks(const std::vector<float>& q, const Cache& c, const std::vector<int32_t>& qpos,
                                         const AttentionParams& p) {
  const int64_t dk = p.head_dim, dv = p.head_dim;
  std::vector<double> out(size_t(p.n_tokens * p.n_head * dv), 0.0);
  for (int64_t t = 0; t < p.n_tokens; ++t)
    for (int64_t h = 0; h < p.n_head; ++h) {
      const int64_t hk = h / (p.n_head / p.n_head_kv);
      std::vector<double> s(size_t(p.n_kv));
      std::vector<bool> vis(size_t(p.n_kv));
      double m = p.sinks[h];
      for (int64_t j = 0; j < p.n_kv; ++j) {
        vis[j] = j <= qpos[t] && (p.n_swa == 0 || qpos[t] - j < p.n_swa);
        if (!vis[j]) continue;
        double d = 0;
        for (int64_t i = 0; i < dk; ++i) d += double(q[(t * p.n_head + h) * dk + i]) * c.kf[(j * p.n_head_kv + hk) * dk + i];
        s[j] = d * p.scale;
        m = std::max(m, s[j]);
      }
      double sum = std::exp(double(p.sinks[h]) - m);
      for (int64_t j = 0; j < p.n_kv; ++j)
        if (vis[j]) sum += std::exp(s[j] - m);
      for (int64_t j = 0; j < p.n_kv; ++j) {
        if (!vis[j]) continue;
        const double w = std::exp(s[j] - m) / sum;
        for (int64_t i = 0; i < dv; ++i) out[(t * p.n_head + h) * dv + i] += w * c.vf[(j * p.n_head_kv + hk) * dv + i];
      }
    }
  return out;
}

namespace {

// The geometry shared by the sinks and chunk cases: head_dim 64, scale 1/8.
AttentionParams masked_case_params(int64_t n_tokens, int64_t n_head, int64_t n_head_kv, int64_t n_kv, GgmlType kvt) {
  AttentionParams p;
  p.n_tokens = n_tokens;
  p.n_head = n_head;
  p.n_head_kv = n_head_kv;
  p.head_dim = 64;
  p.n_kv = n_kv;
  p.k_type = p.v_type = kvt;
  p.depth_kernel = false;  // the reference's one-row order, pinned
  p.scale = 1.0f / 8.0f;
  return p;
}

// Runs fn(pool, isa, threads, case, kv type) for every ISA the machine has,
// 1 and 3 threads, each case, and f32 and f16 caches.
template <class Cases, class Fn>
void for_each_config(const Cases& cases, Fn fn) {
  for (Isa isa : available_isas()) {
    IsaScope scope(isa);
    for (int threads : {1, 3}) {
      ThreadPool pool(threads);
      for (const auto& cs : cases)
        for (GgmlType kvt : {GgmlType::F32, GgmlType::F16}) fn(pool, isa, threads, cs, kvt);
    }
  }
}

}  // namespace

struct SinkCase {
  const char* name;
  int64_t n_tokens, n_head, n_head_kv, n_kv;
  int32_t n_swa;
};

}  // namespace

// Each path (one-row, tiled, split-KV) with sinks far below, near and far
// above the scores, so the sink both adds to the denominator and takes the
// maximum; the sink must also change the result (a kernel that ignores it
// is off by more than 1e-2).
TEST_CASE("attention with sinks vs the softmax-with-sink formula, every path, 1 and 3 threads", "[attention][sinks]") {
  const SinkCase cases[] = {
      {"one-row prefill, GQA 2:1", 5, 4, 2, 40, 0},
      {"one-row, sliding window", 12, 2, 1, 12, 4},
      {"tiled, 70 rows", 70, 4, 2, 70, 0},
      {"tiled, sliding window", 66, 2, 2, 66, 16},
      {"split-KV decode", 1, 4, 2, 600, 0},
      {"split-KV decode, window", 1, 2, 2, 530, 64},
  };
  const float sink_values[] = {6.0f, -20.0f, 30.0f, 0.5f};
  for_each_config(cases, [&](ThreadPool& pool, Isa isa, int threads, const SinkCase& cs, GgmlType kvt) {
    AttentionParams p = masked_case_params(cs.n_tokens, cs.n_head, cs.n_head_kv, cs.n_kv, kvt);
    p.n_swa = cs.n_swa;
    std::vector<float> sinks(size_t(p.n_head));
    for (int64_t h = 0; h < p.n_head; ++h) sinks[size_t(h)] = sink_values[h % 4];
    p.sinks = sinks.data();
    const auto c = make_cache(kvt, p.n_kv, p.n_head_kv, p.head_dim, p.head_dim, 41);
    const auto q = random_floats(p.n_tokens * p.n_head * p.head_dim, 42, -2.0f, 2.0f);
    std::vector<int32_t> qpos(size_t(p.n_tokens));
    for (int64_t t = 0; t < p.n_tokens; ++t) qpos[size_t(t)] = int32_t(p.n_kv - p.n_tokens + t);
    Guarded out(p.n_tokens * p.n_head * p.head_dim);
    attention(q.data(), c.k.data(), c.v.data(), qpos.data(), nullptr, p, out.data(), pool);
    REQUIRE(out.intact());
    const double e = nmse(out.values(), reference_with_sinks(q, c, qpos, p));
    AttentionParams plain = p;
    plain.sinks = nullptr;
    Guarded without(p.n_tokens * p.n_head * p.head_dim);
    attention(q.data(), c.k.data(), c.v.data(), qpos.data(), nullptr, plain, without.data(), pool);
    const double moved = nmse(without.values(), reference_with_sinks(q, c, qpos, p));
    // The path tests' bounds: the f16 accumulator's roundings add up over long caches.
    const double tol = tolerance(kvt, true, cs.n_tokens >= detail::kAttentionTileQ, cs.n_kv);
    INFO(fmt::format("{} threads {} {} kv={} nmse {:.3g} (without sinks {:.3g})", isa_name(isa), threads, cs.name,
                     ggml_type_name(kvt), e, moved));
    CHECK(e < tol);
    CHECK(moved > 1e-2);
  });
}

// Timing, not a test: ./test_cpu_kernels "[.attention-bench]"
TEST_CASE("attention timing: pp512 and decode at growing cache", "[.attention-bench]") {
  const int n_threads = std::getenv("VTC_BENCH_THREADS") ? std::atoi(std::getenv("VTC_BENCH_THREADS")) : 2;
  ThreadPool pool(n_threads);
  auto time_ms = [&](const Problem& pr, int reps) {
    std::vector<float> out(size_t(pr.p.n_tokens * pr.p.n_head * pr.dv));
    double best = 1e300;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      attention(pr.q.data(), pr.k.data(), pr.v.data(), pr.qpos.data(), nullptr, pr.p, out.data(), pool);
      best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
  };
  const char* what = std::getenv("VTC_BENCH_WHAT");  // "pp", "decode" or unset (both)
  const bool do_pp = what == nullptr || std::string(what) == "pp", do_dec = what == nullptr || std::string(what) == "decode";
  for (const auto& [heads, kv_heads] : {std::pair{16, 8}, std::pair{20, 4}}) {
    const Shape pp{512, heads, kv_heads, 64, 64, 512, 16};
    const double ms = do_pp ? time_ms(make_problem(pp, GgmlType::F16, true, 1), 10) : 0.0;
    const double flops = 4.0 * heads * 64 * (512.0 * 513 / 2);
    fmt::print("pp512 {}/{} heads: {:.2f} ms, {:.1f} GFLOP/s (causal), {} threads\n", heads, kv_heads, ms,
               flops / ms * 1e-6, n_threads);
    for (int64_t n_kv : {1, 256, 1024, 4096}) {
      if (!do_dec) break;
      const Shape dec{1, heads, kv_heads, 64, 64, n_kv, 16};
      const double d = time_ms(make_problem(dec, GgmlType::F16, true, 2), 50);
      fmt::print("decode {}/{} heads, {} cached: {:.4f} ms per layer\n", heads, kv_heads, n_kv, d);
    }
  }
}

namespace {

// Plain softmax attention in double over the keys `visible(q_pos, k_pos)`
// allows (cache row j at position j).
template <class Visible>
std::vector<double> reference_masked(const std::vector<float>& q, const Cache& c, const std::vector<int32_t>& qpos,
                                     const AttentionParams& p, Visible visible) {
  const int64_t dk = p.head_dim, dv = p.head_dim;
  std::vector<double> out(size_t(p.n_tokens * p.n_head * dv), 0.0);
  for (int64_t t = 0; t < p.n_tokens; ++t)
    for (int64_t h = 0; h < p.n_head; ++h) {
      const int64_t hk = h / (p.n_head / p.n_head_kv);
      std::vector<double> s(size_t(p.n_kv));
      double m = -1e300;
      for (int64_t j = 0; j < p.n_kv; ++j) {
        if (!visible(qpos[t], int32_t(j))) continue;
        double d = 0;
        for (int64_t i = 0; i < dk; ++i) d += double(q[(t * p.n_head + h) * dk + i]) * c.kf[(j * p.n_head_kv + hk) * dk + i];
        s[j] = d * p.scale;
        m = std::max(m, s[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < p.n_kv; ++j)
        if (visible(qpos[t], int32_t(j))) sum += std::exp(s[j] - m);
      for (int64_t j = 0; j < p.n_kv; ++j) {
        if (!visible(qpos[t], int32_t(j))) continue;
        const double w = std::exp(s[j] - m) / sum;
        for (int64_t i = 0; i < dv; ++i) out[(t * p.n_head + h) * dv + i] += w * c.vf[(j * p.n_head_kv + hk) * dv + i];
      }
    }
  return out;
}

struct ChunkCase {
  const char* name;
  int64_t n_tokens, n_head, n_head_kv, n_kv;
  int32_t n_chunk, n_swa;
};

}  // namespace

// Chunked attention (llama4, docs/ir.md "### attention" `chunk`): key k is
// visible to query q iff k <= q and floor(k / chunk) == floor(q / chunk),
// on each path, with queries on both sides of chunk boundaries; the chunk
// must change the result (a kernel that ignores it is off by > 1e-2).
TEST_CASE("attention with chunks vs the chunked-mask formula, every path, 1 and 3 threads", "[attention][chunk]") {
  const ChunkCase cases[] = {
      {"one-row prefill, chunk 5", 12, 2, 1, 12, 5, 0},
      {"one-row, prefill after cache across a boundary", 5, 4, 2, 40, 8, 0},
      {"one-row, chunk and window", 12, 2, 2, 12, 6, 4},
      {"tiled, 70 rows, chunk 16", 70, 4, 2, 70, 16, 0},
      {"split-KV decode, chunk 256", 1, 4, 2, 600, 256, 0},
  };
  for_each_config(cases, [&](ThreadPool& pool, Isa isa, int threads, const ChunkCase& cs, GgmlType kvt) {
    AttentionParams p = masked_case_params(cs.n_tokens, cs.n_head, cs.n_head_kv, cs.n_kv, kvt);
    p.n_chunk = cs.n_chunk;
    p.n_swa = cs.n_swa;
    const auto c = make_cache(kvt, p.n_kv, p.n_head_kv, p.head_dim, p.head_dim, 51);
    const auto q = random_floats(p.n_tokens * p.n_head * p.head_dim, 52, -2.0f, 2.0f);
    std::vector<int32_t> qpos(size_t(p.n_tokens));
    for (int64_t t = 0; t < p.n_tokens; ++t) qpos[size_t(t)] = int32_t(p.n_kv - p.n_tokens + t);
    auto chunked = [&](int32_t qp, int32_t kp) {
      return kp <= qp && kp / cs.n_chunk == qp / cs.n_chunk && (cs.n_swa == 0 || qp - kp < cs.n_swa);
    };
    const auto want = reference_masked(q, c, qpos, p, chunked);
    Guarded out(p.n_tokens * p.n_head * p.head_dim);
    attention(q.data(), c.k.data(), c.v.data(), qpos.data(), nullptr, p, out.data(), pool);
    REQUIRE(out.intact());
    const double e = nmse(out.values(), want);
    AttentionParams plain = p;
    plain.n_chunk = 0;
    Guarded without(p.n_tokens * p.n_head * p.head_dim);
    attention(q.data(), c.k.data(), c.v.data(), qpos.data(), nullptr, plain, without.data(), pool);
    const double moved = nmse(without.values(), want);
    const double tol = tolerance(kvt, true, cs.n_tokens >= detail::kAttentionTileQ, cs.n_kv);
    INFO(fmt::format("{} threads {} {} kv={} nmse {:.3g} (without the chunk {:.3g})", isa_name(isa), threads,
                     cs.name, ggml_type_name(kvt), e, moved));
    CHECK(e < tol);
    CHECK(moved > 1e-2);
  });
}

namespace {

// ALiBi's slope of head h among n heads, in double, from the ALiBi paper's
// geometric sequence as ggml extends it past a power of two: the first
// 2^floor(log2 n) heads take 2^(-max_bias (h + 1) / n2), the rest the odd
// terms of the sequence for 2 n2 heads, 2^(-max_bias (2 (h - n2) + 1) / (2 n2)).
double alibi_slope_formula(double max_bias, int64_t n, int64_t h) {
  int64_t n2 = 1;
  while (n2 * 2 <= n) n2 *= 2;
  return h < n2 ? std::exp2(-max_bias * double(h + 1) / double(n2))
                : std::exp2(-max_bias * double(2 * (h - n2) + 1) / double(2 * n2));
}

// Plain softmax attention in double with each score plus
// slope(h) * -|q_pos - k_pos| (causal; cache row j at kvpos[j] or j).
std::vector<double> reference_alibi(const std::vector<float>& q, const Cache& c, const std::vector<int32_t>& qpos,
                                    const std::vector<int32_t>* kvpos, const AttentionParams& p) {
  const int64_t dk = p.head_dim, dv = p.head_dim;
  std::vector<double> out(size_t(p.n_tokens * p.n_head * dv), 0.0);
  for (int64_t t = 0; t < p.n_tokens; ++t)
    for (int64_t h = 0; h < p.n_head; ++h) {
      const int64_t hk = h / (p.n_head / p.n_head_kv);
      const double slope = alibi_slope_formula(p.alibi_max_bias, p.n_head, h);
      std::vector<double> s(size_t(p.n_kv), -1e300);
      double m = -1e300;
      for (int64_t j = 0; j < p.n_kv; ++j) {
        const int32_t kp = kvpos ? (*kvpos)[size_t(j)] : int32_t(j);
        if (kp > qpos[t]) continue;
        double d = 0;
        for (int64_t i = 0; i < dk; ++i) d += double(q[(t * p.n_head + h) * dk + i]) * c.kf[(j * p.n_head_kv + hk) * dk + i];
        s[j] = d * p.scale - slope * std::abs(double(qpos[t]) - double(kp));
        m = std::max(m, s[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < p.n_kv; ++j)
        if (s[j] > -1e299) sum += std::exp(s[j] - m);
      for (int64_t j = 0; j < p.n_kv; ++j) {
        if (s[j] <= -1e299) continue;
        const double w = std::exp(s[j] - m) / sum;
        for (int64_t i = 0; i < dv; ++i) out[(t * p.n_head + h) * dv + i] += w * c.vf[(j * p.n_head_kv + hk) * dv + i];
      }
    }
  return out;
}

struct AlibiCase {
  const char* name;
  int64_t n_tokens, n_head, n_head_kv, n_kv;
  float max_bias;
};

// Runs ALiBi case cs on the given cache (stored values in c.kf / c.vf) and
// checks it against reference_alibi; ALiBi must move the result.
void check_alibi(ThreadPool& pool, const AlibiCase& cs, AttentionParams p, const Cache& c, const std::string& what,
                 double tol) {
  p.alibi_max_bias = cs.max_bias;
  const auto q = random_floats(p.n_tokens * p.n_head * p.head_dim, 62, -2.0f, 2.0f);
  std::vector<int32_t> qpos(size_t(p.n_tokens));
  for (int64_t t = 0; t < p.n_tokens; ++t) qpos[size_t(t)] = int32_t(p.n_kv - p.n_tokens + t);
  const auto want = reference_alibi(q, c, qpos, nullptr, p);
  Guarded out(p.n_tokens * p.n_head * p.head_dim);
  attention(q.data(), c.k.data(), c.v.data(), qpos.data(), nullptr, p, out.data(), pool);
  REQUIRE(out.intact());
  const double e = nmse(out.values(), want);
  AttentionParams plain = p;
  plain.alibi_max_bias = 0.0f;
  Guarded without(p.n_tokens * p.n_head * p.head_dim);
  attention(q.data(), c.k.data(), c.v.data(), qpos.data(), nullptr, plain, without.data(), pool);
  const double moved = nmse(without.values(), want);
  INFO(fmt::format("{} {} nmse {:.3g} (without ALiBi {:.3g})", what, cs.name, e, moved));
  CHECK(e < tol);
  CHECK(moved > 1e-2);
}

const AlibiCase kAlibiCases[] = {
    {"one-row prefill, 8 heads (a power of two)", 9, 8, 8, 9, 8.0f},
    {"one-row, prefill after cache, 6 heads GQA 3:1 (m1 heads)", 5, 6, 2, 40, 8.0f},
    {"tiled, 70 rows, 12 heads GQA 3:1", 70, 12, 4, 70, 8.0f},
    {"split-KV decode, 5 heads, max bias 4", 1, 5, 5, 600, 4.0f},
};

}  // namespace

TEST_CASE("alibi: ggml's slopes and the f16 mask distances", "[attention][alibi]") {
  // Powers of two: 2^(-8 (h + 1) / n).
  for (int64_t h = 0; h < 8; ++h) CHECK(alibi_slope(8.0f, 8, h) == std::exp2(-float(h + 1)));
  // 6 heads: n2 = 4, then m1 = 2^-1 to the odd powers.
  const float six[] = {0.25f, 0.0625f, 0.015625f, 0.00390625f, 0.5f, 0.125f};
  for (int64_t h = 0; h < 6; ++h) CHECK(alibi_slope(8.0f, 6, h) == six[h]);
  for (int64_t n : {1, 3, 12, 32, 40, 71})
    for (int64_t h = 0; h < n; ++h)
      CHECK(std::abs(alibi_slope(8.0f, n, h) / alibi_slope_formula(8.0, n, h) - 1.0) < 1e-6);
  CHECK(alibi_slope(0.0f, 8, 3) == 1.0f);
  // -|d| as f16 stores it: exact to 2048, then 11 significant bits, ties to even.
  CHECK(alibi_distance(5, 9) == -4.0f);
  CHECK(alibi_distance(9, 5) == -4.0f);
  CHECK(alibi_distance(2048, 0) == -2048.0f);
  CHECK(alibi_distance(2049, 0) == -2048.0f);
  CHECK(alibi_distance(2051, 0) == -2052.0f);
  CHECK(alibi_distance(0, 4098) == -4096.0f);  // a tie: to the even 4096
  for (int64_t d : {1, 777, 2047, 2049, 3001, 9999, 40000, 65504})
    CHECK(alibi_distance(d, 0) == -fp16_to_fp32(fp32_to_fp16(float(d))));
  CHECK(alibi_distance(65520, 0) == -std::numeric_limits<float>::infinity());
}

// ALiBi (docs/ir.md "### attention" `alibi_max_bias`) on each path, f32 and
// f16 caches, head counts that are and are not powers of two; ALiBi must
// change the result (a kernel that ignores it is off by > 1e-2).
TEST_CASE("attention with ALiBi vs the biased-softmax formula, every path, 1 and 3 threads", "[attention][alibi]") {
  for_each_config(kAlibiCases, [&](ThreadPool& pool, Isa isa, int threads, const AlibiCase& cs, GgmlType kvt) {
    const AttentionParams p = masked_case_params(cs.n_tokens, cs.n_head, cs.n_head_kv, cs.n_kv, kvt);
    const auto c = make_cache(kvt, p.n_kv, p.n_head_kv, p.head_dim, p.head_dim, 61);
    check_alibi(pool, cs, p, c, fmt::format("{} threads {} kv={}", isa_name(isa), threads, ggml_type_name(kvt)),
                tolerance(kvt, true, cs.n_tokens >= detail::kAttentionTileQ, cs.n_kv));
  });
}

// The typed one-row loop (K f16 beside V f32) and decode at depth (the f32
// tile kernel where the machine has it, else the split-KV one-row loop).
TEST_CASE("attention with ALiBi: mixed cache types and decode at depth", "[attention][alibi]") {
  for (Isa isa : available_isas()) {
    IsaScope scope(isa);
    ThreadPool pool(2);
    {
      const AlibiCase cs{"typed, K f16 and V f32", 5, 6, 2, 40, 8.0f};
      AttentionParams p = masked_case_params(cs.n_tokens, cs.n_head, cs.n_head_kv, cs.n_kv, GgmlType::F16);
      p.v_type = GgmlType::F32;
      Cache c = make_cache(GgmlType::F16, p.n_kv, p.n_head_kv, p.head_dim, p.head_dim, 63);
      const Cache c32 = make_cache(GgmlType::F32, p.n_kv, p.n_head_kv, p.head_dim, p.head_dim, 63);
      c.v = c32.v;
      c.vf = c32.vf;
      check_alibi(pool, cs, p, c, isa_name(isa), 1e-5);
    }
    {
      const AlibiCase cs{"decode at depth, 8 heads GQA 4:1", 1, 8, 2, 1500, 8.0f};
      AttentionParams p = masked_case_params(cs.n_tokens, cs.n_head, cs.n_head_kv, cs.n_kv, GgmlType::F16);
      p.depth_kernel = true;
      const Cache c = make_cache(GgmlType::F16, p.n_kv, p.n_head_kv, p.head_dim, p.head_dim, 64);
      check_alibi(pool, cs, p, c, isa_name(isa), tolerance(GgmlType::F16, true, false, cs.n_kv));
    }
  }
}

// attn_temp through the interpreter against the reference's formula
// (llm_graph_input_attn_temp::set_input, llama4's constants), at positions
// around the floor steps, where the factor leaves 1.
TEST_CASE("attn_temp: log(floor((pos + offset) / floor_scale) + 1) * scale + 1, as the reference rounds it",
          "[attention][attn_temp]") {
  const std::string text = R"(func @prefill(%pos: tensor<T x i32, device>) {
  %s = attn_temp(%pos) {floor_scale = 8192, scale = 0.1, offset = 1.0} : tensor<T x f32, device>
  %t = attn_temp(%pos) {floor_scale = 3, scale = 0.5, offset = 0.0} : tensor<T x f32, device>
  return(%s, %t)
})";
  const std::vector<int32_t> pos = {0, 1, 2, 3, 8190, 8191, 8192, 16383, 24575, 100000, 10000000};
  test::IrRun r(text);
  const auto out = r.run({0}, {{"pos", test::i32_tensor({int64_t(pos.size())}, pos)}});
  REQUIRE(out.size() == 2);
  for (size_t i = 0; i < pos.size(); ++i) {
    const float p = float(pos[i]);
    const float want8192 = float(std::log(std::floor((p + 1.0f) / 8192.0f) + 1.0) * double(0.1f) + 1.0);
    const float want3 = float(std::log(std::floor((p + 0.0f) / 3.0f) + 1.0) * double(0.5f) + 1.0);
    INFO("pos " << pos[i]);
    CHECK(out[0].f32()[i] == want8192);
    CHECK(out[1].f32()[i] == want3);
  }
  CHECK(out[0].f32()[4] == 1.0f);   // pos 8190: still the first floor step
  CHECK(out[0].f32()[5] > 1.06f);   // pos 8191: log(2) * 0.1 + 1
}

// A speculative verify chunk at depth: each of its rows must have the bits
// its one-token step gives it (attention.cpp, use_rows_as_decode), while
// the chunk shares work between its rows (run_one_row_group below 1024
// cached keys, run_depth_group from there). Chunks that straddle the
// kernels' boundary (1023 keys) and a padded view's (1024 -> 1280) mix
// groups; with sinks, on 1 to 3 threads, every ISA the machine has.
TEST_CASE("attention: the rows of a verify chunk at depth have their one-token steps' bits", "[attention][spec]") {
  const int64_t n_rows = 8, n_head = 20, n_head_kv = 4, dk = 64;
  for (Isa isa : available_isas()) {
    IsaScope scope(isa);
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      for (const int32_t first : {300, 1019, 1100})
        for (const bool with_sinks : {false, true}) {
          const int64_t n_kv = first + n_rows;
          const Cache cache = make_cache(GgmlType::F16, n_kv, n_head_kv, dk, dk, 91 + uint32_t(first));
          const std::vector<float> q = random_floats(n_rows * n_head * dk, 17 + uint32_t(first));
          const std::vector<float> sinks = random_floats(n_head, 5, -1.0f, 3.0f);
          std::vector<int32_t> pos(static_cast<size_t>(n_rows), 0);
          for (int64_t t = 0; t < n_rows; ++t) pos[size_t(t)] = first + int32_t(t);
          AttentionParams p;
          p.n_head = n_head;
          p.n_head_kv = n_head_kv;
          p.head_dim = dk;
          p.k_type = p.v_type = GgmlType::F16;
          p.scale = 0.125f;
          p.sinks = with_sinks ? sinks.data() : nullptr;
          p.n_tokens = n_rows;
          p.n_kv = n_kv;
          std::vector<float> chunk(size_t(n_rows * n_head * dk));
          attention(q.data(), cache.k.data(), cache.v.data(), pos.data(), nullptr, p, chunk.data(), pool);
          for (int64_t t = 0; t < n_rows; ++t) {
            AttentionParams one = p;
            one.n_tokens = 1;
            one.n_kv = pos[size_t(t)] + 1;  // the cache as the decode step at that position holds it
            std::vector<float> row(size_t(n_head * dk));
            attention(q.data() + t * n_head * dk, cache.k.data(), cache.v.data(), &pos[size_t(t)], nullptr, one,
                      row.data(), pool);
            INFO(fmt::format("{} threads {}, rows from position {}{}, row {}", isa_name(isa), threads, first,
                             with_sinks ? ", sinks" : "", t));
            CHECK(std::memcmp(row.data(), chunk.data() + t * n_head * dk, row.size() * sizeof(float)) == 0);
          }
        }
    }
  }
}
