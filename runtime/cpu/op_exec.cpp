// One execution function per op of ir/ops.def, and the dispatch table built
// from that file: adding an op without a CPU implementation fails to
// compile here. Numerics are the kernels' (runtime/cpu/kernels/kernels.h).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "frontends/gguf/dequant.h"
#include "ir/builder.h"
#include "ir/op_attrs.h"
#include "passes/memory_plan.h"
#include "runtime/cpu/exec_context.h"
#include "runtime/cpu/kernels/indexer.h"
#include "runtime/cpu/kernels/internal.h"
#include "runtime/cpu/kernels/kernels.h"
#include "runtime/cpu/kernels/linear_attention.h"
#include "runtime/cpu/kernels/ssm_scan.h"
#include "runtime/cpu/kernels/moe.h"
#include "support/error.h"

namespace vtc::cpu {

int64_t elem_bytes(const ir::ElemType& e) { return e.scalar_bytes(); }

GgmlType ggml_type_of(const ir::ElemType& e) {
  switch (e.kind()) {
    case ir::ElemType::F32: return GgmlType::F32;
    case ir::ElemType::F16: return GgmlType::F16;
    case ir::ElemType::BF16: return GgmlType::BF16;
    case ir::ElemType::I32: return GgmlType::I32;
    case ir::ElemType::I64: return GgmlType::I64;
    case ir::ElemType::U8: return GgmlType::I8;
    case ir::ElemType::Quant: return e.quant_type();
  }
  return GgmlType::F32;
}

namespace {

[[noreturn]] void fail(const ir::Op& op, const std::string& why) {
  throw Error(fmt::format("cpu: op '{}' at {}:{}: {}", op.mnemonic(), op.loc.line, op.loc.column, why));
}

void require_f32(const ir::Op& op, const Buf& b, const char* what) {
  if (b.elem.kind() != ir::ElemType::F32)
    fail(op, fmt::format("{} must be f32 on the cpu, got {}", what, b.elem.name()));
}

// Index values of any integer element type, widened.
int64_t index_at(const Buf& b, int64_t i) {
  switch (b.elem.kind()) {
    case ir::ElemType::I32: return b.as<int32_t>()[i];
    case ir::ElemType::I64: return b.as<int64_t>()[i];
    case ir::ElemType::U8: return b.as<uint8_t>()[i];
    default: return -1;
  }
}

int64_t sequence_slot(ExecContext& c, const ir::Op& op, int64_t seq_index) {
  if (seq_index < 0 || seq_index >= int64_t(c.slots.size()))
    fail(op, fmt::format("sequence index {} is outside the step's {} sequences", seq_index, c.slots.size()));
  return c.slots[size_t(seq_index)];
}

// --- ops the driver handles itself (no data movement) ---------------------
void exec_driver_only(ExecContext&, const ir::Op& op) { fail(op, "handled by the interpreter driver"); }

// --- state -----------------------------------------------------------------
void exec_state_rows(ExecContext& c, const ir::Op& op, bool write) {
  HostStates::Buffer& s = c.states.buffer(*ir::state_symbol(op));
  if (s.decl->kind == ir::StateKind::Paged) fail(op, "paged states are read by attention, not state_read/state_write");
  const Buf& b = write ? c.in(op, 0) : c.out(op);
  const uint64_t row = uint64_t(s.row_elems * s.elem_bytes);
  for (size_t i = 0; i < c.slots.size(); ++i) {
    auto bytes = c.states.slot_bytes(s, c.slots[i]);
    if (write) std::memcpy(bytes.data(), b.data + i * row, row);
    else std::memcpy(b.data + i * row, bytes.data(), row);
  }
}
void exec_StateRead(ExecContext& c, const ir::Op& op) { exec_state_rows(c, op, false); }
void exec_StateWrite(ExecContext& c, const ir::Op& op) { exec_state_rows(c, op, true); }

// --- gathers and matmul ----------------------------------------------------
void exec_Embed(ExecContext& c, const ir::Op& op) {
  const Buf& table = c.in(op, 0);
  const Buf& ids = c.in(op, 1);
  if (table.elem.layout() != WeightLayout::Rows) fail(op, "the table must be in the rows layout, got " + table.elem.name());
  std::vector<int32_t> rows(size_t(ids.numel));
  for (int64_t i = 0; i < ids.numel; ++i) rows[size_t(i)] = int32_t(index_at(ids, i));
  embed_rows(ggml_type_of(table.elem), table.data, table.shape[0], table.shape[1], rows.data(), ids.numel,
             c.out(op).as<float>());
}

void exec_Matmul(ExecContext& c, const ir::Op& op) {
  const Buf& x = c.in(op, 0);
  const Buf& w = c.in(op, 1);
  require_f32(op, x, "input");
  matmul(ggml_type_of(w.elem), w.data, w.shape[0], w.shape[1], x.as<float>(), x.rows(), c.out(op).as<float>(), c.pool,
         w.elem.layout(), c.token_order);
}

// --- elementwise -----------------------------------------------------------
template <void (*Kernel)(const float*, const float*, float*, int64_t)>
void exec_binary(ExecContext& c, const ir::Op& op) {
  const Buf& a = c.in(op, 0);
  const Buf& b = c.in(op, 1);
  require_f32(op, a, "operand 0");
  const Buf& y = c.out(op);
  const size_t rank = a.shape.size(), lead = rank - b.shape.size();
  if (std::equal(b.shape.begin(), b.shape.end(), a.shape.begin() + long(lead))) {
    // b equals a trailing part of a's shape: apply it to each block of a.
    for (int64_t off = 0; off < a.numel; off += b.numel)
      Kernel(a.as<float>() + off, b.as<float>(), y.as<float>() + off, b.numel);
    return;
  }
  // b has size-1 dims: walk a row by row (last dim), finding b's row from
  // the row's multi-index; a last dim of 1 in b repeats its one value.
  const int64_t n = a.last_dim(), b_last = b.shape.back();
  std::vector<float> repeated(static_cast<size_t>(n));
  for (int64_t row = 0; row < a.rows(); ++row) {
    int64_t rest = row, b_offset = 0, b_stride = b_last;
    for (size_t d = rank - 1; d-- > lead;) {
      const int64_t bd = b.shape[d - lead], index = rest % a.shape[d];
      rest /= a.shape[d];
      if (bd != 1) b_offset += index * b_stride;
      b_stride *= bd;
    }
    const float* b_row = b.as<float>() + b_offset;
    if (b_last == 1) std::fill(repeated.begin(), repeated.end(), *b_row), b_row = repeated.data();
    Kernel(a.as<float>() + row * n, b_row, y.as<float>() + row * n, n);
  }
}
void exec_Add(ExecContext& c, const ir::Op& op) { exec_binary<add>(c, op); }
void exec_Mul(ExecContext& c, const ir::Op& op) { exec_binary<mul>(c, op); }
// ggml_vec_div_f32: one IEEE division per element, so any order is exact.
void divide(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] / b[i];
}
void exec_Div(ExecContext& c, const ir::Op& op) { exec_binary<divide>(c, op); }

template <void (*Kernel)(const float*, float*, int64_t)>
void exec_unary(ExecContext& c, const ir::Op& op) {
  require_f32(op, c.in(op, 0), "input");
  Kernel(c.in(op, 0).as<float>(), c.out(op).as<float>(), c.in(op, 0).numel);
}
void exec_Silu(ExecContext& c, const ir::Op& op) { exec_unary<silu>(c, op); }
void exec_Gelu(ExecContext& c, const ir::Op& op) { exec_unary<gelu>(c, op); }
void exec_Sigmoid(ExecContext& c, const ir::Op& op) { exec_unary<sigmoid>(c, op); }
void exec_Tanh(ExecContext& c, const ir::Op& op) { exec_unary<tanh_values>(c, op); }
void exec_Softplus(ExecContext& c, const ir::Op& op) { exec_unary<softplus>(c, op); }
void exec_Exp(ExecContext& c, const ir::Op& op) { exec_unary<exp>(c, op); }
void exec_Neg(ExecContext& c, const ir::Op& op) { exec_unary<neg>(c, op); }
void exec_Abs(ExecContext& c, const ir::Op& op) { exec_unary<absolute>(c, op); }
void exec_Sign(ExecContext& c, const ir::Op& op) { exec_unary<sgn>(c, op); }
void exec_Sqrt(ExecContext& c, const ir::Op& op) { exec_unary<square_root>(c, op); }
void exec_Clamp(ExecContext& c, const ir::Op& op) {
  require_f32(op, c.in(op, 0), "input");
  // ggml keeps the bounds as float op params: round them the same way.
  const ir::ClampAttrs a = ir::ClampAttrs::of(op);
  clamp_values(c.in(op, 0).as<float>(), float(a.min), float(a.max),
               c.out(op).as<float>(), c.in(op, 0).numel);
}
void exec_Scale(ExecContext& c, const ir::Op& op) {
  require_f32(op, c.in(op, 0), "input");
  scale(c.in(op, 0).as<float>(), float(ir::ScaleAttrs::of(op).factor), c.out(op).as<float>(), c.in(op, 0).numel);
}

float load_float(const Buf& b, int64_t i) {
  switch (b.elem.kind()) {
    case ir::ElemType::F32: return b.as<float>()[i];
    case ir::ElemType::F16: return fp16_to_fp32(b.as<uint16_t>()[i]);
    case ir::ElemType::BF16: return bf16_to_fp32(b.as<uint16_t>()[i]);
    default: return float(index_at(b, i));
  }
}

void exec_Cast(ExecContext& c, const ir::Op& op) {
  const Buf& x = c.in(op, 0);
  const Buf& y = c.out(op);
  for (int64_t i = 0; i < x.numel; ++i) {
    float v = load_float(x, i);
    int64_t iv = x.elem.is_integer() ? index_at(x, i) : int64_t(v);
    switch (y.elem.kind()) {
      case ir::ElemType::F32: y.as<float>()[i] = v; break;
      case ir::ElemType::F16: y.as<uint16_t>()[i] = fp32_to_fp16(v); break;
      case ir::ElemType::BF16: y.as<uint16_t>()[i] = fp32_to_bf16(v); break;
      case ir::ElemType::I32: y.as<int32_t>()[i] = int32_t(iv); break;
      case ir::ElemType::I64: y.as<int64_t>()[i] = iv; break;
      case ir::ElemType::U8: y.as<uint8_t>()[i] = uint8_t(iv); break;
      case ir::ElemType::Quant: fail(op, "cannot cast to a quantized type");
    }
  }
}

// --- norms, rope, attention ------------------------------------------------
void exec_RmsNorm(ExecContext& c, const ir::Op& op) {
  const Buf& x = c.in(op, 0);
  const Buf& w = c.in(op, 1);
  require_f32(op, x, "input");
  require_f32(op, w, "weight");
  const float eps = float(ir::RmsNormAttrs::of(op).eps);
  const int64_t cols = x.last_dim(), groups = w.rows();
  if (groups == 1) return rms_norm(x.as<float>(), w.as<float>(), eps, x.rows(), cols, c.out(op).as<float>());
  // A grouped weight [G, D]: row r takes gain row r % G.
  for (int64_t r = 0; r < x.rows(); ++r)
    rms_norm(x.as<float>() + r * cols, w.as<float>() + (r % groups) * cols, eps, 1, cols, c.out(op).as<float>() + r * cols);
}

void exec_LayerNorm(ExecContext& c, const ir::Op& op) {
  const Buf& x = c.in(op, 0);
  require_f32(op, x, "input");
  const float* gain = nullptr;
  const float* bias = nullptr;
  if (op.operands.size() > 1) require_f32(op, c.in(op, 1), "gain"), gain = c.in(op, 1).as<float>();
  if (op.operands.size() > 2) require_f32(op, c.in(op, 2), "bias"), bias = c.in(op, 2).as<float>();
  layer_norm(x.as<float>(), gain, bias, float(ir::LayerNormAttrs::of(op).eps), x.rows(), x.last_dim(), c.out(op).as<float>());
}

// llm_graph_input_attn_temp::set_input's formula with its roundings: the
// sum and division in f32, the log and the affine map in double.
void exec_AttnTemp(ExecContext& c, const ir::Op& op) {
  const Buf& pos = c.in(op, 0);
  float* y = c.out(op).as<float>();
  const ir::AttnTempAttrs a = ir::AttnTempAttrs::of(op);
  const float floor_scale = float(a.floor_scale);
  const float offset = float(a.offset);
  const double scale = double(float(a.scale));
  for (int64_t t = 0; t < pos.numel; ++t) {
    const float p = float(pos.as<int32_t>()[t]);
    y[t] = float(std::log(double(std::floor((p + offset) / floor_scale)) + 1.0) * scale + 1.0);
  }
}

}  // namespace

