// The simulated device's tensor-core instructions (mma.sync, ldmatrix,
// cp.async; runtime/cuda/sim/kernel_host.h) through the helpers generated
// kernels call (codegen/cuda/helpers_mma.cpp), against fragments computed
// by hand from the PTX ISA's tables ("Matrix Fragments for mma.m16n8k16 /
// m16n8k32", "ldmatrix"): a single non-zero element placed in the register
// the table names must come out in the register the table names, so a
// wrong layout in the emulation goes red. Then whole products against a
// host matmul, with every fragment loaded by the same tables, and
// cp.async's group semantics.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <random>
#include <vector>

#include "codegen/cuda/emit.h"
#include "tests/cuda/sim_fixture.h"

using namespace vtc::cuda;
using vtc::cuda::test::Sim;

namespace {

// Launches `fn` on one warp with an input buffer of `in` words and an
// output of `n_out` words; returns the output.
std::vector<uint32_t> run_warp(Sim& s, void* fn, const std::vector<uint32_t>& in, size_t n_out, unsigned threads = 32) {
  DevPtr x = s.dev->alloc(std::max<size_t>(in.size(), 1) * 4), y = s.dev->alloc(n_out * 4);
  if (!in.empty()) s.dev->upload(x, in.data(), in.size() * 4, s.stream);
  void* params[] = {&x, &y};
  s.dev->launch(fn, 1, 1, threads, params, s.stream);
  std::vector<uint32_t> out = s.read<uint32_t>(y, n_out);
  s.dev->free(x);
  s.dev->free(y);
  return out;
}

void* mma_kernel(Sim& s, const std::string& name, const std::string& body) {
  return s.kernel(name, "const unsigned* x, unsigned* y", body, helper_source("mma"));
}

uint16_t f16_bits(float v) { return __builtin_bit_cast(uint16_t, static_cast<_Float16>(v)); }

}  // namespace

TEST_CASE("mma m16n8k32 s8: one element of A and a row of B land where the PTX tables say", "[sim][mma]") {
  Sim s;
  // A(9, 5) = 1 is byte 1 of a[1] in lane 5 (group 1, t = 1; row 9 = g + 8
  // and column 5 = 4t + 1). B(5, c) = c + 1 is byte 1 of b[0] in lane
  // 4c + 1. D(9, c) = c + 1 is then d[2 + c % 2] of lane 4 + c / 2.
  void* fn = mma_kernel(s, "mma_s8_probe", R"(  const int lane = threadIdx.x;
  unsigned a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
  if (lane == 5) a[1] = 1u << 8;
  if (lane % 4 == 1) b[0] = (unsigned)(lane / 4 + 1) << 8;
  int d[4] = {0, 0, 0, 0};
  vtc_mma_s8_k32(d, a, b);
  for (int i = 0; i < 4; ++i) y[lane * 4 + i] = (unsigned)d[i];)");
  const auto d = run_warp(s, fn, {}, 128);
  std::vector<uint32_t> want(128, 0);
  want[4 * 4 + 2] = 1, want[4 * 4 + 3] = 2, want[5 * 4 + 2] = 3, want[5 * 4 + 3] = 4;
  want[6 * 4 + 2] = 5, want[6 * 4 + 3] = 6, want[7 * 4 + 2] = 7, want[7 * 4 + 3] = 8;
  CHECK(d == want);
}

