// Paged attention: append this step's K/V rows to the KV pools through the
// page table, then attend.
//
// KV state layout (runtime/state): a pool of pages per paged state, K pages
// then V pages, each [P][page][Hkv][D] of f16 or f32. Sequence s's position
// p lives in page page_table[s * PT_STRIDE + p / page] at row p % page.
// Query token t of sequence seq[t] at position pos[t] sees that sequence's
// keys at positions 0..pos[t] (causal; the executor appends before it
// attends, so tokens of one step see each other) or, with causal = false
// (an encoder, whose sequences come whole in one step), every key up to the
// sequence's last position in the step; minus those at or before
// pos[t] - window with a sliding window, and those before
// floor(pos[t] / chunk) * chunk with chunked attention (llama4).
//
// Kernels:
//  1. kv_append: one thread per (token, K/V element) stores the rows
//     (every path but flash decoding, which stores them itself).
//  2. prefill (rows with the symbol T), f16 cache, head_dim a multiple of
//     16 up to 256, no selection: attn_prefill_mma, flash attention on
//     tensor cores (16-token tiles, a warp per query head of a KV group,
//     m16n8k16 for Q K^T and P V; see "Prefill on tensor cores" below);
//     rows in the one-row regime walk the loop of 3 inside it.
//  3. prefill otherwise: attn_prefill, one warp per (token, query head);
//     each lane holds dims lane, lane+32, ... of q and the output
//     accumulator; per key a warp sum gives the score, and the online
//     softmax (running max m, sum l) rescales the accumulator.
//  4. decode (one token per sequence), rows of whole 16-byte chunks of at
//     most 32 lanes, no selection: attn_decode, flash decoding in one
//     launch (a block per (token, KV head) holding the group's heads; the
//     keys split over warps and key blocks, merged in shared memory and by
//     the last key block to finish; see "Flash decoding" below).
//  5. decode otherwise: split-K, a warp per (token, head, slice of
//     SPLITS): (m, l, acc[D]) to scratch, then attn_combine merges the
//     slices per (token, head) with weights exp(m_i - max m).
// VTC_CUDA_ATTN=scalar takes 1, 3 and 5 everywhere.
// Selection (optional operand 5, selected [T, W] i32 from indexer_select):
// the flash loop walks row t's W entries instead of the positions 0..pos[t]
// (decode splits the entries), skipping -1, positions after pos[t] and
// positions listed earlier in the row, so each selected key counts once and
// every other key contributes nothing. A row that is a strictly increasing
// run followed only by negatives (indexer_select's form) cannot repeat a
// position, so the warp checks that once and skips the repeat scan.
// Sinks (attribute `sinks`, the last operand [Hq] f32, gpt-oss): one logit
// per query head that joins the softmax denominator with no value. Prefill
// folds it into the warp's (m, l, acc) after the loop; decode folds it into
// the combine (the maximum over the slices and the sink, then l +=
// exp(sink - max)), so it counts once per (token, head); flash decoding's
// last key block does the same.
// Scores: s = (q . k) * scale, or softcap * tanh(s * scale / softcap).
// ALiBi (attribute `alibi_max_bias`): then s += slope(h) * f16(-|qp - j|),
// the slopes computed on the host as the CPU computes them
// (support/alibi.h) and baked into the kernel as a table, the product and
// sum rounded separately (no fma), as ggml adds slope * mask; every kernel
// (both prefill kernels, flash decoding, split-K decode) adds it where it
// scales the score.
// Numerics follow the CPU, which follows ggml's CPU flash attention
// (runtime/cpu/kernels/attention.cpp), because with attention that matters
// in the logits its f16 roundings do too (a sharp softmax over amplified
// scores turned them into 1e-3..9e-3 rel-L2 against llama.cpp when CUDA
// kept q and the accumulator in f32):
//  - one-row regime (decode; prefill when the sequence has fewer than 64
//    tokens in the step) with an f16 cache: q rounded to f16, and per key in
//    order: if s > m { ms = exp(m - s); m = s; acc = f16(acc * ms) } else
//    vs = exp(s - m); acc = f16(fma(v, vs, acc)); l = l * ms + vs. Decode
//    walks the keys in one slice, as the CPU does, up to 256 of them;
//  - tiled regime (prefill of 64+ tokens of a sequence), or an f32 cache:
//    the same update in f32, q in f32; on tensor cores (kernel 2) q and
//    the softmax weights P are rounded to f16 for the mma, as llama.cpp's
//    CUDA flash attention does (about 1e-7 NMSE against the CPU's f32);
//  - decode past 256 keys: slices (SPLITS, or flash decoding's slices of
//    at least 32 keys), each as the one-row regime, merged in f32 (the
//    CPU's split-KV chunks, though its chunk bounds depend on its thread
//    count).
// A query with no visible key outputs zeros.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "codegen/cuda/emit.h"
#include "support/alibi.h"

