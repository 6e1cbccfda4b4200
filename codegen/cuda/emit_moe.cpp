// Mixture of experts: moe_route and moe_ffn (docs/ir.md), with the CPU
// kernels' numerics (runtime/cpu/kernels/moe.cpp).
//
// moe_route: one warp per token (as topk-moe.cu), the E probabilities and
//   scores in the warp's shared rows, lane l on experts l, l + 32, ...
//   softmax: max, e = exp(x - max) summed in double (a warp sum), then
//   e * (1/sum) (the softmax kernel's formula); sigmoid: 1 / (1 + exp(-x)).
//   Top-k: k warp-wide picks of the best expert not yet picked in the
//   top_k order (value descending, NaN last, lower index first), which is
//   the CPU's "best strictly after the previous pick", so ids come out
//   largest first with ties to the lower index. The weights are
//   the picked probabilities (picked on the selection scores: p plus the
//   selection bias, with grouped routing's excluded groups at -inf), for
//   softmax_weight softmaxed over the k, summed in double; with `norm`
//   divided by max(sum, 6.103515625e-5); times `scale` unless it is
//   absent, 0 or 1.
//
// moe_ffn: one row per (token t, slot j), r = t * k + j. Quantized
// stacks whose gate and up take the same activation codes run on codes,
// as the CPU's per-expert matmuls round their rows (emit_gemv.cpp's
// quantize and vtc_wdot, so the integer block sums are the CPU's exact
// ones), in four launches:
//   quantize: x's rows to the gate/up stacks' codes (q8_1 or q8_K) in the
//     scratch (with `weight_input`, llama4, first a kernel scaling each
//     slot's row, x[t] * weights[r] in f32, then those T * k rows);
//   moe_up: one warp per (r, f): lane c decodes chunk c of each
//     1024-value window of expert ids[r]'s gate and up rows f straight
//     from global memory (vload32_<type>) and dots it with the row's
//     codes (__dp4a), warp sums, then h[r][f] = act(g, u) into scratch;
//   quantize: h's rows to the down stack's codes;
//   moe_down: one warp per (t, d): for j = 0 .. k-1 in order, the dot of
//     down row d of expert ids[t*k+j] with h[r]'s codes, times weights[r],
//     added as the CPU adds the slot views (o = y0 * w0, then o += yj * wj).
// Float stacks (f32, f16, bf16) run moe_up and moe_down alone, each lane
// decoding its chunks to floats (deq32_<type>) and dotting them with the
// f32 rows, rounded to f16 / bf16 for f16 / bf16 stacks as matmul does.
//   A merged gate_up stack [E][2F][D] is one parameter: expert e's gate
//   row f is its row f, the up row its row F + f. Per-expert scales
//   multiply the warp sums (g *= gs[e], u *= us[e]; the down dot times
//   ds[e] before the routing weight), as the CPU scales each matmul
//   result; an unscaled op emits no multiply, so its text is unchanged.
//   Per-expert biases (biased = true) are added after the scales (g +=
//   gb[e][f], u += ub[e][f]; the down dot + db[e][d] before the routing
//   weight), and `activation = swiglu_oai` replaces silu(g) * u by
//   min(g, limit) / (1 + exp(alpha * -min(g, limit))) * (clamp(u, +-limit) + 1).
//   With `weight_input` moe_down adds the slot results unweighted. An id
//   outside [0, E) contributes zeros (the CPU throws; moe_route only
//   produces ids in range). These kernels re-read an expert's rows per
//   (token, slot); a prefill with integer stacks and D, F multiples of 128
//   runs grouped by expert instead ("Prefill experts grouped by expert",
//   below: moe_sort, the tensor-core GEMM over one expert's row tiles).
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

// moe_route runs one warp per token row (topk-moe.cu's shape): the row's
// probabilities p and selection scores q in the warp's shared rows, lane l
// taking experts l, l + 32, ...

