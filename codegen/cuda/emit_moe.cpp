// Mixture of experts: moe_route and moe_ffn (docs/ir.md), with the CPU
// kernels' numerics (runtime/cpu/kernels/moe.cpp).
//
// moe_route: one thread per token, the E probabilities in a local array.
//   softmax: max, e = exp(x - max) summed in double in expert order, then
//   e * (1/sum) (the softmax kernel's formula); sigmoid: 1 / (1 + exp(-x)).
//   Top-k picks k times "the best expert strictly after the previous pick"
//   in the top_k order (value descending, NaN last, lower index first), so
//   ids come out largest first with ties to the lower index. The weights are
//   the picked probabilities (picked on the selection scores: p plus the
//   selection bias, with grouped routing's excluded groups at -inf), for
//   softmax_weight softmaxed over the k, summed in double; with `norm`
//   divided by max(sum, 6.103515625e-5); times `scale` unless it is
//   absent, 0 or 1.
//
// moe_ffn: two launches, one row per (token t, slot j), r = t * k + j.
//   moe_up: one warp per (r, f): lanes walk the 32-value chunks of expert
//     ids[r]'s gate and up rows f (deq32_<type>, as the GEMV), warp sums,
//     then h[r][f] = silu(g) * u into scratch [T * k][F].
//   moe_down: one warp per (t, d): for j = 0 .. k-1 in order, the dot of
//     down row d of expert ids[t*k+j] with h[r], times weights[r], added
//     as the CPU adds the slot views (o = y0 * w0, then o += yj * wj).
//   A merged gate_up stack [E][2F][D] is one parameter: expert e's gate
//   row f is its row f, the up row its row F + f. Per-expert scales
//   multiply the warp sums (g *= gs[e], u *= us[e]; the down dot times
//   ds[e] before the routing weight), as the CPU scales each matmul
//   result; an unscaled op emits no multiply, so its text is unchanged.
//   Per-expert biases (biased = true) are added after the scales (g +=
//   gb[e][f], u += ub[e][f]; the down dot + db[e][d] before the routing
//   weight), and `activation = swiglu_oai` replaces silu(g) * u by
//   min(g, limit) / (1 + exp(alpha * -min(g, limit))) * (clamp(u, +-limit) + 1).
//   With `weight_input` (llama4) moe_up reads x[t] * weights[r] (an f32
//   product, as the CPU scales the gathered rows) and moe_down adds the
//   slot results unweighted.
//   Weights decode to the CPU's floats; activations stay f32 for quantized
//   stacks and are rounded to f16 / bf16 for f16 / bf16 stacks, as matmul
//   does (docs/cuda.md "Numerics"). An id outside [0, E) contributes zeros
//   (the CPU throws; moe_route only produces ids in range). Every expert
//   row is re-read per (token, slot): correct, not yet a grouped GEMM.
#include <fmt/format.h>

#include "codegen/cuda/emit.h"
#include "ir/builder.h"

