// Shared helpers for the CPU kernel tests: deterministic random data,
// random-but-valid quantized weights, NMSE, guarded output buffers and an
// RAII ISA selector.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "frontends/gguf/dequant.h"
#include "frontends/gguf/gguf.h"
#include "runtime/cpu/kernels/internal.h"
#include "runtime/cpu/kernels/kernels.h"
#include "support/ggml_type.h"

namespace vtc::cpu::test {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Offsets of the f16 scale fields inside one block, and whether each may be
// negative (the min of the _1 types).
struct HalfField {
  int offset;
  bool signed_value;
};
inline std::vector<HalfField> half_fields(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0: case GgmlType::Q5_0: case GgmlType::Q8_0: case GgmlType::IQ4_NL:
    case GgmlType::IQ4_XS: case GgmlType::IQ3_XXS: case GgmlType::IQ3_S:
      return {{0, false}};
    case GgmlType::Q4_1: case GgmlType::Q5_1: return {{0, false}, {2, true}};
    case GgmlType::Q4_K: case GgmlType::Q5_K: return {{0, false}, {2, false}};
    case GgmlType::Q2_K: return {{80, false}, {82, false}};
    case GgmlType::Q3_K: return {{108, false}};
    case GgmlType::Q6_K: return {{208, false}};
    default: return {};
  }
}

// rows x cols weights of type t: random codes with sane f16 scales.
inline std::vector<uint8_t> random_weights(GgmlType t, int64_t rows, int64_t cols, uint32_t seed) {
  const auto& tr = ggml_traits(t);
  const int64_t n = rows * cols;
  std::mt19937 rng(seed);
  if (t == GgmlType::F32) {
    auto f = random_floats(static_cast<size_t>(n), seed);
    std::vector<uint8_t> out(f.size() * 4);
    std::memcpy(out.data(), f.data(), out.size());
    return out;
  }
  if (t == GgmlType::F16 || t == GgmlType::BF16) {
    auto f = random_floats(static_cast<size_t>(n), seed);
    std::vector<uint8_t> out(f.size() * 2);
    for (size_t i = 0; i < f.size(); ++i) {
      const uint16_t h = t == GgmlType::F16 ? fp32_to_fp16(f[i]) : fp32_to_bf16(f[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
    return out;
  }
  const int64_t n_blocks = n / tr.block_size;
  std::vector<uint8_t> out(static_cast<size_t>(n_blocks * tr.block_bytes));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : out) b = static_cast<uint8_t>(byte(rng));
  std::uniform_real_distribution<float> mag(0.002f, 0.02f), sgn(-1.0f, 1.0f);
  const auto fields = half_fields(t);
  for (int64_t b = 0; b < n_blocks; ++b) {
    for (const auto& f : fields) {
      const float v = f.signed_value ? sgn(rng) * 0.1f : mag(rng);
      const uint16_t h = fp32_to_fp16(v);
      std::memcpy(out.data() + b * tr.block_bytes + f.offset, &h, 2);
    }
    // MXFP4's E8M0 exponent byte: scales 2^(e-128) of 2^-10 .. 2^-5.
    if (t == GgmlType::MXFP4) out[static_cast<size_t>(b * tr.block_bytes)] = static_cast<uint8_t>(118 + byte(rng) % 6);
  }
  return out;
}

inline std::vector<float> dequant_all(GgmlType t, const std::vector<uint8_t>& w, int64_t rows, int64_t cols) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  const auto& tr = ggml_traits(t);
  const int64_t stride = cols / tr.block_size * tr.block_bytes;
  for (int64_t r = 0; r < rows; ++r) dequantize_row(t, w.data() + r * stride, out.data() + r * cols, cols);
  return out;
}

// x converted to the activation type and back, exactly as matmul sees it.
inline std::vector<float> activations_as_seen(GgmlType wtype, const std::vector<float>& x, int64_t cols, int64_t n_tokens) {
  const GgmlType at = matmul_activation_type(wtype);
  if (at == GgmlType::F32) return x;
  const auto& sk = detail::scalar_quant_kernels();
  std::vector<float> out(x.size());
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* xr = x.data() + t * cols;
    float* o = out.data() + t * cols;
    switch (at) {
      case GgmlType::F16: {
        std::vector<uint16_t> h(static_cast<size_t>(cols));
        sk.quantize[static_cast<int>(detail::ActType::F16)](xr, h.data(), cols);
        for (int64_t i = 0; i < cols; ++i) o[i] = fp16_to_fp32(h[static_cast<size_t>(i)]);
        break;
      }
      case GgmlType::BF16: {
        std::vector<uint16_t> h(static_cast<size_t>(cols));
        sk.quantize[static_cast<int>(detail::ActType::BF16)](xr, h.data(), cols);
        for (int64_t i = 0; i < cols; ++i) o[i] = bf16_to_fp32(h[static_cast<size_t>(i)]);
        break;
      }
      case GgmlType::Q8_0: {
        std::vector<detail::BlockQ8_0> b(static_cast<size_t>(cols / 32));
        sk.quantize[static_cast<int>(detail::ActType::Q8_0)](xr, b.data(), cols);
        for (int64_t i = 0; i < cols; ++i) o[i] = fp16_to_fp32(b[i / 32].d) * b[i / 32].qs[i % 32];
        break;
      }
      case GgmlType::Q8_1: {
        std::vector<detail::BlockQ8_1> b(static_cast<size_t>(cols / 32));
        sk.quantize[static_cast<int>(detail::ActType::Q8_1)](xr, b.data(), cols);
        for (int64_t i = 0; i < cols; ++i) o[i] = fp16_to_fp32(b[i / 32].d) * b[i / 32].qs[i % 32];
        break;
      }
      case GgmlType::Q8_K: {
        std::vector<detail::BlockQ8_K> b(static_cast<size_t>(cols / 256));
        sk.quantize[static_cast<int>(detail::ActType::Q8_K)](xr, b.data(), cols);
        for (int64_t i = 0; i < cols; ++i) o[i] = b[i / 256].d * b[i / 256].qs[i % 256];
        break;
      }
      default: throw std::logic_error("unexpected activation type");
    }
  }
  return out;
}