namespace vtc::cuda {
namespace {

constexpr int kSplits = 16;
// Decode: the CPU walks the keys in order in one loop up to 256 of them (its
// split-KV path starts where the reference's cache view, padded to 256
// rows, reaches 512), so one slice does too; past that, SPLITS slices.
constexpr int kOneRowMaxKeys = 256;

// ALiBi: the kernel's table of per-head slopes (after the prologue, where
// HQ is defined), or nothing without ALiBi.
std::string alibi_table(int64_t hq, double max_bias) {
  if (max_bias <= 0.0) return "";
  std::string vals;
  for (int64_t h = 0; h < hq; ++h) vals += (h ? ", " : "") + flit(alibi_slope(float(max_bias), hq, h));
  return fmt::format("  const float alibi_slopes[HQ] = {{{}}};\n", vals);
}

// ALiBi: " + bias" for a score of head `head` at query position qp and key
// position j (expressions), or "" without: slope * f16(-|qp - j|), each
// operation rounded on its own as the CPU's.
std::string alibi_term(bool alibi, const std::string& head, const std::string& qp, const std::string& j) {
  if (!alibi) return "";
  return fmt::format(", __fmul_rn(alibi_slopes[{0}], vtc_h2f(vtc_f2h(-(float)({1} > {2} ? {1} - {2} : {2} - {1})))))",
                     head, qp, j);
}

// The score expression plus its ALiBi bias: __fadd_rn(score, bias) or score.
std::string with_alibi(const std::string& score, const std::string& term) {
  return term.empty() ? score : "__fadd_rn(" + score + term;
}

// Heads of the flash loop: every position, or the entries of a selection row.
constexpr const char* kPlainHead = "    for (long long j = j_begin; j < j_end; ++j) {\n";
constexpr const char* kSelectedHead = R"(    for (long long e = j_begin; e < j_end; ++e) {
      const long long j = srow[e];
      if (j < 0 || j > qp) continue;
      if (!strict) {
        bool dup = false;
        for (long long u = lane; u < e; u += 32) dup |= srow[u] == j;
        if (__any_sync(0xffffffffu, dup)) continue;
      }
)";

struct AttnShape {
  int64_t hq, hkv, d, page;
  ir::Dim tokens;
  std::string kv_ctype;   // element C type in the pool (f16 fast paths)
  std::string kv_load;    // "vtc_h2f"
  std::string state;
  KvHalf k, v;            // the halves as the generic kernels read them
  // Not an f16 cache of one state: the generic kernels (kv_append_typed,
  // attn_prefill, split-K decode) with per-type stores and loads.
  bool generic = false;
  // Both halves f16 or f32: the CPU converts f32 to f16 and takes its f16
  // regimes (one-row under 64 tokens, else tiled); else its typed one-row
  // loop everywhere.
  bool half_math = true;
};

GgmlType cache_type_of(const ir::ElemType& e) {
  if (e.is_quant()) return e.quant_type();
  return e.kind() == ir::ElemType::F32 ? GgmlType::F32 : e.kind() == ir::ElemType::BF16 ? GgmlType::BF16 : GgmlType::F16;
}

AttnShape attn_shape(const ir::Module& m, const ir::Op& op) {
  const ir::TensorType& qt = op.operands[0].type();
  const ir::TensorType& kt = op.operands[1].type();
  for (size_t i = 0; i < 3; ++i)
    if (op.operands[i].type().elem.kind() != ir::ElemType::F32 || op.operands[i].type().rank() != 3)
      unsupported(op, "q, k and v must be [T, H, D] f32");
  auto hq = qt.shape[1].constant(), hkv = kt.shape[1].constant(), d = qt.shape[2].constant();
  if (!hq || !hkv || !d || *hkv <= 0 || *hq % *hkv != 0) unsupported(op, "head counts must be constant, Hq a multiple of Hkv");
  // Each lane keeps ceil(D / 32) values of q and of the accumulator in
  // registers; 1024 (32 each) covers MLA's 576-wide latent heads.
  if (*d <= 0 || *d > 1024) unsupported(op, fmt::format("head_dim {} must be in [1, 1024]", *d));
  const ir::AttentionAttrs attrs = ir::AttentionAttrs::of(op);
  const std::string state = attrs.state;
  const ir::StateDecl* decl = m.find_state(state);
  const ir::StateDecl* v_decl = attrs.v_state.empty() ? decl : m.find_state(attrs.v_state);
  if (!decl || !v_decl || decl->kind != ir::StateKind::Paged || v_decl->kind != ir::StateKind::Paged ||
      decl->type.rank() != 5 || v_decl->type.rank() != 5)
    unsupported(op, "state @" + state + " must be a paged [2, P, page, Hkv, D] state (or [1, ...] with v_state)");
  auto page = decl->type.shape[2].constant();
  if (!page || *page <= 0) unsupported(op, "the KV page size must be constant");
  AttnShape a{*hq, *hkv, *d, *page, qt.shape[0], "unsigned short", "vtc_h2f", state, {}, {}};
  const GgmlType k_type = cache_type_of(decl->type.elem), v_type = cache_type_of(v_decl->type.elem);
  if ((ggml_traits(k_type).quantized || ggml_traits(v_type).quantized) && *d % 32 != 0)
    unsupported(op, fmt::format("a {} / {} cache needs a head size that is a multiple of 32, got {}", ggml_type_name(k_type),
                                ggml_type_name(v_type), *d));
  a.k = kv_half(k_type, state, 0, *hkv, *d);
  a.v = kv_half(v_type, attrs.v_state.empty() ? state : attrs.v_state, attrs.v_state.empty() ? 1 : 0, *hkv, *d);
  a.generic = !(attrs.v_state.empty() && k_type == GgmlType::F16 && v_type == GgmlType::F16);
  a.half_math = (k_type == GgmlType::F16 || k_type == GgmlType::F32) && (v_type == GgmlType::F16 || v_type == GgmlType::F32);
  return a;
}

// kv_append for the generic kernels: one thread per (token, unit) of K then
// V (an element, or a 32-value block a thread quantizes; emit_kv_cache.cpp).
Kernel kv_append_typed(const ir::Op& op, const AttnShape& a, const std::string& what) {
  KernelBuilder kb("kv_append", what + " [kv append]");
  const std::string k = kb.in(op.operands[1], "k"), v = kb.in(op.operands[2], "v"), pos = kb.in(op.operands[3], "pos"),
                    seq = kb.in(op.operands[4], "seq");
  kb.state_pool(a.k.state, a.k.half, "k_pool", a.k.ctype + "*");
  kb.state_pool(a.v.state, a.v.half, "v_pool", a.v.ctype + "*");
  const std::string pt = kb.page_table();
  for (const std::string& h : kv_helpers(a.k, a.v)) kb.need(h);
  kb.body(fmt::format(R"(  constexpr long long UK = {0}, UV = {1}, ROW = {2}, PAGE = {3};
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < {4} * (UK + UV); e += (long long)gridDim.x * blockDim.x) {{
    const long long t = e / (UK + UV);
    long long u = e % (UK + UV);
    const long long p = {5}[t];
    const long long row = (long long){6}[(long long){7}[t] * s_PT_STRIDE + p / PAGE] * PAGE + p % PAGE;
    if (u < UK) {{
      {8}
    }} else {{
      u -= UK;
      {9}
    }}
  }}
)",
                      a.k.units, a.v.units, a.hkv * a.d, a.page, kb.expr(a.tokens), pos, pt, seq,
                      kv_store_unit(a.k, "k_pool", k + " + t * ROW", a.d), kv_store_unit(a.v, "v_pool", v + " + t * ROW", a.d)));
  kb.launch(a.tokens * (a.k.units + a.v.units), 128);
  Kernel kern = kb.finish();
  kern.fp32_flops = a.tokens * (a.hkv * a.d * 2);
  return kern;
}

Kernel kv_append(const ir::Op& op, const AttnShape& a, const std::string& what) {
  KernelBuilder kb("kv_append", what + " [kv append]");
  const std::string k = kb.in(op.operands[1], "k"), v = kb.in(op.operands[2], "v"), pos = kb.in(op.operands[3], "pos"),
                    seq = kb.in(op.operands[4], "seq");
  const std::string kp = kb.state_pool(a.state, 0, "k_pool", a.kv_ctype + "*");
  const std::string vp = kb.state_pool(a.state, 1, "v_pool", a.kv_ctype + "*");
  const std::string pt = kb.page_table();
  const std::string store_k = a.kv_load.empty() ? "kf" : "vtc_f2h(kf)";
  const std::string store_v = a.kv_load.empty() ? "vf" : "vtc_f2h(vf)";
  kb.body(fmt::format(R"(  constexpr long long ROW = {0}, PAGE = {1};
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < {2} * ROW; e += (long long)gridDim.x * blockDim.x) {{
    const long long t = e / ROW, i = e % ROW;
    const long long p = {3}[t];
    const long long row = (long long){4}[(long long){5}[t] * s_PT_STRIDE + p / PAGE] * PAGE + p % PAGE;
    const float kf = {6}[e], vf = {7}[e];
    {8}[row * ROW + i] = {9};
    {10}[row * ROW + i] = {11};
  }}
)",
                      a.hkv * a.d, a.page, kb.expr(a.tokens), pos, pt, seq, k, v, kp, store_k, vp, store_v));
  kb.launch(a.tokens * (a.hkv * a.d), 256);
  Kernel kern = kb.finish();
  // Two roundings an element at most; without this the cost model would
  // charge the attention op's flops to its first kernel.
  kern.fp32_flops = a.tokens * (a.hkv * a.d * 2);
  return kern;
}