// The rope attributes of `rope` and `indexer_select` (which has no YaRN
// ones: their defaults leave it off).
RopeParams rope_params(const ir::Op& op) {
  ir::RopeAttrs a;
  if (op.kind == ir::OpKind::IndexerSelect) {
    const ir::IndexerSelectAttrs s = ir::IndexerSelectAttrs::of(op);
    a.mode = s.mode, a.n_rot = s.n_rot, a.base = s.base, a.freq_scale = s.freq_scale, a.sections = s.sections;
  } else {
    a = ir::RopeAttrs::of(op);
  }
  RopeParams p;
  p.n_dims = a.n_rot;
  p.mode = a.mode;
  if (!a.sections.empty()) {
    if (a.sections.size() != 4) fail(op, "'sections' must hold 4 values");
    for (size_t i = 0; i < 4; ++i) p.sections[i] = int32_t(a.sections[i]);
  }
  p.freq_base = float(a.base);
  p.freq_scale = float(a.freq_scale);
  p.attn_factor = float(a.attn_factor);
  p.ext_factor = float(a.ext_factor);
  if (p.ext_factor != 0.0f)
    rope_yarn_corr_dims(p.n_dims, a.n_ctx_orig, p.freq_base, float(a.beta_fast), float(a.beta_slow), p.corr_dims);
  return p;
}