// The probabilities p[E] of token row `lr`: softmax's max and double sum
// as warp reductions (the double sum of E floats in another order than
// the CPU's: equal unless a sum's last double bit decides a float).
std::string route_probs(ir::MoeGating gating) {
  if (gating == ir::MoeGating::Sigmoid)
    return "    for (long long e = lane; e < E; e += 32) p[e] = 1.0f / (1.0f + expf(-lr[e]));\n";
  if (gating == ir::MoeGating::SoftmaxWeight) return "    for (long long e = lane; e < E; e += 32) p[e] = lr[e];\n";
  return R"(    float mx = -__int_as_float(0x7f800000);
    for (long long e = lane; e < E; e += 32) mx = fmaxf(mx, lr[e]);
    mx = vtc_warp_max(mx);
    double sum = 0.0;
    for (long long e = lane; e < E; e += 32) { const float v = expf(lr[e] - mx); p[e] = v; sum += (double)v; }
    const float inv = (float)(1.0 / vtc_warp_sum_d(sum));
    for (long long e = lane; e < E; e += 32) p[e] *= inv;
)";
}

// The warp's best of the candidates (bv, bi) of its lanes (bi < 0: none),
// in the top_k order; every lane ends with the same pick.
std::string warp_best() {
  return R"(      for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const long long oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (oi >= 0 && (bi < 0 || vtc_before(ov, oi, bv, bi))) bv = ov, bi = oi;
      }
)";
}

// The selection scores q[E]: p plus the selection bias `sb`, with the
// experts of all but the GU best groups (of GS experts, scored by their
// two best q summed in double) set to -inf, as the CPU's mask_groups:
// lane g scores group g, then GU warp picks keep groups.
std::string route_scores(const std::string& sb, int64_t groups, int64_t groups_used) {
  std::string s = fmt::format("    for (long long e = lane; e < E; e += 32) q[e] = {};\n    __syncwarp();\n",
                              sb.empty() ? "p[e]" : "p[e] + " + sb + "[e]");
  if (groups <= 1) return s;
  s += fmt::format(R"(    {{
      constexpr long long G = {0}, GU = {1}, GS = E / G;
      float gsc = 0.0f;
      if (lane < G) {{
        long long b0 = -1, b1 = -1;
        for (long long e = lane * GS; e < (lane + 1) * GS; ++e) if (b0 < 0 || vtc_before(q[e], e, q[b0], b0)) b0 = e;
        for (long long e = lane * GS; e < (lane + 1) * GS; ++e) if (e != b0 && (b1 < 0 || vtc_before(q[e], e, q[b1], b1))) b1 = e;
        double sum = (double)q[b0];
        if (b1 >= 0) sum += (double)q[b1];
        gsc = (float)sum;
      }}
      u32 keep = 0;
      for (long long j = 0; j < GU; ++j) {{
        float bv = gsc;
        long long bi = lane < G && !((keep >> lane) & 1u) ? lane : -1;
{2}        keep |= 1u << bi;
      }}
      __syncwarp();
      for (long long e = lane; e < E; e += 32) if (!((keep >> (e / GS)) & 1u)) q[e] = -__int_as_float(0x7f800000);
      __syncwarp();
    }}
)",
                   groups, groups_used, warp_best());
  return s;
}

