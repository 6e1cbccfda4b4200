// Host-side rope parameter math that the CPU kernels and the CUDA emitters
// must compute identically (the CUDA kernels bake these floats in): ggml's
// theta scale, YaRN correction dims (ggml_rope_yarn_corr_dims) and YaRN's
// cos/sin magnitude (rope_yarn's mscale). Every step is in float, in
// ggml's order, so both backends round alike.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace vtc {

// base^(-2/n_rot): pair i's frequency is theta_scale^i.
inline float rope_theta_scale(float base, int64_t n_rot) {
  return std::pow(base, -2.0f / static_cast<float>(n_rot));
}

// The first and last pair index of YaRN's ramp for n_rot rotated dims.
inline void rope_yarn_corr_dims(int64_t n_rot, int64_t n_ctx_orig, float base, float beta_fast, float beta_slow,
                                float dims[2]) {
  auto corr_dim = [&](float beta) {
    return static_cast<float>(n_rot) *
           std::log(static_cast<float>(n_ctx_orig) / (beta * 2.0f * static_cast<float>(M_PI))) /
           (2.0f * std::log(base));
  };
  dims[0] = std::max(0.0f, std::floor(corr_dim(beta_fast)));
  dims[1] = std::min(static_cast<float>(n_rot - 1), std::ceil(corr_dim(beta_slow)));
}

// cos and sin are multiplied by this with YaRN on (ext_factor != 0).
inline float rope_yarn_mscale(float attn_factor, float freq_scale) {
  return attn_factor * (1.0f + 0.1f * std::log(1.0f / freq_scale));
}

}  // namespace vtc