namespace {

void exec_Rope(ExecContext& c, const ir::Op& op) {
  const Buf& x = c.in(op, 0);
  require_f32(op, x, "input");
  RopeParams p = rope_params(op);
  if (op.operands.size() == 3) p.freq_factors = c.in(op, 2).as<float>();
  rope(x.as<float>(), x.shape[0], x.shape[1], x.shape[2], c.in(op, 1).as<int32_t>(), p, c.out(op).as<float>());
}

// Rows `members` of a [T, row] buffer, in order, into dst; returns dst's data.
template <typename T>
const T* gather_rows(const T* src, const std::vector<int32_t>& members, int64_t row, std::vector<T>& dst) {
  dst.resize(members.size() * size_t(row));
  for (size_t i = 0; i < members.size(); ++i)
    std::memcpy(dst.data() + i * size_t(row), src + members[i] * row, size_t(row) * sizeof(T));
  return dst.data();
}

// Stores row t of src ([T, row] f32) at token t's position in half `half`
// of the paged state `b`, converted to its element type as the reference's
// KV store converts (quantize_kv_row), through its sequence's page table,
// for every token of the step (before any token reads the state).
void append_rows(ExecContext& c, const ir::Op& op, HostStates::Buffer& b, int half, const float* src, int64_t row,
                 const Buf& pos, const Buf& seq) {
  const GgmlType type = ggml_type_of(b.elem);
  for (int64_t t = 0; t < pos.numel; ++t) {
    const int32_t p = pos.as<int32_t>()[t];
    if (p < 0 || p >= b.rows_per_slot)
      fail(op, fmt::format("position {} is outside the context of {} tokens", p, b.rows_per_slot));
    uint8_t* dst = c.states.kv_row(b, int32_t(sequence_slot(c, op, seq.as<int32_t>()[t])), half, p);
    quantize_kv_row(type, src + t * row, dst, row);
  }
}

// llama.cpp's flash attention casts an f32 cache's view to f16 before it
// attends (build_attn_mha: "this can happen when KV cache is not used"), so
// an f32 cache stores f32 and attends as f16: the sequence's rows [0,
// p.n_kv) are gathered through its page table into dense copies, the f32
// half rounded to f16 (round to nearest even, as ggml_cast), and p reads
// those (no page table).
void read_f32_cache_as_f16(ExecContext& c, HostStates::Buffer& kv, HostStates::Buffer& v_kv, int v_half,
                           AttentionParams& p, const void*& k_rows, const void*& v_rows) {
  thread_local std::vector<uint8_t> k_dense, v_dense;
  const auto to_f16 = detail::active_float_kernels().f32_to_f16;
  auto gather = [&](HostStates::Buffer& b, int half, GgmlType& type, int64_t row_elems, std::vector<uint8_t>& dense) {
    const uint64_t src_bytes = b.layout->row_bytes();
    const uint64_t dst_bytes = type == GgmlType::F32 ? uint64_t(row_elems) * 2 : src_bytes;
    dense.resize(size_t(p.n_kv) * dst_bytes);
    const uint8_t* pool = c.states.pool_base(b, half);
    for (int64_t j = 0; j < p.n_kv; ++j) {
      const int64_t r = int64_t(p.page_table[j / p.page_size]) * p.page_size + j % p.page_size;
      const uint8_t* src = pool + uint64_t(r) * src_bytes;
      uint8_t* dst = dense.data() + uint64_t(j) * dst_bytes;
      if (type == GgmlType::F32) to_f16(reinterpret_cast<const float*>(src), reinterpret_cast<uint16_t*>(dst), row_elems);
      else std::memcpy(dst, src, src_bytes);
    }
    if (type == GgmlType::F32) type = GgmlType::F16;
    return dense.data();
  };
  k_rows = gather(kv, 0, p.k_type, p.n_head_kv * p.head_dim, k_dense);
  v_rows = gather(v_kv, v_half, p.v_type, p.n_head_kv * p.head_dim_v, v_dense);
  p.page_table = nullptr;
}

// The tokens of each sequence of a step, in order: their indices, their
// positions and the rows their attention reads (last position + 1).
struct SequenceRows {
  int32_t seq = 0;
  std::vector<int32_t> members, q_pos;
  int64_t n_kv = 0;
  int64_t cost() const { return int64_t(members.size()) * n_kv; }  // query rows x cache rows
};

std::vector<SequenceRows> sequences_of(const Buf& seq, const Buf& pos) {
  std::vector<SequenceRows> out;
  std::vector<bool> done(size_t(seq.numel), false);
  for (int64_t first = 0; first < seq.numel; ++first) {
    if (done[size_t(first)]) continue;
    SequenceRows sr;
    sr.seq = seq.as<int32_t>()[first];
    for (int64_t t = first; t < seq.numel; ++t)
      if (seq.as<int32_t>()[t] == sr.seq) {
        sr.members.push_back(int32_t(t));
        sr.q_pos.push_back(pos.as<int32_t>()[t]);
        done[size_t(t)] = true;
      }
    sr.n_kv = *std::max_element(sr.q_pos.begin(), sr.q_pos.end()) + 1;
    out.push_back(std::move(sr));
  }
  return out;
}

int64_t total_cost(const std::vector<SequenceRows>& seqs) {
  int64_t sum = 0;
  for (const SequenceRows& sr : seqs) sum += sr.cost();
  return sum;
}

// Calls attend(sr) for every sequence. A sequence that costs more than
// half a thread's share of the step attends with the whole pool; the
// others are spread over the pool one sequence per worker at a time, each
// attending on its worker (the kernel's own parallel_for runs inline there,
// with the same split, so the same bits). Why: a decode step of 8
// sequences was 160 small parallel regions per step; a few large sequences
// (3 prefill chunks on 2 threads) still split each one, not 2 + 1.
template <class Attend>
void attend_sequences(ThreadPool& pool, const std::vector<SequenceRows>& seqs, Attend&& attend) {
  std::vector<size_t> shared;
  const int64_t share = total_cost(seqs) / (2 * std::max(1, pool.size()));
  for (size_t i = 0; i < seqs.size(); ++i)
    if (seqs.size() == 1 || seqs[i].cost() > share) attend(seqs[i]);
    else shared.push_back(i);
  pool.parallel_for(int64_t(shared.size()), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) attend(seqs[shared[size_t(i)]]);
  });
}