// Top-k of the scores q: k warp picks, each the best expert not yet picked
// (the CPU's "best strictly after the previous pick" in the same strict
// order); lane 0 stores each id into ir and its probability into wr, then
// applies the softmax over the k (softmax_weight), normalization and scale.
std::string route_select(bool softmax_weight, bool norm, double scale) {
  std::string s = R"(    u32 picked = 0;  // bit i: expert lane + 32 i
    for (long long j = 0; j < KS; ++j) {
      float bv = 0.0f;
      long long bi = -1;
      for (long long i = 0; lane + 32 * i < E; ++i) {
        const long long e = lane + 32 * i;
        if (!((picked >> i) & 1u) && (bi < 0 || vtc_before(q[e], e, bv, bi))) bi = e, bv = q[e];
      }
)" + warp_best() + R"(      if ((bi & 31) == lane) picked |= 1u << (bi >> 5);
      if (lane == 0) ir[j] = (int)bi, wr[j] = p[bi];
    }
    if (lane != 0) continue;
    double wsum = 0.0;
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

// The integer form of moe_ffn: quantized stacks whose gate and up take
// the same activation codes.
bool on_codes(const MoeShape& s) {
  const DotForm g = dot_form(s.gate), u = dot_form(s.up), d = dot_form(s.down);
  return g.codes != Codes::None && g.codes == u.codes && d.codes != Codes::None;
}

// Bytes a row of codes takes in a scratch region: K codes and their
// 8-byte records, rounded to 16 so the next row or region stays aligned.
int64_t codes_row_bytes(int64_t k) { return (k + k / 32 * 8 + 15) / 16 * 16; }

// The integer form's scratch: the up rows' codes at 0 (the quantize
// kernel's layout, so a GEMV's quantize of the same x serves it), h
// [T * k][F] f32, h's codes, then (weight_input) the pre-scaled rows
// x[t] * weights[r] in f32; each region 16-byte aligned. The up rows are
// x's T rows, or with weight_input the T * k scaled ones.
struct CodesScratch {
  ir::Dim x_rows, h, h_codes, scaled, total;
};
CodesScratch codes_scratch(const ir::Op& op, const MoeShape& s) {
  CodesScratch c;
  c.x_rows = weight_input(op) ? s.tokens * s.k : s.tokens;
  c.h = c.x_rows * codes_row_bytes(s.model);
  c.h_codes = c.h + s.tokens * (s.k * s.ffn * 4);
  c.scaled = c.h_codes + s.tokens * (s.k * codes_row_bytes(s.ffn));
  c.total = weight_input(op) ? c.scaled + s.tokens * (s.k * s.model * 4) : c.scaled;
  return c;
}

// weight_input's rows: scaled[r] = x[r / k] * weights[r], the f32 product
// the CPU scales its gathered rows by, at byte `scaled_at` of a scratch of
// `total` bytes.
Kernel scale_rows_kernel(const ir::Op& op, const std::string& what, const MoeShape& s, const ir::Dim& scaled_at,
                         const ir::Dim& total) {
  KernelBuilder kb("moe_scale_rows", what);
  const std::string x = kb.in(op.operands[0], "x"), w = kb.in(op.operands[1], "weights");
  const std::string scratch = kb.scratch(total);
  const ir::Dim rows = s.tokens * s.k;
  kb.body(fmt::format(R"(  constexpr long long D = {0}, KS = {1};
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= ({2}) * D) return;
  float* scaled = (float*)((u8*){3} + ({4}));
  scaled[i] = __fmul_rn({5}[(i / D / KS) * D + i % D], {6}[i / D]);
)",
                      s.model, s.k, kb.expr(rows), scratch, kb.expr(scaled_at), x, w));
  kb.launch(rows * s.model, 256);
  return kb.finish();
}

// The up rows to the gate/up stacks' codes at the scratch's start: x's
// quantize, or with weight_input the scaled rows (at `scaled_at`) and
// their quantize.
Kernels up_rows_to_codes(const ir::Op& op, const std::string& what, const MoeShape& s, const ir::Dim& scaled_at,
                         const ir::Dim& total) {
  const Codes codes = dot_form(s.gate).codes;
  if (!weight_input(op)) return {quantize_kernel(codes, op.operands[0], s.tokens, s.model, what + " [x to codes]")};
  return {scale_rows_kernel(op, what + " [the scaled rows]", s, scaled_at, total),
          quantize_scratch_kernel(codes, s.tokens * s.k, s.model, {total, scaled_at, 0}, what + " [rows to codes]")};
}

// A warp's integer dot of weight row `row` (type t, K values) with the
// codes of activation row `xrow` at `codes` (M rows), accumulated into
// `acc`: lane c takes chunk c of each 1024-value window, decoded by
// vload32_<type> from global memory and dotted by vtc_wdot.
std::string codes_dot(KernelBuilder& kb, GgmlType t, int64_t K, const std::string& row, const std::string& codes,
                      const std::string& m, const std::string& xrow, const std::string& acc) {
  const DotForm form = dot_form(t);
  const GgmlTypeTraits& tr = ggml_traits(t);
  const std::string load = vload32_helper(t);
  kb.need(load);
  return fmt::format(R"(    for (long long k0 = 0; k0 < {0}; k0 += 1024) {{
      const int nc = (int)(min(1024ll, {0} - k0) / 32);
      if (lane >= nc) continue;
      vtc_xq xq;
      const u8* xr = {1} + ({3}) * {0} + k0;
      const uint2* xmr = (const uint2*)({1} + ({2}) * {0}) + ({3}) * {0} / 32 + k0 / 32;
{4}      vtc_wq wq;
      const u8* wwin = {5} + (k0 / {6}) * {7};
      if ({7} % 16 == 0 && ((unsigned long long)wwin & 15) == 0) {8}<true>(wwin, lane, wq);
      else {8}<false>(wwin, lane, wq);
      {9} += vtc_wdot<{10}, {11}>(wq, xq);
    }}
)",
                     K, codes, m, xrow, activation_chunk(form, "      "), row, tr.block_size, tr.block_bytes, load, acc,
                     form.offset, form.kind);
}

