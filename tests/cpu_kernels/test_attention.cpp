// Attention against a double reference (plain softmax attention over the
// stored K/V values), for f32 and f16 caches, GQA, causal masks with
// per-token positions, sliding windows and softcap.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "frontends/gguf/dequant.h"
#include "kernel_test_util.h"
#include "runtime/cpu/kernels/kernels.h"

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
          p.kv_type = kvt;
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
  p.kv_type = GgmlType::F16;
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

TEST_CASE("attention: scalar and AVX2 agree", "[attention][isa]") {
  if (best_isa() != Isa::Avx2) {
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
    p.kv_type = kvt;
    const auto c = make_cache(kvt, p.n_kv, p.n_head_kv, p.head_dim, p.head_dim, 8);
    const auto q = random_floats(p.n_tokens * p.n_head * p.head_dim, 9);
    std::vector<int32_t> qpos = {46, 47, 48, 49};
    std::vector<float> ys, yv;
    for (Isa isa : {Isa::Scalar, Isa::Avx2}) {
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
  p.kv_type = GgmlType::Q8_0;
  CHECK_THROWS(attention(q.data(), kv.data(), kv.data(), &pos, nullptr, p, out.data(), pool));
}