// The shared flash loop over keys [j_begin, j_end) of one (token, head).
// With a selection it walks the row's entries [j_begin, j_end) instead.
// The update is ggml's one-row step (see the header): a larger score
// rescales the accumulator first, then v * vs is added; `acc16` (warp
// uniform) rounds the accumulator to f16 after each of those, as the CPU
// does with an f16 cache.
std::string flash_loop(const AttnShape& a, double scale, double softcap, int64_t window, int64_t chunk,
                       bool selected, bool alibi) {
  const std::string load = a.kv_load;
  std::string score = softcap != 0.0 ? fmt::format("{} * tanhf(s * {})", flit(softcap), flit(scale / softcap))
                                     : fmt::format("s * {}", flit(scale));
  score = with_alibi(score, alibi_term(alibi, "h", "qp", "j"));
  std::string mask = window > 0 ? fmt::format("      if (qp - j >= {}) continue;\n", window) : "";
  // Chunked attention: only keys from the start of the query's chunk on.
  if (chunk > 0) mask += fmt::format("      if (j < (qp / {0}) * {0}) continue;\n", chunk);
  // The generic kernels read each half at its own type and stride.
  const std::string rows =
      a.generic ? fmt::format("      const {}* kr = k_pool + row * {} + kvh * {};\n      const {}* vr = v_pool + row * {} + kvh * {};\n",
                              a.k.ctype, a.k.row, a.k.head, a.v.ctype, a.v.row, a.v.head)
                : fmt::format("      const {0}* kr = k_pool + row * ROW + kvh * D;\n      const {0}* vr = v_pool + row * ROW + kvh * D;\n",
                              a.kv_ctype);
  const std::string dot =
      a.generic ? kv_score(a.k)
                : fmt::format("      for (int i = 0; i < DL; ++i) if (lane + 32 * i < D) s += qv[i] * {}(kr[lane + 32 * i]);\n", load);
  const std::string v_elem = a.generic ? kv_value(a.v) : load + "(vr[lane + 32 * i])";
  return fmt::format(R"({4}{0}      const long long row = (long long)page_table[sq * s_PT_STRIDE + j / PAGE] * PAGE + j % PAGE;
{5}      float s = 0.0f;
{6}      s = vtc_warp_sum(s);
      s = {3};
      float ms = 1.0f, vs = 1.0f;
      if (s > m) {{
        ms = expf(m - s);
        m = s;
        for (int i = 0; i < DL; ++i) acc[i] = acc16 ? vtc_h2f(vtc_f2h(acc[i] * ms)) : acc[i] * ms;
      }} else {{
        vs = expf(s - m);
      }}
      for (int i = 0; i < DL; ++i)
        if (lane + 32 * i < D) {{
          const float u = fmaf({7}, vs, acc[i]);
          acc[i] = acc16 ? vtc_h2f(vtc_f2h(u)) : u;
        }}
      l = l * ms + vs;
    }}
)",
                     mask, a.kv_ctype, load, score, selected ? kSelectedHead : kPlainHead, rows, dot, v_elem);
}

// Parameters and per-warp setup common to prefill and decode kernels.
std::string flash_prologue(const AttnShape& a) {
  return fmt::format(R"(  constexpr long long HQ = {0}, HKV = {1}, D = {2}, PAGE = {3}, ROW = {1} * {2};
  constexpr int DL = ({2} + 31) / 32;
  const int lane = threadIdx.x & 31;
  const long long w = blockIdx.x * (long long)(blockDim.x >> 5) + (threadIdx.x >> 5);
  if (w >= TOKENS * HQ) return;
  const long long t = w / HQ, h = w % HQ, kvh = h / (HQ / HKV);
  const long long qp = pos[t], sq = seq[t];
  float qv[DL], acc[DL];
  for (int i = 0; i < DL; ++i) {{ qv[i] = lane + 32 * i < D ? q[(t * HQ + h) * D + lane + 32 * i] : 0.0f; acc[i] = 0.0f; }}
  float m = -__int_as_float(0x7f800000), l = 0.0f;
)",
                     a.hq, a.hkv, a.d, a.page);
}

// After the prologue, with `acc16` defined: in ggml's one-row regime an f16
// cache's query is rounded to f16 (the CPU converts it to K's type).
constexpr const char* kRoundQuery = R"(  if (acc16)
    for (int i = 0; i < DL; ++i) qv[i] = vtc_h2f(vtc_f2h(qv[i]));
)";

// Prefill: the CPU takes the one-row path for a sequence with fewer than
// kTiledMinTokens tokens in the step, else its tiled f32 path (q in f32,
// an f32 accumulator). A warp counts its sequence's tokens.
constexpr int kTiledMinTokens = 64;  // the CPU's kAttentionTileQ (GGML_FA_TILE_Q)
std::string prefill_regime(const AttnShape& a) {
  if (a.kv_load.empty()) return "  const bool acc16 = false;\n";
  return fmt::format(R"(  long long seq_tokens = 0;
  for (long long u = lane; u < TOKENS; u += 32) seq_tokens += seq[u] == sq;
  for (int o = 16; o > 0; o >>= 1) seq_tokens += __shfl_xor_sync(0xffffffffu, seq_tokens, o);
  const bool acc16 = seq_tokens < {};
)",
                     kTiledMinTokens);
}

// Selection: row t of `sel` and whether it is strictly increasing then
// negative only (no repeats possible).
std::string selection_prologue(int64_t width) {
  return fmt::format(R"(  constexpr long long SW = {0};
  const int* srow = sel + t * SW;
  bool unordered = false;
  for (long long u = lane; u + 1 < SW; u += 32) {{
    const int x = srow[u], y = srow[u + 1];
    unordered |= x < 0 ? y >= 0 : (y >= 0 && y <= x);
  }}
  const bool strict = !__any_sync(0xffffffffu, unordered);
)",
                     width);
}

// Non-causal: seq_end, one past the largest position among the step's
// tokens of the warp's sequence (a warp max over a strided scan).
constexpr const char* kSequenceEnd = R"(  long long seq_end = 0;
  for (long long u = lane; u < TOKENS; u += 32)
    if (seq[u] == sq) seq_end = max(seq_end, (long long)pos[u] + 1);
  for (int o = 16; o > 0; o >>= 1) seq_end = max(seq_end, __shfl_xor_sync(0xffffffffu, seq_end, o));
)";

bool has_sinks(const ir::Op& op) { return ir::AttentionAttrs::of(op).sinks; }

// The sinks operand (the last one), checked: [Hq] f32.
ir::Value sinks_operand(const ir::Op& op, const AttnShape& a) {
  const ir::Value v = op.operands.back();
  const ir::TensorType& t = v.type();
  if (t.elem.kind() != ir::ElemType::F32 || t.rank() != 1 || t.shape[0].constant() != a.hq)
    unsupported(op, fmt::format("sinks must be [{}] f32, got {}", a.hq, t.str()));
  return v;
}

// The sink fold of one (token, head) warp state after the flash loop.
constexpr const char* kSinkFold = R"(  {
    const float sk = sinks[h], m_new = fmaxf(m, sk), corr = expf(m - m_new);
    l = l * corr + expf(sk - m_new);
    for (int i = 0; i < DL; ++i) acc[i] *= corr;
    m = m_new;
  }
)";

// The width W of operand 5, or 0 without one (sinks, when set, come last).
int64_t selection_width(const ir::Op& op) {
  if (op.operands.size() < (has_sinks(op) ? 7u : 6u)) return 0;
  const ir::TensorType& st = op.operands[5].type();
  auto w = st.rank() == 2 ? st.shape[1].constant() : std::nullopt;
  if (st.elem.kind() != ir::ElemType::I32 || !w || *w <= 0)
    unsupported(op, "selected positions must be [T, W] i32 with a constant W, got " + st.str());
  return *w;
}

// Split-K combine: merges the SPLITS partial (m, l, acc) of each (token, head).
Kernel combine(const ir::Op& op, const AttnShape& a, int splits, const std::string& what) {
  const ir::Dim part_floats = a.tokens * (a.hq * splits * (a.d + 2));
  KernelBuilder cb("attn_combine", what + " [split-K combine]");
  cb.scratch(part_floats * 4);
  const bool sinks = has_sinks(op);
  if (sinks) cb.in(sinks_operand(op, a), "sinks");
  const std::string o = cb.out(op.results[0], "out");
  // A thread per output element, a warp per block: a decode step's few
  // heads still spread over the SMs.
  cb.body(fmt::format(R"(  constexpr long long HQ = {0}, D = {1}, SPLITS = {2};
  const long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (e >= {3} * HQ * D) return;
  const long long w = e / D, d = e % D;
  const float* part = scratch + w * SPLITS * (D + 2);
  float mx = -__int_as_float(0x7f800000);
  for (int s = 0; s < SPLITS; ++s) if (part[s * (D + 2) + 1] > 0.0f) mx = fmaxf(mx, part[s * (D + 2)]);
{5}  float l = {6}, acc = 0.0f;
  for (int s = 0; s < SPLITS; ++s) {{
    const float* ps = part + s * (D + 2);
    if (ps[1] <= 0.0f) continue;
    const float f = expf(ps[0] - mx);
    l += ps[1] * f;
    acc += ps[2 + d] * f;
  }}
  {4}[e] = l > 0.0f ? acc / l : 0.0f;
)",
                      a.hq, a.d, splits, cb.expr(a.tokens), o, sinks ? "  const float sk = sinks[w % HQ];\n  mx = fmaxf(mx, sk);\n" : "",
                      sinks ? "expf(sk - mx)" : "0.0f"));
  cb.launch(a.tokens * (a.hq * a.d), 32);
  return cb.finish();
}