// The statements taking an expert's gate and up sums g and u (of row f,
// expert e in scope) through the split form's scales (the merged form
// scales only down) and the per-expert biases (ggml_add_id, after the
// scale: [E, F] each, or the merged [E, 2F] gate_up bias whose gate and up
// rows match the stack's).
std::string gate_up_epilogue(KernelBuilder& kb, const MoeShape& s) {
  const ir::MoeExperts& st = s.stacks;
  std::string out;
  if (st.gate_scale) {
    const std::string gs = kb.in(st.gate_scale, "gate_scale"), us = kb.in(st.up_scale, "up_scale");  // in this order
    out += fmt::format("  if (e >= 0 && e < E) {{\n    g *= {0}[e];\n    u *= {1}[e];\n  }}\n", gs, us);
  }
  std::string gb, ub, gb_row = "e * F + f", ub_row = "e * F + f";
  if (st.merged() && st.gate_up_bias) {
    gb = ub = kb.in(st.gate_up_bias, "gate_up_bias");
    gb_row = "e * 2 * F + f", ub_row = "e * 2 * F + F + f";
  } else if (st.gate_bias) {
    gb = kb.in(st.gate_bias, "gate_bias"), ub = kb.in(st.up_bias, "up_bias");
  }
  if (!gb.empty())
    out += fmt::format("  if (e >= 0 && e < E) {{\n    g += {0}[{1}];\n    u += {2}[{3}];\n  }}\n", gb, gb_row, ub, ub_row);
  return out;
}

Kernel moe_up_kernel(const ir::Op& op, const std::string& what, const MoeShape& s) {
  KernelBuilder kb("moe_up", what);
  const ir::MoeExperts& st = s.stacks;
  const bool codes = on_codes(s);
  const std::string x = codes ? "" : kb.in(op.operands[0], "x"), ids = kb.in(op.operands[2], "ids");
  // weight_input (llama4): the slot's routing weight scales its input row.
  const std::string wi = weight_input(op) && !codes ? kb.in(op.operands[1], "weights") + "[r]" : "";
  std::string gate, up, gate_row = "(e * F + f)", up_row = "(e * F + f)";
  if (st.merged()) {
    gate = up = kb.in(st.gate_up, "gate_up");
    gate_row = "(e * 2 * F + f)", up_row = "(e * 2 * F + F + f)";
  } else {
    gate = kb.in(st.gate, "gate"), up = kb.in(st.up, "up");
  }
  const ir::Dim rows = s.tokens * s.k;
  std::string h, x_codes;
  if (codes) {
    const CodesScratch cs = codes_scratch(op, s);
    const std::string scratch = kb.scratch(cs.total);
    h = fmt::format("((float*)((u8*){} + ({})))", scratch, kb.expr(cs.h));
    x_codes = fmt::format("((const u8*){})", scratch);
  } else {
    h = kb.scratch(rows * (s.ffn * 4));
    kb.need(deq32_helper(s.gate));
    kb.need(deq32_helper(s.up));
  }
  std::string body = fmt::format(R"(  constexpr long long E = {0}, F = {1}, D = {2}, KS = {3}, CH = D / 32, GROW = {4}, UROW = {5};
  const long long R = {6};
  const int lane = threadIdx.x & 31;
  const long long wid = blockIdx.x * (long long)(blockDim.x >> 5) + (threadIdx.x >> 5);
  if (wid >= R * F) return;
  const long long r = wid / F, f = wid % F, e = (long long){7}[r];
  float g = 0.0f, u = 0.0f;
  if (e >= 0 && e < E) {{
    const u8* gr = (const u8*){8} + {10} * GROW;
    const u8* ur = (const u8*){9} + {11} * UROW;
)",
                                 s.experts, s.ffn, s.model, s.k, row_bytes(s.gate, s.model),
                                 row_bytes(s.up, s.model), kb.expr(rows), ids, gate, up, gate_row, up_row);
  if (codes) {
    // The up rows: x's (row r / KS), or weight_input's scaled ones (row r).
    const std::string x_rows = kb.expr(codes_scratch(op, s).x_rows), x_row = weight_input(op) ? "r" : "r / KS";
    body += codes_dot(kb, s.gate, s.model, "gr", x_codes, x_rows, x_row, "g");
    body += codes_dot(kb, s.up, s.model, "ur", x_codes, x_rows, x_row, "u");
  } else {
    body += fmt::format("    const float* xr = {} + (r / KS) * D;\n", x);
    body += chunk_dot(deq32_helper(s.gate), "gr", "xr", s.gate, "g", "CH", "    ", wi);
    body += chunk_dot(deq32_helper(s.up), "ur", "xr", s.up, "u", "CH", "    ", wi);
  }
  body += R"(  }
  g = vtc_warp_sum(g);
  u = vtc_warp_sum(u);
)";
  body += gate_up_epilogue(kb, s) + fmt::format("  if (lane == 0) {0}[r * F + f] = {1};\n", h, activation(op));
  kb.body(body);
  kb.launch(rows * (s.ffn * 32), 128);
  Kernel k = kb.finish();
  if (codes) {
    if (!weight_input(op)) k.reads_codes_of = op.operands[0].data();  // x's codes, as a GEMV reads them
    k.fp32_flops = rows * (s.ffn * 2) * (s.model / 32) * 4;  // per chunk scaling; the products are __dp4a
  }
  return k;
}