namespace vtc::cuda {
namespace {

int64_t constant_dim(const ir::Op& op, const ir::Dim& d, const char* what) {
  auto c = d.constant();
  if (!c || *c <= 0) unsupported(op, fmt::format("{} must be a positive constant, got {}", what, d.str()));
  return *c;
}

void require_f32(const ir::Op& op, size_t i, const char* what) {
  if (op.operands[i].type().elem.kind() != ir::ElemType::F32)
    unsupported(op, fmt::format("{} must be f32, got {}", what, op.operands[i].type().str()));
}

// The probabilities p[E] of token row `lr`.
std::string route_probs(ir::MoeGating gating) {
  if (gating == ir::MoeGating::Sigmoid) return "    for (long long e = 0; e < E; ++e) p[e] = 1.0f / (1.0f + expf(-lr[e]));\n";
  if (gating == ir::MoeGating::SoftmaxWeight) return "    for (long long e = 0; e < E; ++e) p[e] = lr[e];\n";
  return R"(    float mx = -__int_as_float(0x7f800000);
    for (long long e = 0; e < E; ++e) mx = fmaxf(mx, lr[e]);
    double sum = 0.0;
    for (long long e = 0; e < E; ++e) { const float v = expf(lr[e] - mx); p[e] = v; sum += (double)v; }
    const float inv = (float)(1.0 / sum);
    for (long long e = 0; e < E; ++e) p[e] *= inv;
)";
}

// The selection scores q[E]: p plus the selection bias `sb`, with the
// experts of all but the GU best groups (of GS experts, scored by their
// two best q summed in double) set to -inf, as the CPU's mask_groups.
std::string route_scores(const std::string& sb, int64_t groups, int64_t groups_used) {
  std::string s = fmt::format("    float q[E];\n    for (long long e = 0; e < E; ++e) q[e] = {};\n",
                              sb.empty() ? "p[e]" : "p[e] + " + sb + "[e]");
  if (groups <= 1) return s;
  s += fmt::format(R"(    {{
      constexpr long long G = {0}, GU = {1}, GS = E / G;
      float gs[G];
      for (long long g = 0; g < G; ++g) {{
        long long b0 = -1, b1 = -1;
        for (long long e = g * GS; e < (g + 1) * GS; ++e) if (b0 < 0 || vtc_before(q[e], e, q[b0], b0)) b0 = e;
        for (long long e = g * GS; e < (g + 1) * GS; ++e) if (e != b0 && (b1 < 0 || vtc_before(q[e], e, q[b1], b1))) b1 = e;
        double sum = (double)q[b0];
        if (b1 >= 0) sum += (double)q[b1];
        gs[g] = (float)sum;
      }}
      bool keep[G] = {{}};
      for (long long j = 0; j < GU; ++j) {{
        long long best = -1;
        for (long long g = 0; g < G; ++g) if (!keep[g] && (best < 0 || vtc_before(gs[g], g, gs[best], best))) best = g;
        keep[best] = true;
      }}
      for (long long e = 0; e < E; ++e) if (!keep[e / GS]) q[e] = -__int_as_float(0x7f800000);
    }}
)",
                   groups, groups_used);
  return s;
}

// Top-k of the scores q into ir, their probabilities p into wr, then the
// softmax over the k (softmax_weight), normalization and scale.
std::string route_select(bool softmax_weight, bool norm, double scale) {
  std::string s = R"(    long long prev = -1;
    float pv = 0.0f;
    double wsum = 0.0;
    for (long long j = 0; j < KS; ++j) {
      long long best = -1;
      float bv = 0.0f;
      for (long long e = 0; e < E; ++e) {
        if (prev >= 0 && !vtc_before(pv, prev, q[e], e)) continue;
        if (best < 0 || vtc_before(q[e], e, bv, best)) { best = e; bv = q[e]; }
      }
      ir[j] = (int)best;
      wr[j] = p[best];
      prev = best;
      pv = bv;
    }
)";
  if (softmax_weight)
    s += R"(    {
      float mx = -__int_as_float(0x7f800000);
      for (long long j = 0; j < KS; ++j) mx = fmaxf(mx, wr[j]);
      double sum = 0.0;
      for (long long j = 0; j < KS; ++j) { wr[j] = expf(wr[j] - mx); sum += (double)wr[j]; }
      const float inv = (float)(1.0 / sum);
      for (long long j = 0; j < KS; ++j) wr[j] *= inv;
    }
)";
  s += "    for (long long j = 0; j < KS; ++j) wsum += (double)wr[j];\n";
  if (norm)
    s += "    const float denom = fmaxf((float)wsum, 6.103515625e-5f);\n"
         "    for (long long j = 0; j < KS; ++j) wr[j] /= denom;\n";
  const float f = float(scale);
  if (f != 0.0f && f != 1.0f) s += fmt::format("    for (long long j = 0; j < KS; ++j) wr[j] *= {};\n", flit(f));
  return s;
}

struct MoeShape {
  ir::MoeExperts stacks;  // which operand form (docs/ir.md: moe_ffn)
  ir::Dim tokens;         // T
  int64_t k = 0, experts = 0, ffn = 0, model = 0;
  GgmlType gate = GgmlType::F32, up = GgmlType::F32, down = GgmlType::F32;
};