// --- Flash decoding: the GQA group's heads in one block, 16-byte K/V loads ---
//
// The shape of the fast decode kernel, or nullopt where it does not apply
// (a selection, or a row that is not whole 16-byte chunks of at most 32
// lanes: MLA's 576-wide latent heads keep the warp-per-head kernel).
struct FlashDecodeShape {
  int cw = 0;    // elements per 16-byte chunk (8 f16, 4 f32)
  int c = 0;     // chunks per K/V row
  int lk = 0;    // lanes per key (a power of two >= c)
  int kp = 0;    // keys per pass of a warp (32 / lk)
  int gb = 0;    // query heads per block (a divisor of the group, <= 8)
  int nsub = 0;  // blocks per (token, KV head): group / gb
  int hpg = 0;   // heads each lane group owns in the update: ceil(gb / kp)
  int y = 0;     // blocks along the keys (grid y); 4 warp slices each
};

// Two blocks per SM of a 132-SM H100/H200 at one row: the key blocks a
// (token, KV head) gets, so a long context keeps every SM reading.
constexpr int kTargetBlocks = 264;
constexpr int kDecodeWarps = 4;
// Past the one-row regime a warp's slice has at least this many keys
// (fewer makes the partials' traffic a visible share of the K/V bytes).
constexpr int kMinSliceKeys = 32;

// The query heads of a KV group one block of the flash kernels holds: the
// largest divisor of the group up to 8 (registers: each head's q chunks).
int heads_per_block(const AttnShape& a) {
  const int group = int(a.hq / a.hkv);
  int gb = 1;
  for (int g = 1; g <= std::min(group, 8); ++g)
    if (group % g == 0) gb = g;
  return gb;
}

std::optional<FlashDecodeShape> flash_decode_shape(const AttnShape& a, int64_t width) {
  FlashDecodeShape f;
  f.cw = a.kv_load.empty() ? 4 : 8;
  if (width || a.d % f.cw != 0 || a.d / f.cw > 32) return std::nullopt;
  f.c = int(a.d / f.cw);
  f.lk = 1;
  while (f.lk < f.c) f.lk *= 2;
  f.kp = 32 / f.lk;
  const int group = int(a.hq / a.hkv);
  f.gb = heads_per_block(a);
  f.nsub = group / f.gb;
  f.hpg = (f.gb + f.kp - 1) / f.kp;
  f.y = int(std::clamp<int64_t>((kTargetBlocks + a.hkv * f.nsub - 1) / (a.hkv * f.nsub), 1, 64));
  return f;
}

// Setup: the block's (token, KV head, head subgroup), the store of the
// step's K/V rows, the warp's slice [j_begin, j_end) of the visible keys
// [lo, qp], then the query chunks of its heads (f16-rounded with an f16
// cache: the one-row regime).
std::string flash_decode_prologue(const AttnShape& a, const FlashDecodeShape& f, int64_t window, int64_t chunk) {
  std::string lo = "  long long lo = 0;\n";
  if (window > 0) lo += fmt::format("  lo = max(lo, qp - {} + 1);\n", window);
  if (chunk > 0) lo += fmt::format("  lo = max(lo, (qp / {0}) * {0});\n", chunk);
  return fmt::format(R"(  constexpr long long HQ = {0}, HKV = {1}, D = {2}, PAGE = {3}, ROW = {1} * {2};
  constexpr int CW = {4}, C = {5}, LK = {6}, KP = {7}, GB = {8}, NSUB = {9}, HPG = {10}, Y = {11}, NW = {12};
  const int lane = threadIdx.x & 31, wi = threadIdx.x >> 5, kl = lane % LK, kg = lane / LK;
  const bool has_chunk = kl < C;
  const long long b = blockIdx.x;
  if (b >= TOKENS * HKV * NSUB) return;
  const long long t = b / (HKV * NSUB), kvh = (b / NSUB) % HKV, h0 = kvh * (HQ / HKV) + (b % NSUB) * GB;
  const long long qp = pos[t], sq = seq[t];
  float m[HPG], l[HPG], acc[HPG][CW];
  for (int u = 0; u < HPG; ++u) {{
    m[u] = -__int_as_float(0x7f800000), l[u] = 0.0f;
    for (int i = 0; i < CW; ++i) acc[u][i] = 0.0f;
  }}
{13}  const long long n_kv = qp + 1, n = max(0ll, n_kv - lo);
  long long per = n, used = 1;
  if (n_kv > {14}) {{
    per = max((long long){15}, (n + Y * NW - 1) / (Y * NW));
    per = (per + KP - 1) / KP * KP;
    used = (n + per - 1) / per;
  }}
  // This step's K/V rows: the loop reads key qp from them (no block waits
  // for another's store); block (y 0, subgroup 0) stores them in the pool.
  const float* k_new = k + t * ROW;
  const float* v_new = v + t * ROW;
  if (blockIdx.y == 0 && b % NSUB == 0) {{
    const long long prow = (long long)page_table[sq * s_PT_STRIDE + qp / PAGE] * PAGE + qp % PAGE;
    for (int i = threadIdx.x; i < D; i += blockDim.x) {{
      k_pool[prow * ROW + kvh * D + i] = {16};
      v_pool[prow * ROW + kvh * D + i] = {17};
    }}
  }}
  const long long slice = blockIdx.y * NW + wi;
  const long long j_begin = slice < used ? lo + slice * per : n_kv, j_end = min(n_kv, j_begin + per);
  // The query chunks of the block's heads, 16 bytes a load, only in a warp
  // with keys (a long context's idle key blocks read nothing).
  float qv[GB][CW];
  for (int h = 0; h < GB; ++h)
    for (int i4 = 0; i4 < CW; i4 += 4) {{
      uint4 w = make_uint4(0u, 0u, 0u, 0u);
      if (has_chunk && j_begin < j_end) w = vtc_load16(q + (t * HQ + h0 + h) * D + kl * CW + i4);
      const float x[4] = {{__uint_as_float(w.x), __uint_as_float(w.y), __uint_as_float(w.z), __uint_as_float(w.w)}};
      for (int u = 0; u < 4; ++u) qv[h][i4 + u] = acc16 ? vtc_h2f(vtc_f2h(x[u])) : x[u];
    }}
)",
                     a.hq, a.hkv, a.d, a.page, f.cw, f.c, f.lk, f.kp, f.gb, f.nsub, f.hpg, f.y, kDecodeWarps, lo,
                     kOneRowMaxKeys, kMinSliceKeys, a.kv_load.empty() ? "k_new[kvh * D + i]" : "vtc_f2h(k_new[kvh * D + i])",
                     a.kv_load.empty() ? "v_new[kvh * D + i]" : "vtc_f2h(v_new[kvh * D + i])");
}

// One 16-byte chunk of a K or V row into floats.
std::string unpack_chunk(const AttnShape& a, const std::string& w, const std::string& out) {
  if (a.kv_load.empty())
    return fmt::format("      {1}[0] = __uint_as_float({0}.x), {1}[1] = __uint_as_float({0}.y), {1}[2] = __uint_as_float({0}.z), "
                       "{1}[3] = __uint_as_float({0}.w);\n",
                       w, out);
  return fmt::format(R"(      {{
        const unsigned u[4] = {{{0}.x, {0}.y, {0}.z, {0}.w}};
        for (int i = 0; i < 4; ++i) {1}[2 * i] = vtc_h2f((unsigned short)(u[i] & 0xffffu)), {1}[2 * i + 1] = vtc_h2f((unsigned short)(u[i] >> 16));
      }}
)",
                     w, out);
}

