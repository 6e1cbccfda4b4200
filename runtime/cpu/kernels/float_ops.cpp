// The float ops of the forward pass (kernels.h), following ggml's CPU
// definitions: rms_norm accumulates the sum of squares in double and scales
// by 1/sqrtf(mean + eps) in float, then multiplies by the gain (ggml's
// rms_norm followed by mul); softmax sums exp in double; silu is
// x/(1+expf(-x)); gelu goes through an f16 table like GGML_GELU_FP16; rope
// builds its cos/sin cache by repeated multiplication by base^(-2/n_dims)
// (one angle per position component in the multi-section modes, as
// ggml_mrope_cache_init); sum_rows adds in double like ggml_vec_sum_f32.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "frontends/gguf/dequant.h"
#include "runtime/cpu/kernels/internal.h"
#include "runtime/cpu/kernels/kernels.h"
#include "support/error.h"
#include "support/mutation.h"

namespace vtc::cpu {

using detail::active_float_kernels;

void rms_norm(const float* x, const float* weight, float eps, int64_t n_rows, int64_t n_cols, float* y) {
  const auto& k = active_float_kernels();
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * n_cols;
    float* yr = y + r * n_cols;
    const double sum = k.sum_squares(xr, n_cols);
    const float mean = static_cast<float>(sum / static_cast<double>(n_cols));
    const float s = 1.0f / std::sqrt(mean + eps);
    k.scale(xr, s, yr, n_cols);
    if (weight != nullptr) k.mul(yr, weight, yr, n_cols);
  }
}

void add(const float* a, const float* b, float* y, int64_t n) { active_float_kernels().add(a, b, y, n); }
void mul(const float* a, const float* b, float* y, int64_t n) { active_float_kernels().mul(a, b, y, n); }
void scale(const float* x, float s, float* y, int64_t n) { active_float_kernels().scale(x, s, y, n); }

void neg(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = -x[i];
}
void exp(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}
void silu(const float* x, float* y, int64_t n) { active_float_kernels().silu(x, y, n); }
void sigmoid(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + std::exp(-x[i]));
}
void tanh_values(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
}
namespace {

// ggml_vec_cvar_f32: y = x - mean, and the sum of y^2 in double over float
// partial sums. Per `lanes` values (8 on the reference's AVX2 build, 16 on
// its AVX-512 builds) the squares are summed in the order of its horizontal
// add (each half added to the other, down to one lane), then added to the
// double; the leftovers (and every value, with lanes 0: the build without
// SIMD the scalar level stands for) one square at a time. Summing every
// square in double instead parted from the reference by an ulp of the
// variance on some rows, which a q8_0 activation turned into a whole code
// (gptneox and jais with a q8_0 cache on an AVX2 core, issue 43).
double centered_squares(const float* x, float mean, float* y, int64_t n, int lanes) {
  double sum = 0.0;
  int64_t i = 0;
  if (lanes > 0)
    for (; i + lanes <= n; i += lanes) {
      float p[16];
      for (int l = 0; l < lanes; ++l) {
        y[i + l] = x[i + l] - mean;
        p[l] = y[i + l] * y[i + l];
      }
      for (int half = lanes / 2; half >= 1; half /= 2)
        for (int l = 0; l < half; ++l) p[l] = p[l + half] + p[l];
      sum += double(p[0]);
    }
  for (; i < n; ++i) {
    const float v = x[i] - mean;
    y[i] = v;
    sum += double(v * v);
  }
  return sum;
}

}  // namespace