GgmlType stack_type(const ir::Op& op, const ir::Value& v) {
  const ir::ElemType& e = v.type().elem;
  const GgmlType t = weight_type(e);
  if (!quant_supported(t)) unsupported(op, "expert type " + e.name() + " has no CUDA kernel");
  return t;
}

MoeShape moe_shape(const ir::Op& op) {
  require_f32(op, 0, "the input");
  require_f32(op, 1, "the expert weights");
  MoeShape s;
  s.stacks = ir::MoeExperts::of(op);
  s.tokens = op.operands[0].type().shape[0];
  s.k = constant_dim(op, op.operands[1].type().shape[1], "k");
  const ir::Value first = s.stacks.merged() ? s.stacks.gate_up : s.stacks.gate;
  const ir::Shape& g = first.type().shape;
  s.experts = constant_dim(op, g[0], "the expert count");
  s.ffn = constant_dim(op, g[1], "the expert FFN size") / (s.stacks.merged() ? 2 : 1);
  s.model = constant_dim(op, g[2], "the model dim");
  if (s.model % 32 != 0 || s.ffn % 32 != 0)
    unsupported(op, fmt::format("expert matrices must be multiples of 32 wide, got D = {}, F = {}", s.model, s.ffn));
  s.gate = stack_type(op, first), s.down = stack_type(op, s.stacks.down);
  s.up = s.stacks.merged() ? s.gate : stack_type(op, s.stacks.up);
  return s;
}

uint64_t row_bytes(GgmlType t, int64_t cols) { return *ggml_bytes_for(t, uint64_t(cols)); }

// A warp's dot product of a decoded weight row with activations `act`
// (chunks c = lane, lane + 32, ...), accumulated into `acc` (no warp sum);
// each line starts with `indent`.
// With `factor`, each activation is the f32 product act[i] * factor.
std::string chunk_dot(const std::string& deq, const std::string& row, const std::string& act, GgmlType t,
                      const std::string& acc, const std::string& chunks, const std::string& indent,
                      const std::string& factor = "") {
  const std::string a = act + "[32 * c + l]";
  const std::string value = factor.empty() ? a : fmt::format("__fmul_rn({}, {})", a, factor);
  const std::string lines[] = {
      fmt::format("for (long long c = lane; c < {}; c += 32) {{", chunks),
      "  float wv[32];",
      fmt::format("  {}({}, c, wv);", deq, row),
      "  float s = 0.0f;",
      fmt::format("  for (int l = 0; l < 32; ++l) s += wv[l] * {};", round_activation(t, value)),
      fmt::format("  {} += s;", acc),
      "}",
  };
  std::string out;
  for (const auto& l : lines) out += indent + l + "\n";
  return out;
}

bool weight_input(const ir::Op& op) { return ir::MoeFfnAttrs::of(op).weight_input; }

// The gated activation of g and u (docs/ir.md "### moe_ffn"): silu(g) * u,
// or gpt-oss's swiglu_oai, clamped as ggml_swiglu_oai.
std::string activation(const ir::Op& op) {
  const ir::MoeFfnAttrs attrs = ir::MoeFfnAttrs::of(op);
  if (attrs.activation == ir::MoeActivationKind::Silu) return "(g / (1.0f + expf(-g))) * u";
  const std::string alpha = flit(attrs.alpha), limit = flit(attrs.limit);
  return fmt::format("fminf(g, {1}) / (1.0f + expf({0} * -fminf(g, {1}))) * (fminf(fmaxf(u, -{1}), {1}) + 1.0f)", alpha,
                     limit);
}

