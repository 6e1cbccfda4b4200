// Linear-attention ops (Gated DeltaNet layers): l2_norm, causal_conv1d and
// delta_rule, and the state-space scan of Mamba layers (ssm_scan), which
// shares their per-sequence recurrent state. Semantics in docs/ir.md;
// numerics follow the CPU interpreter.
//
// l2_norm: one warp per row. Squares are rounded to float and summed in
// double (the reference's ggml_l2_norm), then y = x * (1 / max(sqrt(sum), eps)).
//
// causal_conv1d: per sequence s the input stream is the state's last
// W = (K-1)*dilation inputs (oldest first) followed by the step's tokens of
// s in batch order. Two kernels, because the outputs read the old state:
//  1. conv1d: one thread per (token, channel). The thread walks back
//     through the batch to find the m-th previous input of its sequence
//     (m = dilation, 2*dilation, ...); inputs older than the batch come from
//     the state. Prefill of one sequence finds each in one step back, so the
//     walk is O(W); interleaved sequences only make it longer.
//  2. conv1d_state: one thread per (sequence, channel) gathers the newest W
//     inputs of the stream and rewrites the state row. One thread owns a
//     whole (sequence, channel) history, so the shift needs no barrier.
// The K products are added in order k = 0..K-1 with separately rounded
// products (__fmul_rn/__fadd_rn), as the CPU's loop does.
//
// delta_rule: the head matrix rows are independent (row j only needs k, q,
// v[j], g and beta), so one warp owns one row j of one (sequence, head):
// lane l holds elements l, l+32, ... of the row in registers, loads the row
// from the state slot, runs the sequence's tokens in batch order
//   M[j] *= exp(g); d = (v[j] - M[j].k) * beta; M[j] += d * k; out[j] = scale * M[j].q
// with the dot products as warp sums, and stores the row back. A per-key
// gate g [T, H, Dk] (KDA) scales element i of the row by exp(g[i]). The decay is
// a rounded product and the rank-1 update a fused multiply-add, as on the
// CPU's FMA path (ggml_vec_scale_f32, ggml_vec_mad_f32); the dot products
// (per-lane FMA chains, then a warp tree) differ from the CPU's emulation of
// ggml_vec_dot_f32 by reassociation only, so the states agree to rounding,
// not bit for bit. Decode (one token per
// sequence) is the one-step update; prefill runs its tokens sequentially per
// row. The chunked WY form for long prefills (ggml's TODO as well) is future
// work.
//
// ssm_scan: like delta_rule, the state rows are independent (row p of head
// h only needs x[t, h, p], dt[t, h] and the group's B and C), so one warp
// owns one row of one (sequence, head): lane l holds elements l, l+32, ...
// of its N, loads them from the state slot, runs the sequence's tokens in
// batch order
//   d = softplus(dt); S[i] = S[i] * exp(d * A) + B[i] * (x * d); y = S.C
// and stores the row back. The state update is two rounded products added
// unfused, as on the CPU, so the states agree with it bit for bit up to
// expf; y is a per-lane sum then a warp tree, which differs from the CPU's
// 8-lane sum by reassociation only.
#include <fmt/format.h>

#include "codegen/cuda/emit.h"

