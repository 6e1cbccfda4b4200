// indexer_select: the QSA lightning indexer of qwen4exp (docs/ir.md,
// "### indexer_select"). W = top_k + r - 1 positions per query token, r = ratio.
//
// Side cache (runtime/state): a paged state [1, P, page, D] with one half, one
// raw key row per position; position p of sequence s lives in page
// page_table[s * PT_STRIDE + p / page] at row p % page, as in attention.
//
// Three kernels, in launch order (one stream, so all stores land before any
// read; the same order attention uses for its K/V append):
//  1. idx_append: one thread per (token, element) stores k[t] at pos[t].
//  2. idx_score: one warp per (token t, block b), b < n_full = (pos[t]+1)/r
//     (other warps exit). Lane l holds elements l, l+32, ... of the block:
//       x   = (sum of the r cached rows in position order, f32) * (1.0f/r)
//       x   = (x * (1/sqrtf(mean(x^2) + eps))) * k_norm   (squares summed
//             in double, as the rms_norm emitter)
//       key = rope(x) at position b*r (the rope emitter's angle and rotation
//             math; multi/imulti rotate like neox, all components b*r)
//     The roped row goes through a per-warp shared buffer (a pair's two
//     elements may sit in different lanes). score = sum over heads in order of
//     relu(q[t,h] . key) (warp sums), stored to scratch scores[t][b].
//  3. idx_select: one thread per token replays libstdc++ 12's
//     std::partial_sort heap selection (bits/stl_heap.h) over the candidates
//     c in [0, L), L = max(W, p+1), value(c) = score[c/r] when c < n_full*r,
//     +inf for the unfinished tail up to p, -inf after p; comp(a, b) =
//     value(a) > value(b):
//       idx[i] = i; make_heap(idx, idx + W);
//       for i in [W, L): if comp(i, idx[0]) pop_heap(idx, idx + W, &idx[i])
//     Only idx[0, W) is stored (scratch heap[t][W]): idx[i >= W] is read once,
//     as i, before pop_heap overwrites it, so it stays virtual. The selected
//     set (which is all the op defines) is then sorted ascending, entries at
//     -inf dropped and the row padded with -1.
// Scratch: scores [T][PT_STRIDE * ceil(page/r)] f32 (PT_STRIDE * page bounds
// every position of the step, so that many blocks bound n_full), then the
// heaps [T][W] i32. The selection is sequential per query (correctness first;
// O(L log W) per token).
#include <fmt/format.h>

#include <cmath>

#include "codegen/cuda/emit.h"
#include "support/rope_yarn.h"

namespace vtc::cuda {
namespace {

constexpr int kScoreBlock = 128;  // 4 warps, one shared key row each

struct IdxShape {
  int64_t heads, d, page, ratio, w, nbp;  // nbp: blocks per page, rounded up
  ir::Dim tokens;
  ir::ElemType elem;  // of the side cache
  std::string state;
};

IdxShape idx_shape(const ir::Module& m, const ir::Op& op) {
  const ir::TensorType& qt = op.operands[0].type();
  auto heads = qt.shape[1].constant(), d = qt.shape[2].constant();
  if (!heads || !d || *heads <= 0) unsupported(op, "the head count and head dim must be constant");
  if (*d <= 0 || *d > 512) unsupported(op, fmt::format("head dim {} must be in [1, 512]", *d));
  const std::string state = ir::IndexerSelectAttrs::of(op).state;
  const ir::StateDecl* decl = m.find_state(state);
  if (!decl || decl->kind != ir::StateKind::Paged || decl->type.rank() != 4)
    unsupported(op, "state @" + state + " must be a paged [1, P, page, D] state");
  auto page = decl->type.shape[2].constant();
  if (!page || *page <= 0) unsupported(op, "the side cache page size must be constant");
  const ir::ElemType e = decl->type.elem;
  if (e.kind() != ir::ElemType::F16 && e.kind() != ir::ElemType::F32 && e.kind() != ir::ElemType::BF16)
    unsupported(op, "the side cache must be f16, bf16 or f32");
  const ir::IndexerSelectAttrs attrs = ir::IndexerSelectAttrs::of(op);
  const int64_t ratio = attrs.ratio, w = attrs.top_k + ratio - 1;
  return {*heads, *d, *page, ratio, w, (*page + ratio - 1) / ratio, qt.shape[0], e, state};
}

// Blocks per query in the scores scratch: PT_STRIDE * nbp.
ir::Dim score_blocks(const IdxShape& s) { return ir::Dim::symbol("PT_STRIDE") * s.nbp; }
ir::Dim scratch_bytes(const IdxShape& s) { return s.tokens * score_blocks(s) * 4 + s.tokens * (s.w * 4); }

Kernel idx_append(const ir::Op& op, const IdxShape& s, const std::string& what) {
  KernelBuilder kb("idx_append", what + " [side cache append]");
  const std::string k = kb.in(op.operands[1], "k"), pos = kb.in(op.operands[3], "pos");
  const std::string seq = kb.in(op.operands[4], "seq");
  const std::string pool = kb.state_pool(s.state, 0, "pool", c_type(s.elem) + "*");
  const std::string pt = kb.page_table();
  kb.body(fmt::format(R"(  constexpr long long D = {0}, PAGE = {1};
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < {2} * D; e += (long long)gridDim.x * blockDim.x) {{
    const long long t = e / D, i = e % D;
    const long long p = {3}[t];
    const long long row = (long long){4}[(long long){5}[t] * s_PT_STRIDE + p / PAGE] * PAGE + p % PAGE;
    {6}
  }}
)",
                      s.d, s.page, kb.expr(s.tokens), pos, pt, seq,
                      store_from_float(s.elem, pool, "row * D + i", k + "[e]")));
  kb.launch(s.tokens * s.d, 256);
  return kb.finish();
}