Kernel moe_up_kernel(const ir::Op& op, const std::string& what, const MoeShape& s) {
  KernelBuilder kb("moe_up", what);
  const ir::MoeExperts& st = s.stacks;
  const std::string x = kb.in(op.operands[0], "x"), ids = kb.in(op.operands[2], "ids");
  // weight_input (llama4): the slot's routing weight scales its input row.
  const std::string wi = weight_input(op) ? kb.in(op.operands[1], "weights") + "[r]" : "";
  std::string gate, up, gate_row = "(e * F + f)", up_row = "(e * F + f)";
  if (st.merged()) {
    gate = up = kb.in(st.gate_up, "gate_up");
    gate_row = "(e * 2 * F + f)", up_row = "(e * 2 * F + F + f)";
  } else {
    gate = kb.in(st.gate, "gate"), up = kb.in(st.up, "up");
  }
  // The split form's scales (the merged form scales only down).
  const std::string gs = st.gate_scale ? kb.in(st.gate_scale, "gate_scale") : "",
                    us = st.up_scale ? kb.in(st.up_scale, "up_scale") : "";
  // Per-expert biases (ggml_add_id), added after the scale: [E, F] each, or
  // the merged [E, 2F] gate_up bias whose gate and up rows match the stack's.
  std::string gb, ub, gb_row = "e * F + f", ub_row = "e * F + f";
  if (st.merged() && st.gate_up_bias) {
    gb = ub = kb.in(st.gate_up_bias, "gate_up_bias");
    gb_row = "e * 2 * F + f", ub_row = "e * 2 * F + F + f";
  } else if (st.gate_bias) {
    gb = kb.in(st.gate_bias, "gate_bias"), ub = kb.in(st.up_bias, "up_bias");
  }
  const ir::Dim rows = s.tokens * s.k;
  const std::string h = kb.scratch(rows * (s.ffn * 4));
  kb.need(deq32_helper(s.gate));
  kb.need(deq32_helper(s.up));
  std::string body = fmt::format(R"(  constexpr long long E = {0}, F = {1}, D = {2}, KS = {3}, CH = D / 32, GROW = {4}, UROW = {5};
  const long long R = {6};
  const int lane = threadIdx.x & 31;
  const long long wid = blockIdx.x * (long long)(blockDim.x >> 5) + (threadIdx.x >> 5);
  if (wid >= R * F) return;
  const long long r = wid / F, f = wid % F, e = (long long){7}[r];
  float g = 0.0f, u = 0.0f;
  if (e >= 0 && e < E) {{
    const float* xr = {8} + (r / KS) * D;
    const u8* gr = (const u8*){9} + {11} * GROW;
    const u8* ur = (const u8*){10} + {12} * UROW;
)",
                                 s.experts, s.ffn, s.model, s.k, row_bytes(s.gate, s.model),
                                 row_bytes(s.up, s.model), kb.expr(rows), ids, x, gate, up, gate_row, up_row);
  body += chunk_dot(deq32_helper(s.gate), "gr", "xr", s.gate, "g", "CH", "    ", wi);
  body += chunk_dot(deq32_helper(s.up), "ur", "xr", s.up, "u", "CH", "    ", wi);
  body += R"(  }
  g = vtc_warp_sum(g);
  u = vtc_warp_sum(u);
)";
  if (!gs.empty())
    body += fmt::format(R"(  if (e >= 0 && e < E) {{
    g *= {0}[e];
    u *= {1}[e];
  }}
)",
                        gs, us);
  if (!gb.empty())
    body += fmt::format(R"(  if (e >= 0 && e < E) {{
    g += {0}[{1}];
    u += {2}[{3}];
  }}
)",
                        gb, gb_row, ub, ub_row);
  body += fmt::format("  if (lane == 0) {0}[r * F + f] = {1};\n", h, activation(op));
  kb.body(body);
  kb.launch(rows * (s.ffn * 32), 128);
  return kb.finish();
}