// Appends each token's K/V row to its sequence's cache at its position,
// then attends per sequence over that sequence's cache.
void exec_Attention(ExecContext& c, const ir::Op& op) {
  const Buf &q = c.in(op, 0), &k = c.in(op, 1), &v = c.in(op, 2), &pos = c.in(op, 3), &seq = c.in(op, 4);
  const Buf& out = c.out(op);
  const ir::AttentionAttrs a = ir::AttentionAttrs::of(op);
  // K and V share one state [2, ...], or (v_state: the halves hold
  // different types) live in two [1, ...] states.
  HostStates::Buffer& kv = c.states.buffer(a.state);
  HostStates::Buffer& v_kv = a.v_state.empty() ? kv : c.states.buffer(a.v_state);
  const int v_half = a.v_state.empty() ? 1 : 0;
  const int64_t n_tokens = q.shape[0], n_head = q.shape[1], n_head_kv = k.shape[1], head_dim = q.shape[2];
  const int64_t row = n_head_kv * head_dim, v_row = n_head_kv * v.shape[2];
  // Write this step's K and V rows first, so a token sees the keys of
  // earlier tokens in the same step.
  append_rows(c, op, kv, 0, k.as<float>(), row, pos, seq);
  append_rows(c, op, v_kv, v_half, v.as<float>(), v_row, pos, seq);
  AttentionParams p;
  p.n_head = n_head;
  p.n_head_kv = n_head_kv;
  p.head_dim = head_dim;
  p.head_dim_v = v.shape[2];
  p.k_type = ggml_type_of(kv.elem);
  p.v_type = ggml_type_of(v_kv.elem);
  p.scale = float(a.scale);
  p.softcap = float(a.softcap);
  p.causal = a.causal;
  p.n_swa = int32_t(a.window);
  p.n_chunk = int32_t(a.chunk);
  p.alibi_max_bias = float(a.alibi_max_bias);
  p.page_size = c.states.page_size();
  const int64_t q_row = n_head * head_dim;
  // Operand 5, when present: the positions each query may read (from
  // indexer_select). With `sinks` the last operand holds the [Hq] sink logits.
  const bool has_sinks = a.sinks;
  const size_t n_base = has_sinks ? 6 : 5;
  const Buf* selected = op.operands.size() == n_base + 1 ? &c.in(op, 5) : nullptr;
  if (has_sinks) {
    const Buf& sinks = c.in(op, op.operands.size() - 1);
    require_f32(op, sinks, "sinks");
    if (sinks.numel != n_head) fail(op, fmt::format("sinks hold {} values for {} query heads", sinks.numel, n_head));
    p.sinks = sinks.as<float>();
  }
  p.selected_width = selected != nullptr ? selected->shape[1] : 0;
  // Tokens of one sequence are gathered in order, so any batch layout works.
  const std::vector<SequenceRows> seqs = sequences_of(seq, pos);
  auto attend = [&](const SequenceRows& sr) {
    // Kept between calls: fresh multi-MiB buffers cost a page fault per 4 KiB
    // on every call (~20 ms for a 512-token step of a 1280-wide model).
    thread_local std::vector<float> q_rows, out_rows;
    thread_local std::vector<int32_t> sel_rows;
    // One sequence (every token, in order) whose output does not overlap q:
    // attend in place, without gathering q and scattering the output.
    const float* q_src = q.as<float>();
    float* out_dst = out.as<float>();
    const bool whole = int64_t(sr.members.size()) == n_tokens &&
                       (out_dst + n_tokens * q_row <= q_src || q_src + n_tokens * q_row <= out_dst);
    if (!whole) {
      out_rows.resize(sr.members.size() * size_t(q_row));
      q_src = gather_rows(q.as<float>(), sr.members, q_row, q_rows);
      out_dst = out_rows.data();
    }
    AttentionParams call = p;  // this sequence's: an f32 cache's rows become an f16 copy
    if (selected != nullptr) call.selected = gather_rows(selected->as<int32_t>(), sr.members, p.selected_width, sel_rows);
    call.n_tokens = int64_t(sr.members.size());
    call.n_kv = sr.n_kv;
    const int32_t slot = int32_t(sequence_slot(c, op, sr.seq));
    const auto& table = c.states.page_table(slot);
    if (int64_t(table.size()) * p.page_size < call.n_kv)
      fail(op, fmt::format("slot {} maps {} KV pages, too few for position {}", slot, table.size(), call.n_kv - 1));
    call.page_table = table.data();
    const void* k_rows = c.states.pool_base(kv, 0);
    const void* v_rows = c.states.pool_base(v_kv, v_half);
    if (p.k_type == GgmlType::F32 || p.v_type == GgmlType::F32) read_f32_cache_as_f16(c, kv, v_kv, v_half, call, k_rows, v_rows);
    attention(q_src, k_rows, v_rows, sr.q_pos.data(), nullptr, call, out_dst, c.pool);
    if (whole) return;
    for (size_t i = 0; i < sr.members.size(); ++i)
      std::memcpy(out.as<float>() + sr.members[i] * q_row, out_rows.data() + i * q_row, size_t(q_row) * 4);
  };
  attend_sequences(c.pool, seqs, attend);
}