// Score kernel, part 1: the block's mean row, rms-normed and weighted, into
// the warp's shared row kv[].
std::string pooled_key(const ir::Op& op, const IdxShape& s) {
  return fmt::format(R"(  float x[DL];
  for (int i = 0; i < DL; ++i) x[i] = 0.0f;
  for (long long j = blk * R; j < (blk + 1) * R; ++j) {{
    const long long row = (long long)page_table[sq * s_PT_STRIDE + j / PAGE] * PAGE + j % PAGE;
    for (int i = 0; i < DL; ++i) if (lane + 32 * i < D) x[i] = __fadd_rn(x[i], {0});
  }}
  double ss = 0.0;
  for (int i = 0; i < DL; ++i)
    if (lane + 32 * i < D) {{ x[i] = __fmul_rn(x[i], {1}); ss += (double)x[i] * (double)x[i]; }}
  ss = vtc_warp_sum_d(ss);
  const float mean = (float)(ss / (double)D);
  const float rs = 1.0f / sqrtf(mean + {2});
  for (int i = 0; i < DL; ++i)
    if (lane + 32 * i < D) kv[lane + 32 * i] = __fmul_rn(__fmul_rn(x[i], rs), k_norm[lane + 32 * i]);
  __syncwarp();
)",
                     load_as_float(s.elem, "pool", "row * D + lane + 32 * i"), flit(1.0 / double(s.ratio)),
                     flit(ir::IndexerSelectAttrs::of(op).eps));
}

// Score kernel, part 2: rope of kv[] at position blk * R, in place (each
// pair belongs to one lane). The angle and rotation are emit_rope.cpp's
// without YaRN or frequency factors (its attn_factor of 1 included).
std::string rope_key(const ir::Op& op) {
  const ir::IndexerSelectAttrs attrs = ir::IndexerSelectAttrs::of(op);
  const bool neox = attrs.mode != ir::RopeMode::Normal;
  const int64_t n_rot = attrs.n_rot, pairs = n_rot / 2;
  const float base = float(attrs.base), freq_scale = float(attrs.freq_scale);
  const float theta_scale = rope_theta_scale(base, n_rot);
  const std::string rotate = rope_rotation(neox);
  return fmt::format(R"(  for (long long i = lane; i < {0}; i += 32) {{
    float theta = (float)(blk * R);
    for (long long j = 0; j < i; ++j) theta *= {1};
    const float extrapolated = theta / 1.0f;
    float th = {2} * extrapolated;
    const float c = cosf(th) * {3}, s = sinf(th) * {3};
    const long long a = {4}, b = a + {5};
    const float x0 = kv[a], x1 = kv[b];
    float y0, y1;
{6}    kv[a] = y0; kv[b] = y1;
  }}
  __syncwarp();
)",
                     pairs, flit(theta_scale), flit(freq_scale), flit(1.0), neox ? "i" : "2 * i", neox ? pairs : 1,
                     rotate);
}

