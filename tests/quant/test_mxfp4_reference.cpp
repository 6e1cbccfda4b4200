// MXFP4 (ggml type 39) against the llama.cpp reference, on blocks the
// reference's own quantizer wrote (`vtc-ref mxfp4`: quantize_row_mxfp4_ref,
// ggml's to_float, and ggml_mul_mat on its CPU backend).
//
//  - dequantization: vtc::dequantize_row of those blocks equals ggml's
//    floats bit for bit, on rows that reach every E8M0 exponent the
//    quantizer can emit (0..252: subnormal scales 2^-128 and 2^-127 through
//    2^124), zero blocks, subnormal inputs, mixed magnitudes;
//  - matmul: vtc's MXFP4 x q8_0 matmul, on every ISA this machine runs,
//    equals the reference's mul_mat bit for bit (both follow ggml's x86
//    AVX2 float order; see quant_scalar.cpp dot_mxfp4), including a row of
//    an odd number of blocks (the scalar tail), and matches a double
//    product of the dequantized weights and the q8_0-rounded activations to
//    float accumulation error (and the exact activations to q8_0 error).
//
// Exits 77 (ctest SKIPPED) when vtc-ref is missing.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "frontends/gguf/dequant.h"
#include "runtime/cpu/kernels/internal.h"
#include "runtime/cpu/kernels/kernels.h"
#include "runtime/cpu/thread_pool.h"
#include "support/ggml_type.h"

namespace fs = std::filesystem;
using vtc::GgmlType;

namespace {

const std::string kRefExe = VTC_REF_EXE;
const fs::path kDataDir = fs::path(VTC_QUANT_DATA_DIR) / "mxfp4";

void require_reference() {
  if (!fs::exists(kRefExe)) {
    std::cout << "SKIPPED: " << kRefExe << " is missing; run tests/reference/fetch.sh and rebuild\n";
    std::exit(77);
  }
}

void run(const std::string& cmd) {
  INFO("command: " << cmd);
  REQUIRE(std::system(cmd.c_str()) == 0);
}

void write_f32(const fs::path& p, const std::vector<float>& v) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
  REQUIRE(out.good());
}

std::vector<uint8_t> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE(in.good());
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<float> read_f32(const fs::path& p) {
  const auto b = read_bytes(p);
  REQUIRE(b.size() % 4 == 0);
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

struct RefResult {
  std::vector<uint8_t> blocks;
  std::vector<float> dequant, matmul;
};

// The reference's blocks and floats for w (rows of `cols`), and its mul_mat
// with x when x is not empty.
RefResult reference(const std::string& tag, const std::vector<float>& w, int64_t cols, const std::vector<float>& x) {
  require_reference();
  const fs::path dir = kDataDir / tag;
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_f32(dir / "w.f32", w);
  std::string cmd = fmt::format("'{}' mxfp4 '{}' '{}' --cols {}", kRefExe, (dir / "w.f32").string(), dir.string(), cols);
  if (!x.empty()) {
    write_f32(dir / "x.f32", x);
    cmd += fmt::format(" --x '{}'", (dir / "x.f32").string());
  }
  run(cmd);
  RefResult r{read_bytes(dir / "blocks.bin"), read_f32(dir / "dequant.f32"), {}};
  if (!x.empty()) r.matmul = read_f32(dir / "matmul.f32");
  fs::remove_all(dir);
  REQUIRE(r.blocks.size() == w.size() / 32 * 17);
  REQUIRE(r.dequant.size() == w.size());
  return r;
}

int count_bit_mismatches(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  REQUIRE(a.size() == b.size());
  int bad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    uint32_t ua, ub;
    std::memcpy(&ua, &a[i], 4);
    std::memcpy(&ub, &b[i], 4);
    if (ua != ub && ++bad <= 8)
      std::cout << what << " [" << i << "]: vtc " << a[i] << " (0x" << std::hex << ua << ") ref " << b[i] << " (0x" << ub
                << std::dec << ")\n";
  }
  return bad;
}

// Rows of 256 values (8 blocks): block k of row r has amax in
// [2^(e-125), 2^(e-124)), e = (8r + k) % 253, so the quantizer emits every
// exponent 0..252; values inside a block span many binades (down to
// subnormal ones), with a sign pattern, exact zeros and values halfway
// between neighbouring codes. Plus a row of zero blocks.
std::vector<float> dequant_rows(int64_t& rows) {
  constexpr int kCols = 256;
  rows = 40;
  std::vector<float> v(static_cast<size_t>(rows * kCols), 0.0f);
  std::mt19937 rng(39);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int64_t r = 0; r + 1 < rows; ++r)
    for (int k = 0; k < 8; ++k) {
      const int e = static_cast<int>((8 * r + k) % 253);
      const float top = std::ldexp(1.0f + 0.999f * u(rng), e - 125);  // the block's amax
      float* b = v.data() + r * kCols + k * 32;
      for (int j = 0; j < 32; ++j) {
        float m;
        switch (j % 8) {
          case 0: m = 0.0f; break;
          case 1: m = top * std::ldexp(1.0f, -static_cast<int>(u(rng) * 30.0f)); break;  // far smaller, maybe subnormal
          case 2: m = top * (0.25f * static_cast<float>(1 + static_cast<int>(u(rng) * 11)) / 6.0f); break;  // near ties
          default: m = top * u(rng); break;
        }
        b[j] = (j % 3 == 1) ? -m : m;
      }
      b[7 + (k % 3) * 8] = (k % 2 ? -top : top);
    }
  return v;
}

