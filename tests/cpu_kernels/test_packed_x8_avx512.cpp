// The AVX-512 VNNI x8 kernels (packed_x8_avx512.cpp) against the scalar x8
// kernels (packed_x8.cpp), bit for bit (internal.h, PackedFn: the integer
// dot of each block is exact, and each output takes the scalar float steps
// in order, Q4_K per pair of sub-blocks in a 4-token call):
//  - called directly, every type, 1 to 4 tokens per call, odd block counts,
//    strided activations, block sums and outputs, sentinels around the
//    outputs and in the gaps between the tokens' rows;
//  - extreme codes and activations (the int16 steps of Q4_K and Q6_K at
//    their bounds);
//  - the 16-row kernels (PackedKernels::fn16, two consecutive groups)
//    against the scalar 8-row kernel called once per group, the same way;
//  - through matmul on x8 weights, 1 to 33 tokens, 1 to 4 threads.
#include <catch2/catch.hpp>

#include <bit>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "kernel_test_util.h"
#include "runtime/cpu/kernels/internal.h"
#include "runtime/cpu/kernels/kernels.h"

using namespace vtc;
using namespace vtc::cpu;
using namespace vtc::cpu::test;

namespace {

constexpr GgmlType kTypes[] = {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K};

bool have_avx512() {
  if (isa_supported(Isa::Avx512Vnni)) return true;
  WARN("SKIPPED: this CPU has no AVX-512 VNNI; the avx512vnni x8 kernels were not run");
  return false;
}

bool k_quant(GgmlType t) { return t == GgmlType::Q4_K || t == GgmlType::Q6_K; }

// `groups` x8 groups (8 rows each) of n_blocks blocks, and nt tokens of
// activations converted as matmul converts them, at a padded stride.
struct Call {
  GgmlType type;
  int64_t n_blocks, cols, x_stride, sums_stride;
  int groups;
  std::vector<uint8_t> w8, x;
  std::vector<int32_t> sums;

  Call(GgmlType t, int64_t blocks, int nt, uint32_t seed, bool extreme, int groups_ = 1)
      : type(t), n_blocks(blocks), groups(groups_) {
    const int64_t bsize = k_quant(t) ? 256 : 32;
    cols = n_blocks * bsize;
    auto w = random_weights(t, 8 * groups, cols, seed);
    if (extreme) {
      // Largest codes everywhere (nibbles 15, Q6_K codes 63, Q8_0 -1 / 127
      // alternating), scales kept from random_weights.
      const auto& tr = ggml_traits(t);
      for (int64_t b = 0; b < 8 * groups * n_blocks; ++b) {
        uint8_t* blk = w.data() + b * tr.block_bytes;
        if (t == GgmlType::Q4_0) std::memset(blk + 2, 0xff, 16);
        if (t == GgmlType::Q8_0)
          for (int i = 0; i < 32; ++i) blk[2 + i] = i % 2 ? 0x7f : 0x80;
        if (t == GgmlType::Q4_K) std::memset(blk + 16, 0xff, 128);
        if (t == GgmlType::Q6_K) {
          std::memset(blk, 0xff, 192);
          for (int s = 0; s < 16; ++s) blk[192 + s] = static_cast<uint8_t>(s % 2 ? 0x80 : 0x7f);  // -128, 127
        }
      }
    }
    w8.assign(w.size(), 0);
    repack_weight(t, WeightLayout::Interleaved8, w.data(), 8 * groups, cols, w8.data());
    const detail::ActType act = k_quant(t) ? detail::ActType::Q8_K : detail::ActType::Q8_0;
    const int64_t row = k_quant(t) ? n_blocks * int64_t(sizeof(detail::BlockQ8_K)) : n_blocks * int64_t(sizeof(detail::BlockQ8_0));
    x_stride = row + 40;  // padding between the tokens' rows
    sums_stride = n_blocks + 3;
    x.assign(static_cast<size_t>(x_stride * nt), 0xab);
    sums.assign(static_cast<size_t>(sums_stride * nt), 0x5a5a5a5a);
    for (int tk = 0; tk < nt; ++tk) {
      auto f = random_floats(static_cast<size_t>(cols), seed * 31 + static_cast<uint32_t>(tk), -1.0f, 1.0f);
      if (extreme)
        for (size_t i = 0; i < f.size(); ++i) f[i] = (tk % 2 ? 1.0f : -1.0f) * (i % 7 == 3 ? 0.5f : 1.0f);
      uint8_t* xr = x.data() + tk * x_stride;
      detail::scalar_quant_kernels().quantize[static_cast<int>(act)](f.data(), xr, cols);
      if (t == GgmlType::Q4_0) {
        const auto* blocks = reinterpret_cast<const detail::BlockQ8_0*>(xr);
        for (int64_t b = 0; b < n_blocks; ++b) {
          int32_t s = 0;
          for (int i = 0; i < 32; ++i) s += blocks[b].qs[i];
          sums[static_cast<size_t>(tk * sums_stride + b)] = s;
        }
      }
    }
  }

