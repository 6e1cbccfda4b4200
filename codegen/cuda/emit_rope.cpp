// RoPE: one thread per (token, head, rotated pair), plus a copy of the
// unrotated tail of each head. Several rope ops (a projection region's q
// and k) can share one launch: one grid-stride loop each.
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
#include "support/rope_yarn.h"

namespace vtc::cuda {

namespace {

// Multi-section rope: code computing `comp`, the position component
// (0..3) that drives pair i, from the `sections` attribute.
std::string section_component(const ir::Op& op) {
  const ir::RopeAttrs attrs = ir::RopeAttrs::of(op);
  if (attrs.sections.size() != 4) unsupported(op, "multi-section rope needs 4 sections");
  const auto& sec = attrs.sections;
  const int64_t total = sec[0] + sec[1] + sec[2] + sec[3];
  if (total <= 0) unsupported(op, "the rope sections must not all be zero");
  std::string code = fmt::format("    const long long sector = i % {};\n", total);
  if (attrs.mode == ir::RopeMode::IMulti)
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

namespace {

// One rope op's grid-stride loop, in its own scope, with its parameters
// bound in kb; `threads` gets the loop's trip count.
std::string rope_loop(const ir::Op& op, KernelBuilder& kb, size_t index, ir::Dim& threads) {
  const ir::TensorType& xt = op.operands[0].type();
  if (xt.elem.kind() != ir::ElemType::F32 || xt.rank() != 3) unsupported(op, "x must be [T, H, D] f32, got " + xt.str());
  const ir::RopeAttrs attrs = ir::RopeAttrs::of(op);
  const bool multi = ir::is_multi(attrs.mode);
  auto heads = xt.shape[1].constant(), head_dim = xt.shape[2].constant();
  if (!heads || !head_dim) unsupported(op, "heads and head_dim must be constant");
  const int64_t n_rot = attrs.n_rot;
  if (n_rot <= 0 || n_rot % 2 != 0 || n_rot > *head_dim)
    unsupported(op, fmt::format("n_rot {} must be even and in (0, {}]", n_rot, *head_dim));
  const float base = float(attrs.base), freq_scale = float(attrs.freq_scale);
  const float ext = float(attrs.ext_factor), attn_factor = float(attrs.attn_factor);
  const float theta_scale = rope_theta_scale(base, n_rot);
  float corr[2] = {0, 0};
  float mscale = attn_factor;
  if (ext != 0.0f) {
    rope_yarn_corr_dims(n_rot, attrs.n_ctx_orig, base, float(attrs.beta_fast), float(attrs.beta_slow), corr);
    mscale = rope_yarn_mscale(attn_factor, freq_scale);
  }
  const std::string sfx = index == 0 ? "" : fmt::format("{}", index);
  const std::string x = kb.in(op.operands[0], "x" + sfx), pos = kb.in(op.operands[1], "pos" + sfx);
  const bool has_ff = op.operands.size() == 3;
  const std::string ff = has_ff ? kb.in(op.operands[2], "freq_factors" + sfx) : "";
  const std::string y = kb.out(op.results[0], "y" + sfx);
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
  const bool neox = attrs.mode != ir::RopeMode::Normal;
  const std::string rotate = rope_rotation(neox);
  threads = tokens * (*heads * per_head);
  return fmt::format(R"(  {{
  constexpr long long H = {0}, D = {1}, PAIRS = {2}, PER_HEAD = {3};
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
  }}
)",
                      *heads, *head_dim, pairs, per_head, kb.expr(tokens), x, y, pos, flit(theta_scale), n_rot, angle,
                      flit(mscale), neox ? "i" : "2 * i", neox ? pairs : 1, rotate, multi ? section_component(op) : "",
                      multi ? "t * 4 + comp" : "t");
}

}  // namespace

Kernels emit_rope(const ir::Op& op, const std::string& what) { return emit_rope_ops({&op}, what); }

Kernels emit_rope_ops(const std::vector<const ir::Op*>& ops, const std::string& what) {
  KernelBuilder kb(ops[0]->mnemonic(), what);
  // Each op's loop strides over the whole grid, sized for the largest
  // (the sum of the trip counts: Dims have no max).
  ir::Dim total = 0;
  std::string body;
  for (size_t i = 0; i < ops.size(); ++i) {
    ir::Dim threads = 0;
    body += rope_loop(*ops[i], kb, i, threads);
    total = i == 0 ? threads : total + threads;
  }
  kb.body(body);
  kb.launch(total, 256);
  return {kb.finish()};
}

}  // namespace vtc::cuda