TEST_CASE("mma m16n8k16 s8 and f16: the probes of their tables", "[sim][mma]") {
  Sim s;
  SECTION("s8 k16: A(3, 6) in byte 2 of a[0], lane 13; B(6, c) in byte 2 of b[0], lane 4c + 1") {
    void* fn = mma_kernel(s, "mma_s8k16_probe", R"(  const int lane = threadIdx.x;
  unsigned a[2] = {0, 0}, b[1] = {0};
  if (lane == 13) a[0] = 1u << 16;
  if (lane % 4 == 1) b[0] = (unsigned)(lane / 4 + 1) << 16;
  int d[4] = {0, 0, 0, 0};
  vtc_mma_s8_k16(d, a, b);
  for (int i = 0; i < 4; ++i) y[lane * 4 + i] = (unsigned)d[i];)");
    const auto d = run_warp(s, fn, {}, 128);
    // D(3, c): lanes 12 .. 15, d[0] and d[1].
    std::vector<uint32_t> want(128, 0);
    for (int c = 0; c < 8; ++c) want[size_t((12 + c / 2) * 4 + c % 2)] = uint32_t(c + 1);
    CHECK(d == want);
  }
  SECTION("f16: A(10, 5) in the high half of a[1], lane 10; B(5, c) in the high half of b[0], lane 4c + 2") {
    void* fn = mma_kernel(s, "mma_f16_probe", R"(  const int lane = threadIdx.x;
  unsigned a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
  if (lane == 10) a[1] = 0x3c00u << 16;
  if (lane % 4 == 2) b[0] = x[lane / 4] << 16;
  float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  vtc_mma_f16(d, a, b);
  for (int i = 0; i < 4; ++i) y[lane * 4 + i] = __float_as_uint(d[i]);)");
    std::vector<uint32_t> b_values;
    for (int c = 0; c < 8; ++c) b_values.push_back(f16_bits(float(c + 1)));
    const auto d = run_warp(s, fn, b_values, 128);
    // D(10, c): group 2, lanes 8 .. 11, d[2] and d[3].
    std::vector<uint32_t> want(128, 0);
    for (int c = 0; c < 8; ++c) want[size_t((8 + c / 2) * 4 + 2 + c % 2)] = __builtin_bit_cast(uint32_t, float(c + 1));
    CHECK(d == want);
  }
}

TEST_CASE("ldmatrix x4 and x4.trans hand out the rows and columns the PTX table names", "[sim][mma]") {
  Sim s;
  // A 16x16 matrix of halves h(r, c) = 16 r + c in shared memory; lane l
  // points at row l % 16, columns 8 (l / 16) .. + 7: matrix j = l / 8 is
  // rows 8 (j % 2) .., columns 8 (j / 2) .., the A-fragment order.
  const std::string body = R"(  __shared__ unsigned short m[16][16];
  const int lane = threadIdx.x;
  for (int i = lane; i < 128; i += 32) ((unsigned*)m)[i] = (unsigned)(2 * i) | ((unsigned)(2 * i + 1) << 16);
  __syncwarp();
  unsigned r[4];
  VTC_LDMATRIX(r, &m[lane % 16][8 * (lane / 16)]);
  for (int i = 0; i < 4; ++i) y[lane * 4 + i] = r[i];)";
  auto h2 = [](int r, int c0, int r1, int c1) { return uint32_t(16 * r + c0) | (uint32_t(16 * r1 + c1) << 16); };
  SECTION("x4") {
    const std::string b = fmt::format("#define VTC_LDMATRIX vtc_ldmatrix_x4\n{}", body);
    const auto got = run_warp(s, mma_kernel(s, "ldmatrix_x4", b), {}, 128);
    // Lane 5 (row 1, halves 2 and 3): matrix 0 h(1, 2..3), 1 h(9, 2..3), 2 h(1, 10..11), 3 h(9, 10..11).
    CHECK(got[5 * 4 + 0] == h2(1, 2, 1, 3));
    CHECK(got[5 * 4 + 1] == h2(9, 2, 9, 3));
    CHECK(got[5 * 4 + 2] == h2(1, 10, 1, 11));
    CHECK(got[5 * 4 + 3] == h2(9, 10, 9, 11));
    for (int l = 0; l < 32; ++l)
      for (int j = 0; j < 4; ++j) {
        const int row = 8 * (j % 2) + l / 4, col = 8 * (j / 2) + 2 * (l % 4);
        CHECK(got[size_t(l * 4 + j)] == h2(row, col, row, col + 1));
      }
  }
  SECTION("x4.trans") {
    const std::string b = fmt::format("#define VTC_LDMATRIX vtc_ldmatrix_x4_trans\n{}", body);
    const auto got = run_warp(s, mma_kernel(s, "ldmatrix_x4_trans", b), {}, 128);
    // Lane 5 (column 1, rows 2 and 3 of each matrix): matrix 3 h(10..11, 9).
    CHECK(got[5 * 4 + 0] == h2(2, 1, 3, 1));
    CHECK(got[5 * 4 + 3] == h2(10, 9, 11, 9));
    for (int l = 0; l < 32; ++l)
      for (int j = 0; j < 4; ++j) {
        const int row = 8 * (j % 2) + 2 * (l % 4), col = 8 * (j / 2) + l / 4;
        CHECK(got[size_t(l * 4 + j)] == h2(row, col, row + 1, col));
      }
  }
}