// A slot's share of the output (e, r, d in scope): the down result `acc`
// times the expert's scale, plus its bias, then the routing weight
// (unweighted with weight_input). An unscaled, unbiased op keeps the plain
// text.
std::string slot_result(const ir::Op& op, const std::string& acc, const std::string& ds, const std::string& db,
                        const std::string& w) {
  std::string sum = acc + (ds.empty() ? "" : fmt::format(" * (e >= 0 && e < E ? {}[e] : 0.0f)", ds));
  if (!db.empty()) sum = fmt::format("({} + (e >= 0 && e < E ? {}[e * D + d] : 0.0f))", sum, db);
  return sum + (weight_input(op) ? "" : fmt::format(" * {}[r]", w));
}

Kernel moe_down_kernel(const ir::Op& op, const std::string& what, const MoeShape& s) {
  KernelBuilder kb("moe_down", what);
  const std::string w = kb.in(op.operands[1], "weights"), ids = kb.in(op.operands[2], "ids"),
                    down = kb.in(s.stacks.down, "down");
  const std::string ds = s.stacks.down_scale ? kb.in(s.stacks.down_scale, "down_scale") : "";
  const std::string db = s.stacks.down_bias ? kb.in(s.stacks.down_bias, "down_bias") : "";
  const bool codes = on_codes(s);
  const std::string h = codes ? "" : kb.scratch(s.tokens * (s.k * s.ffn * 4));
  const CodesScratch cs = codes_scratch(op, s);
  const std::string h_codes =
      codes ? fmt::format("((const u8*){} + ({}))", kb.scratch(cs.total), kb.expr(cs.h_codes)) : "";
  const std::string y = kb.out(op.results[0], "y");
  if (!codes) kb.need(deq32_helper(s.down));
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
)",
                                 s.experts, s.ffn, s.model, s.k, row_bytes(s.down, s.ffn), kb.expr(s.tokens), ids,
                                 down);
  if (codes) {
    body += codes_dot(kb, s.down, s.ffn, "dr", h_codes, "T * KS", "r", "acc");
  } else {
    body += fmt::format("      const float* hr = {} + r * F;\n", h);
    body += chunk_dot(deq32_helper(s.down), "dr", "hr", s.down, "acc", "CH", "      ");
  }
  body += fmt::format(R"(    }}
    const float yj = {2};
    o = j == 0 ? yj : o + yj;
  }}
  if (lane == 0) {1}[t * D + d] = o;
)",
                      w, y, slot_result(op, "vtc_warp_sum(acc)", ds, db, w));
  kb.body(body);
  kb.launch(s.tokens * (s.model * 32), 128);
  Kernel k = kb.finish();
  if (codes) k.fp32_flops = s.tokens * (s.k * s.model) * (s.ffn / 32) * 4;
  return k;
}