// Stores each token's raw key in the side cache first (a query reads the
// keys of earlier tokens of the same step), then selects per sequence.
void exec_IndexerSelect(ExecContext& c, const ir::Op& op) {
  const Buf &q = c.in(op, 0), &k = c.in(op, 1), &k_norm = c.in(op, 2), &pos = c.in(op, 3), &seq = c.in(op, 4);
  for (int i = 0; i < 3; ++i) require_f32(op, c.in(op, size_t(i)), i == 0 ? "q" : i == 1 ? "k" : "k_norm");
  const ir::IndexerSelectAttrs a = ir::IndexerSelectAttrs::of(op);
  HostStates::Buffer& cache = c.states.buffer(a.state);
  const int64_t n_tokens = q.shape[0], dim = k.shape[1];
  append_rows(c, op, cache, 0, k.as<float>(), dim, pos, seq);
  IndexerParams p{.n_tokens = n_tokens, .n_head = q.shape[1], .head_dim = dim, .ratio = a.ratio,
                  .top_k = a.top_k, .eps = float(a.eps), .rope = rope_params(op),
                  .cache = c.states.pool_base(cache, 0), .cache_type = ggml_type_of(cache.elem),
                  .page_size = c.states.page_size()};
  std::vector<IndexerTable> tables;
  for (int32_t slot : c.slots) {
    const auto& table = c.states.page_table(slot);
    tables.push_back({table.data(), int64_t(table.size())});
  }
  indexer_select(q.as<float>(), k_norm.as<float>(), pos.as<int32_t>(), seq.as<int32_t>(), tables.data(),
                 int64_t(tables.size()), p, c.out(op).as<int32_t>(), c.pool);
}

void exec_Hadamard(ExecContext& c, const ir::Op& op) {
  const Buf& x = c.in(op, 0);
  require_f32(op, x, "x");
  hadamard_rows(x.as<float>(), c.out(op).as<float>(), x.numel, ir::HadamardAttrs::of(op).block);
}

// --- linear attention (docs/ir.md: l2_norm, causal_conv1d, delta_rule) -----
void exec_L2Norm(ExecContext& c, const ir::Op& op) {
  const Buf& x = c.in(op, 0);
  require_f32(op, x, "input");
  l2_norm(x.as<float>(), float(ir::L2NormAttrs::of(op).eps), x.rows(), x.last_dim(), c.out(op).as<float>());
}

// The rows of a plain recurrent state, one per sequence of the step (by
// sequence index), for kernels that update them in place.
std::vector<float*> sequence_states(ExecContext& c, const ir::Op& op) {
  HostStates::Buffer& s = c.states.buffer(*ir::state_symbol(op));
  if (s.decl->kind != ir::StateKind::Plain || s.elem.kind() != ir::ElemType::F32)
    fail(op, "the recurrent state must be plain f32");
  std::vector<float*> rows(c.slots.size());
  for (size_t i = 0; i < rows.size(); ++i)
    rows[i] = reinterpret_cast<float*>(c.states.slot_bytes(s, int32_t(sequence_slot(c, op, int64_t(i)))).data());
  return rows;
}

void exec_CausalConv1d(ExecContext& c, const ir::Op& op) {
  const Buf &x = c.in(op, 0), &w = c.in(op, 1), &seq = c.in(op, 2);
  CausalConvParams p;
  p.n_tokens = x.shape[0];
  p.channels = x.shape[1];
  p.kernel = w.shape[1];
  p.dilation = ir::CausalConv1dAttrs::of(op).dilation;
  p.n_seqs = int64_t(c.slots.size());
  const auto states = sequence_states(c, op);
  try {
    causal_conv1d(x.as<float>(), w.as<float>(), seq.as<int32_t>(), states.data(), p, c.out(op).as<float>(), c.pool);
  } catch (const Error& e) {
    fail(op, e.what());
  }
}