TEST_CASE("mma products equal a host matmul with fragments loaded by the tables", "[sim][mma]") {
  Sim s;
  std::mt19937 rng(7);
  SECTION("s8 m16n8k32, accumulating onto C") {
    // x: A 16x32 row-major bytes (128 words), then B as 8 columns of 32 bytes (64 words), then C (128 ints).
    std::vector<int8_t> A(16 * 32), B(8 * 32);
    for (auto& v : A) v = int8_t(int(rng() % 256) - 128);
    for (auto& v : B) v = int8_t(int(rng() % 256) - 128);
    std::vector<uint32_t> in(128 + 64 + 128);
    std::memcpy(in.data(), A.data(), 512);
    std::memcpy(in.data() + 128, B.data(), 256);
    for (int i = 0; i < 128; ++i) in[size_t(192 + i)] = uint32_t(int(rng() % 2001) - 1000);
    void* fn = mma_kernel(s, "mma_s8_full", R"(  const int lane = threadIdx.x, g = lane / 4, t = lane % 4;
  const unsigned* A = x; const unsigned* B = x + 128;
  unsigned a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = A[(g + 8 * (i & 1)) * 8 + t + 4 * (i >> 1)];
  for (int i = 0; i < 2; ++i) b[i] = B[g * 8 + t + 4 * i];
  int d[4];
  for (int i = 0; i < 4; ++i) d[i] = (int)x[192 + lane * 4 + i];
  vtc_mma_s8_k32(d, a, b);
  for (int i = 0; i < 4; ++i) y[lane * 4 + i] = (unsigned)d[i];)");
    const auto got = run_warp(s, fn, in, 128);
    for (int l = 0; l < 32; ++l)
      for (int i = 0; i < 4; ++i) {
        const int r = l / 4 + 8 * (i >> 1), c = 2 * (l % 4) + (i & 1);
        int want = int(in[size_t(192 + l * 4 + i)]);
        for (int k = 0; k < 32; ++k) want += int(A[size_t(r * 32 + k)]) * int(B[size_t(c * 32 + k)]);
        INFO("lane " << l << " d[" << i << "]");
        CHECK(int(got[size_t(l * 4 + i)]) == want);
      }
  }
  SECTION("bf16 and f16 m16n8k16 with ldmatrix for A") {
    for (bool bf16 : {false, true}) {
      // x: A 16x16 halves row-major (128 words), B as 8 columns of 16 halves (64 words).
      std::vector<uint16_t> A(256), B(128);
      std::vector<float> Af(256), Bf(128);
      for (size_t i = 0; i < 256 + 128; ++i) {
        const float v = float(int(rng() % 64) - 32) / 8.0f;  // exact in f16 and bf16
        const uint16_t h = bf16 ? uint16_t(__builtin_bit_cast(uint32_t, v) >> 16) : f16_bits(v);
        (i < 256 ? A[i] : B[i - 256]) = h;
        (i < 256 ? Af[i] : Bf[i - 256]) = v;
      }
      std::vector<uint32_t> in(192);
      std::memcpy(in.data(), A.data(), 512);
      std::memcpy(in.data() + 128, B.data(), 256);
      void* fn = mma_kernel(s, bf16 ? "mma_bf16_full" : "mma_f16_full",
                            fmt::format(R"(  __shared__ unsigned short As[16][16];
  const int lane = threadIdx.x, g = lane / 4, t = lane % 4;
  for (int i = lane; i < 128; i += 32) ((unsigned*)As)[i] = x[i];
  __syncwarp();
  unsigned a[4], b[2];
  vtc_ldmatrix_x4(a, &As[lane % 16][8 * (lane / 16)]);
  for (int i = 0; i < 2; ++i) b[i] = x[128 + g * 8 + t + 4 * i];
  float d[4] = {{0.0f, 0.0f, 0.0f, 0.0f}};
  {}(d, a, b);
  for (int i = 0; i < 4; ++i) y[lane * 4 + i] = __float_as_uint(d[i]);)",
                                        bf16 ? "vtc_mma_bf16" : "vtc_mma_f16"));
      const auto got = run_warp(s, fn, in, 128);
      for (int l = 0; l < 32; ++l)
        for (int i = 0; i < 4; ++i) {
          const int r = l / 4 + 8 * (i >> 1), c = 2 * (l % 4) + (i & 1);
          float want = 0.0f;  // small multiples of 1/64: exact in any order
          for (int k = 0; k < 16; ++k) want += Af[size_t(r * 16 + k)] * Bf[size_t(c * 16 + k)];
          INFO((bf16 ? "bf16" : "f16") << " lane " << l << " d[" << i << "]");
          CHECK(__builtin_bit_cast(float, got[size_t(l * 4 + i)]) == want);
        }
    }
  }
}