namespace vtc::cuda {
namespace {

int64_t const_dim(const ir::Op& op, const ir::Dim& d, const char* what) {
  auto c = d.constant();
  if (!c || *c <= 0) unsupported(op, fmt::format("{} must be a positive constant, got {}", what, d.str()));
  return *c;
}

// The plain f32 state an op names, shaped [S, rest...].
void require_plain_f32_state(const ir::Module& m, const ir::Op& op) {
  const std::string name = *ir::state_symbol(op);
  const ir::StateDecl* decl = m.find_state(name);
  if (!decl || decl->kind != ir::StateKind::Plain || decl->type.elem.kind() != ir::ElemType::F32)
    unsupported(op, "state @" + name + " must be a plain f32 state");
}

// The warp-per-row prologue: lane, the global warp index `w`, and an exit
// for warps past `count`.
std::string warp_prologue(const std::string& count) {
  return fmt::format(R"(  const int lane = threadIdx.x & 31;
  const long long w = blockIdx.x * (long long)(blockDim.x >> 5) + (threadIdx.x >> 5);
  if (w >= {}) return;
)",
                     count);
}

Kernel conv_outputs(const ir::Op& op, int64_t c, int64_t k, int64_t dil, const std::string& what) {
  KernelBuilder kb("conv1d", what);
  const std::string x = kb.in(op.operands[0], "x"), wt = kb.in(op.operands[1], "w"), seq = kb.in(op.operands[2], "seq");
  const std::string st = kb.state_rows(*ir::state_symbol(op), "state", "const float*");
  const std::string slots = kb.slots();
  const std::string y = kb.out(op.results[0], "y");
  const ir::Dim tokens = op.operands[0].type().shape[0];
  kb.body(fmt::format(R"(  constexpr long long C = {0}, K = {1}, DIL = {2}, W = (K - 1) * DIL;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < {3} * C; e += (long long)gridDim.x * blockDim.x) {{
    const long long t = e / C, c = e % C;
    const int sq = {4}[t];
    const float* hist = {5} + (long long){6}[sq] * (W * C) + c;
    // win[k] = the input (K-1-k)*DIL steps back in this sequence's stream.
    float win[K];
    win[K - 1] = {7}[e];
    long long u = t, found = 0;
#pragma unroll
    for (int kk = (int)K - 2; kk >= 0; --kk) {{
      const long long back = (K - 1 - kk) * DIL;
      while (found < back && u > 0) {{ --u; if ({4}[u] == sq) ++found; }}
      win[kk] = found == back ? {7}[u * C + c] : hist[(W - (back - found)) * C];
    }}
    float sum = 0.0f;
#pragma unroll
    for (int kk = 0; kk < (int)K; ++kk) sum = __fadd_rn(sum, __fmul_rn(win[kk], {8}[c * K + kk]));
    {9}[e] = sum;
  }}
)",
                      c, k, dil, kb.expr(tokens), seq, st, slots, x, wt, y));
  kb.launch(tokens * c, 256);
  return kb.finish();
}

Kernel conv_state(const ir::Op& op, int64_t c, int64_t k, int64_t dil, const std::string& what) {
  KernelBuilder kb("conv1d_state", what + " [state update]");
  const std::string x = kb.in(op.operands[0], "x"), seq = kb.in(op.operands[2], "seq");
  const std::string st = kb.state_rows(*ir::state_symbol(op), "state", "float*");
  const std::string slots = kb.slots();
  const ir::Dim seqs = ir::Dim::symbol("S");
  kb.body(fmt::format(R"(  constexpr long long C = {0}, W = ({1} - 1) * {2};
  const long long TOKENS = {3};
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < {4} * C; e += (long long)gridDim.x * blockDim.x) {{
    const long long s = e / C, c = e % C;
    float* hist = {5} + (long long){6}[s] * (W * C) + c;
    float fresh[W];
    // The newest inputs of sequence s in this step, newest last...
    long long n = 0;
    for (long long u = TOKENS - 1; u >= 0 && n < W; --u)
      if ({7}[u] == s) {{ fresh[W - 1 - n] = {8}[u * C + c]; ++n; }}
    // ...after the old history shifted left by n.
    for (long long i = 0; i < W - n; ++i) fresh[i] = hist[(i + n) * C];
    for (long long i = 0; i < W; ++i) hist[i * C] = fresh[i];
  }}
)",
                      c, k, dil, kb.expr(op.operands[0].type().shape[0]), kb.expr(seqs), st, slots, seq, x));
  kb.launch(seqs * c, 256);
  return kb.finish();
}

// The recurrence of one warp (sequence s, head h, row j) over the step's
// tokens; {0} is the scale. Parameter names are those emit_delta_rule
// declares. per_key_decay: g holds DK decays per head (KDA), each lane
// scales its elements by its own.
std::string delta_rule_recurrence(double scale, bool per_key_decay) {
  const std::string head_decay = per_key_decay ? "" : "    const float decay = expf(g[th]);\n";
  const std::string decay = per_key_decay ? "(in ? expf(g[th * DK + lane + 32 * r]) : 0.0f)" : "decay";
  return fmt::format(R"(  const long long s = w / (H * DV), h = (w / DV) % H, j = w % DV;
  float* row = state + ((long long)slots[s] * H + h) * (DV * DK) + j * DK;
  float mr[KL];
#pragma unroll
  for (int r = 0; r < KL; ++r) mr[r] = lane + 32 * r < DK ? row[lane + 32 * r] : 0.0f;
  for (long long t = 0; t < TOKENS; ++t) {{
    if (seq[t] != s) continue;
    const long long th = t * H + h;
{1}    const float b = beta[th];
    float kr[KL], qr[KL], kv = 0.0f;
#pragma unroll
    for (int r = 0; r < KL; ++r) {{
      const bool in = lane + 32 * r < DK;
      kr[r] = in ? k[th * DK + lane + 32 * r] : 0.0f;
      qr[r] = in ? q[th * DK + lane + 32 * r] : 0.0f;
      mr[r] = __fmul_rn(mr[r], {2});
      kv = __fmaf_rn(mr[r], kr[r], kv);
    }}
    kv = vtc_warp_sum(kv);
    const float d = __fmul_rn(__fsub_rn(v[th * DV + j], kv), b);
    float acc = 0.0f;
#pragma unroll
    for (int r = 0; r < KL; ++r) {{
      mr[r] = __fmaf_rn(kr[r], d, mr[r]);
      acc = __fmaf_rn(mr[r], qr[r], acc);
    }}
    acc = vtc_warp_sum(acc);
    if (lane == 0) out[th * DV + j] = __fmul_rn({0}, acc);
  }}
#pragma unroll
  for (int r = 0; r < KL; ++r) if (lane + 32 * r < DK) row[lane + 32 * r] = mr[r];
)",
                     flit(scale), head_decay, decay);
}