// The key loop: a pass reads KP keys' K chunks (LK lanes a key), reduces
// each head's dot over the key's lanes, then walks the KP keys in order,
// each lane group updating the heads it owns with ggml's one-row step (a
// shuffle brings each head's score from the key's first lane).
std::string flash_decode_loop(const AttnShape& a, double scale, double softcap, bool alibi) {
  // Key qp comes from this step's f32 rows, as the pool will hold it.
  auto as_stored = [&](const std::string& x) { return a.kv_load.empty() ? x : "vtc_h2f(vtc_f2h(" + x + "))"; };
  const std::string score =
      with_alibi(softcap != 0.0 ? fmt::format("{} * tanhf(s[h] * {})", flit(softcap), flit(scale / softcap))
                                : fmt::format("s[h] * {}", flit(scale)),
                 alibi_term(alibi, "h0 + h", "qp", "jk"));
  return fmt::format(R"(  for (long long j = j_begin; j < j_end; j += KP) {{
    const long long jk = j + kg;
    float s[GB];
    for (int h = 0; h < GB; ++h) s[h] = 0.0f;
    if (jk < j_end && has_chunk) {{
      float kf[CW];
      if (jk == qp) {{
        for (int i = 0; i < CW; ++i) kf[i] = {3};
      }} else {{
        const long long row = (long long)page_table[sq * s_PT_STRIDE + jk / PAGE] * PAGE + jk % PAGE;
        const uint4 kw = vtc_load16(k_pool + row * ROW + kvh * D + kl * CW);
{1}      }}
      for (int h = 0; h < GB; ++h)
        for (int i = 0; i < CW; ++i) s[h] = fmaf(qv[h][i], kf[i], s[h]);
    }}
    for (int h = 0; h < GB; ++h) {{
      for (int o = LK / 2; o > 0; o >>= 1) s[h] += __shfl_xor_sync(0xffffffffu, s[h], o);
      s[h] = {0};
    }}
    for (int kk = 0; kk < KP && j + kk < j_end; ++kk) {{
      const long long jj = j + kk;
      const long long row = (long long)page_table[sq * s_PT_STRIDE + jj / PAGE] * PAGE + jj % PAGE;
      float vf[CW];
      if (has_chunk && jj == qp) {{
        for (int i = 0; i < CW; ++i) vf[i] = {4};
      }} else if (has_chunk) {{
        const uint4 vw = vtc_load16(v_pool + row * ROW + kvh * D + kl * CW);
{2}      }} else {{
        for (int i = 0; i < CW; ++i) vf[i] = 0.0f;
      }}
      for (int h = 0; h < GB; ++h) {{
        const float sc = __shfl_sync(0xffffffffu, s[h], kk * LK);
        if (h % KP != kg) continue;
        const int u = h / KP;
        float ms = 1.0f, vs = 1.0f;
        if (sc > m[u]) {{
          ms = expf(m[u] - sc);
          m[u] = sc;
          for (int i = 0; i < CW; ++i) acc[u][i] = acc16 ? vtc_h2f(vtc_f2h(acc[u][i] * ms)) : acc[u][i] * ms;
        }} else {{
          vs = expf(sc - m[u]);
        }}
        for (int i = 0; i < CW; ++i) {{
          const float x = fmaf(vf[i], vs, acc[u][i]);
          acc[u][i] = acc16 ? vtc_h2f(vtc_f2h(x)) : x;
        }}
        l[u] = l[u] * ms + vs;
      }}
    }}
  }}
)",
                     score, unpack_chunk(a, "kw", "kf"), unpack_chunk(a, "vw", "vf"), as_stored("k_new[kvh * D + kl * CW + i]"),
                     as_stored("v_new[kvh * D + kl * CW + i]"));
}

// The block's NW warp slices merged in f32 through shared memory into one
// partial (m, l, acc[D]) per head at key block blockIdx.y, for the combine.
constexpr const char* kFlashDecodeMerge = R"(  __shared__ float ws[NW][GB][D + 2];
  __shared__ float wf[NW][GB], wm[GB], wl[GB];
  for (int u = 0; u < HPG; ++u) {
    const int h = kg + KP * u;
    if (h >= GB) continue;
    if (has_chunk && l[u] > 0.0f)
      for (int i = 0; i < CW; ++i) ws[wi][h][2 + kl * CW + i] = acc[u][i];
    if (kl == 0) ws[wi][h][0] = m[u], ws[wi][h][1] = l[u];
  }
  __syncthreads();
  if (threadIdx.x < GB) {
    const int h = threadIdx.x;
    float mx = -__int_as_float(0x7f800000), ls = 0.0f;
    for (int w = 0; w < NW; ++w) if (ws[w][h][1] > 0.0f) mx = fmaxf(mx, ws[w][h][0]);
    for (int w = 0; w < NW; ++w) {
      wf[w][h] = ws[w][h][1] > 0.0f ? expf(ws[w][h][0] - mx) : 0.0f;
      ls += ws[w][h][1] * wf[w][h];
    }
    wm[h] = mx, wl[h] = ls;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < GB * D; e += blockDim.x) {
    const int h = e / D, d = e % D;
    float* part = scratch + ((t * HQ + h0 + h) * Y + blockIdx.y) * (D + 2);
    if (d == 0) part[0] = wm[h], part[1] = wl[h];
    if (wl[h] <= 0.0f) continue;
    float x = 0.0f;
    for (int w = 0; w < NW; ++w) if (wf[w][h] > 0.0f) x += ws[w][h][2 + d] * wf[w][h];
    part[2 + d] = x;
  }
)";

// The split-K combine, done by the last of the Y key blocks of a (token,
// KV head, subgroup) to finish (a counter per block column, left at zero
// for the next step): it merges the Y partials of its heads exactly as
// attn_combine does (the maximum over the partials with keys, and the
// sink; then l and acc in partial order) and writes the output. The
// partials are read through volatile loads after the fence: other SMs
// wrote them in this launch.
std::string flash_decode_combine(bool sinks) {
  return fmt::format(R"(  __shared__ int s_last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {{
    s_last = atomicAdd(&counters[b], 1) == Y - 1;
    if (s_last) counters[b] = 0;
  }}
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  for (int e = threadIdx.x; e < GB * D; e += blockDim.x) {{
    const int h = e / D, d = e % D;
    const volatile float* part = scratch + (t * HQ + h0 + h) * Y * (D + 2);
    float mx = -__int_as_float(0x7f800000);
    for (int y = 0; y < Y; ++y) if (part[y * (D + 2) + 1] > 0.0f) mx = fmaxf(mx, part[y * (D + 2)]);
{0}    float l = {1}, acc = 0.0f;
    for (int y = 0; y < Y; ++y) {{
      const volatile float* py = part + y * (D + 2);
      if (py[1] <= 0.0f) continue;
      const float f = expf(py[0] - mx);
      l += py[1] * f;
      acc += py[2 + d] * f;
    }}
    out[(t * HQ + h0 + h) * D + d] = l > 0.0f ? acc / l : 0.0f;
  }}
)",
                     sinks ? "    const float sk = sinks[h0 + h];\n    mx = fmaxf(mx, sk);\n" : "",
                     sinks ? "expf(sk - mx)" : "0.0f");
}