void layer_norm(const float* x, const float* gain, const float* bias, float eps, int64_t n_rows, int64_t n_cols,
                float* y) {
  const int lanes = detail::reference_vector_width();
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * n_cols;
    float* yr = y + r * n_cols;
    double sum = 0.0;
    for (int64_t c = 0; c < n_cols; ++c) sum += double(xr[c]);
    const float mean = float(sum) / float(n_cols);  // ggml_vec_sum_f32 rounds the sum, then a float division
    const double sum2 = centered_squares(xr, mean, yr, n_cols, lanes);
    const float s = 1.0f / std::sqrt(float(sum2 / double(n_cols)) + eps);
    for (int64_t c = 0; c < n_cols; ++c) yr[c] *= s;
    if (gain != nullptr)
      for (int64_t c = 0; c < n_cols; ++c) yr[c] *= gain[c];
    if (bias != nullptr)
      for (int64_t c = 0; c < n_cols; ++c) yr[c] += bias[c];
  }
}
void softplus(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 20.0f ? x[i] : std::log(1.0f + std::exp(x[i]));
}
void absolute(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::fabs(x[i]);
}
void sgn(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? 1.0f : (x[i] < 0.0f ? -1.0f : 0.0f);
}
void square_root(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::sqrt(x[i]);
}
void clamp_values(const float* x, float lo, float hi, float* y, int64_t n) {
  // Spelled as ggml's MIN/MAX macros rather than std::clamp or fminf: the
  // ternaries decide NaN (-> hi) and signed zeros (-0 vs 0 -> the bound).
  for (int64_t i = 0; i < n; ++i) {
    const float m = x[i] < hi ? x[i] : hi;
    y[i] = m > lo ? m : lo;
  }
}
void swiglu(const float* gate, const float* up, float* y, int64_t n) {
  // silu(gate) rounded, then times up: ggml_vec_swiglu_f32's roundings.
  active_float_kernels().silu(gate, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] *= up[i];
}

namespace {
const uint16_t* gelu_table() {
  static const std::vector<uint16_t> table = [] {
    std::vector<uint16_t> t(65536);
    constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
    constexpr float kCoefA = 0.044715f;
    for (uint32_t i = 0; i < 65536; ++i) {
      const float f = vtc::fp16_to_fp32(static_cast<uint16_t>(i));
      const float g = 0.5f * f * (1.0f + std::tanh(kSqrt2OverPi * f * (1.0f + kCoefA * f * f)));
      t[i] = vtc::fp32_to_fp16(g);
    }
    return t;
  }();
  return table.data();
}
}  // namespace

void gelu(const float* x, float* y, int64_t n) {
  const uint16_t* t = gelu_table();
  const float* h = detail::fp16_table();
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (v <= -10.0f) y[i] = 0.0f;
    else if (v >= 10.0f) y[i] = v;
    else y[i] = h[t[vtc::fp32_to_fp16(v)]];
  }
}

void softmax(const float* x, int64_t n_rows, int64_t n_cols, float scale_by, float* y) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * n_cols;
    float* yr = y + r * n_cols;
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n_cols; ++i) max = std::max(max, xr[i] * scale_by);
    double sum = 0.0;
    for (int64_t i = 0; i < n_cols; ++i) {
      const float e = std::exp(xr[i] * scale_by - max);
      yr[i] = e;
      sum += static_cast<double>(e);
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < n_cols; ++i) yr[i] *= inv;
  }
}

void sum_rows(const float* x, int64_t n_rows, int64_t n_cols, float* y) {
  for (int64_t r = 0; r < n_rows; ++r) {
    double sum = 0.0;  // ggml_float, index order (ggml_vec_sum_f32)
    for (int64_t c = 0; c < n_cols; ++c) sum += static_cast<double>(x[r * n_cols + c]);
    y[r] = static_cast<float>(sum);
  }
}