// The recurrence of one warp (sequence s, head h, row p) over the step's
// tokens. Parameter names are those emit_ssm_scan declares.
std::string ssm_scan_recurrence(bool per_element_decay) {
  // Mamba-2: one decay per head, before the element loop; Mamba-1: one per element.
  const std::string decay = per_element_decay ? "expf(__fmul_rn(d, a[h * N + lane + 32 * r]))" : "head_decay";
  const std::string head_decay =
      per_element_decay ? "" : "    const float head_decay = expf(__fmul_rn(d, a[h]));\n";
  return fmt::format(R"(  const long long s = w / (H * P), hp = w % (H * P), h = hp / P, g = h / (H / G);
  float* row = state + ((long long)slots[s] * H * P + hp) * N;
  float sr[NL];
#pragma unroll
  for (int r = 0; r < NL; ++r) sr[r] = lane + 32 * r < N ? row[lane + 32 * r] : 0.0f;
  for (long long t = 0; t < TOKENS; ++t) {{
    if (seq[t] != s) continue;
    const float v = dt[t * H + h];
    const float d = v > 20.0f ? v : logf(__fadd_rn(1.0f, expf(v)));
{1}    const float xd = __fmul_rn(x[t * H * P + hp], d);
    const float* bt = b + (t * G + g) * N;
    const float* ct = c + (t * G + g) * N;
    float acc = 0.0f;
#pragma unroll
    for (int r = 0; r < NL; ++r) {{
      if (lane + 32 * r < N) {{
        sr[r] = __fadd_rn(__fmul_rn(sr[r], {0}), __fmul_rn(bt[lane + 32 * r], xd));
        acc = __fadd_rn(acc, __fmul_rn(sr[r], ct[lane + 32 * r]));
      }}
    }}
    acc = vtc_warp_sum(acc);
    if (lane == 0) y[t * H * P + hp] = acc;
  }}
#pragma unroll
  for (int r = 0; r < NL; ++r) if (lane + 32 * r < N) row[lane + 32 * r] = sr[r];
)",
                     decay, head_decay);
}

}  // namespace

Kernels emit_l2_norm(const ir::Op& op, const std::string& what) {
  const ir::TensorType& xt = op.operands[0].type();
  if (xt.shape.empty()) unsupported(op, "needs at least one dim");
  if (!xt.elem.is_float()) unsupported(op, "input must be f32, f16 or bf16, got " + xt.str());
  const int64_t n = const_dim(op, xt.shape.back(), "the normalized dim");
  const ir::Dim rows = dims_product(xt.shape, 0, xt.rank() - 1);
  KernelBuilder kb(op.mnemonic(), what);
  const std::string x = kb.in(op.operands[0], "x"), y = kb.out(op.results[0], "y");
  const std::string xv = load_as_float(xt.elem, x, "r * N + c");
  kb.body(fmt::format("  constexpr long long N = {};\n", n) + warp_prologue(kb.expr(rows)) +
          fmt::format(R"(  const long long r = w;
  double acc = 0.0;
  for (long long c = lane; c < N; c += 32) {{ const float v = {0}; acc += (double)__fmul_rn(v, v); }}
  acc = vtc_warp_sum_d(acc);
  const float s = 1.0f / fmaxf(sqrtf((float)acc), {1});
  for (long long c = lane; c < N; c += 32) {{ {2} }}
)",
                      xv, flit(ir::L2NormAttrs::of(op).eps), store_from_float(xt.elem, y, "r * N + c", "__fmul_rn(" + xv + ", s)")));
  kb.launch(rows * 32, 128);
  return {kb.finish()};
}

