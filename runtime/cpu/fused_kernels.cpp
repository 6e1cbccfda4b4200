// FusedKernel: see fused_kernels.h for what runs where and why the bits
// equal op-by-op execution.
#include "runtime/cpu/fused_kernels.h"

#include "ir/fused_kinds.h"

#include <fmt/format.h>

#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "ir/op_attrs.h"
#include "runtime/cpu/kernels/kernels.h"

namespace vtc::cpu {

namespace {

struct SwigluPair {
  const ir::Op *gate, *silu, *up, *mul;
};
struct RopeChain {
  const ir::Op *matmul, *reshape, *rope;
};

constexpr int64_t kSwigluMinTokens = 16;

// --- run-time pieces: what the prologue and the epilogues read -------------

struct RopeTable {
  RopeParams params;
  int64_t head_dim;
  const int32_t* pos;
  std::vector<float> cos_sin;  // [n_tokens][n_dims]
};

bool same_rope(const RopeParams& a, const RopeParams& b) {
  return a.n_dims == b.n_dims && a.mode == b.mode && a.freq_base == b.freq_base && a.freq_scale == b.freq_scale &&
         a.attn_factor == b.attn_factor && a.freq_factors == b.freq_factors && a.ext_factor == b.ext_factor &&
         a.corr_dims[0] == b.corr_dims[0] && a.corr_dims[1] == b.corr_dims[1] &&
         std::equal(a.sections, a.sections + 4, b.sections);
}

struct Prologue {
  const float* x = nullptr;  // the norm's input; null: no norm
  const float* gain = nullptr;
  float eps = 0;
  int64_t cols = 0;
  float* normed = nullptr;
  std::vector<RopeTable>* tables = nullptr;

  static void run(const void* context, int64_t t0, int64_t t1) {
    const auto& p = *static_cast<const Prologue*>(context);
    if (p.x != nullptr) rms_norm(p.x + t0 * p.cols, p.gain, p.eps, t1 - t0, p.cols, p.normed + t0 * p.cols);
    for (RopeTable& t : *p.tables) rope_table(t.params, t.head_dim, t.pos, t0, t1, t.cos_sin.data());
  }
};

// silu(gate) then * up, row by row of the box. Materialized, the silu
// values go to their own body value; otherwise straight into the product
// (same roundings: silu rounds, then the multiply).
struct SwigluTile {
  float *silu_out, *product;  // silu_out null: not materialized
  int64_t rows;

  static void run(const void* context, const TileBox& box) {
    const auto& s = *static_cast<const SwigluTile*>(context);
    const int64_t n = box.r1 - box.r0;
    for (int64_t t = box.t0; t < box.t1; ++t) {
      const int64_t at = t * s.rows + box.r0, in = (t - box.t0) * box.ld;
      float* silu_dst = (s.silu_out != nullptr ? s.silu_out : s.product) + at;
      silu(box.out[0] + in, silu_dst, n);
      mul(silu_dst, box.out[1] + in, s.product + at, n);
    }
  }
};

struct RopeTile {
  float* out;
  int64_t rows, head_dim;
  const RopeTable* table;

  static void run(const void* context, const TileBox& box) {
    const auto& r = *static_cast<const RopeTile*>(context);
    rope_rotate(box.out[0], box.ld, box.t1 - box.t0, (box.r1 - box.r0) / r.head_dim, r.head_dim,
                r.table->cos_sin.data() + box.t0 * r.table->params.n_dims, r.table->params,
                r.out + box.t0 * r.rows + box.r0, r.rows);
  }
};

// A matmul_epilogue region's chain on each box: every step reads the
// previous value (the box for the first) and writes its own, row by row of
// the box, with the kernel op by op execution calls for that op (so the
// same bits: add, mul and scale round once per element on every path, gelu
// is a table lookup per element, and silu's vector path covers the whole
// row when N % 8 == 0, which the plan requires, as it does op by op).
struct EpilogueStep {
  ir::OpKind kind;
  const float* other = nullptr;  // add/mul: the argument operand
  bool broadcast = false;        // other is one [N] row for every token
  bool chain_first = true;       // the chain value is operand 0 (keeps the op's operand order)
  float factor = 0;              // scale
  float* out = nullptr;          // where this value goes; null: the worker's scratch row
};

struct EpilogueTile {
  std::vector<EpilogueStep> steps;
  int64_t rows;