// y[t][r] = dot(wf row r, x row t), in double.
inline std::vector<double> reference(const std::vector<float>& wf, const std::vector<float>& x, int64_t rows, int64_t cols,
                              int64_t n_tokens) {
  std::vector<double> y(static_cast<size_t>(rows * n_tokens));
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (int64_t c = 0; c < cols; ++c)
        s += static_cast<double>(wf[static_cast<size_t>(r * cols + c)]) * x[static_cast<size_t>(t * cols + c)];
      y[static_cast<size_t>(t * rows + r)] = s;
    }
  return y;
}

// Normalized mean squared error of a against the reference b.
inline double nmse(const float* a, const double* b, size_t n) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    err += d * d;
    ref += b[i] * b[i];
  }
  if (ref == 0) return err;
  return err / ref;
}
inline double nmse(const std::vector<float>& a, const std::vector<double>& b) { return nmse(a.data(), b.data(), a.size()); }
inline double nmse(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<double> bd(b.begin(), b.end());
  return nmse(a.data(), bd.data(), a.size());
}

// An output buffer with sentinel floats on both sides; intact() checks that
// no kernel wrote outside [data(), data() + size()).
class Guarded {
 public:
  static constexpr size_t kGuard = 64;
  static constexpr uint32_t kSentinel = 0x7fa5a5a5u;  // a NaN no kernel produces
  explicit Guarded(size_t n) : n_(n), buf_(n + 2 * kGuard) {
    for (auto& f : buf_) f = std::bit_cast<float>(kSentinel);
    for (size_t i = 0; i < n; ++i) buf_[kGuard + i] = -12345.0f;  // poison: must be overwritten
  }
  float* data() { return buf_.data() + kGuard; }
  size_t size() const { return n_; }
  bool intact() const {
    for (size_t i = 0; i < kGuard; ++i)
      if (std::bit_cast<uint32_t>(buf_[i]) != kSentinel || std::bit_cast<uint32_t>(buf_[kGuard + n_ + i]) != kSentinel)
        return false;
    return true;
  }
  std::vector<float> values() const { return {buf_.begin() + kGuard, buf_.begin() + static_cast<long>(kGuard + n_)}; }

 private:
  size_t n_;
  std::vector<float> buf_;
};

// Selects an ISA for the scope; restores the previous one.
class IsaScope {
 public:
  explicit IsaScope(Isa isa) : prev_(active_isa()) { set_active_isa(isa); }
  ~IsaScope() { set_active_isa(prev_); }
  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;

 private:
  Isa prev_;
};

// The ISA levels this machine can run, lowest first (always scalar).
inline std::vector<Isa> available_isas() { return supported_isas(); }

// The levels with SIMD kernels (AVX2 and up) this machine can run; empty
// without AVX2.
inline std::vector<Isa> simd_isas() {
  std::vector<Isa> v;
  for (Isa isa : supported_isas())
    if (isa >= Isa::Avx2) v.push_back(isa);
  return v;
}

inline bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A GGUF with a header only (version 3, no tensors, no metadata): the
// weight file of interpreter tests whose modules declare no weights.
inline const gguf::GgufFile& empty_gguf() {
  static const std::vector<uint8_t> bytes = {'G', 'G', 'U', 'F', 3, 0, 0, 0, 0, 0, 0, 0,
                                             0,   0,   0,   0,   0, 0, 0, 0, 0, 0, 0, 0};
  static const gguf::GgufFile file = gguf::GgufFile::parse(bytes);
  return file;
}

}  // namespace vtc::cpu::test