// ---- Prefill experts grouped by expert (llama.cpp's mmid) ----
//
// A prefill's (token, slot) rows sorted by expert once (moe_sort: a
// thread per expert counts its rows, then writes them in row order), then the tensor-core GEMM over tiles of up
// to 128 rows of one expert (integer_gemm_kernel's grouped form: each
// expert's weight rows are read once per tile instead of once per row):
// gate and up into the scratch at their rows, the activation (scales,
// biases, act) into h, h's quantize, the down GEMM, and a combine kernel
// adding the slots in order with the routing weights.

bool grouped_prefill(const MoeShape& s) {
  return on_codes(s) && tiled_rows(s.tokens) && gemm_mma_supported(s.gate, s.model) &&
         gemm_mma_supported(s.up, s.model) && gemm_mma_supported(s.down, s.ffn);
}

// The grouped form's scratch (bytes; each region 16-byte aligned): the up
// rows' codes at 0 (x's T rows, or weight_input's T * k scaled ones), the
// sorted rows perm [R], the tile table (a count, then (expert, first,
// end) per tile: at most R / 128 + E tiles), g, u and h [R][F] f32, h's
// codes, the down GEMM's rows y [R][D] f32, then weight_input's scaled
// rows.
struct GroupedScratch {
  ir::Dim rows, x_rows, perm, tiles, g, u, h, h_codes, y, scaled, total;
};
GroupedScratch grouped_scratch(const ir::Op& op, const MoeShape& s) {
  GroupedScratch c;
  c.rows = s.tokens * s.k;
  c.x_rows = weight_input(op) ? c.rows : s.tokens;
  c.perm = c.x_rows * codes_row_bytes(s.model);
  c.tiles = c.perm + c.rows * 16;
  c.g = c.tiles + c.rows * 16 + 16 * (s.experts + 1);
  c.u = c.g + c.rows * (s.ffn * 4);
  c.h = c.u + c.rows * (s.ffn * 4);
  c.h_codes = c.h + c.rows * (s.ffn * 4);
  c.y = c.h_codes + c.rows * codes_row_bytes(s.ffn);
  c.scaled = c.y + c.rows * (s.model * 4);
  c.total = weight_input(op) ? c.scaled + c.rows * (s.model * 4) : c.scaled;
  return c;
}

Kernel moe_sort_kernel(const ir::Op& op, const std::string& what, const MoeShape& s, const GroupedScratch& gs) {
  KernelBuilder kb("moe_sort", what);
  const std::string ids = kb.in(op.operands[2], "ids");
  const std::string scratch = kb.scratch(gs.total);
  kb.body(fmt::format(R"(  constexpr int E = {0};
  const long long R = {1};
  int* perm = (int*)((u8*){2} + ({3}));
  int* tiles = (int*)((u8*){2} + ({4}));
  // Thread e counts expert e's rows, then writes them in row order (no
  // atomics: the order is stable, and each count is one thread's), over
  // the ids staged in shared memory 4096 at a time (every thread reads the
  // same id at once: a broadcast).
  __shared__ int cnt[E], ids_s[4096];
  for (int e = threadIdx.x; e < E; e += blockDim.x) cnt[e] = 0;
  for (long long c0 = 0; c0 < R; c0 += 4096) {{
    const int n = (int)min(4096LL, R - c0);
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) ids_s[i] = {5}[c0 + i];
    __syncthreads();
    for (int e = threadIdx.x; e < E; e += blockDim.x) {{
      int k = 0;
      for (int i = 0; i < n; ++i) k += ids_s[i] == e;
      cnt[e] += k;
    }}
  }}
  __syncthreads();
  if (threadIdx.x == 0) {{
    int off = 0, nt = 0;
    for (int e = 0; e < E; ++e) {{
      for (int j = 0; j < cnt[e]; j += 128, ++nt)
        tiles[1 + 3 * nt] = e, tiles[2 + 3 * nt] = off + j, tiles[3 + 3 * nt] = off + min(cnt[e], j + 128);
      const int k = cnt[e];
      cnt[e] = off;  // now expert e's next place
      off += k;
    }}
    tiles[0] = nt;
  }}
  for (long long c0 = 0; c0 < R; c0 += 4096) {{
    const int n = (int)min(4096LL, R - c0);
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) ids_s[i] = {5}[c0 + i];
    __syncthreads();
    for (int e = threadIdx.x; e < E; e += blockDim.x)
      for (int i = 0; i < n; ++i)
        if (ids_s[i] == e) perm[cnt[e]++] = (int)(c0 + i);
  }}
)",
                      s.experts, kb.expr(gs.rows), scratch, kb.expr(gs.perm), kb.expr(gs.tiles), ids));
  kb.launch(256, 256);
  return kb.finish();
}