// --- Prefill on tensor cores ---
//
// attn_prefill_mma: a block per (tile of 16 step tokens, KV head, head
// subgroup), a warp per query head of the group, f16 cache only. For each
// sequence among the tile's rows in the tiled regime (64+ tokens in the
// step), key tiles of 16 are staged in shared memory (cp.async through
// the page table, rows padded by 16 bytes: conflict-free ldmatrix), then
// per warp: S = Q K^T by m16n8k16 (Q's f16 fragments held in registers,
// K's by ldmatrix), scale/softcap and the masks per element (the row's
// sequence, causal or the sequence end, window, chunk), the online softmax
// per row (max over the 4 lanes of a row; each lane keeps a partial sum),
// P rounded to f16 in place as the A fragment of O += P V (V's by
// ldmatrix.trans). Rows in the one-row regime (fewer than 64 tokens of
// their sequence) run ggml's one-row loop, a row at a time per warp, as
// attn_prefill does, so short prompts keep the CPU's roundings.
// Rows of other sequences in a tile are masked, so a tile that mixes
// sequences walks each one's keys in turn.
std::optional<int> prefill_mma_heads(const AttnShape& a, int64_t width) {
  if (width || a.kv_load.empty() || a.d % 16 != 0 || a.d > 256) return std::nullopt;
  return heads_per_block(a);
}

std::string prefill_mma_prologue(const AttnShape& a, int gb, bool causal, int64_t window, int64_t chunk) {
  std::string lo = "0ll";
  if (window > 0) lo = fmt::format("max({}, s_pos[r] - {} + 1)", lo, window);
  if (chunk > 0) lo = fmt::format("max({}, (s_pos[r] / {}) * {})", lo, chunk, chunk);
  return fmt::format(R"(  constexpr long long HQ = {0}, HKV = {1}, D = {2}, PAGE = {3}, ROW = {1} * {2};
  constexpr int G = {0} / {1}, GB = {4}, NSUB = G / GB, NW = GB, DT = D / 16, NT = D / 8, KC = D / 8, PAD = D + 8;
  constexpr int DL = ({2} + 31) / 32;
  const int lane = threadIdx.x & 31, wi = threadIdx.x >> 5, g = lane >> 2, tq = lane & 3;
  const long long b = blockIdx.x, t0 = (long long)blockIdx.y * 16;
  const long long kvh = (b / NSUB) % HKV, h = kvh * G + (b % NSUB) * GB + wi;
  __shared__ int s_seq[16];
  __shared__ long long s_pos[16], s_cnt[16], s_end[16];
  alignas(16) __shared__ unsigned short ks[16][PAD];
  alignas(16) __shared__ unsigned short vs[16][PAD];
  if (threadIdx.x < 16) {{
    const long long t = t0 + threadIdx.x;
    s_seq[threadIdx.x] = t < TOKENS ? seq[t] : -1;
    s_pos[threadIdx.x] = t < TOKENS ? pos[t] : 0;
  }}
  __syncthreads();
  for (int r = wi; r < 16; r += NW) {{
    const int sr = s_seq[r];
    long long c = 0, e = 0;
    if (sr >= 0)
      for (long long u = lane; u < TOKENS; u += 32)
        if (seq[u] == sr) ++c, e = max(e, (long long)pos[u] + 1);
    for (int o = 16; o > 0; o >>= 1) c += __shfl_xor_sync(0xffffffffu, c, o), e = max(e, __shfl_xor_sync(0xffffffffu, e, o));
    if (lane == 0) s_cnt[r] = c, s_end[r] = e;
  }}
  __syncthreads();
  auto tiled = [&](int r) {{ return s_seq[r] >= 0 && s_cnt[r] >= {5}; }};
  auto row_hi = [&](int r) {{ return {6}; }};
  auto row_lo = [&](int r) {{ return (long long){7}; }};
)",
                     a.hq, a.hkv, a.d, a.page, gb, kTiledMinTokens, causal ? "s_pos[r] + 1" : "s_end[r]", lo);
}

// Q's fragments (f16, rows g and g + 8 of the tile; zero for rows not in
// the tiled regime), the accumulators, then the walk over each sequence.
std::string prefill_mma_walk(double scale, double softcap, bool alibi) {
  const std::string score =
      with_alibi(softcap != 0.0 ? fmt::format("{} * tanhf(x * {})", flit(softcap), flit(scale / softcap))
                                : fmt::format("x * {}", flit(scale)),
                 alibi_term(alibi, "h", "s_pos[g + 8 * rr]", "j"));
  return fmt::format(R"(  unsigned qa[DT][4];
  for (int k = 0; k < DT; ++k)
    for (int i = 0; i < 4; ++i) {{
      const int r = g + 8 * (i & 1), col = 16 * k + 2 * tq + 8 * (i >> 1);
      const float* qr = q + ((t0 + r) * HQ + h) * D + col;
      const bool ok = tiled(r);
      qa[k][i] = (unsigned)vtc_f2h(ok ? qr[0] : 0.0f) | ((unsigned)vtc_f2h(ok ? qr[1] : 0.0f) << 16);
    }}
  float o[NT][4], mr[2] = {{-__int_as_float(0x7f800000), -__int_as_float(0x7f800000)}}, lr[2] = {{0.0f, 0.0f}};
  for (int n = 0; n < NT; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  for (int r0 = 0; r0 < 16; ++r0) {{
    if (!tiled(r0)) continue;
    const int sq = s_seq[r0];
    bool seen = false;
    for (int r = 0; r < r0; ++r) seen |= tiled(r) && s_seq[r] == sq;
    if (seen) continue;
    long long hi = 0, lo = 0x7fffffffffffffffLL;
    for (int r = 0; r < 16; ++r)
      if (tiled(r) && s_seq[r] == sq) hi = max(hi, row_hi(r)), lo = min(lo, row_lo(r));
    bool mine[2];
    long long rhi[2], rlo[2];
    for (int rr = 0; rr < 2; ++rr) {{
      const int r = g + 8 * rr;
      mine[rr] = tiled(r) && s_seq[r] == sq;
      rhi[rr] = mine[rr] ? row_hi(r) : 0;
      rlo[rr] = mine[rr] ? row_lo(r) : 0;
    }}
    for (long long kt = lo / 16 * 16; kt < hi; kt += 16) {{
      for (int c = threadIdx.x; c < 16 * KC; c += blockDim.x) {{
        const int kr = c / KC, kc = c % KC;
        const long long j = kt + kr;
        const bool ok = j < hi;
        const long long row = ok ? (long long)page_table[sq * s_PT_STRIDE + j / PAGE] * PAGE + j % PAGE : 0;
        vtc_cp_async16(&ks[kr][8 * kc], k_pool + row * ROW + kvh * D + 8 * kc, ok);
        vtc_cp_async16(&vs[kr][8 * kc], v_pool + row * ROW + kvh * D + 8 * kc, ok);
      }}
      vtc_cp_commit();
      vtc_cp_wait<0>();
      __syncthreads();
      float sc[2][4] = {{{{0.0f, 0.0f, 0.0f, 0.0f}}, {{0.0f, 0.0f, 0.0f, 0.0f}}}};
      for (int k = 0; k < DT; ++k) {{
        unsigned kb4[4];
        vtc_ldmatrix_x4(kb4, &ks[(lane & 7) + 8 * (lane >> 4)][16 * k + 8 * ((lane >> 3) & 1)]);
        vtc_mma_f16(sc[0], qa[k], kb4);
        vtc_mma_f16(sc[1], qa[k], kb4 + 2);
      }}
      float rmax[2] = {{-__int_as_float(0x7f800000), -__int_as_float(0x7f800000)}};
      for (int nt = 0; nt < 2; ++nt)
        for (int i = 0; i < 4; ++i) {{
          const int rr = i >> 1;
          const long long j = kt + 8 * nt + 2 * tq + (i & 1);
          const float x = sc[nt][i];
          sc[nt][i] = mine[rr] && j >= rlo[rr] && j < rhi[rr] ? {0} : -__int_as_float(0x7f800000);
          rmax[rr] = fmaxf(rmax[rr], sc[nt][i]);
        }}
      float corr[2];
      for (int rr = 0; rr < 2; ++rr) {{
        rmax[rr] = fmaxf(rmax[rr], __shfl_xor_sync(0xffffffffu, rmax[rr], 1));
        rmax[rr] = fmaxf(rmax[rr], __shfl_xor_sync(0xffffffffu, rmax[rr], 2));
        const float mn = fmaxf(mr[rr], rmax[rr]);
        corr[rr] = mn == -__int_as_float(0x7f800000) ? 1.0f : expf(mr[rr] - mn);
        mr[rr] = mn;
        lr[rr] *= corr[rr];
      }}
      unsigned pa[4];
      for (int nt = 0; nt < 2; ++nt)
        for (int rr = 0; rr < 2; ++rr) {{
          float p[2];
          for (int u = 0; u < 2; ++u) {{
            const float x = sc[nt][2 * rr + u];
            p[u] = x == -__int_as_float(0x7f800000) ? 0.0f : expf(x - mr[rr]);
            lr[rr] += p[u];
          }}
          pa[2 * nt + rr] = (unsigned)vtc_f2h(p[0]) | ((unsigned)vtc_f2h(p[1]) << 16);
        }}
      for (int n = 0; n < NT; ++n) o[n][0] *= corr[0], o[n][1] *= corr[0], o[n][2] *= corr[1], o[n][3] *= corr[1];
      for (int n2 = 0; n2 < NT / 2; ++n2) {{
        unsigned vb4[4];
        vtc_ldmatrix_x4_trans(vb4, &vs[(lane & 7) + 8 * ((lane >> 3) & 1)][16 * n2 + 8 * (lane >> 4)]);
        vtc_mma_f16(o[2 * n2], pa, vb4);
        vtc_mma_f16(o[2 * n2 + 1], pa, vb4 + 2);
      }}
      __syncthreads();
    }}
  }}
  for (int rr = 0; rr < 2; ++rr) {{
    lr[rr] += __shfl_xor_sync(0xffffffffu, lr[rr], 1);
    lr[rr] += __shfl_xor_sync(0xffffffffu, lr[rr], 2);
  }}
)",
                     score);
}

