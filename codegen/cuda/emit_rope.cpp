// RoPE: one thread per (token, head, rotated pair), plus a copy of the
// unrotated tail of each head.
//
// The angle follows the CPU kernel exactly where it can: theta starts at the
// position and is multiplied by theta_scale = base^(-2/n_rot) once per pair
// index, in float, as the CPU's running product does (theta_scale is
// computed on the host with the same std::pow call and baked in); YaRN's
// ramp and correction dims likewise. Normal mode rotates with
// fma(x0, cos, -(x1 * sin)), fma(x0, sin, x1 * cos) (the CPU's FMA path,
// which matches the reference's), neox mode with separately rounded
// products (__fmul_rn), so NVRTC's contraction cannot change the rounding.
// cosf/sinf may differ from glibc's in the last bit.
//
// Multi-section modes (multi, imulti; ggml's MROPE and IMROPE) rotate like
// neox; pos is [T, 4] and pair i takes its base angle from the component
// its sector (i mod sum(sections)) selects. ggml keeps four running
// products, one per component, all multiplied by theta_scale every pair;
// the i-fold product starting from the selected component is the same
// float, so the per-thread loop below reproduces it.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "codegen/cuda/emit.h"

namespace vtc::cuda {

namespace {

// Multi-section rope: code computing `comp`, the position component
// (0..3) that drives pair i, from the `sections` attribute.
std::string section_component(const ir::Op& op) {
  const ir::Attr* a = op.attr("sections");
  if (!a || a->ints.size() != 4) unsupported(op, "multi-section rope needs 4 sections");
  const auto& sec = a->ints;
  const int64_t total = sec[0] + sec[1] + sec[2] + sec[3];
  if (total <= 0) unsupported(op, "the rope sections must not all be zero");
  std::string code = fmt::format("    const long long sector = i % {};\n", total);
  if (op.attr("mode")->s == "imulti")
    return code + fmt::format(
                      "    const int comp = (sector % 3 == 1 && sector < {}) ? 1 : (sector % 3 == 2 && sector < {}) ? 2\n"
                      "                   : (sector % 3 == 0 && sector < {}) ? 0 : 3;\n",
                      3 * sec[1], 3 * sec[2], 3 * sec[0]);
  return code + fmt::format("    const int comp = sector < {} ? 0 : sector < {} ? 1 : sector < {} ? 2 : 3;\n", sec[0],
                            sec[0] + sec[1], sec[0] + sec[1] + sec[2]);
}

}  // namespace

std::string rope_rotation(bool neox) {
  return neox ? "    y0 = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));\n    y1 = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));\n"
              : "    y0 = __fmaf_rn(x0, c, -__fmul_rn(x1, s));\n    y1 = __fmaf_rn(x0, s, __fmul_rn(x1, c));\n";
}

Kernels emit_rope(const ir::Op& op, const std::string& what) {
  const ir::TensorType& xt = op.operands[0].type();
  if (xt.elem.kind() != ir::ElemType::F32 || xt.rank() != 3) unsupported(op, "x must be [T, H, D] f32, got " + xt.str());
  const std::string mode = op.attr("mode")->s;
  const bool multi = mode == "multi" || mode == "imulti";
  auto heads = xt.shape[1].constant(), head_dim = xt.shape[2].constant();
  if (!heads || !head_dim) unsupported(op, "heads and head_dim must be constant");
  const int64_t n_rot = attr_i(op, "n_rot");
  if (n_rot <= 0 || n_rot % 2 != 0 || n_rot > *head_dim)
    unsupported(op, fmt::format("n_rot {} must be even and in (0, {}]", n_rot, *head_dim));
  const float base = float(attr_f(op, "base", 10000.0)), freq_scale = float(attr_f(op, "freq_scale", 1.0));
  const float ext = float(attr_f(op, "ext_factor", 0.0)), attn_factor = float(attr_f(op, "attn_factor", 1.0));
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
  float corr[2] = {0, 0};
  float mscale = attn_factor;
  if (ext != 0.0f) {
    const float n_ctx_orig = float(attr_i(op, "n_ctx_orig"));
    auto corr_dim = [&](float beta) {
      return float(n_rot) * std::log(n_ctx_orig / (beta * 2.0f * float(M_PI))) / (2.0f * std::log(base));
    };
    corr[0] = std::max(0.0f, std::floor(corr_dim(float(attr_f(op, "beta_fast", 32.0)))));
    corr[1] = std::min(float(n_rot - 1), std::ceil(corr_dim(float(attr_f(op, "beta_slow", 1.0)))));
    mscale *= 1.0f + 0.1f * std::log(1.0f / freq_scale);
  }
  KernelBuilder kb(op.mnemonic(), what);
  const std::string x = kb.in(op.operands[0], "x"), pos = kb.in(op.operands[1], "pos");
  const bool has_ff = op.operands.size() == 3;
  const std::string ff = has_ff ? kb.in(op.operands[2], "freq_factors") : "";
  const std::string y = kb.out(op.results[0], "y");
  const ir::Dim tokens = xt.shape[0];
  const int64_t pairs = n_rot / 2, tail = *head_dim - n_rot, per_head = pairs + tail;
  std::string angle = fmt::format("    const float extrapolated = theta / {};\n    float th = {} * extrapolated;\n",
                                  has_ff ? ff + "[i]" : "1.0f", flit(freq_scale));
  if (ext != 0.0f)
    angle += fmt::format(
        "    const float ry = ((float)i - {0}) / fmaxf(0.001f, {1} - {0});\n"
        "    const float ramp_mix = (1.0f - fminf(1.0f, fmaxf(0.0f, ry))) * {2};\n"
        "    th = th * (1.0f - ramp_mix) + extrapolated * ramp_mix;\n",
        flit(corr[0]), flit(corr[1]), flit(ext));
  const bool neox = mode == "neox" || multi;
  const std::string rotate = rope_rotation(neox);
  kb.body(fmt::format(R"(  constexpr long long H = {0}, D = {1}, PAIRS = {2}, PER_HEAD = {3};
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < {4} * H * PER_HEAD; e += (long long)gridDim.x * blockDim.x) {{
    const long long t = e / (H * PER_HEAD), h = (e / PER_HEAD) % H, i = e % PER_HEAD;
    const float* xs = {5} + (t * H + h) * D;
    float* ys = {6} + (t * H + h) * D;
    if (i >= PAIRS) {{ const long long d = {9} + (i - PAIRS); ys[d] = xs[d]; continue; }}
{15}    float theta = (float){7}[{16}];
    for (long long j = 0; j < i; ++j) theta *= {8};
{10}    const float c = cosf(th) * {11}, s = sinf(th) * {11};
    const long long a = {12}, b = a + {13};
    const float x0 = xs[a], x1 = xs[b];
    float y0, y1;
{14}    ys[a] = y0; ys[b] = y1;
  }}
)",
                      *heads, *head_dim, pairs, per_head, kb.expr(tokens), x, y, pos, flit(theta_scale), n_rot, angle,
                      flit(mscale), neox ? "i" : "2 * i", neox ? pairs : 1, rotate, multi ? section_component(op) : "",
                      multi ? "t * 4 + comp" : "t"));
  kb.launch(tokens * (*heads * per_head), 256);
  return {kb.finish()};
}

}  // namespace vtc::cuda