void exec_DeltaRule(ExecContext& c, const ir::Op& op) {
  const Buf &q = c.in(op, 0), &v = c.in(op, 2);
  DeltaRuleParams p;
  p.n_tokens = q.shape[0];
  p.n_heads = q.shape[1];
  p.dk = q.shape[2];
  p.dv = v.shape[2];
  p.n_seqs = int64_t(c.slots.size());
  p.scale = float(ir::DeltaRuleAttrs::of(op).scale);
  p.gate_per_key = c.in(op, 3).shape.size() == 3;
  const auto states = sequence_states(c, op);
  try {
    delta_rule(q.as<float>(), c.in(op, 1).as<float>(), v.as<float>(), c.in(op, 3).as<float>(), c.in(op, 4).as<float>(),
               c.in(op, 5).as<int32_t>(), states.data(), p, c.out(op).as<float>(), c.pool);
  } catch (const Error& e) {
    fail(op, e.what());
  }
}

// --- state space models (docs/ir.md: ssm_scan) ------------------------------
void exec_SsmScan(ExecContext& c, const ir::Op& op) {
  const Buf &x = c.in(op, 0), &a = c.in(op, 2), &b = c.in(op, 3);
  const char* roles[] = {"x", "dt", "A", "B", "C"};
  for (size_t i = 0; i < 5; ++i) require_f32(op, c.in(op, i), roles[i]);
  SsmScanParams p;
  p.n_tokens = x.shape[0];
  p.n_heads = x.shape[1];
  p.head_dim = x.shape[2];
  p.n_groups = b.shape[1];
  p.state_size = b.shape[2];
  p.per_element_decay = a.shape[1] != 1;
  p.n_seqs = int64_t(c.slots.size());
  const auto states = sequence_states(c, op);
  try {
    ssm_scan(x.as<float>(), c.in(op, 1).as<float>(), a.as<float>(), b.as<float>(), c.in(op, 4).as<float>(),
             c.in(op, 5).as<int32_t>(), states.data(), p, c.out(op).as<float>(), c.pool);
  } catch (const Error& e) {
    fail(op, e.what());
  }
}

// --- reductions ------------------------------------------------------------
void exec_Softmax(ExecContext& c, const ir::Op& op) {
  const Buf& x = c.in(op, 0);
  require_f32(op, x, "input");
  softmax(x.as<float>(), x.rows(), x.last_dim(), 1.0f, c.out(op).as<float>());
}

void exec_Sum(ExecContext& c, const ir::Op& op) {
  const Buf& x = c.in(op, 0);
  require_f32(op, x, "input");
  // Rows from the [..., 1] result: an empty last dim still yields zeros.
  const Buf& y = c.out(op);
  sum_rows(x.as<float>(), y.numel, x.last_dim(), y.as<float>());
}

void exec_Argmax(ExecContext& c, const ir::Op& op) {
  const Buf& x = c.in(op, 0);
  require_f32(op, x, "input");
  for (int64_t r = 0; r < x.rows(); ++r)
    c.out(op).as<int32_t>()[r] = int32_t(argmax(x.as<float>() + r * x.last_dim(), x.last_dim()));
}

void exec_TopK(ExecContext& c, const ir::Op& op) {
  const Buf& x = c.in(op, 0);
  require_f32(op, x, "input");
  const int64_t k = ir::TopKAttrs::of(op).k, n = x.last_dim();
  for (int64_t r = 0; r < x.rows(); ++r) {
    int32_t* idx = c.out(op, 1).as<int32_t>() + r * k;
    top_k(x.as<float>() + r * n, n, k, idx);
    for (int64_t j = 0; j < k; ++j) c.out(op, 0).as<float>()[r * k + j] = x.as<float>()[r * n + idx[j]];
  }
}

// logits [S, V], params [S, 4], seed [S, 2] (low, high words), pos [S]
// (docs/ir.md: sample). Rows are independent and cheap next to the matmul
// that made the logits, so they run on the caller's thread.
void exec_Sample(ExecContext& c, const ir::Op& op) {
  const Buf& x = c.in(op, 0);
  require_f32(op, x, "logits");
  const float* params = c.in(op, 1).as<float>();
  const int32_t* seed = c.in(op, 2).as<int32_t>();
  const int32_t* pos = c.in(op, 3).as<int32_t>();
  const int64_t n = x.last_dim(), max_k = ir::SampleAttrs::of(op).max_k;
  for (int64_t r = 0; r < x.rows(); ++r) {
    const uint64_t s = uint64_t(uint32_t(seed[2 * r])) | uint64_t(uint32_t(seed[2 * r + 1])) << 32;
    c.out(op).as<int32_t>()[r] = sample_row(x.as<float>() + r * n, n, params + 4 * r, s, pos[r], max_k);
  }
}

// --- mixture of experts (docs/ir.md: moe_route, moe_ffn) -------------------
void exec_MoeRoute(ExecContext& c, const ir::Op& op) {
  const Buf& logits = c.in(op, 0);
  require_f32(op, logits, "router logits");
  const ir::MoeRouteAttrs a = ir::MoeRouteAttrs::of(op);
  MoeRouteParams p;
  p.k = a.k;
  p.gating = a.gating;
  p.norm = a.norm;
  p.scale = float(a.scale);
  if (op.operands.size() > 1) {
    require_f32(op, c.in(op, 1), "selection bias");
    p.selection_bias = c.in(op, 1).as<float>();
  }
  p.groups = a.groups;
  p.groups_used = a.groups_used;
  moe_route(logits.as<float>(), logits.rows(), logits.last_dim(), p, c.out(op, 0).as<float>(), c.out(op, 1).as<int32_t>());
}

// The activation attributes of a moe_ffn op.
MoeActivationParams moe_activation_of(const ir::MoeFfnAttrs& attrs) {
  return {.kind = attrs.activation, .alpha = float(attrs.alpha), .limit = float(attrs.limit)};
}

