// Scalar float helpers (see internal.h, FloatKernels). Sums accumulate in
// double; fused multiply-adds are explicit (std::fma) where the AVX2 version
// fuses, so the f16 accumulator of attention rounds the same way on both ISAs.
#include <cmath>

#include "frontends/gguf/dequant.h"
#include "runtime/cpu/kernels/internal.h"

namespace vtc::cpu::detail {
namespace {

double sum_squares(const float* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  return sum;
}
void add(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}
void mul(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}
void scale(const float* x, float s, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
}
float dot_f32(const float* a, const float* b, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(a[i] * b[i]);
  return static_cast<float>(sum);
}
float dot_f16(const uint16_t* a, const uint16_t* b, int64_t n) {
  const float* t = fp16_table();
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(t[a[i]] * t[b[i]]);
  return static_cast<float>(sum);
}
void mad_f32(float* y, const float* x, float v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::fma(x[i], v, y[i]);
}
void mad_f16(uint16_t* y, const uint16_t* x, float v, int64_t n) {
  const float* t = fp16_table();
  for (int64_t i = 0; i < n; ++i) y[i] = vtc::fp32_to_fp16(std::fma(t[x[i]], v, t[y[i]]));
}
void mad_f32_f16(float* y, const uint16_t* x, float v, int64_t n) {
  const float* t = fp16_table();
  for (int64_t i = 0; i < n; ++i) y[i] = std::fma(t[x[i]], v, y[i]);
}
void scale_f16(uint16_t* y, float v, int64_t n) {
  const float* t = fp16_table();
  for (int64_t i = 0; i < n; ++i) y[i] = vtc::fp32_to_fp16(t[y[i]] * v);
}
void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = vtc::fp32_to_fp16(x[i]);
}
void silu(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i]));
}

}  // namespace

const FloatKernels& scalar_float_kernels() {
  static const FloatKernels k = {sum_squares, add, mul, scale, dot_f32, dot_f16, mad_f32,
                                 mad_f16, mad_f32_f16, scale_f16, f32_to_f16, silu, nullptr};
  return k;
}

}  // namespace vtc::cpu::detail