  // Runs the table's kernel for nt tokens, outputs at stride 11 (3 unwritten
  // floats after each token's 8).
  std::vector<float> run(const detail::QuantKernels& qk, int nt, bool& intact) const {
    const detail::PackedKernels& k = qk.x8[static_cast<int>(type)];
    REQUIRE(k.toks >= nt);
    const int64_t y_stride = 11;
    Guarded y(static_cast<size_t>(y_stride * nt));
    k.fn[nt](n_blocks, w8.data(), x.data(), x_stride, type == GgmlType::Q4_0 ? sums.data() : nullptr, sums_stride,
             y.data(), y_stride);
    intact = y.intact();
    return y.values();
  }

  // Two groups: the table's 16-row kernel (sixteen), or its 8-row kernel
  // once per group; outputs at stride 19 (3 unwritten floats after each
  // token's 16).
  std::vector<float> run16(const detail::QuantKernels& qk, int nt, bool sixteen, bool& intact) const {
    REQUIRE(groups == 2);
    const detail::PackedKernels& k = qk.x8[static_cast<int>(type)];
    REQUIRE(k.toks >= nt);
    const int64_t y_stride = 19;
    Guarded y(static_cast<size_t>(y_stride * nt));
    const int32_t* bs = type == GgmlType::Q4_0 ? sums.data() : nullptr;
    if (sixteen) {
      REQUIRE(k.fn16[nt] != nullptr);
      k.fn16[nt](n_blocks, w8.data(), x.data(), x_stride, bs, sums_stride, y.data(), y_stride);
    } else {
      for (int g = 0; g < 2; ++g)
        k.fn[nt](n_blocks, w8.data() + g * w8.size() / 2, x.data(), x_stride, bs, sums_stride, y.data() + 8 * g,
                 y_stride);
    }
    intact = y.intact();
    return y.values();
  }
};

std::vector<Isa> avx512_levels() {
  std::vector<Isa> v;
  for (Isa isa : available_isas())
    if (isa >= Isa::Avx512Vnni) v.push_back(isa);
  return v;
}

}  // namespace

TEST_CASE("packed x8 avx512: kernels equal the scalar x8 kernels bit for bit", "[matmul][x8][avx512]") {
  if (!have_avx512()) return;
  const auto& scalar = detail::scalar_quant_kernels();
  for (GgmlType t : kTypes)
    for (int64_t n_blocks : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{5}, int64_t{7}, int64_t{41}})
      for (int nt = 1; nt <= 4; ++nt)
        for (bool extreme : {false, true}) {
          const Call call(t, n_blocks, nt, 100 + static_cast<uint32_t>(n_blocks * 8 + nt), extreme);
          bool ok_ref = false;
          const auto ref = call.run(scalar, nt, ok_ref);
          REQUIRE(ok_ref);
          for (Isa isa : avx512_levels()) {
            INFO(fmt::format("{} blocks={} tokens={} extreme={} isa={}", ggml_type_name(t), n_blocks, nt, extreme,
                             isa_name(isa)));
            bool ok = false;
            const auto got = call.run(detail::quant_kernels(isa), nt, ok);
            CHECK(ok);
            // Same bits everywhere, and the gaps (poison) left alone.
            CHECK(bitwise_equal(got, ref));
            for (int tk = 0; tk < nt; ++tk)
              for (int i = 8; i < 11; ++i) CHECK(got[static_cast<size_t>(tk * 11 + i)] == -12345.0f);
          }
        }
}