void exec_MoeFfn(ExecContext& c, const ir::Op& op) {
  const Buf &x = c.in(op, 0), &w = c.in(op, 1), &ids = c.in(op, 2);
  require_f32(op, x, "input");
  const ir::MoeFfnAttrs attrs = ir::MoeFfnAttrs::of(op);
  const ir::MoeExperts experts = ir::MoeExperts::of(op);
  auto f32_of = [&](ir::Value v, const char* what) -> const float* {
    if (!v) return nullptr;
    const Buf& b = c.buf(v.data());
    require_f32(op, b, what);
    return b.as<float>();
  };
  auto stack = [&](ir::Value v, ir::Value scale, ir::Value bias) {
    const Buf& b = c.buf(v.data());
    ExpertStack s{ggml_type_of(b.elem), b.data, b.shape[0], b.shape[1], b.shape[2]};
    s.scale = f32_of(scale, "expert scale");
    s.bias = f32_of(bias, "expert bias");
    return s;
  };
  ExpertStack gate, up;
  if (experts.merged()) {
    // Gate rows then up rows of each expert: two views of the one stack
    // (and of its [E, 2F] bias).
    gate = stack(experts.gate_up, {}, experts.gate_up_bias);
    gate.stride_rows = gate.rows;
    gate.rows /= 2;
    up = gate;
    up.first_row = gate.rows;
  } else {
    gate = stack(experts.gate, experts.gate_scale, experts.gate_bias);
    up = stack(experts.up, experts.up_scale, experts.up_bias);
  }
  moe_ffn(gate, up, stack(experts.down, experts.down_scale, experts.down_bias), x.as<float>(), x.rows(),
          w.as<float>(), ids.as<int32_t>(), w.last_dim(), c.out(op).as<float>(), c.pool, moe_activation_of(attrs),
          attrs.weight_input);
}

// --- data movement ---------------------------------------------------------
int64_t span_of(const std::vector<int64_t>& shape, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to && i < shape.size(); ++i) n *= shape[i];
  return n;
}

void exec_Transpose(ExecContext& c, const ir::Op& op) {
  const Buf& x = c.in(op, 0);
  const Buf& y = c.out(op);
  const std::vector<int64_t> perm = ir::TransposeAttrs::of(op).perm;
  const size_t rank = x.shape.size();
  const int64_t eb = elem_bytes(x.elem);
  std::vector<int64_t> in_stride(rank, 1);
  for (size_t i = rank; i-- > 1;) in_stride[i - 1] = in_stride[i] * x.shape[i];
  std::vector<int64_t> idx(rank, 0);
  for (int64_t o = 0; o < y.numel; ++o) {
    int64_t src = 0;
    for (size_t d = 0; d < rank; ++d) src += idx[d] * in_stride[size_t(perm[d])];
    std::memcpy(y.data + o * eb, x.data + src * eb, size_t(eb));
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < y.shape[d]) break;
      idx[d] = 0;
    }
  }
}

void exec_Concat(ExecContext& c, const ir::Op& op) {
  const Buf& y = c.out(op);
  const size_t axis = size_t(ir::ConcatAttrs::of(op).axis);
  const int64_t eb = elem_bytes(y.elem), outer = span_of(y.shape, 0, axis);
  const int64_t out_chunk = span_of(y.shape, axis, y.shape.size()) * eb;
  int64_t offset = 0;
  for (size_t i = 0; i < op.operands.size(); ++i) {
    const Buf& x = c.in(op, i);
    const int64_t chunk = span_of(x.shape, axis, x.shape.size()) * eb;
    for (int64_t o = 0; o < outer; ++o) std::memcpy(y.data + o * out_chunk + offset, x.data + o * chunk, size_t(chunk));
    offset += chunk;
  }
}

void exec_Slice(ExecContext& c, const ir::Op& op) {
  const Buf& x = c.in(op, 0);
  const Buf& y = c.out(op);
  const ir::SliceAttrs a = ir::SliceAttrs::of(op);
  const size_t axis = size_t(a.axis);
  auto start = a.start.constant();
  if (!start) fail(op, "symbolic slice starts are not supported on the cpu yet");
  const int64_t eb = elem_bytes(x.elem), outer = span_of(x.shape, 0, axis), inner = span_of(x.shape, axis + 1, x.shape.size()) * eb;
  const int64_t in_chunk = x.shape[axis] * inner, out_chunk = y.shape[axis] * inner;
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(y.data + o * out_chunk, x.data + o * in_chunk + *start * inner, size_t(out_chunk));
}

// Shared by gather and scatter: the row of `x` that index `i` selects.
struct AxisSplit {
  int64_t outer, inner_bytes, axis_len;
};
AxisSplit split_at(const Buf& x, size_t axis) {
  return {span_of(x.shape, 0, axis), span_of(x.shape, axis + 1, x.shape.size()) * elem_bytes(x.elem), x.shape[axis]};
}

int64_t checked_index(const ir::Op& op, const Buf& idx, int64_t i, int64_t limit) {
  int64_t v = index_at(idx, i);
  if (v < 0 || v >= limit) fail(op, fmt::format("index {} is out of range [0, {})", v, limit));
  return v;
}

void exec_Gather(ExecContext& c, const ir::Op& op) {
  const Buf& x = c.in(op, 0);
  const Buf& idx = c.in(op, 1);
  if (x.elem.is_quant()) fail(op, "gather keeps the element type; use embed for quantized rows");
  AxisSplit s = split_at(x, size_t(ir::GatherAttrs::of(op).axis));
  uint8_t* y = c.out(op).data;
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < idx.numel; ++i, y += s.inner_bytes)
      std::memcpy(y, x.data + (o * s.axis_len + checked_index(op, idx, i, s.axis_len)) * s.inner_bytes, size_t(s.inner_bytes));
}