class IsaScope {
 public:
  explicit IsaScope(vtc::cpu::Isa isa) : prev_(vtc::cpu::active_isa()) { vtc::cpu::set_active_isa(isa); }
  ~IsaScope() { vtc::cpu::set_active_isa(prev_); }
  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;

 private:
  vtc::cpu::Isa prev_;
};

std::vector<vtc::cpu::Isa> isas() {
  return vtc::cpu::supported_isas();
}

// x converted to q8_0 by vtc's scalar quantizer and back (what the dot sees).
std::vector<float> q8_0_rounded(const std::vector<float>& x, int64_t cols) {
  using namespace vtc::cpu::detail;
  std::vector<float> out(x.size());
  std::vector<BlockQ8_0> b(static_cast<size_t>(cols / 32));
  for (size_t t = 0; t < x.size() / static_cast<size_t>(cols); ++t) {
    scalar_quant_kernels().quantize[static_cast<int>(ActType::Q8_0)](x.data() + t * cols, b.data(), cols);
    vtc::dequantize_row(GgmlType::Q8_0, b.data(), out.data() + t * cols, cols);
  }
  return out;
}

// rel-L2 of y against the double product of wf [rows][cols] and x.
double rel_l2(const std::vector<float>& y, const std::vector<float>& wf, const std::vector<float>& x, int64_t rows,
              int64_t cols) {
  double err = 0, ref = 0;
  const int64_t tokens = static_cast<int64_t>(x.size()) / cols;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (int64_t c = 0; c < cols; ++c) s += static_cast<double>(wf[r * cols + c]) * x[t * cols + c];
      const double d = y[t * rows + r] - s;
      err += d * d;
      ref += s * s;
    }
  return std::sqrt(err / ref);
}

}  // namespace

TEST_CASE("mxfp4: dequantization of reference blocks is bit-exact", "[reference][mxfp4]") {
  int64_t rows = 0;
  const auto w = dequant_rows(rows);
  const auto ref = reference("dequant", w, 256, {});
  std::set<int> exps;
  for (size_t b = 0; b < ref.blocks.size(); b += 17) exps.insert(ref.blocks[b]);
  std::vector<float> ours(w.size());
  vtc::dequantize_row(GgmlType::MXFP4, ref.blocks.data(), ours.data(), static_cast<int64_t>(ours.size()));
  CHECK(count_bit_mismatches(ours, ref.dequant, "dequant") == 0);
  size_t zeros = 0, subnormal = 0;
  for (float f : ref.dequant) {
    zeros += f == 0.0f;
    subnormal += std::fpclassify(f) == FP_SUBNORMAL;
  }
  std::cout << fmt::format("mxfp4 dequant bit-exact: {} values, {} E8M0 exponents ({}..{}), {} zeros, {} subnormal\n",
                           ours.size(), exps.size(), *exps.begin(), *exps.rbegin(), zeros, subnormal);
  CHECK(exps.size() == 253);  // every exponent 0..252
  CHECK(subnormal > 0);
}

TEST_CASE("mxfp4: matmul equals the reference's mul_mat on every ISA", "[reference][mxfp4][matmul]") {
  vtc::cpu::ThreadPool pool(2);
  struct Shape {
    int64_t rows, cols, tokens;
  };
  // 8, 9, 3 and 1 blocks per row: odd counts take the reference's scalar tail.
  for (const Shape s : {Shape{37, 256, 3}, Shape{19, 288, 2}, Shape{64, 96, 8}, Shape{8, 32, 1}}) {
    std::mt19937 rng(static_cast<uint32_t>(s.cols));
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::vector<float> w(static_cast<size_t>(s.rows * s.cols)), x(static_cast<size_t>(s.tokens * s.cols));
    for (int64_t r = 0; r < s.rows; ++r) {
      const float row_scale = std::ldexp(1.0f, static_cast<int>(r % 7) - 3);
      for (int64_t c = 0; c < s.cols; ++c) w[r * s.cols + c] = (r % 5 == 4 && c < 32) ? 0.0f : row_scale * g(rng);
    }
    for (auto& v : x) v = g(rng);
    const auto ref = reference(fmt::format("matmul{}", s.cols), w, s.cols, x);
    REQUIRE(ref.matmul.size() == static_cast<size_t>(s.rows * s.tokens));
    const auto x_q8 = q8_0_rounded(x, s.cols);
    for (vtc::cpu::Isa isa : isas()) {
      IsaScope scope(isa);
      std::vector<float> y(ref.matmul.size(), -12345.0f);
      vtc::cpu::matmul(GgmlType::MXFP4, ref.blocks.data(), s.rows, s.cols, x.data(), s.tokens, y.data(), pool);
      const double e_q8 = rel_l2(y, ref.dequant, x_q8, s.rows, s.cols);
      const double e_exact = rel_l2(y, ref.dequant, x, s.rows, s.cols);
      const int bad = count_bit_mismatches(y, ref.matmul, "matmul");
      std::cout << fmt::format("mxfp4 matmul {}x{} x {} tokens, isa {}: {} of {} outputs differ from the reference's "
                               "bits; rel-L2 vs double (q8_0 x) {:.3g}, (f32 x) {:.3g}\n",
                               s.rows, s.cols, s.tokens, vtc::cpu::isa_name(isa), bad, y.size(), e_q8, e_exact);
      INFO(fmt::format("{}x{} isa {}", s.rows, s.cols, vtc::cpu::isa_name(isa)));
      CHECK(bad == 0);
      CHECK(e_q8 < 1e-6);     // float accumulation only
      CHECK(e_exact < 1e-2);  // q8_0 activations: about 1/254 relative per value
    }
  }
}