Kernel idx_score(const ir::Op& op, const IdxShape& s, const std::string& what) {
  KernelBuilder kb("idx_score", what + " [block scores]");
  kb.in(op.operands[0], "q");
  kb.in(op.operands[2], "k_norm");
  kb.in(op.operands[3], "pos");
  kb.in(op.operands[4], "seq");
  kb.state_pool(s.state, 0, "pool", "const " + c_type(s.elem) + "*");
  kb.page_table();
  kb.scratch(scratch_bytes(s));
  std::string body = fmt::format(R"(  constexpr long long H = {0}, D = {1}, PAGE = {2}, R = {3}, NBP = {4};
  constexpr int DL = (int)((D + 31) / 32);
  __shared__ float kbuf[{5}][D];
  const long long TOKENS = {6}, NB = s_PT_STRIDE * NBP;
  const int lane = threadIdx.x & 31;
  const long long w = blockIdx.x * (long long)(blockDim.x >> 5) + (threadIdx.x >> 5);
  if (w >= TOKENS * NB) return;
  const long long t = w / NB, blk = w % NB;
  const long long p = pos[t], sq = seq[t];
  if (blk >= (p + 1) / R) return;
  float* kv = kbuf[threadIdx.x >> 5];
)",
                                 s.heads, s.d, s.page, s.ratio, s.nbp, kScoreBlock / 32, kb.expr(s.tokens));
  body += pooled_key(op, s) + rope_key(op);
  body += R"(  float score = 0.0f;
  for (long long h = 0; h < H; ++h) {
    const float* qh = q + (t * H + h) * D;
    float dot = 0.0f;
    for (int i = 0; i < DL; ++i) if (lane + 32 * i < D) dot = __fmaf_rn(qh[lane + 32 * i], kv[lane + 32 * i], dot);
    dot = vtc_warp_sum(dot);
    score = __fadd_rn(score, dot > 0.0f ? dot : 0.0f);
  }
  if (lane == 0) scratch[t * NB + blk] = score;
)";
  kb.body(body);
  kb.launch(s.tokens * score_blocks(s) * 32, kScoreBlock);
  return kb.finish();
}

// libstdc++ 12's __make_heap / __adjust_heap / __push_heap on heap[0, W)
// with comp(a, b) = value(a) > value(b), then the __heap_select loop.
constexpr const char* kHeapSelect = R"(  auto adjust = [&](long long hole, long long v) {
    const long long top = hole;
    const float vv = value(v);
    long long child = hole;
    while (child < (W - 1) / 2) {
      child = 2 * (child + 1);
      if (value(heap[child]) > value(heap[child - 1])) --child;
      heap[hole] = heap[child];
      hole = child;
    }
    if ((W & 1) == 0 && child == (W - 2) / 2) {
      child = 2 * (child + 1);
      heap[hole] = heap[child - 1];
      hole = child - 1;
    }
    long long parent = (hole - 1) / 2;
    while (hole > top && value(heap[parent]) > vv) {
      heap[hole] = heap[parent];
      hole = parent;
      parent = (hole - 1) / 2;
    }
    heap[hole] = (int)v;
  };
  for (long long i = 0; i < W; ++i) heap[i] = (int)i;
  if (W >= 2)
    for (long long parent = (W - 2) / 2;; --parent) {
      adjust(parent, heap[parent]);
      if (parent == 0) break;
    }
  for (long long i = W; i < L; ++i)
    if (value(i) > value(heap[0])) adjust(0, i);
)";

// The selected set ascending (a plain heapsort), -inf entries dropped,
// padded with -1.
constexpr const char* kWriteRow = R"(  auto sift = [&](long long i, long long n) {
    const int v = heap[i];
    while (2 * i + 1 < n) {
      long long c = 2 * i + 1;
      if (c + 1 < n && heap[c + 1] > heap[c]) ++c;
      if (heap[c] <= v) break;
      heap[i] = heap[c];
      i = c;
    }
    heap[i] = v;
  };
  for (long long i = W / 2 - 1; i >= 0; --i) sift(i, W);
  for (long long n = W - 1; n > 0; --n) {
    const int top = heap[0];
    heap[0] = heap[n];
    heap[n] = top;
    sift(0, n);
  }
  int* row = out + t * W;
  long long kept = 0;
  for (long long i = 0; i < W; ++i)
    if (value(heap[i]) > -INF) row[kept++] = heap[i];
  for (; kept < W; ++kept) row[kept] = -1;
)";

Kernel idx_select(const ir::Op& op, const IdxShape& s, const std::string& what) {
  KernelBuilder kb("idx_select", what + " [top-k selection]");
  kb.in(op.operands[3], "pos");
  kb.scratch(scratch_bytes(s));
  kb.out(op.results[0], "out");
  std::string body = fmt::format(R"(  constexpr long long R = {0}, W = {1}, NBP = {2};
  const long long TOKENS = {3}, NB = {4} * NBP;
  const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (t >= TOKENS) return;
  const float INF = __int_as_float(0x7f800000);
  const long long p = pos[t], full = (p + 1) / R * R, L = max(W, p + 1);
  const float* score = scratch + t * NB;
  int* heap = (int*)(scratch + TOKENS * NB) + t * W;
  auto value = [&](long long c) {{ return c < full ? score[c / R] : c <= p ? INF : -INF; }};
)",
                                 s.ratio, s.w, s.nbp, kb.expr(s.tokens), kb.expr(ir::Dim::symbol("PT_STRIDE")));
  kb.body(body + kHeapSelect + kWriteRow);
  kb.launch(s.tokens, 64);
  return kb.finish();
}

}  // namespace

Kernels emit_indexer_select(const ir::Module& m, const ir::Op& op, const std::string& what) {
  const IdxShape s = idx_shape(m, op);
  return {idx_append(op, s, what), idx_score(op, s, what), idx_select(op, s, what)};
}

}  // namespace vtc::cuda