namespace {


// The position component that drives rotary pair i in the multi-section
// modes (ggml_mrope_cache_init; `t, h, w, e` there are components 0..3).
int mrope_component(const RopeParams& p, int64_t i) {
  const int64_t unit = mutated(Mutation::MropeSection) ? 2 : 1;  // support/mutation.h: sections read in dims
  const int64_t a = p.sections[0] / unit, b = p.sections[1] / unit, c = p.sections[2] / unit;
  const int64_t s = i % (p.sections[0] + p.sections[1] + p.sections[2] + p.sections[3]);
  if (p.mode == RopeMode::IMulti) {
    if (s % 3 == 1 && s < 3 * b) return 1;
    if (s % 3 == 2 && s < 3 * c) return 2;
    if (s % 3 == 0 && s < 3 * a) return 0;
    return 3;
  }
  return s < a ? 0 : s < a + b ? 1 : s < a + b + c ? 2 : 3;
}

// cos/sin of every rotary pair for one token (ggml_rope_cache_init, or
// ggml_mrope_cache_init in the multi modes: there each component's angle
// is advanced by theta_scale at every pair, and the pair reads the one its
// sector selects, so equal components give exactly the single-position
// cache). pos: the token's position, or its 4 components.
void rope_cache(const RopeParams& p, const int32_t* pos, float theta_scale, float* cache) {
  const bool multi = is_multi(p.mode);
  const int n_components = multi ? 4 : 1;
  float theta[4];
  for (int j = 0; j < n_components; ++j) theta[j] = static_cast<float>(pos[j]);
  for (int64_t i = 0; i < p.n_dims / 2; ++i) {
    const float ff = p.freq_factors != nullptr ? p.freq_factors[i] : 1.0f;
    const float extrapolated = theta[multi ? mrope_component(p, i) : 0] / ff;
    float th = p.freq_scale * extrapolated;
    float mscale = p.attn_factor;
    if (p.ext_factor != 0.0f) {
      const float y = (static_cast<float>(i) - p.corr_dims[0]) / std::max(0.001f, p.corr_dims[1] - p.corr_dims[0]);
      const float ramp_mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
      th = th * (1.0f - ramp_mix) + extrapolated * ramp_mix;
      mscale = rope_yarn_mscale(p.attn_factor, p.freq_scale);
    }
    cache[2 * i] = std::cos(th) * mscale;
    cache[2 * i + 1] = std::sin(th) * mscale;
    for (int j = 0; j < n_components; ++j) theta[j] *= theta_scale;
  }
}

void check_rope_params(const RopeParams& p, int64_t head_dim) {
  if (p.n_dims <= 0 || p.n_dims % 2 != 0 || p.n_dims > head_dim)
    throw Error(fmt::format("rope: n_dims {} must be even and in (0, head_dim {}]", p.n_dims, head_dim));
  if (p.mode != RopeMode::Normal && p.mode != RopeMode::Neox && !is_multi(p.mode))
    throw Error(fmt::format("rope: unsupported mode {}", static_cast<int>(p.mode)));
  if (is_multi(p.mode)) {
    int64_t sum = 0;
    for (int32_t s : p.sections) {
      if (s < 0) throw Error(fmt::format("rope: negative section {}", s));
      sum += s;
    }
    if (sum == 0) throw Error("rope: multi-section rope needs a positive section");
  }
}

}  // namespace