// One grouped GEMM into the rows of the [R][N] f32 region at `out_at`:
// weight rows first_row + n of expert e's rows_per_expert in `stack` (N
// of them, K wide) against the codes at `codes_at` (`codes_rows` rows,
// row r / k when codes_per_token, else r).
Kernel grouped_gemm(const std::string& what, const MoeShape& s, const GroupedScratch& gs, GgmlType t,
                    const ir::Value& x, const ir::Value& stack, int64_t N, int64_t K, int64_t rows_per_expert,
                    int64_t first_row, const ir::Dim& codes_at, const ir::Dim& codes_rows, bool codes_per_token,
                    const ir::Dim& out_at) {
  GemmGrouping g;
  g.scratch_bytes = gs.total, g.codes_at = codes_at, g.perm_at = gs.perm, g.tiles_at = gs.tiles, g.out_at = out_at;
  g.rows = gs.rows, g.experts = s.experts, g.slots = s.k, g.codes_per_token = codes_per_token;
  g.rows_per_expert = rows_per_expert, g.first_row = first_row;
  return integer_gemm_kernel(t, what, codes_rows, N, K, {x, stack, nullptr}, &g);
}

// h = act(g, u) per (row, f) with the expert's scales and biases, as
// moe_up applies them to its sums.
Kernel grouped_act_kernel(const ir::Op& op, const std::string& what, const MoeShape& s, const GroupedScratch& gs) {
  KernelBuilder kb("moe_act", what);
  const std::string ids = kb.in(op.operands[2], "ids");
  const std::string scratch = kb.scratch(gs.total);
  std::string body = fmt::format(R"(  constexpr long long E = {0}, F = {1};
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= ({2}) * F) return;
  const long long r = i / F, f = i % F, e = (long long){3}[r];
  float g = ((const float*)((const u8*){4} + ({5})))[i], u = ((const float*)((const u8*){4} + ({6})))[i];
  (void)f;
)",
                                 s.experts, s.ffn, kb.expr(gs.rows), ids, scratch, kb.expr(gs.g), kb.expr(gs.u));
  body += gate_up_epilogue(kb, s);
  body += fmt::format("  ((float*)((u8*){} + ({})))[i] = {};\n", scratch, kb.expr(gs.h), activation(op));
  kb.body(body);
  kb.launch(gs.rows * s.ffn, 256);
  return kb.finish();
}

// o[t][d]: the slots' down rows in order, each through slot_result, as
// moe_down adds them.
Kernel grouped_combine_kernel(const ir::Op& op, const std::string& what, const MoeShape& s, const GroupedScratch& gs) {
  KernelBuilder kb("moe_combine", what);
  const std::string w = kb.in(op.operands[1], "weights"), ids = kb.in(op.operands[2], "ids");
  const std::string ds = s.stacks.down_scale ? kb.in(s.stacks.down_scale, "down_scale") : "";
  const std::string db = s.stacks.down_bias ? kb.in(s.stacks.down_bias, "down_bias") : "";
  const std::string scratch = kb.scratch(gs.total), y = kb.out(op.results[0], "y");
  kb.body(fmt::format(R"(  constexpr long long E = {0}, D = {1}, KS = {2};
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= ({3}) * D) return;
  const long long t = i / D, d = i % D;
  const float* yr = (const float*)((const u8*){4} + ({5}));
  float o = 0.0f;
  for (long long j = 0; j < KS; ++j) {{
    const long long r = t * KS + j, e = (long long){6}[r];
    const float acc = e >= 0 && e < E ? yr[r * D + d] : 0.0f;
    const float yj = {7};
    o = j == 0 ? yj : o + yj;
  }}
  {8}[i] = o;
)",
                      s.experts, s.model, s.k, kb.expr(s.tokens), scratch, kb.expr(gs.y), ids,
                      slot_result(op, "acc", ds, db, w), y));
  kb.launch(s.tokens * s.model, 256);
  return kb.finish();
}

