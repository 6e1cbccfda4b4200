// Shape functions for every op in ops.def.
//
// Conventions (docs/ir.md, "Shapes"): shapes are listed outermost first, the
// last dim is contiguous. Weights use the GGUF layout, so a matmul weight is
// [N, K] (N rows of K) and computes x[..., K] -> [..., N]. Results are placed
// where the first operand is; ops without operands take their placement
// from the declaration they name. The verifier then checks that every
// operand agrees with the op's placement.
#include "ir/shape_infer.h"

#include <algorithm>
#include <climits>

#include "ir/builder.h"
#include "support/error.h"
#include "support/kv_cache_type.h"

namespace vtc::ir {
namespace {

std::string dims_str(const Shape& s) { return "[" + shape_str(s) + "]"; }

// The placement every compute op inherits: that of its first operand.
TensorType like_first(const InferContext& c, ElemType elem, Shape shape) {
  return TensorType{elem, std::move(shape), c.operand(0).placement};
}

void require_rank_at_least(const InferContext& c, size_t i, size_t rank, std::string_view role) {
  c.require(c.operand(i).rank() >= rank, std::string(role) + " (operand " + std::to_string(i) + ") must have rank >= " +
                                             std::to_string(rank) + ", got " + c.operand(i).str());
}

void require_rank(const InferContext& c, size_t i, size_t rank, std::string_view role) {
  c.require(c.operand(i).rank() == rank, std::string(role) + " (operand " + std::to_string(i) + ") must have rank " +
                                             std::to_string(rank) + ", got " + c.operand(i).str());
}

void require_float(const InferContext& c, size_t i, std::string_view role) {
  c.require(c.operand(i).elem.is_float(),
            std::string(role) + " (operand " + std::to_string(i) + ") must be f32, f16 or bf16, got " + c.operand(i).elem.name());
}

void require_index(const InferContext& c, size_t i, std::string_view role) {
  ElemType e = c.operand(i).elem;
  c.require(e.kind() == ElemType::I32 || e.kind() == ElemType::I64,
            std::string(role) + " (operand " + std::to_string(i) + ") must be i32 or i64, got " + e.name());
}

void require_same_dim(const InferContext& c, const Dim& a, const Dim& b, const std::string& what) {
  c.require(a == b, what + ": " + a.str() + " != " + b.str());
}

size_t checked_axis(const InferContext& c, int64_t axis, size_t rank) {
  c.require(axis >= 0 && static_cast<uint64_t>(axis) < rank,
            "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return static_cast<size_t>(axis);
}

// A shape attribute may hold symbols, but no dim may be a negative constant.
void require_valid_shape(const InferContext& c, const Shape& s) {
  for (const auto& d : s) {
    auto k = d.constant();
    c.require(!k || *k >= 0, "shape " + dims_str(s) + " has a negative dimension");
  }
}

}  // namespace

void InferContext::fail(const std::string& message) const { throw Error(message); }

std::vector<TensorType> infer_result_types(const Module& module, const Op& op) {
  InferContext c{module, op, {}};
  op.info().infer(c);
  return std::move(c.results);
}

void infer_weight(InferContext& c) {
  const std::string name = c.attrs<WeightAttrs>().name;
  const WeightDecl* w = c.module.find_weight(name);
  c.require(w != nullptr, "weight @" + name + " is not declared");
  c.results.push_back(w->type);
}

void infer_state_read(InferContext& c) {
  const std::string name = c.attrs<StateReadAttrs>().state;
  const StateDecl* s = c.module.find_state(name);
  c.require(s != nullptr, "state @" + name + " is not declared");
  c.results.push_back(s->type);
}

void infer_state_write(InferContext& c) {
  const std::string name = c.attrs<StateWriteAttrs>().state;
  const StateDecl* s = c.module.find_state(name);
  c.require(s != nullptr, "state @" + name + " is not declared");
  c.require(c.operand(0) == s->type,
            "value " + c.operand(0).str() + " does not match the declaration of state @" + name + ": " + s->type.str());
}

void infer_transfer(InferContext& c) {
  TensorType t = c.operand(0);
  t.placement = c.op.kind == OpKind::ToHost ? Placement::Host : Placement::Device;
  c.results.push_back(t);
}

void infer_embed(InferContext& c) {
  require_rank(c, 0, 2, "table");
  c.require(!c.operand(0).elem.is_integer(), "table (operand 0) must hold float or quantized rows");
  require_index(c, 1, "ids");
  Shape s = c.operand(1).shape;
  s.push_back(c.operand(0).shape[1]);
  c.results.push_back(like_first(c, ElemType::F32, s));
}

void infer_matmul(InferContext& c) {
  require_rank_at_least(c, 0, 1, "input");
  require_float(c, 0, "input");
  require_rank(c, 1, 2, "weight");
  c.require(!c.operand(1).elem.is_integer(), "weight (operand 1) must be float or quantized");
  const Shape& x = c.operand(0).shape;
  const Shape& w = c.operand(1).shape;
  require_same_dim(c, x.back(), w[1], "contraction dim of input " + dims_str(x) + " and weight " + dims_str(w) + " differ");
  // A weight stored in groups of rows (x8) has whole groups.
  const WeightLayout layout = c.operand(1).elem.layout();
  if (layout != WeightLayout::Rows) {
    const int64_t group = weight_layout_rows(layout);
    auto n = w[0].constant();
    c.require(n && *n % group == 0, "weight (operand 1) in the " + std::string(weight_layout_name(layout)) +
                                        " layout needs a constant row count that is a multiple of " + std::to_string(group) +
                                        ", got " + dims_str(w));
  }
  Shape s(x.begin(), x.end() - 1);
  s.push_back(w[0]);
  c.results.push_back(like_first(c, ElemType::F32, s));
}

// b broadcasts over a's leading dims: its shape must equal a suffix of a's.
void infer_binary(InferContext& c) {
  const TensorType& a = c.operand(0);
  const TensorType& b = c.operand(1);
  c.require(!a.elem.is_quant() && a.elem == b.elem,
            "operands must share a non-quantized element type, got " + a.elem.name() + " and " + b.elem.name());
  // Right-aligned, each dim of b equals a's or is 1 (numpy broadcasting, b side only).
  bool broadcasts = b.rank() <= a.rank();
  for (size_t i = 0; broadcasts && i < b.rank(); ++i) {
    const Dim& bd = b.shape[b.rank() - 1 - i];
    broadcasts = bd == a.shape[a.rank() - 1 - i] || bd == Dim(1);
  }
  c.require(broadcasts, "shape " + dims_str(b.shape) + " does not broadcast to " + dims_str(a.shape) +
                            " (right-aligned, each dim must equal a's or be 1)");
  c.results.push_back(a);
}

void infer_unary_float(InferContext& c) {
  require_float(c, 0, "input");
  if (c.op.kind == OpKind::Softmax) require_rank_at_least(c, 0, 1, "input");
  c.results.push_back(c.operand(0));
}

// ggml_clamp's bounds; max may be inf (qwen4exp clamps |x| to [1e-6, inf)).
// NaN bounds fail the comparison, so they are rejected too.
void infer_clamp(InferContext& c) {
  require_float(c, 0, "input");
  const ClampAttrs a = c.attrs<ClampAttrs>();
  const double lo = a.min, hi = a.max;
  c.require(lo <= hi, "clamp needs min <= max, got min = " + format_double(lo) + ", max = " + format_double(hi));
  c.results.push_back(c.operand(0));
}

void infer_cast(InferContext& c) {
  const std::string to_name = c.attrs<CastAttrs>().to;
  auto to = ElemType::from_name(to_name);
  c.require(to && !to->is_quant(), "cast target '" + to_name + "' is not a non-quantized element type");
  c.require(!c.operand(0).elem.is_quant(), "cast input must not be quantized (use matmul or embed on quantized weights)");
  c.results.push_back(like_first(c, *to, c.operand(0).shape));
}

void infer_rms_norm(InferContext& c) {
  require_rank_at_least(c, 0, 1, "input");
  require_float(c, 0, "input");
  require_float(c, 1, "weight");
  // A weight of rank > 1 is a grouped gain (qwen4exp's hyper-connection
  // norms): [G, D] scales the G rows before the normalized dim separately.
  const Shape& x = c.operand(0).shape;
  const Shape& w = c.operand(1).shape;
  c.require(w.size() >= 1 && w.size() <= x.size() && std::equal(w.begin(), w.end(), x.end() - long(w.size())),
            "weight " + dims_str(w) + " must match the input's trailing dims " + dims_str(x) +
                " (the normalized dim, optionally preceded by group dims)");
  c.require(c.attrs<RmsNormAttrs>().eps > 0, "eps must be positive");
  c.results.push_back(c.operand(0));
}

// layer_norm(x[, gain[, bias]]): gain and bias are the normalized dim [D].
void infer_layer_norm(InferContext& c) {
  require_rank_at_least(c, 0, 1, "input");
  require_float(c, 0, "input");
  const Shape& x = c.operand(0).shape;
  for (size_t i = 1; i < c.op.operands.size(); ++i) {
    const char* role = i == 1 ? "gain" : "bias";
    require_float(c, i, role);
    const Shape& w = c.operand(i).shape;
    c.require(w.size() == 1 && w[0] == x.back(),
              std::string(role) + " " + dims_str(w) + " must be the input's last dim [" + x.back().str() + "]");
  }
  c.require(c.attrs<LayerNormAttrs>().eps > 0, "eps must be positive");
  c.results.push_back(c.operand(0));
}

// Normalizes the last dim to unit L2 length; eps bounds the divisor.
void infer_l2_norm(InferContext& c) {
  require_rank_at_least(c, 0, 1, "input");
  require_float(c, 0, "input");
  c.require(c.attrs<L2NormAttrs>().eps > 0, "eps must be positive");
  c.results.push_back(c.operand(0));
}

void infer_rope(InferContext& c) {
  require_rank(c, 0, 3, "input [T, heads, head_dim]");
  require_float(c, 0, "input");
  c.require(c.operand(1).elem.kind() == ElemType::I32, "positions (operand 1) must be i32");
  const Shape& x = c.operand(0).shape;
  const Shape& pos = c.operand(1).shape;
  const RopeAttrs a = c.attrs<RopeAttrs>();
  if (is_multi(a.mode)) {
    c.require(pos.size() == 2 && pos[0] == x[0] && pos[1] == Dim(4), "multi rope positions must be [T, 4] with T = " + x[0].str());
    c.require(a.sections.size() == 4, "multi rope needs 4 'sections'");
    for (int64_t s : a.sections) c.require(s >= 0, "rope sections must be non-negative");
  } else {
    c.require(pos.size() == 1 && pos[0] == x[0], "positions must be [T] with T = " + x[0].str());
    c.require(!c.has("sections"), "'sections' is only valid for multi rope");
  }
  const int64_t n_rot = a.n_rot;
  auto head_dim = x[2].constant();
  c.require(n_rot > 0 && n_rot % 2 == 0, "n_rot must be positive and even");
  c.require(!head_dim || n_rot <= *head_dim, "n_rot exceeds head dim " + x[2].str());
  if (c.op.operands.size() == 3)
    c.require(c.operand(2).elem.kind() == ElemType::F32 && c.operand(2).rank() == 1 &&
                  c.operand(2).shape[0] == Dim(n_rot / 2),
              "freq_factors (operand 2) must be [" + std::to_string(n_rot / 2) + "] f32, got " + c.operand(2).str());
  c.results.push_back(c.operand(0));
}

void require_seq_ids(const InferContext& c, size_t i, const Dim& tokens);

// hadamard(x: [..., D] f32) {block = n} -> the same type: n a power of two
// (2 or more) that divides D.
void infer_hadamard(InferContext& c) {
  const TensorType& x = c.operand(0);
  c.require(x.elem.kind() == ElemType::F32 && x.rank() >= 1, "hadamard rotates f32 rows, got " + x.str());
  const int64_t n = c.attrs<HadamardAttrs>().block;
  c.require(n >= 2 && (n & (n - 1)) == 0, "block must be a power of two, 2 or more, got " + std::to_string(n));
  const auto d = x.shape.back().constant();
  c.require(!d || *d % n == 0, "the last dim " + x.shape.back().str() + " is not a multiple of block " + std::to_string(n));
  c.results.push_back(x);
}

// q [T, Hq, D], k [T, Hkv, D], v [T, Hkv, D], pos [T], seq [T]; the KV state
// is [2, pages..., Hkv, D] (K and V stacked on the leading 2), or, with
// v_state (K and V of different element types), two [1, pages..., Hkv, D]
// states. A KV state holds floats or a KV cache type (kv_cache_types())
// whose blocks tile D.
void infer_attention(InferContext& c) {
  for (size_t i = 0; i < 3; ++i) {
    require_rank(c, i, 3, i == 0 ? "q" : i == 1 ? "k" : "v");
    require_float(c, i, i == 0 ? "q" : i == 1 ? "k" : "v");
  }
  const Shape& q = c.operand(0).shape;
  const Shape& k = c.operand(1).shape;
  const Shape& v = c.operand(2).shape;
  c.require(k == v, "k " + dims_str(k) + " and v " + dims_str(v) + " must have the same shape");
  require_same_dim(c, q[0], k[0], "q and k token counts differ");
  require_same_dim(c, q[2], k[2], "q and k head dims differ");
  auto hq = q[1].constant(), hkv = k[1].constant();
  c.require(!hq || !hkv || (*hkv > 0 && *hq % *hkv == 0),
            "grouped-query attention needs q heads (" + q[1].str() + ") to be a multiple of kv heads (" + k[1].str() + ")");
  for (size_t i = 3; i < 5; ++i) {
    c.require(c.operand(i).elem.kind() == ElemType::I32 && c.operand(i).rank() == 1 && c.operand(i).shape[0] == q[0],
              std::string(i == 3 ? "positions" : "sequence ids") + " (operand " + std::to_string(i) + ") must be [" +
                  q[0].str() + "] i32, got " + c.operand(i).str());
  }
  const AttentionAttrs a = c.attrs<AttentionAttrs>();
  const bool split = !a.v_state.empty();
  for (const std::string& name : split ? std::vector<std::string>{a.state, a.v_state} : std::vector<std::string>{a.state}) {
    const StateDecl* s = c.module.find_state(name);
    c.require(s != nullptr, "state @" + name + " is not declared");
    c.require(s->kind != StateKind::Plain, "attention needs a paged or ring KV state, @" + name + " is plain");
    const Shape& kv = s->type.shape;
    const std::string lead = split ? "1" : "2";
    c.require(kv.size() >= 3 && kv[0] == Dim(split ? 1 : 2) && kv[kv.size() - 2] == k[1] && kv.back() == k[2],
              "KV state @" + name + " " + dims_str(kv) + " must be [" + lead + ", ..., " + k[1].str() + ", " + k[2].str() + "]");
    const ElemType e = s->type.elem;
    const auto head = k[2].constant();
    c.require(e.is_float() || (e.is_quant() && e.layout() == WeightLayout::Rows && is_kv_cache_type(e.quant_type()) &&
                               (!head || *head % int64_t(ggml_traits(e.quant_type()).block_size) == 0)),
              "KV state @" + name + " holds " + e.name() + ", not a KV cache type (" + kv_cache_type_list() +
                  ") whose blocks tile the head size " + k[2].str());
  }
  c.require(a.scale > 0, "scale must be positive");
  c.require(!c.has("window") || a.window > 0, "window must be positive");
  c.require(!c.has("chunk") || a.chunk > 0, "chunk must be positive");
  c.require(!c.has("softcap") || a.softcap > 0, "softcap must be positive");
  c.require(!c.has("alibi_max_bias") || a.alibi_max_bias > 0, "alibi_max_bias must be positive");
  const bool sinks = a.sinks;
  const size_t n_operands = c.op.operands.size() - (sinks ? 1 : 0);
  c.require(n_operands >= 5 && n_operands <= 6,
            sinks ? "with sinks = true, attention takes q, k, v, pos, seq[, selected], sinks"
                  : "attention takes q, k, v, pos, seq[, selected] (a 7th operand needs sinks = true)");
  if (sinks) {
    const TensorType& t = c.operand(n_operands);
    c.require(t.elem.kind() == ElemType::F32 && t.rank() == 1 && t.shape[0] == q[1],
              "sinks (operand " + std::to_string(n_operands) + ") must be [" + q[1].str() + "] f32 (one logit per q head), got " + t.str());
  }
  if (n_operands == 6) {
    const TensorType& sel = c.operand(5);
    c.require(sel.elem.kind() == ElemType::I32 && sel.rank() == 2 && sel.shape[0] == q[0],
              "selected positions (operand 5) must be [" + q[0].str() + ", W] i32, got " + sel.str());
  }
  c.results.push_back(like_first(c, ElemType::F32, {q[0], q[1], v[2]}));
}

// attn_temp(pos: [T] i32) -> [T] f32, the factors of llama4's temperature tuning.
void infer_attn_temp(InferContext& c) {
  const TensorType& pos = c.operand(0);
  c.require(pos.elem.kind() == ElemType::I32 && pos.rank() == 1, "positions must be [T] i32, got " + pos.str());
  c.require(c.attrs<AttnTempAttrs>().floor_scale > 0, "floor_scale must be positive");
  c.results.push_back(like_first(c, ElemType::F32, pos.shape));
}

// q [T, H, D] (normed and roped), k [T, D] raw keys, k_norm [D], pos [T],
// seq [T] -> [T, top_k + ratio - 1] i32 positions; the side cache is
// [1, P, page, D] (one key row per position).
void infer_indexer_select(InferContext& c) {
  require_rank(c, 0, 3, "queries [T, H, D]");
  require_rank(c, 1, 2, "raw keys [T, D]");
  require_rank(c, 2, 1, "key norm weight [D]");
  for (size_t i = 0; i < 3; ++i)
    c.require(c.operand(i).elem.kind() == ElemType::F32,
              "operand " + std::to_string(i) + " must be f32, got " + c.operand(i).str());
  const Shape &q = c.operand(0).shape, &k = c.operand(1).shape;
  require_same_dim(c, q[0], k[0], "queries and keys have different token counts");
  require_same_dim(c, q[2], k[1], "queries and keys have different head dims");
  require_same_dim(c, c.operand(2).shape[0], k[1], "the key norm weight and the key head dim differ");
  c.require(c.operand(3).elem.kind() == ElemType::I32 && c.operand(3).shape == Shape{q[0]},
            "positions (operand 3) must be [" + q[0].str() + "] i32, got " + c.operand(3).str());
  require_seq_ids(c, 4, q[0]);
  const IndexerSelectAttrs a = c.attrs<IndexerSelectAttrs>();
  const int64_t ratio = a.ratio, top_k = a.top_k;
  c.require(ratio >= 1 && ratio <= 64, "ratio must be in [1, 64]");
  c.require(top_k >= 1, "top_k must be positive");
  c.require(is_multi(a.mode) == (a.sections.size() == 4), "multi rope needs 4 'sections'; other modes take none");
  const int64_t n_rot = a.n_rot;
  auto dim = k[1].constant();
  c.require(n_rot > 0 && n_rot % 2 == 0 && (!dim || n_rot <= *dim), "n_rot must be positive, even and at most the head dim");
  const std::string& name = a.state;
  const StateDecl* s = c.module.find_state(name);
  c.require(s != nullptr, "state @" + name + " is not declared");
  const Shape& st = s->type.shape;
  c.require(s->kind == StateKind::Paged && st.size() == 4 && st[0] == Dim(1) && st[3] == k[1],
            "indexer state @" + name + " " + dims_str(st) + " must be paged [1, P, page, " + k[1].str() + "]");
  const ElemType e = s->type.elem;
  c.require(e.is_float() || (e.is_quant() && is_kv_cache_type(e.quant_type())),
            "indexer state @" + name + " must hold floats or a KV cache type (" + kv_cache_type_list() + ")");
  c.results.push_back(like_first(c, ElemType::I32, {q[0], Dim(top_k + ratio - 1)}));
}

void infer_argmax(InferContext& c) {
  require_rank_at_least(c, 0, 1, "input");
  require_float(c, 0, "input");
  const Shape& x = c.operand(0).shape;
  c.results.push_back(like_first(c, ElemType::I32, Shape(x.begin(), x.end() - 1)));
}

// ggml_sum_rows: the last dim collapses to 1 (kept, so the result
// broadcasts back against the input in `mul`/`add`).
void infer_sum(InferContext& c) {
  require_rank_at_least(c, 0, 1, "input");
  require_float(c, 0, "input");
  Shape s = c.operand(0).shape;
  s.back() = Dim(1);
  c.results.push_back(like_first(c, ElemType::F32, s));
}

void infer_top_k(InferContext& c) {
  require_rank_at_least(c, 0, 1, "input");
  require_float(c, 0, "input");
  const int64_t k = c.attrs<TopKAttrs>().k;
  const Shape& x = c.operand(0).shape;
  auto n = x.back().constant();
  c.require(k > 0 && (!n || k <= *n), "k = " + std::to_string(k) + " must be in [1, " + x.back().str() + "]");
  Shape s(x.begin(), x.end() - 1);
  s.push_back(k);
  c.results.push_back(like_first(c, c.operand(0).elem, s));
  c.results.push_back(like_first(c, ElemType::I32, s));
}

namespace {

// Operand i of `sample` is exactly [rows, cols...] of `elem` (an empty
// `cols` means rank 1); `rows` is the logits' row dim.
void require_sample_operand(const InferContext& c, size_t i, std::string_view role, ElemType::Kind elem,
                            const Dim& rows, const std::vector<int64_t>& cols) {
  const TensorType& t = c.operand(i);
  std::string want = "[" + rows.str();
  for (int64_t n : cols) want += ", " + std::to_string(n);
  want += "] " + std::string(ElemType(elem).name());
  const std::string head = std::string(role) + " (operand " + std::to_string(i) + ") must be " + want + ", got ";
  c.require(t.rank() == cols.size() + 1 && t.elem.kind() == elem, head + t.str());
  c.require(t.shape[0] == rows, head + t.str() + " (rows " + t.shape[0].str() + " != " + rows.str() + ")");
  for (size_t d = 0; d < cols.size(); ++d) c.require(t.shape[d + 1] == Dim(cols[d]), head + t.str());
}

}  // namespace

// logits [S, V] f32, params [S, 4] f32, seed [S, 2] i32, pos [S] i32 ->
// [S] i32 (docs/ir.md: sample). max_k sizes the candidate list of the
// kernels (CUDA keeps it in shared memory), hence the bound of 256.
void infer_sample(InferContext& c) {
  const TensorType& logits = c.operand(0);
  c.require(logits.rank() == 2 && logits.elem.kind() == ElemType::F32,
            "logits (operand 0) must be [S, V] f32, got " + logits.str());
  const Dim& rows = logits.shape[0];
  auto v = logits.shape[1].constant();
  c.require(!v || *v >= 1, "logits (operand 0) must have at least one column, got " + logits.str());
  require_sample_operand(c, 1, "params", ElemType::F32, rows, {4});
  require_sample_operand(c, 2, "seed", ElemType::I32, rows, {2});
  require_sample_operand(c, 3, "pos", ElemType::I32, rows, {});
  const int64_t max_k = c.attrs<SampleAttrs>().max_k;
  c.require(max_k >= 1 && max_k <= 256, "max_k = " + std::to_string(max_k) + " must be in [1, 256]");
  c.results.push_back(like_first(c, ElemType::I32, {rows}));
}

// logits [T, E] -> weights [T, k] f32, ids [T, k] i32 (docs/ir.md: moe_route).
// The per-sequence state named by `state`: declared, plain, f32, and shaped
// [S, expected...]; `what` names the op's expectation in the message.
void require_recurrent_state(const InferContext& c, const std::string& name, const Shape& expected,
                             const std::string& what) {
  const StateDecl* s = c.module.find_state(name);
  c.require(s != nullptr, "state @" + name + " is not declared");
  c.require(s->kind == StateKind::Plain, "state @" + name + " must be plain (one row per sequence slot)");
  c.require(s->type.elem.kind() == ElemType::F32, "state @" + name + " must be f32, got " + s->type.elem.name());
  const Shape& st = s->type.shape;
  c.require(st.size() == expected.size() + 1 && std::equal(expected.begin(), expected.end(), st.begin() + 1),
            "state @" + name + " " + dims_str(st) + " must be [S x " + shape_str(expected) + "] (" + what + ")");
}

void require_seq_ids(const InferContext& c, size_t i, const Dim& tokens) {
  c.require(c.operand(i).elem.kind() == ElemType::I32 && c.operand(i).rank() == 1 && c.operand(i).shape[0] == tokens,
            "sequence ids (operand " + std::to_string(i) + ") must be [" + tokens.str() + "] i32, got " +
                c.operand(i).str());
}

// x [T, C], w [C, K], seq [T]; state [S, (K-1)*dilation, C].
void infer_causal_conv1d(InferContext& c) {
  require_rank(c, 0, 2, "input [T, C]");
  c.require(c.operand(0).elem.kind() == ElemType::F32, "input (operand 0) must be f32, got " + c.operand(0).str());
  require_rank(c, 1, 2, "kernel [C, K]");
  c.require(c.operand(1).elem.kind() == ElemType::F32, "kernel (operand 1) must be f32, got " + c.operand(1).str());
  const Shape& x = c.operand(0).shape;
  const Shape& w = c.operand(1).shape;
  require_same_dim(c, w[0], x[1], "kernel channels and input channels differ");
  require_seq_ids(c, 2, x[0]);
  const CausalConv1dAttrs a = c.attrs<CausalConv1dAttrs>();
  const int64_t dilation = a.dilation;
  c.require(dilation >= 1, "dilation must be at least 1");
  auto k = w[1].constant();
  c.require(k && *k >= 1, "kernel width must be a positive constant, got " + w[1].str());
  require_recurrent_state(c, a.state, {Dim((*k - 1) * dilation), x[1]}, "the last (K-1)*dilation inputs");
  c.results.push_back(c.operand(0));
}

// q, k [T, H, Dk], v [T, H, Dv], g [T, H] or [T, H, Dk], beta [T, H], seq [T];
// state [S, H, Dv, Dk].
void infer_delta_rule(InferContext& c) {
  const char* roles[] = {"q [T, H, Dk]", "k [T, H, Dk]", "v [T, H, Dv]", "gate [T, H] or [T, H, Dk]", "beta [T, H]"};
  for (size_t i = 0; i < 5; ++i) {
    if (i != 3) require_rank(c, i, i < 3 ? 3 : 2, roles[i]);
    c.require(c.operand(i).elem.kind() == ElemType::F32,
              std::string(roles[i]) + " (operand " + std::to_string(i) + ") must be f32, got " + c.operand(i).str());
  }
  const Shape &q = c.operand(0).shape, &k = c.operand(1).shape, &v = c.operand(2).shape, &g = c.operand(3).shape;
  c.require(q == k, "q " + dims_str(q) + " and k " + dims_str(k) + " must have the same shape");
  require_same_dim(c, v[0], q[0], "v and q token counts differ");
  require_same_dim(c, v[1], q[1], "v and q head counts differ (repeat q/k heads first)");
  // One decay per head, or one per key channel (Kimi Delta Attention).
  c.require(g == Shape{q[0], q[1]} || g == q,
            std::string(roles[3]) + " must be " + dims_str({q[0], q[1]}) + " or " + dims_str(q) + ", got " + c.operand(3).str());
  c.require(c.operand(4).shape == Shape{q[0], q[1]},
            std::string(roles[4]) + " must be " + dims_str({q[0], q[1]}) + ", got " + c.operand(4).str());
  require_seq_ids(c, 5, q[0]);
  require_recurrent_state(c, c.attrs<DeltaRuleAttrs>().state, {q[1], v[2], q[2]}, "one Dv x Dk matrix per head");
  c.results.push_back(like_first(c, ElemType::F32, v));
}

// x [T, H, P], dt [T, H], A [H, 1] or [H, N], B, C [T, G, N] (G divides H),
// seq [T]; state [S, H, P, N].
void infer_ssm_scan(InferContext& c) {
  const char* roles[] = {"x [T, H, P]", "dt [T, H]", "A [H, 1] or [H, N]", "B [T, G, N]", "C [T, G, N]"};
  const size_t ranks[] = {3, 2, 2, 3, 3};
  for (size_t i = 0; i < 5; ++i) {
    require_rank(c, i, ranks[i], roles[i]);
    c.require(c.operand(i).elem.kind() == ElemType::F32,
              std::string(roles[i]) + " (operand " + std::to_string(i) + ") must be f32, got " + c.operand(i).str());
  }
  const Shape &x = c.operand(0).shape, &dt = c.operand(1).shape, &a = c.operand(2).shape;
  const Shape &bm = c.operand(3).shape, &cm = c.operand(4).shape;
  c.require(dt == Shape{x[0], x[1]}, "dt must be " + dims_str({x[0], x[1]}) + ", got " + c.operand(1).str());
  c.require(bm == cm, "B " + dims_str(bm) + " and C " + dims_str(cm) + " must have the same shape");
  require_same_dim(c, bm[0], x[0], "B and x token counts differ");
  require_same_dim(c, a[0], x[1], "A's rows and x's head count differ");
  c.require(a[1] == Dim(1) || a[1] == bm[2],
            "A " + dims_str(a) + " must be [H, 1] (one decay per head) or [H, N] (one per state element)");
  auto heads = x[1].constant();
  auto groups = bm[1].constant();
  c.require(heads && groups && *groups > 0 && *heads % *groups == 0,
            "the group count " + bm[1].str() + " must be a constant dividing the head count " + x[1].str());
  require_seq_ids(c, 5, x[0]);
  require_recurrent_state(c, c.attrs<SsmScanAttrs>().state, {x[1], x[2], bm[2]}, "one P x N matrix per head");
  c.results.push_back(like_first(c, ElemType::F32, x));
}

void infer_moe_route(InferContext& c) {
  require_rank(c, 0, 2, "router logits [T, experts]");
  c.require(c.operand(0).elem.kind() == ElemType::F32, "router logits (operand 0) must be f32, got " + c.operand(0).str());
  const MoeRouteAttrs a = c.attrs<MoeRouteAttrs>();
  const int64_t k = a.k;
  auto n = c.operand(0).shape[1].constant();
  c.require(n.has_value(), "the expert count " + c.operand(0).shape[1].str() + " must be a constant");
  c.require(k > 0 && k <= *n, "k = " + std::to_string(k) + " must be in [1, " + std::to_string(*n) + "]");
  c.require(!c.has("scale") || a.scale > 0, "scale must be positive");
  if (c.op.operands.size() == 2) {
    const TensorType& b = c.operand(1);
    c.require(b.elem.kind() == ElemType::F32 && b.rank() == 1 && b.shape[0] == Dim(*n),
              "selection bias (operand 1) must be [" + std::to_string(*n) + "] f32, got " + b.str());
  }
  c.require(c.has("groups") == c.has("groups_used"), "groups and groups_used go together");
  if (c.has("groups")) {
    const int64_t g = a.groups, used = a.groups_used;
    c.require(g > 1 && *n % g == 0, "groups = " + std::to_string(g) + " must be > 1 and divide the expert count " + std::to_string(*n));
    c.require(used >= 1 && used <= g, "groups_used = " + std::to_string(used) + " must be in [1, " + std::to_string(g) + "]");
    c.require(k <= used * (*n / g), "k = " + std::to_string(k) + " exceeds the experts of the used groups");
  }
  const Shape s = {c.operand(0).shape[0], Dim(k)};
  c.results.push_back(like_first(c, ElemType::F32, s));
  c.results.push_back(like_first(c, ElemType::I32, s));
}

// x [T, D], weights [T, k] f32, ids [T, k] i32, then the experts (GGUF
// stacks, outermost first): gate/up [E, F, D] or gate_up [E, 2F, D], down
// [E, D, F], and with `scaled` f32 [E] scales (ir::MoeExperts) -> [T, D] f32.
void infer_moe_ffn(InferContext& c) {
  require_rank(c, 0, 2, "input [T, D]");
  c.require(c.operand(0).elem.kind() == ElemType::F32, "input (operand 0) must be f32, got " + c.operand(0).str());
  const Shape& x = c.operand(0).shape;
  const Shape want = {x[0], c.operand(1).rank() == 2 ? c.operand(1).shape[1] : Dim(0)};
  c.require(c.operand(1).elem.kind() == ElemType::F32 && c.operand(1).shape == want,
            "weights (operand 1) must be [" + x[0].str() + ", k] f32, got " + c.operand(1).str());
  c.require(c.operand(2).elem.kind() == ElemType::I32 && c.operand(2).shape == want,
            "ids (operand 2) must be " + dims_str(want) + " i32 like the weights, got " + c.operand(2).str());
  const MoeFfnAttrs a = c.attrs<MoeFfnAttrs>();
  if (a.activation == MoeActivationKind::SwigluOai) c.require(a.limit > 0, "activation swiglu_oai needs a positive limit");
  MoeExperts experts;
  try {
    experts = MoeExperts::of(c.op);
  } catch (const Error& e) {
    c.fail(e.what());
  }
  const auto slots = experts.slots();
  for (size_t s = 0; s < slots.size(); ++s) {
    const size_t i = 3 + s;
    if (slots[s].scale || slots[s].bias) continue;  // checked below, once E is known
    const std::string role = slots[s].role;
    require_rank(c, i, 3, role);
    c.require(!c.operand(i).elem.is_integer(), role + " (operand " + std::to_string(i) + ") must be float or quantized");
  }
  const Shape& d = experts.down.type().shape;
  Dim n_expert, ffn;
  if (experts.merged()) {
    const Shape& gu = experts.gate_up.type().shape;
    require_same_dim(c, gu[2], x[1], "expert input dim and model dim differ");
    const auto rows = gu[1].constant();
    c.require(rows && *rows % 2 == 0,
              "gate_up experts " + dims_str(gu) + " must have an even constant row count (gate rows, then up rows)");
    n_expert = gu[0], ffn = Dim(*rows / 2);
  } else {
    const Shape &g = experts.gate.type().shape, &u = experts.up.type().shape;
    c.require(g == u, "gate experts " + dims_str(g) + " and up experts " + dims_str(u) + " must have the same shape");
    require_same_dim(c, g[2], x[1], "expert input dim and model dim differ");
    n_expert = g[0], ffn = g[1];
  }
  c.require(d[0] == n_expert && d[1] == x[1] && d[2] == ffn,
            "down experts must be " + dims_str({n_expert, x[1], ffn}) + ", got " + dims_str(d));
  for (size_t s = 0; s < slots.size(); ++s) {
    if (!slots[s].bias) continue;
    const TensorType& t = slots[s].value.type();
    const Value stack = slots[s].value == experts.down_bias ? experts.down : experts.merged() ? experts.gate_up : experts.gate;
    const Shape want = {n_expert, stack.type().shape[1]};
    c.require(t.elem.kind() == ElemType::F32 && t.shape == want,
              std::string(slots[s].role) + " (operand " + std::to_string(3 + s) + ") must be " + dims_str(want) +
                  " f32 (one row per expert), got " + t.str());
  }
  for (size_t s = 0; s < slots.size(); ++s) {
    if (!slots[s].scale) continue;
    const std::string role = slots[s].role;
    const TensorType& t = slots[s].value.type();
    c.require(t.elem.kind() == ElemType::F32 && t.shape == Shape{n_expert},
              role + " (operand " + std::to_string(3 + s) + ") must be " + dims_str({n_expert}) +
                  " f32 (one factor per expert), got " + t.str());
  }
  c.results.push_back(like_first(c, ElemType::F32, x));
}

void infer_reshape(InferContext& c) {
  const Shape to = c.attrs<ReshapeAttrs>().shape;
  require_valid_shape(c, to);
  const Shape& from = c.operand(0).shape;
  c.require(product(from) == product(to),
            "reshape from " + dims_str(from) + " to " + dims_str(to) + " changes the element count");
  c.results.push_back(like_first(c, c.operand(0).elem, to));
}

void infer_view(InferContext& c) {
  const ViewAttrs a = c.attrs<ViewAttrs>();
  const Shape& to = a.shape;
  require_valid_shape(c, to);
  const Dim& offset = a.offset;
  auto off = offset.constant();
  c.require(!off || *off >= 0, "view offset must be non-negative");
  auto end = (offset + product(to)).constant();
  auto size = product(c.operand(0).shape).constant();
  c.require(!end || !size || *end <= *size, "view [" + offset.str() + ", " + (offset + product(to)).str() +
                                                ") exceeds the " + product(c.operand(0).shape).str() + " elements of its input");
  c.results.push_back(like_first(c, c.operand(0).elem, to));
}

void infer_transpose(InferContext& c) {
  const std::vector<int64_t> perm = c.attrs<TransposeAttrs>().perm;
  const Shape& x = c.operand(0).shape;
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool is_perm = sorted.size() == x.size();
  for (size_t i = 0; is_perm && i < sorted.size(); ++i) is_perm = sorted[i] == static_cast<int64_t>(i);
  c.require(is_perm, "perm must be a permutation of 0.." + std::to_string(x.size()) + "-1");
  Shape s;
  for (int64_t p : perm) s.push_back(x[static_cast<size_t>(p)]);
  c.results.push_back(like_first(c, c.operand(0).elem, s));
}

void infer_concat(InferContext& c) {
  const TensorType& first = c.operand(0);
  size_t axis = checked_axis(c, c.attrs<ConcatAttrs>().axis, first.rank());
  Shape s = first.shape;
  for (size_t i = 1; i < c.op.operands.size(); ++i) {
    const TensorType& t = c.operand(i);
    c.require(t.elem == first.elem && t.rank() == first.rank(), "operand " + std::to_string(i) + " " + t.str() +
                                                                   " does not match operand 0 " + first.str());
    for (size_t d = 0; d < s.size(); ++d)
      if (d != axis) require_same_dim(c, t.shape[d], first.shape[d], "operand " + std::to_string(i) + " dim " + std::to_string(d) + " differs");
    s[axis] = s[axis] + t.shape[axis];
  }
  c.results.push_back(like_first(c, first.elem, s));
}

void infer_slice(InferContext& c) {
  const Shape& x = c.operand(0).shape;
  const SliceAttrs a = c.attrs<SliceAttrs>();
  size_t axis = checked_axis(c, a.axis, x.size());
  const Dim& start = a.start;
  const Dim& size = a.size;
  auto k0 = start.constant(), n = size.constant(), end = (start + size).constant(), lim = x[axis].constant();
  c.require((!k0 || *k0 >= 0) && (!n || *n >= 0), "slice start and size must be non-negative");
  c.require(!end || !lim || *end <= *lim, "slice [" + start.str() + ", " + (start + size).str() + ") exceeds dim " + x[axis].str());
  Shape s = x;
  s[axis] = size;
  c.results.push_back(like_first(c, c.operand(0).elem, s));
}

// x[:axis] + idx.shape + x[axis+1:]: the shape both gather and scatter use.
Shape gathered_shape(const InferContext& c) {
  const Shape& x = c.operand(0).shape;
  const int64_t axis_value = c.op.kind == OpKind::Gather ? c.attrs<GatherAttrs>().axis : c.attrs<ScatterAttrs>().axis;
  size_t axis = checked_axis(c, axis_value, x.size());
  require_index(c, 1, "indices");
  Shape s(x.begin(), x.begin() + static_cast<long>(axis));
  const Shape& idx = c.operand(1).shape;
  s.insert(s.end(), idx.begin(), idx.end());
  s.insert(s.end(), x.begin() + static_cast<long>(axis) + 1, x.end());
  return s;
}

void infer_gather(InferContext& c) {
  require_rank_at_least(c, 0, 1, "input");
  c.results.push_back(like_first(c, c.operand(0).elem, gathered_shape(c)));
}

void infer_scatter(InferContext& c) {
  require_rank_at_least(c, 0, 1, "input");
  Shape want = gathered_shape(c);
  c.require(c.operand(2).elem == c.operand(0).elem && c.operand(2).shape == want,
            "updates (operand 2) must be " + dims_str(want) + " " + c.operand(0).elem.name() + ", got " + c.operand(2).str());
  c.results.push_back(c.operand(0));
}

namespace {

// ids [T], seq [T] i32 (sequence slot of each token), history [S, n-1] i64.
void require_ngram_operands(const InferContext& c, size_t ids, size_t seq, size_t history) {
  require_rank(c, ids, 1, "ids");
  require_index(c, ids, "ids");
  c.require(c.operand(seq).elem.kind() == ElemType::I32 && c.operand(seq).rank() == 1 &&
                c.operand(seq).shape[0] == c.operand(ids).shape[0],
            "sequence ids (operand " + std::to_string(seq) + ") must be [" + c.operand(ids).shape[0].str() + "] i32");
  c.require(c.operand(history).elem.kind() == ElemType::I64 && c.operand(history).rank() == 2,
            "history (operand " + std::to_string(history) + ") must be [S, n-1] i64, got " + c.operand(history).str());
}

}  // namespace

void infer_ngram_hash(InferContext& c) {
  require_ngram_operands(c, 0, 1, 2);
  const NgramHashAttrs a = c.attrs<NgramHashAttrs>();
  const int64_t n = a.n, per_gram = a.heads_per_gram;
  c.require(n >= 2 && n <= 16, "n must be in [2, 16]");
  c.require(per_gram >= 1 && per_gram <= 256, "heads_per_gram must be in [1, 256]");
  c.require(c.operand(2).shape[1] == Dim(n - 1), "history must keep n-1 = " + std::to_string(n - 1) + " tokens per sequence");
  c.require(a.eos >= 0, "eos must be a token id");
  const int64_t heads = (n - 1) * per_gram;
  c.require(a.mult.size() == static_cast<size_t>(n), "mult must have n = " + std::to_string(n) + " entries");
  const auto& vocab = a.vocab;
  const auto& offset = a.offset;
  c.require(vocab.size() == static_cast<size_t>(heads) && offset.size() == static_cast<size_t>(heads),
            "vocab and offset must have (n-1)*heads_per_gram = " + std::to_string(heads) + " entries");
  for (size_t h = 0; h < vocab.size(); ++h)
    c.require(vocab[h] > 0 && offset[h] >= 0 && vocab[h] <= INT32_MAX - offset[h],
              "head " + std::to_string(h) + ": vocab must be positive and offset + vocab must fit in i32");
  c.results.push_back(like_first(c, ElemType::I32, {c.operand(0).shape[0], heads}));
}

void infer_ngram_roll(InferContext& c) {
  require_ngram_operands(c, 1, 2, 0);
  c.require(c.attrs<NgramRollAttrs>().eos >= 0, "eos must be a token id");
  c.results.push_back(c.operand(0));
}

void infer_return(InferContext&) {}

// A fused op produces what its body returns, where the op runs.
void infer_fused(InferContext& c) {
  c.require(c.op.body != nullptr, "a fused op needs a body");
  const Function& body = *c.op.body;
  c.require(!body.ops.empty() && body.ops.back()->kind == OpKind::Return, "the body of a fused op must end with return");
  c.require(body.args.size() == c.op.operands.size(), "the body takes " + std::to_string(body.args.size()) +
                                                          " arguments but the op has " + std::to_string(c.op.operands.size()) + " operands");
  for (size_t i = 0; i < body.args.size(); ++i)
    c.require(body.args[i].type() == c.operand(i), "body argument " + std::to_string(i) + " is " + body.args[i].type().str() +
                                                       " but operand " + std::to_string(i) + " is " + c.operand(i).str());
  for (const Value& v : body.ops.back()->operands) c.results.push_back(like_first(c, v.type().elem, v.type().shape));
}

}  // namespace vtc::ir