// The tiled rows' sinks and stores, then the one-row rows.
std::string prefill_mma_finish(const AttnShape& a, double scale, double softcap, int64_t window, int64_t chunk,
                               bool causal, bool sinks, bool alibi) {
  std::string s;
  if (sinks)
    s += R"(  for (int rr = 0; rr < 2; ++rr) {
    const float sk = sinks[h], mn = fmaxf(mr[rr], sk), cr = expf(mr[rr] - mn);
    lr[rr] = lr[rr] * cr + expf(sk - mn);
    for (int n = 0; n < NT; ++n) o[n][2 * rr] *= cr, o[n][2 * rr + 1] *= cr;
  }
)";
  s += R"(  for (int rr = 0; rr < 2; ++rr) {
    const int r = g + 8 * rr;
    if (!tiled(r)) continue;
    float* orow = out + ((t0 + r) * HQ + h) * D + 2 * tq;
    for (int n = 0; n < NT; ++n) {
      orow[8 * n] = lr[rr] > 0.0f ? o[n][2 * rr] / lr[rr] : 0.0f;
      orow[8 * n + 1] = lr[rr] > 0.0f ? o[n][2 * rr + 1] / lr[rr] : 0.0f;
    }
  }
  for (int r = 0; r < 16; ++r) {
    if (s_seq[r] < 0 || tiled(r)) continue;
    const long long t = t0 + r, qp = s_pos[r], sq = s_seq[r];
    const bool acc16 = true;
    float qv[DL], acc[DL], m = -__int_as_float(0x7f800000), l = 0.0f;
    for (int i = 0; i < DL; ++i) {
      qv[i] = lane + 32 * i < D ? vtc_h2f(vtc_f2h(q[(t * HQ + h) * D + lane + 32 * i])) : 0.0f;
      acc[i] = 0.0f;
    }
)";
  s += fmt::format("    const long long j_begin = 0, j_end = {};\n", causal ? "qp + 1" : "s_end[r]");
  s += flash_loop(a, scale, softcap, window, chunk, false, alibi);
  if (sinks) s += kSinkFold;
  s += "    for (int i = 0; i < DL; ++i)\n      if (lane + 32 * i < D) out[(t * HQ + h) * D + lane + 32 * i] = l > 0.0f ? acc[i] / l : 0.0f;\n  }\n";
  return s;
}

}  // namespace