TEST_CASE("cp.async lands at its wait_group, group by group", "[sim][mma]") {
  Sim s;
  // Each lane copies 16 bytes of x into shared memory in two groups; before
  // any wait the old bytes are still there (as a GPU leaves them undefined,
  // the simulated device keeps them: a kernel reading early gets wrong
  // values); wait_group 1 lands the first group only; wait_group 0 both.
  void* fn = mma_kernel(s, "cp_async_groups", R"(  __shared__ __attribute__((aligned(16))) unsigned buf[2][32 * 4];
  const int lane = threadIdx.x;
  for (int i = 0; i < 4; ++i) buf[0][lane * 4 + i] = buf[1][lane * 4 + i] = 0xdeadu;
  __syncwarp();
  vtc_cp_async16(&buf[0][lane * 4], x + lane * 4, true);
  vtc_cp_commit();
  vtc_cp_async16(&buf[1][lane * 4], x + 128 + lane * 4, lane % 2 == 0);
  vtc_cp_commit();
  y[lane * 3 + 0] = buf[0][lane * 4 + 1];
  vtc_cp_wait<1>();
  y[lane * 3 + 1] = buf[0][lane * 4 + 1] + 1000000u * (buf[1][lane * 4 + 1] == 0xdeadu);
  vtc_cp_wait<0>();
  y[lane * 3 + 2] = buf[1][lane * 4 + 1];)");
  std::vector<uint32_t> in(256);
  for (size_t i = 0; i < in.size(); ++i) in[i] = uint32_t(i * 3 + 1);
  const auto got = run_warp(s, fn, in, 96);
  for (int l = 0; l < 32; ++l) {
    INFO("lane " << l);
    CHECK(got[size_t(l * 3)] == 0xdeadu);
    CHECK(got[size_t(l * 3 + 1)] == in[size_t(l * 4 + 1)] + 1000000u);
    CHECK(got[size_t(l * 3 + 2)] == (l % 2 == 0 ? in[size_t(128 + l * 4 + 1)] : 0u));  // odd lanes zero-fill
  }
}

TEST_CASE("an mma in a warp of fewer than 32 threads is an error naming the kernel", "[sim][mma]") {
  Sim s;
  void* fn = mma_kernel(s, "mma_short_warp", R"(  unsigned a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
  int d[4] = {0, 0, 0, 0};
  vtc_mma_s8_k32(d, a, b);
  y[threadIdx.x] = (unsigned)d[0];)");
  CHECK_THROWS_WITH(run_warp(s, fn, {}, 16, 16), Catch::Contains("mma_short_warp") && Catch::Contains("all 32 lanes"));
}