void exec_Scatter(ExecContext& c, const ir::Op& op) {
  const Buf& x = c.in(op, 0);
  const Buf& idx = c.in(op, 1);
  const Buf& upd = c.in(op, 2);
  const Buf& y = c.out(op);
  std::memmove(y.data, x.data, storage_bytes(x.elem, x.numel));
  AxisSplit s = split_at(x, size_t(ir::ScatterAttrs::of(op).axis));
  const uint8_t* u = upd.data;
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < idx.numel; ++i, u += s.inner_bytes)
      std::memcpy(y.data + (o * s.axis_len + checked_index(op, idx, i, s.axis_len)) * s.inner_bytes, u, size_t(s.inner_bytes));
}

// --- n-gram hash (docs/ir.md: ngram_hash, ngram_roll) ----------------------
// The context of token t: ctx[0] = its id, ctx[s] the token s earlier in
// its sequence (this step first, then the history row, newest last); a
// missing, negative or eos predecessor cuts the context to eos.
std::vector<int64_t> ngram_context(const Buf& ids, const Buf& seq, const Buf& history, int64_t t, int64_t n, int64_t eos) {
  std::vector<int64_t> ctx(size_t(n), eos);
  ctx[0] = index_at(ids, t);
  const int32_t s = seq.as<int32_t>()[t];
  const int64_t width = history.last_dim();
  int64_t step_back = t - 1, hist_back = width - 1;
  for (int64_t k = 1; k < n; ++k) {
    int64_t prev = eos;
    while (step_back >= 0 && seq.as<int32_t>()[step_back] != s) --step_back;
    if (step_back >= 0) prev = index_at(ids, step_back--);
    else if (hist_back >= 0) prev = history.as<int64_t>()[s * width + hist_back--];
    if (prev < 0 || prev == eos) break;
    ctx[size_t(k)] = prev;
  }
  return ctx;
}

void exec_NgramHash(ExecContext& c, const ir::Op& op) {
  const Buf &ids = c.in(op, 0), &seq = c.in(op, 1), &history = c.in(op, 2);
  const ir::NgramHashAttrs a = ir::NgramHashAttrs::of(op);
  const int64_t n = a.n, hpg = a.heads_per_gram, eos = a.eos;
  const auto &mult = a.mult, &vocab = a.vocab, &offset = a.offset;
  const int64_t heads = (n - 1) * hpg;
  for (int64_t t = 0; t < ids.numel; ++t) {
    std::vector<int64_t> ctx = ngram_context(ids, seq, history, t, n, eos);
    uint64_t mixed = uint64_t(ctx[0]) * uint64_t(mult[0]);
    for (int64_t g = 2; g <= n; ++g) {
      mixed ^= uint64_t(ctx[size_t(g - 1)]) * uint64_t(mult[size_t(g - 1)]);
      for (int64_t j = 0; j < hpg; ++j) {
        const size_t h = size_t((g - 2) * hpg + j);
        c.out(op).as<int32_t>()[t * heads + int64_t(h)] = int32_t(mixed % uint64_t(vocab[h]) + uint64_t(offset[h]));
      }
    }
  }
}

void exec_NgramRoll(ExecContext& c, const ir::Op& op) {
  const Buf &history = c.in(op, 0), &ids = c.in(op, 1), &seq = c.in(op, 2);
  const Buf& y = c.out(op);
  const int64_t width = history.last_dim();
  std::memcpy(y.data, history.data, storage_bytes(history.elem, history.numel));
  for (int64_t t = 0; t < ids.numel; ++t) {
    int64_t* row = y.as<int64_t>() + seq.as<int32_t>()[t] * width;
    std::memmove(row, row + 1, size_t(width - 1) * 8);
    row[width - 1] = index_at(ids, t);
  }
}

}  // namespace

void exec_matmuls_shared_input(ExecContext& c, const std::vector<const ir::Op*>& matmuls) {
  const Buf& x = c.in(*matmuls.front(), 0);
  require_f32(*matmuls.front(), x, "input");
  std::vector<MatmulOutput> outputs;
  for (const ir::Op* op : matmuls) {
    const Buf& w = c.in(*op, 1);
    if (w.shape[1] != x.last_dim())
      throw Error(fmt::format("cpu: matmul {} has {} input columns but weight rows of {}", op->results[0]->name,
                              x.last_dim(), w.shape[1]));
    outputs.push_back({ggml_type_of(w.elem), w.data, w.shape[0], c.out(*op).as<float>(), w.elem.layout()});
  }
  matmul_shared_input(outputs.data(), outputs.size(), x.last_dim(), x.as<float>(), x.rows(), c.pool, c.token_order);
}

namespace {
void exec_Weight(ExecContext& c, const ir::Op& op) { exec_driver_only(c, op); }
void exec_Return(ExecContext& c, const ir::Op& op) { exec_driver_only(c, op); }
void exec_Reshape(ExecContext& c, const ir::Op& op) { exec_driver_only(c, op); }
void exec_View(ExecContext& c, const ir::Op& op) { exec_driver_only(c, op); }
// On the CPU both places are host memory; a transfer is a copy between the
// two arenas of the memory plan.
void exec_transfer(ExecContext& c, const ir::Op& op) {
  std::memcpy(c.out(op).data, c.in(op, 0).data, storage_bytes(c.out(op).elem, c.out(op).numel));
}
void exec_ToHost(ExecContext& c, const ir::Op& op) { exec_transfer(c, op); }
void exec_ToDevice(ExecContext& c, const ir::Op& op) { exec_transfer(c, op); }
void exec_Fused(ExecContext& c, const ir::Op& op) { exec_driver_only(c, op); }

constexpr ExecFn kExec[] = {
#define VTC_OP(id, ...) &exec_##id,
#include "ir/ops.def"
#undef VTC_OP
};
}  // namespace

ExecFn exec_fn(ir::OpKind kind) { return kExec[static_cast<size_t>(kind)]; }

}  // namespace vtc::cpu