Kernels emit_attention(const ir::Module& m, const ir::Op& op, const std::string& what) {
  const AttnShape a = attn_shape(m, op);
  const ir::AttentionAttrs attrs = ir::AttentionAttrs::of(op);
  const double scale = attrs.scale, softcap = attrs.softcap;
  const int64_t window = attrs.window, chunk = attrs.chunk, width = selection_width(op);
  // A T step's decode form (kernel.h, RowsGuard) takes decode's kernels,
  // but an encoder's whole sequences keep the prefill ones.
  const bool t_rows = has_symbol(a.tokens, "T");
  const bool prefill = tiled_rows(a.tokens) || (t_rows && !attrs.causal);
  const bool sinks = has_sinks(op);
  const double max_bias = attrs.alibi_max_bias;
  const bool alibi = max_bias > 0.0;
  // VTC_CUDA_ATTN=scalar keeps the warp-per-(token, head) kernels
  // (before/after figures, or to rule the new ones out on a GPU).
  const char* attn_env = std::getenv("VTC_CUDA_ATTN");
  const bool scalar_forced = attn_env && std::string(attn_env) == "scalar";
  const bool fast = !scalar_forced && !a.generic;  // an f16 cache: tensor cores and flash decoding
  const auto mma_heads = prefill && fast ? prefill_mma_heads(a, width) : std::nullopt;
  const auto flash = prefill || !fast ? std::nullopt : flash_decode_shape(a, width);
  // Flash decoding stores this step's K/V rows itself (one launch fewer).
  // In a T step's decode form a sequence's rows read each other's keys, so
  // kv_append stores them all first (flash decoding then stores the same
  // bytes again: a block may read a row while its own block rewrites it,
  // and reads the same value either way).
  Kernels out;
  if (!flash || t_rows) out.push_back(a.generic ? kv_append_typed(op, a, what) : kv_append(op, a, what));
  KernelBuilder kb(prefill ? (mma_heads ? "attn_prefill_mma" : "attn_prefill") : "attn_decode", what);
  kb.in(op.operands[0], "q");
  if (flash) kb.in(op.operands[1], "k"), kb.in(op.operands[2], "v");
  kb.in(op.operands[3], "pos");
  kb.in(op.operands[4], "seq");
  if (a.generic) {
    kb.state_pool(a.k.state, a.k.half, "k_pool", "const " + a.k.ctype + "*");
    kb.state_pool(a.v.state, a.v.half, "v_pool", "const " + a.v.ctype + "*");
    if (a.k.type == GgmlType::IQ4_NL || a.v.type == GgmlType::IQ4_NL) kb.need("iq4_values");
  } else {
    const std::string pool_type = (flash ? "" : "const ") + a.kv_ctype + "*";
    kb.state_pool(a.state, 0, "k_pool", pool_type);
    kb.state_pool(a.state, 1, "v_pool", pool_type);
  }
  kb.page_table();
  if (width) kb.in(op.operands[5], "sel");
  if (sinks) kb.in(sinks_operand(op, a), "sinks");
  // Keys (or selection entries) to walk: [0, n_keys). Without the causal
  // mask (an encoder) a query reads every key of its sequence in the step:
  // up to the largest position of that sequence's tokens.
  const bool causal = attrs.causal;
  if (!causal && (!prefill || width || window > 0 || chunk > 0))
    unsupported(op, "non-causal attention runs only in a step of whole sequences (T rows) with no window, chunk or selection");
  const char* n_keys = width ? "SW" : causal ? "qp + 1" : "seq_end";
  std::string body = fmt::format("  const long long TOKENS = {};\n", kb.expr(a.tokens));
  if (mma_heads) {
    const int gb = *mma_heads;
    kb.out(op.results[0], "out");
    kb.need("mma");
    kb.body(body + prefill_mma_prologue(a, gb, causal, window, chunk) + alibi_table(a.hq, max_bias) +
            prefill_mma_walk(scale, softcap, alibi) +
            prefill_mma_finish(a, scale, softcap, window, chunk, causal, sinks, alibi));
    kb.launch(ir::Dim(a.hq / gb * 32 * gb), gb * 32, a.tokens, 16);
    Kernel k = kb.finish();
    // The products run as mma (counted); the softmax's few operations per
    // score are the FP32 work.
    k.fp32_flops = a.tokens * (a.hq * 8) * ir::Dim::symbol("KEYS");
    out.push_back(std::move(k));
    return out;
  }
  // The CPU's V accumulator: f16 in its one-row loop for an f16 (or f32,
  // read as f16) V; a prefill of half-math halves picks its regime below.
  const bool v16 = a.v.type == GgmlType::F16 || a.v.type == GgmlType::F32;
  if (!prefill || !a.half_math) body += fmt::format("  const bool acc16 = {};\n", v16 ? "true" : "false");
  if (flash) {
    kb.out(op.results[0], "out");
    kb.scratch(a.tokens * (a.hq * flash->y * (a.d + 2) * 4));
    kb.counters(a.tokens * (a.hkv * flash->nsub));
    kb.need("copy16");
    kb.body(body + flash_decode_prologue(a, *flash, window, chunk) + alibi_table(a.hq, max_bias) +
            flash_decode_loop(a, scale, softcap, alibi) + kFlashDecodeMerge + flash_decode_combine(sinks));
    kb.launch(a.tokens * (a.hkv * flash->nsub * kDecodeWarps * 32), kDecodeWarps * 32, ir::Dim(flash->y), 1);
    out.push_back(kb.finish());
    return out;
  }
  body += flash_prologue(a);
  body += alibi_table(a.hq, max_bias);
  if (width) body += selection_prologue(width);
  if (!causal) body += kSequenceEnd;
  if (prefill && a.half_math) body += prefill_regime(a);
  body += a.half_math ? kRoundQuery : kv_query_prologue(a.k);
  if (prefill) {
    kb.out(op.results[0], "out");
    body += fmt::format("  const long long j_begin = 0, j_end = {};\n", n_keys);
    body += flash_loop(a, scale, softcap, window, chunk, width != 0, alibi);
    if (sinks) body += kSinkFold;
    body += "  for (int i = 0; i < DL; ++i)\n    if (lane + 32 * i < D) out[(t * HQ + h) * D + lane + 32 * i] = l > 0.0f ? acc[i] / l : 0.0f;\n";
    kb.body(body);
    kb.launch(a.tokens * (a.hq * 32), 128);
    out.push_back(kb.finish());
    return out;
  }
  // Decode with a selection, or rows the flash kernel does not cover: a warp
  // per (token, head, slice) of kSplits.
  kb.scratch(a.tokens * (a.hq * kSplits * (a.d + 2) * 4));
  body += fmt::format(R"(  constexpr long long SPLITS = {0};
  const long long n_kv = {1}, splits = qp + 1 > {2} ? SPLITS : 1, per = (n_kv + splits - 1) / splits;
  const long long j_begin = min(n_kv, blockIdx.y * per), j_end = min(n_kv, j_begin + per);
)",
                      kSplits, n_keys, kOneRowMaxKeys);
  body += flash_loop(a, scale, softcap, window, chunk, width != 0, alibi);
  body += R"(  float* part = scratch + ((t * HQ + h) * SPLITS + blockIdx.y) * (D + 2);
  if (lane == 0) { part[0] = m; part[1] = l; }
  for (int i = 0; i < DL; ++i) if (lane + 32 * i < D) part[2 + lane + 32 * i] = acc[i];
)";
  kb.body(body);
  kb.launch(a.tokens * (a.hq * 32), 128, ir::Dim(kSplits), 1);
  out.push_back(kb.finish());
  out.push_back(combine(op, a, kSplits, what));
  return out;
}

// attn_temp: one thread per token, the CPU's formula and roundings (the sum
// and division in f32, the log and affine map in double, with explicit
// roundings so no fma contracts them).
Kernels emit_attn_temp(const ir::Op& op, const std::string& what) {
  KernelBuilder kb(op.mnemonic(), what);
  const std::string pos = kb.in(op.operands[0], "pos"), y = kb.out(op.results[0], "y");
  const ir::Dim n = numel(op.results[0].type());
  const ir::AttnTempAttrs attrs = ir::AttnTempAttrs::of(op);
  const float floor_scale = float(attrs.floor_scale), offset = float(attrs.offset);
  const double scale = double(float(attrs.scale));
  kb.body(fmt::format(R"(  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < {0}; i += (long long)gridDim.x * blockDim.x) {{
    const float q = floorf(__fdiv_rn(__fadd_rn((float){1}[i], {3}), {4}));
    {2}[i] = (float)__dadd_rn(__dmul_rn(log(__dadd_rn((double)q, 1.0)), {5}), 1.0);
  }}
)",
                      kb.expr(n), pos, y, flit(offset), flit(floor_scale), fmt::format("{:a}", scale)));
  kb.launch(n, 256);
  return {kb.finish()};
}

// hadamard: one warp per block of N values; lane l holds values l, l + 32,
// ... (N / 32 of them, or one for N < 32). Each value is scaled first, then
// the butterflies run in the CPU's order of spans: spans under 32 pair
// lanes (__shfl_xor_sync; the lane holding the pair's lower value keeps
// u + v, the other u - v), longer spans pair registers of one lane. The
// same additions on the same values as hadamard_rows, so the same bits.
Kernels emit_hadamard(const ir::Op& op, const std::string& what) {
  const int64_t n = ir::HadamardAttrs::of(op).block;
  if (n > 1024) unsupported(op, fmt::format("block {} is over 1024", n));
  KernelBuilder kb(op.mnemonic(), what);
  const std::string x = kb.in(op.operands[0], "x"), y = kb.out(op.results[0], "y");
  const ir::TensorType& xt = op.operands[0].type();
  const auto last = xt.shape.back().constant();
  if (!last) unsupported(op, "the rotated dim must be constant");
  const ir::Dim blocks = dims_product(xt.shape, 0, xt.rank() - 1) * ir::Dim(*last / n);
  const int64_t lanes = std::min<int64_t>(n, 32), per_lane = n / lanes;
  kb.body(fmt::format(R"(  constexpr int N = {0}, LANES = {1}, R = {2};
  const int lane = threadIdx.x & 31;
  const long long b = blockIdx.x * (long long)(blockDim.x >> 5) + (threadIdx.x >> 5);
  if (b >= {3}) return;
  float r[R];
#pragma unroll
  for (int i = 0; i < R; ++i) r[i] = lane < LANES ? __fmul_rn({4}[b * N + lane + LANES * i], {5}) : 0.0f;
  for (int len = 1; len < LANES; len <<= 1) {{
#pragma unroll
    for (int i = 0; i < R; ++i) {{
      const float other = __shfl_xor_sync(0xffffffffu, r[i], len);
      r[i] = (lane & len) ? __fsub_rn(other, r[i]) : __fadd_rn(r[i], other);
    }}
  }}
#pragma unroll
  for (int span = 1; span < R; span <<= 1) {{
#pragma unroll
    for (int i = 0; i < R; ++i) {{
      if (i & span) continue;
      const float u = r[i], v = r[i + span];
      r[i] = __fadd_rn(u, v);
      r[i + span] = __fsub_rn(u, v);
    }}
  }}
  if (lane < LANES) {{
#pragma unroll
    for (int i = 0; i < R; ++i) {6}[b * N + lane + LANES * i] = r[i];
  }}
)",
                      n, lanes, per_lane, kb.expr(blocks), x, flit(1.0f / std::sqrt(float(n))), y));
  kb.launch(blocks * 32, 128);
  return {kb.finish()};
}

}  // namespace vtc::cuda