  static void run(const void* context, const TileBox& box) {
    const auto& e = *static_cast<const EpilogueTile*>(context);
    const int64_t n = box.r1 - box.r0;
    thread_local std::vector<float> scratch;
    if (int64_t(scratch.size()) < n) scratch.resize(size_t(n));
    for (int64_t t = box.t0; t < box.t1; ++t) {
      const int64_t at = t * e.rows + box.r0;
      const float* prev = box.out[0] + (t - box.t0) * box.ld;
      for (const EpilogueStep& s : e.steps) {
        float* dst = s.out != nullptr ? s.out + at : scratch.data();
        const float* other = s.other == nullptr ? nullptr : s.other + (s.broadcast ? box.r0 : at);
        switch (s.kind) {
          case ir::OpKind::Add: s.chain_first ? add(prev, other, dst, n) : add(other, prev, dst, n); break;
          case ir::OpKind::Mul: s.chain_first ? mul(prev, other, dst, n) : mul(other, prev, dst, n); break;
          case ir::OpKind::Scale: scale(prev, s.factor, dst, n); break;
          case ir::OpKind::Silu: silu(prev, dst, n); break;
          case ir::OpKind::Gelu: gelu(prev, dst, n); break;
          default: break;  // why_op_by_op admits no other op
        }
        prev = dst;
      }
    }
  }
};

bool epilogue_tile_op(ir::OpKind k) {
  return k == ir::OpKind::Add || k == ir::OpKind::Mul || k == ir::OpKind::Scale || k == ir::OpKind::Silu ||
         k == ir::OpKind::Gelu;
}

// Why a decoded matmul_epilogue region has no tile form; empty when it has.
std::string why_epilogue_op_by_op(const ir::EpilogueRegion& r) {
  const ir::Op& mm = *r.matmul;
  const ir::TensorType& out = mm.results[0].type();
  if (mm.operands[0].type().elem.kind() != ir::ElemType::F32) return "the matmul's input is not f32";
  const std::optional<int64_t> n_rows = mm.operands[1].type().shape.empty() ? std::nullopt : mm.operands[1].type().shape[0].constant();
  const ir::Value* prev = &mm.results[0];
  for (const ir::Op* op : r.chain) {
    if (!epilogue_tile_op(op->kind))
      return fmt::format("the epilogue op '{}' has no tile form on the CPU (add, mul, scale, silu and gelu have)", op->mnemonic());
    if (op->results[0].type().elem.kind() != ir::ElemType::F32)
      return fmt::format("the epilogue op '{}' makes a {} value, not f32", op->mnemonic(), op->results[0].type().elem.name());
    if (op->kind == ir::OpKind::Silu && (!n_rows || *n_rows % 8 != 0))
      return "a silu epilogue needs a matmul of N % 8 == 0 rows (silu's vector and tail paths round differently)";
    if (op->kind == ir::OpKind::Add || op->kind == ir::OpKind::Mul) {
      const bool chain_first = op->operands[0] == *prev;
      const ir::TensorType& other = op->operands[chain_first ? 1 : 0].type();
      if (other.elem.kind() != ir::ElemType::F32)
        return fmt::format("the epilogue {}'s other operand is {}, not f32", op->mnemonic(), other.elem.name());
      const bool full = other.shape == out.shape;
      const bool row = other.shape.size() == 1 && !out.shape.empty() && other.shape[0] == out.shape.back();
      if (!full && !(row && chain_first))
        return fmt::format("the epilogue {} reads an operand of shape {}, neither the matmul's {} nor a row of its last dim after it",
                           op->mnemonic(), ir::shape_str(other.shape), ir::shape_str(out.shape));
    }
    prev = &op->results[0];
  }
  return "";
}

}  // namespace

struct FusedKernel::Plan {
  const ir::Op* norm = nullptr;
  ir::Value input;                    // what every matmul reads
  std::vector<const ir::Op*> plain;   // matmuls with no epilogue
  std::vector<SwigluPair> swiglu;
  std::vector<RopeChain> ropes;
  std::vector<const ir::Op*> all_matmuls;
  // A value the epilogues would keep in scratch is returned: always write it.
  bool intermediates_returned = false;
  // A matmul_epilogue region: its matmul and chain (then the fields above
  // are unused).
  const ir::Op* epilogue_matmul = nullptr;
  std::vector<const ir::Op*> epilogue_chain;
};

namespace {

// The storage of every output, the epilogue contexts and the groups of one
// run (they point into each other, so they are built in place).
struct RunState {
  std::vector<MatmulOutput> outputs;  // reserved up front: groups point into it
  std::vector<SwigluTile> swiglu;
  std::vector<RopeTile> ropes;
  std::vector<RopeTable> tables;
  std::vector<MatmulGroup> groups;
  Prologue prologue;
};

}  // namespace

FusedKernel::FusedKernel(std::unique_ptr<Plan> plan) : plan_(std::move(plan)) {}
FusedKernel::~FusedKernel() = default;

std::string FusedKernel::why_op_by_op(const ir::Op& fused) {
  const ir::FusedKind kind = ir::fused_kind(fused);
  if (kind == ir::FusedKind::Elementwise) return "the CPU has no one-kernel form of an elementwise region";
  if (kind == ir::FusedKind::MatmulEpilogue) return why_epilogue_op_by_op(ir::decode_epilogue_region(*fused.body));
  for (const auto& chain : ir::decode_projection_region(kind, *fused.body).ropes) {
    if (chain.qk_norm != nullptr) return "a rope chain holds a QK-norm (the rope epilogue rotates matmul rows)";
    if (chain.reshape == nullptr) return "a rope chain has no reshape to heads";
  }
  return "";
}

std::unique_ptr<FusedKernel> FusedKernel::of(const ir::Op& fused) {
  if (!why_op_by_op(fused).empty()) return nullptr;
  if (ir::fused_kind(fused) == ir::FusedKind::MatmulEpilogue) {
    const ir::EpilogueRegion region = ir::decode_epilogue_region(*fused.body);
    auto plan = std::make_unique<Plan>();
    plan->epilogue_matmul = region.matmul;
    plan->epilogue_chain = region.chain;
    return std::unique_ptr<FusedKernel>(new FusedKernel(std::move(plan)));
  }
  const ir::ProjectionRegion region = ir::decode_projection_region(ir::fused_kind(fused), *fused.body);
  auto plan = std::make_unique<Plan>();
  plan->norm = region.norm;
  plan->input = region.input;
  plan->plain = region.plain;
  plan->all_matmuls = region.matmuls;
  for (const auto& pair : region.swiglu) plan->swiglu.push_back({pair.gate, pair.silu, pair.up, pair.mul});
  for (const auto& chain : region.ropes) plan->ropes.push_back({chain.matmul, chain.reshape, chain.rope});
  plan->intermediates_returned = region.intermediates_returned;
  return std::unique_ptr<FusedKernel>(new FusedKernel(std::move(plan)));
}

// matmul_epilogue: one group of the one matmul, the chain as its epilogue.
// The matmul and the intermediate chain values stay in scratch unless
// materialized; the last value goes to the region's result.
bool FusedKernel::run_epilogue(ExecContext& ctx, bool materialize) const {
  const Plan& p = *plan_;
  const ir::Op& mm = *p.epilogue_matmul;
  const Buf& x = ctx.in(mm, 0);
  const Buf& w = ctx.in(mm, 1);
  const Buf& y = ctx.out(mm);
  if (x.elem.kind() != ir::ElemType::F32) return false;
  const int64_t n_tokens = x.rows(), cols = x.last_dim();
  if (w.shape.size() != 2 || w.shape[1] != cols) return false;
  const int64_t rows = w.shape[0];
  if (y.numel != n_tokens * rows) return false;
  EpilogueTile tile{{}, rows};
  const ir::ValueData* prev = mm.results[0].data();
  for (const ir::Op* op : p.epilogue_chain) {
    EpilogueStep s{op->kind};
    const Buf& out = ctx.out(*op);
    if (out.numel != y.numel || out.elem.kind() != ir::ElemType::F32) return false;
    if (op->kind == ir::OpKind::Add || op->kind == ir::OpKind::Mul) {
      s.chain_first = op->operands[0].data() == prev;
      const Buf& other = ctx.in(*op, s.chain_first ? 1 : 0);
      if (other.elem.kind() != ir::ElemType::F32) return false;
      s.broadcast = other.shape.size() == 1 && other.shape[0] == rows;  // one [N] row (T = 1: the same bytes)
      if (!(other.numel == y.numel && other.shape == out.shape) && !(s.broadcast && s.chain_first)) return false;
      s.other = other.as<float>();
    } else if (op->kind == ir::OpKind::Scale) {
      s.factor = float(ir::ScaleAttrs::of(*op).factor);
    } else if (op->kind == ir::OpKind::Silu && rows % 8 != 0) {
      return false;
    }
    s.out = materialize || op == p.epilogue_chain.back() ? out.as<float>() : nullptr;
    tile.steps.push_back(s);
    prev = op->results[0].data();
  }
  const MatmulOutput o{ggml_type_of(w.elem), w.data, rows, materialize ? y.as<float>() : nullptr, w.elem.layout()};
  const MatmulGroup group{&o, 1, 0, {&EpilogueTile::run, &tile}, !materialize};
  matmul_groups(&group, 1, cols, x.as<float>(), n_tokens, ctx.pool, {}, ctx.token_order);
  return true;
}

bool FusedKernel::run(ExecContext& ctx, bool materialize) const {
  const Plan& p = *plan_;
  if (p.epilogue_matmul != nullptr) return run_epilogue(ctx, materialize);
  const bool in_scratch = !materialize && !p.intermediates_returned;
  const Buf& x = ctx.buf(p.input.data());
  if (x.elem.kind() != ir::ElemType::F32) return false;
  const int64_t n_tokens = x.rows(), cols = x.last_dim();
  // Decode-sized steps stream the weights from DRAM; a work item that
  // reads gate rows then up rows measured 8-12% slower there than the two
  // weights streamed one after the other (tg128 on the 0.56B model, F16,
  // Q8_0 and Q4_K_M), so below one token tile a swiglu runs op by op.
  if (!p.swiglu.empty() && n_tokens < kSwigluMinTokens) return false;
  RunState s;
  s.outputs.reserve(p.all_matmuls.size());
  s.swiglu.reserve(p.swiglu.size());
  s.ropes.reserve(p.ropes.size());
  s.tables.reserve(p.ropes.size());
  // False when a weight does not fit the input (op by op names the error).
  auto output = [&](const ir::Op* m) -> const MatmulOutput* {
    const Buf& w = ctx.in(*m, 1);
    if (w.shape.size() != 2 || w.shape[1] != cols) return nullptr;
    s.outputs.push_back({ggml_type_of(w.elem), w.data, w.shape[0], ctx.out(*m).as<float>(), w.elem.layout()});
    return &s.outputs.back();
  };
  for (const ir::Op* m : p.plain) {
    const MatmulOutput* o = output(m);
    if (o == nullptr) return false;
    s.groups.push_back({o, 1, 0, {}});
  }
  for (const SwigluPair& pair : p.swiglu) {
    const MatmulOutput* gate = output(pair.gate);
    const MatmulOutput* up = output(pair.up);
    if (gate == nullptr || up == nullptr || gate->rows != up->rows || gate->rows % 8 != 0) return false;
    s.swiglu.push_back({in_scratch ? nullptr : ctx.out(*pair.silu).as<float>(), ctx.out(*pair.mul).as<float>(), gate->rows});
    s.groups.push_back({gate, 2, 0, {&SwigluTile::run, &s.swiglu.back()}, in_scratch});
  }
  for (const RopeChain& chain : p.ropes) {
    const MatmulOutput* o = output(chain.matmul);
    const Buf& shaped = ctx.out(*chain.reshape);
    if (o == nullptr || shaped.shape.size() != 3 || shaped.shape[1] * shaped.shape[2] != o->rows) return false;
    const int64_t head_dim = shaped.shape[2];
    RopeParams params = rope_params(*chain.rope);
    if (chain.rope->operands.size() == 3) params.freq_factors = ctx.in(*chain.rope, 2).as<float>();
    const int32_t* pos = ctx.in(*chain.rope, 1).as<int32_t>();
    RopeTable* table = nullptr;
    for (RopeTable& t : s.tables)
      if (t.pos == pos && t.head_dim == head_dim && same_rope(t.params, params)) table = &t;
    if (table == nullptr) {
      s.tables.push_back({params, head_dim, pos, std::vector<float>(size_t(n_tokens * params.n_dims))});
      table = &s.tables.back();
    }
    s.ropes.push_back({ctx.out(*chain.rope).as<float>(), o->rows, head_dim, table});
    s.groups.push_back({o, 1, std::lcm<int64_t>(16, head_dim), {&RopeTile::run, &s.ropes.back()}, in_scratch});
  }
  s.prologue.tables = &s.tables;
  s.prologue.cols = cols;
  if (p.norm != nullptr) {
    const Buf& in = ctx.in(*p.norm, 0);
    const Buf& gain = ctx.in(*p.norm, 1);
    if (gain.numel != cols || gain.elem.kind() != ir::ElemType::F32 || in.elem.kind() != ir::ElemType::F32) return false;
    s.prologue.x = in.as<float>();
    s.prologue.gain = gain.as<float>();
    s.prologue.eps = static_cast<float>(ir::RmsNormAttrs::of(*p.norm).eps);
    s.prologue.normed = x.as<float>();
  }
  const bool any_prologue = p.norm != nullptr || !s.tables.empty();
  matmul_groups(s.groups.data(), s.groups.size(), cols, x.as<float>(), n_tokens, ctx.pool,
                any_prologue ? RowFn{&Prologue::run, &s.prologue} : RowFn{}, ctx.token_order);
  return true;
}

}  // namespace vtc::cpu