Kernels emit_causal_conv1d(const ir::Module& m, const ir::Op& op, const std::string& what) {
  require_plain_f32_state(m, op);
  const ir::TensorType& xt = op.operands[0].type();
  const int64_t c = const_dim(op, xt.shape[1], "the channel count");
  const int64_t k = const_dim(op, op.operands[1].type().shape[1], "the kernel width");
  const int64_t dil = ir::CausalConv1dAttrs::of(op).dilation;
  if (k > 64 || (k - 1) * dil > 1024)
    unsupported(op, fmt::format("kernel width {} (at most 64) with dilation {} (history at most 1024) is too wide", k, dil));
  Kernels out{conv_outputs(op, c, k, dil, what)};
  if (k > 1) out.push_back(conv_state(op, c, k, dil, what));
  return out;
}

Kernels emit_delta_rule(const ir::Module& m, const ir::Op& op, const std::string& what) {
  require_plain_f32_state(m, op);
  const ir::TensorType& qt = op.operands[0].type();
  const int64_t heads = const_dim(op, qt.shape[1], "the head count");
  const int64_t dk = const_dim(op, qt.shape[2], "the key head dim");
  const int64_t dv = const_dim(op, op.operands[2].type().shape[2], "the value head dim");
  if (dk > 1024) unsupported(op, fmt::format("key head dim {} exceeds 1024", dk));
  KernelBuilder kb(op.mnemonic(), what);
  const char* names[] = {"q", "k", "v", "g", "beta", "seq"};
  for (size_t i = 0; i < 6; ++i) kb.in(op.operands[i], names[i]);
  kb.state_rows(*ir::state_symbol(op), "state", "float*");
  kb.slots();
  kb.out(op.results[0], "out");
  const ir::Dim seqs = ir::Dim::symbol("S");
  std::string body = fmt::format(R"(  constexpr long long H = {0}, DK = {1}, DV = {2};
  constexpr int KL = (int)((DK + 31) / 32);
  const long long TOKENS = {3};
)",
                                 heads, dk, dv, kb.expr(qt.shape[0]));
  body += warp_prologue(fmt::format("{} * H * DV", kb.expr(seqs)));
  body += delta_rule_recurrence(ir::DeltaRuleAttrs::of(op).scale, op.operands[3].type().rank() == 3);
  kb.body(body);
  kb.launch(seqs * (heads * dv * 32), 128);
  return {kb.finish()};
}

Kernels emit_ssm_scan(const ir::Module& m, const ir::Op& op, const std::string& what) {
  require_plain_f32_state(m, op);
  const ir::TensorType& xt = op.operands[0].type();
  const int64_t heads = const_dim(op, xt.shape[1], "the head count");
  const int64_t head_dim = const_dim(op, xt.shape[2], "the head dim");
  const int64_t groups = const_dim(op, op.operands[3].type().shape[1], "the group count");
  const int64_t n = const_dim(op, op.operands[3].type().shape[2], "the state size");
  const int64_t a_cols = const_dim(op, op.operands[2].type().shape[1], "A's columns");
  if (n > 1024) unsupported(op, fmt::format("state size {} exceeds 1024", n));
  KernelBuilder kb(op.mnemonic(), what);
  const char* names[] = {"x", "dt", "a", "b", "c", "seq"};
  for (size_t i = 0; i < 6; ++i) kb.in(op.operands[i], names[i]);
  kb.state_rows(*ir::state_symbol(op), "state", "float*");
  kb.slots();
  kb.out(op.results[0], "y");
  const ir::Dim seqs = ir::Dim::symbol("S");
  std::string body = fmt::format(R"(  constexpr long long H = {0}, P = {1}, G = {2}, N = {3};
  constexpr int NL = (int)((N + 31) / 32);
  const long long TOKENS = {4};
)",
                                 heads, head_dim, groups, n, kb.expr(xt.shape[0]));
  body += warp_prologue(fmt::format("{} * H * P", kb.expr(seqs)));
  body += ssm_scan_recurrence(a_cols != 1);
  kb.body(body);
  kb.launch(seqs * (heads * head_dim * 32), 128);
  return {kb.finish()};
}

}  // namespace vtc::cuda
