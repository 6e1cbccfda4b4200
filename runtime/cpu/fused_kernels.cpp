// FusedKernel: see fused_kernels.h for what runs where and why the bits
// equal op-by-op execution.
#include "runtime/cpu/fused_kernels.h"

#include "ir/fused_kinds.h"

#include <numeric>
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
  for (const auto& chain : ir::decode_projection_region(kind, *fused.body).ropes) {
    if (chain.qk_norm != nullptr) return "a rope chain holds a QK-norm (the rope epilogue rotates matmul rows)";
    if (chain.reshape == nullptr) return "a rope chain has no reshape to heads";
  }
  return "";
}

std::unique_ptr<FusedKernel> FusedKernel::of(const ir::Op& fused) {
  if (!why_op_by_op(fused).empty()) return nullptr;
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

bool FusedKernel::run(ExecContext& ctx, bool materialize) const {
  const Plan& p = *plan_;
  const bool in_scratch = !materialize && !p.intermediates_returned;
  const Buf& x = ctx.bufs.at(p.input.data());
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
                any_prologue ? RowFn{&Prologue::run, &s.prologue} : RowFn{});
  return true;
}

}  // namespace vtc::cpu