Kernel moe_down_kernel(const ir::Op& op, const std::string& what, const MoeShape& s) {
  KernelBuilder kb("moe_down", what);
  const std::string w = kb.in(op.operands[1], "weights"), ids = kb.in(op.operands[2], "ids"),
                    down = kb.in(s.stacks.down, "down");
  const std::string ds = s.stacks.down_scale ? kb.in(s.stacks.down_scale, "down_scale") : "";
  const std::string db = s.stacks.down_bias ? kb.in(s.stacks.down_bias, "down_bias") : "";
  const std::string h = kb.scratch(s.tokens * (s.k * s.ffn * 4));
  const std::string y = kb.out(op.results[0], "y");
  kb.need(deq32_helper(s.down));
  std::string body = fmt::format(R"(  constexpr long long E = {0}, F = {1}, D = {2}, KS = {3}, CH = F / 32, ROW = {4};
  const long long T = {5};
  const int lane = threadIdx.x & 31;
  const long long wid = blockIdx.x * (long long)(blockDim.x >> 5) + (threadIdx.x >> 5);
  if (wid >= T * D) return;
  const long long t = wid / D, d = wid % D;
  float o = 0.0f;
  for (long long j = 0; j < KS; ++j) {{
    const long long r = t * KS + j, e = (long long){6}[r];
    float acc = 0.0f;
    if (e >= 0 && e < E) {{
      const u8* dr = (const u8*){7} + (e * D + d) * ROW;
      const float* hr = {8} + r * F;
)",
                                 s.experts, s.ffn, s.model, s.k, row_bytes(s.down, s.ffn), kb.expr(s.tokens), ids,
                                 down, h);
  body += chunk_dot(deq32_helper(s.down), "dr", "hr", s.down, "acc", "CH", "      ");
  // The down result times the expert's scale, plus its bias, then the routing weight.
  const std::string scaled = ds.empty() ? "" : fmt::format(" * (e >= 0 && e < E ? {}[e] : 0.0f)", ds);
  // (An unbiased op keeps the unbiased text.)
  std::string sum = "vtc_warp_sum(acc)" + scaled;
  if (!db.empty()) sum = fmt::format("({} + (e >= 0 && e < E ? {}[e * D + d] : 0.0f))", sum, db);
  body += fmt::format(R"(    }}
    const float yj = {2}{3};
    o = j == 0 ? yj : o + yj;
  }}
  if (lane == 0) {1}[t * D + d] = o;
)",
                      w, y, sum, weight_input(op) ? "" : fmt::format(" * {}[r]", w));
  kb.body(body);
  kb.launch(s.tokens * (s.model * 32), 128);
  return kb.finish();
}

}  // namespace

Kernels emit_moe_route(const ir::Op& op, const std::string& what) {
  require_f32(op, 0, "the router logits");
  const ir::TensorType& lt = op.operands[0].type();
  const int64_t experts = constant_dim(op, lt.shape.back(), "the expert count");
  const ir::MoeRouteAttrs attrs = ir::MoeRouteAttrs::of(op);
  const int64_t k = attrs.k;
  if (k < 1 || k > experts) unsupported(op, fmt::format("k = {} must be in [1, {}]", k, experts));
  const bool bias = op.operands.size() > 1;
  if (bias) require_f32(op, 1, "the selection bias");
  KernelBuilder kb(op.mnemonic(), what);
  const std::string logits = kb.in(op.operands[0], "logits");
  const std::string sb = bias ? kb.in(op.operands[1], "sb") : "";
  const std::string w = kb.out(op.results[0], "weights"), ids = kb.out(op.results[1], "ids");
  kb.need("order_before");
  const ir::Dim tokens = dims_product(lt.shape, 0, lt.shape.size() - 1);
  kb.body(fmt::format(R"(  constexpr long long E = {0}, KS = {1};
  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < {2}; t += (long long)gridDim.x * blockDim.x) {{
    const float* lr = {3} + t * E;
    float* wr = {4} + t * KS;
    int* ir = {5} + t * KS;
    float p[E];
)",
                      experts, k, kb.expr(tokens), logits, w, ids) +
          route_probs(attrs.gating) + route_scores(sb, attrs.groups, attrs.groups_used) +
          route_select(attrs.gating == ir::MoeGating::SoftmaxWeight, attrs.norm, attrs.scale) + "  }\n");
  kb.launch(tokens, 64);
  return {kb.finish()};
}

Kernels emit_moe_ffn(const ir::Op& op, const std::string& what) {
  const MoeShape s = moe_shape(op);
  return {moe_up_kernel(op, what, s), moe_down_kernel(op, what, s)};
}

}  // namespace vtc::cuda