// The grouped prefill's launches (see above).
Kernels grouped_moe_ffn(const ir::Op& op, const std::string& what, const MoeShape& s) {
  const GroupedScratch gs = grouped_scratch(op, s);
  const ir::MoeExperts& st = s.stacks;
  Kernels out = up_rows_to_codes(op, what, s, gs.scaled, gs.total);
  out.push_back(moe_sort_kernel(op, what + " [rows by expert]", s, gs));
  const bool per_token = !weight_input(op);
  const ir::Value& gate = st.merged() ? st.gate_up : st.gate;
  const ir::Value& up = st.merged() ? st.gate_up : st.up;
  const int64_t stride = st.merged() ? 2 * s.ffn : s.ffn;
  out.push_back(grouped_gemm(what + " [gate]", s, gs, s.gate, op.operands[0], gate, s.ffn, s.model, stride, 0, 0,
                             gs.x_rows, per_token, gs.g));
  out.push_back(grouped_gemm(what + " [up]", s, gs, s.up, op.operands[0], up, s.ffn, s.model, stride,
                             st.merged() ? s.ffn : 0, 0, gs.x_rows, per_token, gs.u));
  out.push_back(grouped_act_kernel(op, what + " [activation]", s, gs));
  out.push_back(quantize_scratch_kernel(dot_form(s.down).codes, gs.rows, s.ffn, {gs.total, gs.h, gs.h_codes},
                                        what + " [h to codes]"));
  out.push_back(grouped_gemm(what + " [down]", s, gs, s.down, op.operands[0], st.down, s.model, s.ffn, s.model, 0,
                             gs.h_codes, gs.rows, false, gs.y));
  out.push_back(grouped_combine_kernel(op, what + " [slots]", s, gs));
  return out;
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
  if (experts > 32 * 32) unsupported(op, fmt::format("E = {} experts: at most 1024 (32 a lane)", experts));
  if (attrs.groups > 32) unsupported(op, fmt::format("{} expert groups: at most 32 (one a lane)", attrs.groups));
  KernelBuilder kb(op.mnemonic(), what);
  const std::string logits = kb.in(op.operands[0], "logits");
  const std::string sb = bias ? kb.in(op.operands[1], "sb") : "";
  const std::string w = kb.out(op.results[0], "weights"), ids = kb.out(op.results[1], "ids");
  kb.need("order_before");
  const ir::Dim tokens = dims_product(lt.shape, 0, lt.shape.size() - 1);
  constexpr int kWarpsPerBlock = 4;
  kb.body(fmt::format(R"(  constexpr long long E = {0}, KS = {1};
  constexpr int WPB = {6};
  __shared__ float p_s[WPB][E], q_s[WPB][E];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (long long t = blockIdx.x * (long long)WPB + warp; t < {2}; t += (long long)gridDim.x * WPB) {{
    const float* lr = {3} + t * E;
    float* wr = {4} + t * KS;
    int* ir = {5} + t * KS;
    float* p = p_s[warp];
    float* q = q_s[warp];
    __syncwarp();
)",
                      experts, k, kb.expr(tokens), logits, w, ids, kWarpsPerBlock) +
          route_probs(attrs.gating) + route_scores(sb, attrs.groups, attrs.groups_used) +
          route_select(attrs.gating == ir::MoeGating::SoftmaxWeight, attrs.norm, attrs.scale) + "  }\n");
  kb.launch(tokens * 32, 32 * kWarpsPerBlock);
  return {kb.finish()};
}

Kernels emit_moe_ffn(const ir::Op& op, const std::string& what) {
  const MoeShape s = moe_shape(op);
  if (!on_codes(s)) return {moe_up_kernel(op, what, s), moe_down_kernel(op, what, s)};
  if (grouped_prefill(s)) return grouped_moe_ffn(op, what, s);
  // The up rows to the gate/up stacks' codes, moe_up, h to the down
  // stack's codes, moe_down.
  const CodesScratch cs = codes_scratch(op, s);
  const ir::Dim rows = s.tokens * s.k;
  Kernels out = up_rows_to_codes(op, what, s, cs.scaled, cs.total);
  out.push_back(moe_up_kernel(op, what, s));
  out.push_back(quantize_scratch_kernel(dot_form(s.down).codes, rows, s.ffn, {cs.total, cs.h, cs.h_codes},
                                        what + " [h to codes]"));
  out.push_back(moe_down_kernel(op, what, s));
  return out;
}

}  // namespace vtc::cuda