namespace {

// Rotates one token's n_heads heads (head_dim apart) by its cos/sin cache.
// On an FMA-capable ISA the reference's CPU backend (ggml's rotate_pairs,
// built with GCC's default -ffp-contract=fast) fuses x0's product into
// the sum and rounds x1's product first: fma(x0, cos, -(x1*sin)),
// fma(x0, sin, x1*cos). In normal (llama) mode every FMA build does; the
// neox loop (also the multi modes') is contracted the same way by the
// AVX2 (haswell) and the AVX-512 (sapphirerapids) builds: q8_0 logits of
// the qwen family are bit-identical with it on both. See
// docs/numerics-parity.md.
void rotate_token(const float* x, int64_t n_heads, int64_t head_dim, const float* cache, const RopeParams& p,
                  float* y) {
  const int64_t n_pairs = p.n_dims / 2;
  const bool fma_isa = active_isa() != Isa::Scalar;
  const bool fused = fma_isa;
  const bool pairs_apart = p.mode != RopeMode::Normal;  // neox-style (i, i + n_dims/2)
  const int64_t stride = pairs_apart ? n_pairs : 1;
  for (int64_t h = 0; h < n_heads; ++h) {
    const float* xs = x + h * head_dim;
    float* ys = y + h * head_dim;
    if (fused) {
      for (int64_t i = 0; i < n_pairs; ++i) {
        const int64_t a = pairs_apart ? i : 2 * i;
        const float c = cache[2 * i], s = cache[2 * i + 1];
        const float x0 = xs[a], x1 = xs[a + stride];
        const float x1s = x1 * s, x1c = x1 * c;  // rounded, then fused with x0's product
        ys[a] = std::fma(x0, c, -x1s);
        ys[a + stride] = std::fma(x0, s, x1c);
      }
    } else {
      for (int64_t i = 0; i < n_pairs; ++i) {
        const int64_t a = pairs_apart ? i : 2 * i;
        const float c = cache[2 * i], s = cache[2 * i + 1];
        const float x0 = xs[a], x1 = xs[a + stride];
        ys[a] = x0 * c - x1 * s;
        ys[a + stride] = x0 * s + x1 * c;
      }
    }
    if (ys != xs)
      for (int64_t i = p.n_dims; i < head_dim; ++i) ys[i] = xs[i];
  }
}

float rope_theta_scale(const RopeParams& p) { return vtc::rope_theta_scale(p.freq_base, p.n_dims); }
int64_t rope_pos_stride(const RopeParams& p) { return is_multi(p.mode) ? 4 : 1; }

}  // namespace

void rope(const float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, const int32_t* pos,
          const RopeParams& p, float* y) {
  check_rope_params(p, head_dim);
  const float theta_scale = rope_theta_scale(p);
  std::vector<float> cache(static_cast<size_t>(p.n_dims));
  for (int64_t t = 0; t < n_tokens; ++t) {
    rope_cache(p, pos + t * rope_pos_stride(p), theta_scale, cache.data());
    rotate_token(x + t * n_heads * head_dim, n_heads, head_dim, cache.data(), p, y + t * n_heads * head_dim);
  }
}

void rope_table(const RopeParams& p, int64_t head_dim, const int32_t* pos, int64_t t0, int64_t t1, float* table) {
  check_rope_params(p, head_dim);
  const float theta_scale = rope_theta_scale(p);
  for (int64_t t = t0; t < t1; ++t) rope_cache(p, pos + t * rope_pos_stride(p), theta_scale, table + t * p.n_dims);
}

void rope_rotate(const float* x, int64_t x_stride, int64_t n_tokens, int64_t n_heads, int64_t head_dim,
                 const float* table, const RopeParams& p, float* y, int64_t y_stride) {
  for (int64_t t = 0; t < n_tokens; ++t)
    rotate_token(x + t * x_stride, n_heads, head_dim, table + t * p.n_dims, p, y + t * y_stride);
}

int64_t argmax(const float* x, int64_t n) {
  if (n <= 0) return -1;
  int64_t best = 0;
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i)
    if (x[i] > max) {
      max = x[i];
      best = i;
    }
  return best;
}

int64_t top_k(const float* x, int64_t n, int64_t k, int32_t* indices) {
  k = std::clamp<int64_t>(k, 0, std::max<int64_t>(n, 0));
  if (k == 0) return 0;
  std::vector<int32_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  // NaN sorts last; ties go to the lower index.
  auto before = [x](int32_t a, int32_t b) {
    const float va = x[a], vb = x[b];
    const bool na = std::isnan(va), nb = std::isnan(vb);
    if (na != nb) return nb;
    if (!na && va != vb) return va > vb;
    return a < b;
  };
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), before);
  std::copy(idx.begin(), idx.begin() + k, indices);
  return k;
}

}  // namespace vtc::cpu