TEST_CASE("packed x8 avx512: 16-row kernels equal two scalar x8 calls bit for bit", "[matmul][x8][avx512]") {
  if (!have_avx512()) return;
  const auto& scalar = detail::scalar_quant_kernels();
  for (GgmlType t : kTypes)
    for (Isa isa : avx512_levels()) {
      const detail::PackedKernels& k = detail::quant_kernels(isa).x8[static_cast<int>(t)];
      // Q4_0 has them at every AVX-512 level for 2 to 4 tokens (where they
      // pay); any other type or count that gets one is checked too.
      if (t == GgmlType::Q4_0)
        for (int nt = 2; nt <= 4; ++nt) CHECK(k.fn16[nt] != nullptr);
      for (int nt = 1; nt <= 4; ++nt) {
        if (k.fn16[nt] == nullptr) continue;
        for (int64_t n_blocks : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{5}, int64_t{7}, int64_t{41}})
          for (bool extreme : {false, true}) {
            const Call call(t, n_blocks, nt, 500 + static_cast<uint32_t>(n_blocks * 8 + nt), extreme, 2);
            bool ok_ref = false;
            const auto ref = call.run16(scalar, nt, false, ok_ref);
            REQUIRE(ok_ref);
            INFO(fmt::format("{} blocks={} tokens={} extreme={} isa={}", ggml_type_name(t), n_blocks, nt, extreme,
                             isa_name(isa)));
            bool ok = false;
            const auto got = call.run16(detail::quant_kernels(isa), nt, true, ok);
            CHECK(ok);
            CHECK(bitwise_equal(got, ref));
            for (int tk = 0; tk < nt; ++tk)
              for (int i = 16; i < 19; ++i) CHECK(got[static_cast<size_t>(tk * 19 + i)] == -12345.0f);
          }
      }
    }
}

TEST_CASE("packed x8 avx512: matmul on x8 weights equals the scalar level 1 to 33 tokens 1 to 4 threads",
          "[matmul][x8][avx512][threads]") {
  if (!have_avx512()) return;
  ThreadPool p1(1), p2(2), p3(3), p4(4);
  ThreadPool* pools[] = {&p1, &p2, &p3, &p4};
  struct Shape {
    GgmlType type;
    int64_t rows, cols;
  };
  // Row counts with an odd trailing 8-row group (24, 40, 56) and without
  // (32): the 16-row kernels take the pairs, the 8-row ones the rest.
  const Shape shapes[] = {{GgmlType::Q4_0, 40, 1280}, {GgmlType::Q4_0, 24, 96},   {GgmlType::Q4_0, 32, 64},
                          {GgmlType::Q8_0, 24, 224},  {GgmlType::Q8_0, 56, 96},   {GgmlType::Q4_K, 40, 1280},
                          {GgmlType::Q4_K, 32, 512},  {GgmlType::Q4_K, 8, 256},   {GgmlType::Q6_K, 24, 768}};
  for (const Shape& s : shapes) {
    const auto w = random_weights(s.type, s.rows, s.cols, 77 + static_cast<uint32_t>(s.rows));
    std::vector<uint8_t> w8(w.size());
    repack_weight(s.type, WeightLayout::Interleaved8, w.data(), s.rows, s.cols, w8.data());
    for (int64_t n_tokens : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, int64_t{5}, int64_t{17}, int64_t{33}}) {
      const auto x = random_floats(static_cast<size_t>(s.cols * n_tokens), 9 + static_cast<uint32_t>(n_tokens));
      auto run = [&](Isa isa, ThreadPool& pool) {
        IsaScope scope(isa);
        Guarded y(static_cast<size_t>(s.rows * n_tokens));
        matmul(s.type, w8.data(), s.rows, s.cols, x.data(), n_tokens, y.data(), pool, WeightLayout::Interleaved8);
        CHECK(y.intact());
        return y.values();
      };
      const auto ref = run(Isa::Scalar, p1);
      for (Isa isa : avx512_levels())
        for (int i = 0; i < 4; ++i) {
          INFO(fmt::format("{} {}x{} tokens={} threads={} isa={}", ggml_type_name(s.type), s.rows, s.cols, n_tokens,
                           i + 1, isa_name(isa)));
          CHECK(bitwise_equal(run(isa, *pools[i]), ref));
        }
    }
  }
}
