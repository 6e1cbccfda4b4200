// The one Session (session.h): the step contract, chunking, reservation,
// checks; a backend chosen by target executes.
#include "runtime/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <set>
#include <tuple>

#include "ir/op_attrs.h"
#include "ir/step_interface.h"
#include "runtime/compile/compile.h"
#include "runtime/cpu/cpu_backend.h"
#include "frontends/gguf/arch/arch.h"
#include "runtime/cpu/kernels/kernels.h"
#include "runtime/cuda/executor.h"
#include "support/error.h"

namespace vtc {

namespace {
using ir::StepKind;
namespace step = ir::step;

// A request for step `kind`; its arguments are set by the step interface's
// names (ir/step_interface.h), which the Session checked the module against.
StepRequest step_request(StepKind kind, std::vector<int32_t> slots) {
  return StepRequest{std::string(ir::step_name(kind)), std::move(slots), {}};
}
void set_arg(StepRequest& req, std::string_view name, HostTensor value) { req.args[std::string(name)] = std::move(value); }

CompileOptions compile_options(const SessionOptions& o) {
  CompileOptions c;
  c.target = o.target;
  c.max_step_tokens = o.max_step_tokens;
  c.max_sequences = std::max(o.n_slots, 1);
  c.optimize = o.optimize;
  c.weight_layout_types = o.weight_layout_types;
  c.embeddings = o.embeddings;
  c.cache_type_k = o.cache_type_k;
  c.cache_type_v = o.cache_type_v;
  if (o.passes) c.manager = *o.passes;
  return c;
}

// The bound a compiled model's plans give `symbol`, or `fallback`.
int64_t plan_bound(const CompiledModel& m, const std::string& symbol, int64_t fallback) {
  int64_t bound = fallback;
  for (const auto& p : m.plans)
    if (auto it = p.bindings.find(symbol); it != p.bindings.end()) bound = std::min(bound, it->second);
  return bound;
}

void check_tokens(std::span<const int32_t> tokens, int64_t n_vocab, const char* what) {
  for (int32_t t : tokens)
    if (t < 0 || t >= n_vocab) throw Error(fmt::format("{}: token id {} is outside the vocabulary [0, {})", what, t, n_vocab));
}

// An artifact's stored CUDA kernels are what its executor must run.
std::unique_ptr<Backend> make_backend(const BackendInputs& in, const CompiledModel& m, const SessionOptions& o) {
  if (o.target == Target::Cpu) return std::make_unique<cpu::CpuBackend>(in, cpu::CpuBackendOptions{o.threads, o.fused_kernels});
  cuda::ExecutorOptions cuda{.graphs = o.cuda_graphs};
  if (!m.cuda_steps.empty()) cuda.kernels = &m.cuda_steps;
  else if (!m.kernels.empty()) cuda.stored_kernels = &m.kernels;
  return std::make_unique<cuda::Executor>(in, cuda);
}

void check_target(const std::string& path, const SessionOptions& o) {
  if (o.max_step_tokens < 1) throw Error(fmt::format("session: max_step_tokens must be at least 1 (got {})", o.max_step_tokens));
  if (o.target == Target::Cuda)
    if (std::string why = cuda::cuda_unavailable_reason(); !why.empty())
      throw Error(fmt::format("{}: the cuda target is unavailable here: {}", path, why));
}
// Whether any attention op of `fn` (fused bodies included) has causal = false.
bool has_bidirectional_attention(const ir::Function& fn) {
  for (const auto& op : fn.ops) {
    if (op->body && has_bidirectional_attention(*op->body)) return true;
    if (op->kind != ir::OpKind::Attention) continue;
    if (!ir::AttentionAttrs::of(*op).causal) return true;
  }
  return false;
}
bool has_bidirectional_attention(const ir::Module& m) {
  return std::any_of(m.functions.begin(), m.functions.end(), [](const auto& fn) { return has_bidirectional_attention(*fn); });
}
}  // namespace

struct Session::Impl {
  CompiledModel model;
  StateStore states;
  std::unique_ptr<Backend> backend;
  int64_t n_vocab;
  int32_t max_step_tokens;

  Impl(CompiledModel m, const StateStoreConfig& cfg, const SessionOptions& o, int32_t max_step)
      : model(std::move(m)), states(model.module, cfg),
        backend(make_backend({model.module, model.file, states, model.plans}, model, o)),
        n_vocab(int64_t(model.file.find_tensor("token_embd.weight")->dims[1])), max_step_tokens(max_step),
        generates_text(model.module.find_function(ir::step_name(StepKind::Prefill)) != nullptr), whole_sequences(has_bidirectional_attention(model.module)) {}

  const bool generates_text;
  const bool whole_sequences;

  void reserve(int32_t slot, int64_t n_positions, const char* what) {
    if (!states.reserve(slot, n_positions))
      throw Error(fmt::format("{}: the KV pool is out of pages ({} of {} free) for slot {} at position {}", what,
                              states.free_pages(), states.n_pages(), slot, n_positions - 1));
  }

  // The @decode request of the contract: one row per slot, its id in
  // @last_ids, and each row's sampling (one entry for every row, or one per
  // row).
  StepRequest decode_request(std::span<const int32_t> slots, std::span<const int32_t> positions,
                             std::span<const DeviceSampling> sampling) {
    if (sampling.size() != 1 && sampling.size() != slots.size())
      throw Error(fmt::format("decode: {} sampling settings for {} sequences", sampling.size(), slots.size()));
    std::vector<int32_t> seq(slots.size());
    std::iota(seq.begin(), seq.end(), 0);
    StepRequest req = step_request(StepKind::Decode, std::vector<int32_t>(slots.begin(), slots.end()));
    set_arg(req, step::kPos, HostTensor::i32(std::vector<int32_t>(positions.begin(), positions.end())));
    set_arg(req, step::kSeq, HostTensor::i32(seq));
    std::vector<float> params;
    std::vector<int32_t> seeds;
    for (size_t i = 0; i < slots.size(); ++i) {
      const DeviceSampling& d = sampling[sampling.size() == 1 ? 0 : i];
      const std::array<float, 4> op = d.op_params();
      params.insert(params.end(), op.begin(), op.end());
      seeds.push_back(int32_t(uint32_t(d.seed)));
      seeds.push_back(int32_t(uint32_t(d.seed >> 32)));
    }
    HostTensor p{ir::ElemType::F32, {int64_t(slots.size()), 4}, {}};
    p.bytes.resize(params.size() * 4);
    std::memcpy(p.bytes.data(), params.data(), p.bytes.size());
    set_arg(req, step::kSampling, std::move(p));
    HostTensor seed = HostTensor::i32(seeds);
    seed.shape = {int64_t(slots.size()), 2};
    set_arg(req, step::kSeed, std::move(seed));
    return req;
  }

  void check_decode_rows(std::span<const int32_t> slots, std::span<const int32_t> positions) {
    if (slots.size() != positions.size() || slots.empty()) throw Error("decode: need one position per sequence");
    std::set<int32_t> seen;
    for (size_t i = 0; i < slots.size(); ++i) {
      states.check_slot(slots[i]);
      if (!seen.insert(slots[i]).second) throw Error(fmt::format("decode: slot {} appears twice", slots[i]));
      if (positions[i] < 0 || positions[i] >= states.config().n_ctx)
        throw Error(fmt::format("decode: position {} is outside the context of {}", positions[i], states.config().n_ctx));
    }
    for (size_t i = 0; i < slots.size(); ++i) reserve(slots[i], positions[i] + 1, "decode");
  }

  // One @prefill call. The logits rows are the last token of every chunk
  // that asks for them or, with every_row, every token of every chunk.
  HostTensor run_prefill(std::span<const SeqChunk> chunks, bool every_row);
  // One @embed call: every token of every chunk.
  HostTensor run_embed(std::span<const SeqChunk> chunks);

  // The checks of step() and embed() (`what` names the caller).
  void check_chunks(std::span<const SeqChunk> chunks, const char* what) {
    if (chunks.empty()) throw Error(fmt::format("{}: no sequences", what));
    const int64_t n_ctx = states.config().n_ctx;
    int64_t total = 0;
    std::set<int32_t> seen;
    for (const SeqChunk& c : chunks) {
      states.check_slot(c.slot);
      if (!seen.insert(c.slot).second) throw Error(fmt::format("{}: slot {} appears twice", what, c.slot));
      if (c.tokens.empty()) throw Error(fmt::format("{}: slot {} has no tokens", what, c.slot));
      if (c.logit_rows < 0 || c.logit_rows > int64_t(c.tokens.size()))
        throw Error(fmt::format("{}: slot {} asks for {} logits rows of a {}-token chunk", what, c.slot, c.logit_rows,
                                c.tokens.size()));
      if (c.n_past < 0 || c.n_past + int64_t(c.tokens.size()) > n_ctx)
        throw Error(fmt::format("{}: {} tokens at position {} exceed the context of {}", what, c.tokens.size(), c.n_past, n_ctx));
      check_tokens(c.tokens, n_vocab, what);
      if (whole_sequences && c.n_past != 0)
        throw Error(fmt::format("{}: slot {} starts at position {}, but this model's attention is not causal: each "
                                "sequence must come whole, from position 0, in one step",
                                what, c.slot, c.n_past));
      total += int64_t(c.tokens.size());
    }
    if (total > max_step_tokens)
      throw Error(fmt::format("{}: {} tokens exceed the step bound of {}", what, total, max_step_tokens));
  }
};

HostTensor Session::Impl::run_embed(std::span<const SeqChunk> chunks) {
  std::vector<int32_t> ids, pos, seq, slots;
  for (const SeqChunk& c : chunks) {
    const int32_t s = int32_t(slots.size());
    slots.push_back(c.slot);
    for (size_t i = 0; i < c.tokens.size(); ++i) {
      ids.push_back(c.tokens[i]);
      pos.push_back(c.n_past + int32_t(i));
      seq.push_back(s);
    }
  }
  for (const SeqChunk& c : chunks) reserve(c.slot, c.n_past + int64_t(c.tokens.size()), "embed");
  StepRequest req = step_request(StepKind::Embed, std::move(slots));
  set_arg(req, step::kIds, HostTensor::i32(ids));
  set_arg(req, step::kPos, HostTensor::i32(pos));
  set_arg(req, step::kSeq, HostTensor::i32(seq));
  return std::move(backend->run(req).at(0));
}

HostTensor Session::Impl::run_prefill(std::span<const SeqChunk> chunks, bool every_row) {
  std::vector<int32_t> ids, pos, seq, rows, slots;
  for (const SeqChunk& c : chunks) {
    const int32_t s = int32_t(slots.size());
    slots.push_back(c.slot);
    for (size_t i = 0; i < c.tokens.size(); ++i) {
      if (every_row) rows.push_back(int32_t(ids.size()));
      ids.push_back(c.tokens[i]);
      pos.push_back(c.n_past + int32_t(i));
      seq.push_back(s);
    }
    if (!every_row)
      for (int32_t r = c.logit_rows; r > 0; --r) rows.push_back(int32_t(ids.size()) - r);
  }
  // The step must return at least one row; an all-silent step asks for the
  // last token's and drops it.
  const bool silent = rows.empty();
  if (silent) rows.push_back(int32_t(ids.size()) - 1);
  // Pages for every position first, so a full pool fails before any state
  // changes. A failed reservation keeps the pages it already holds: they
  // belong to the slot and go back on reset().
  for (const SeqChunk& c : chunks) reserve(c.slot, c.n_past + int64_t(c.tokens.size()), "step");
  StepRequest req = step_request(StepKind::Prefill, std::move(slots));
  // A chunk whose logits are read at more than its last row verifies drafts:
  // its rows need decode's bits. (A prompt's every row, every_row, keeps the
  // reference's batched order: its logits are compared with llama.cpp's.)
  for (const SeqChunk& c : chunks)
    req.rows_as_decode = req.rows_as_decode || c.rows_as_decode || (!every_row && c.logit_rows > 1);
  set_arg(req, step::kIds, HostTensor::i32(ids));
  set_arg(req, step::kPos, HostTensor::i32(pos));
  set_arg(req, step::kSeq, HostTensor::i32(seq));
  set_arg(req, step::kRows, HostTensor::i32(rows));
  HostTensor out = std::move(backend->run(req).at(0));
  if (silent) out.shape[0] = 0, out.bytes.clear();
  return out;
}

namespace {
GgmlType cache_type_of(const ir::ElemType& e) {
  if (e.is_quant()) return e.quant_type();
  return e.kind() == ir::ElemType::F32 ? GgmlType::F32 : e.kind() == ir::ElemType::BF16 ? GgmlType::BF16 : GgmlType::F16;
}
}  // namespace

std::pair<GgmlType, GgmlType> kv_cache_types_of(const ir::Module& module) {
  for (const auto& f : module.functions)
    for (const auto& op : f->ops) {
      if (op->kind != ir::OpKind::Attention) continue;
      const ir::AttentionAttrs a = ir::AttentionAttrs::of(*op);
      const ir::StateDecl* k = module.find_state(a.state);
      const ir::StateDecl* v = a.v_state.empty() ? k : module.find_state(a.v_state);
      if (k && v) return {cache_type_of(k->type.elem), cache_type_of(v->type.elem)};
    }
  return {GgmlType::F16, GgmlType::F16};
}

namespace {
// Whether any step attends over a KV state.
bool has_kv_cache(const ir::Module& module) {
  for (const auto& f : module.functions)
    for (const auto& op : f->ops)
      if (op->kind == ir::OpKind::Attention) return true;
  return false;
}
}  // namespace

std::string describe_kv_memory(const KvMemory& m) {
  return fmt::format("KV cache: K {}, V {}; {} bytes per token; {:.2f} MiB reserved ({} pages of {} positions)",
                     ggml_type_name(m.k_type), ggml_type_name(m.v_type), m.bytes_per_token,
                     double(m.reserved_bytes) / 1048576.0, m.pages, m.page_size);
}

Session::Session(const std::string& path, const SessionOptions& o) {
  check_target(path, o);
  CompiledModel model = load_model(path, compile_options(o));
  // An artifact keeps the cache types it was compiled with; other types
  // asked for by name (not the f16 default) are refused, not ignored. A
  // model without attention (mamba, mamba2: only recurrent states) has no
  // KV cache for the types to apply to, as in the reference.
  if (const auto [k, v] = kv_cache_types_of(model.module);
      has_kv_cache(model.module) &&
      ((o.cache_type_k != GgmlType::F16 && o.cache_type_k != k) || (o.cache_type_v != GgmlType::F16 && o.cache_type_v != v)))
    throw Error(fmt::format("{}: compiled with a {} / {} KV cache (K / V), not the {} / {} asked for; recompile with "
                            "`vtc compile --cache-type-k {} --cache-type-v {}`", path, ggml_type_name(k), ggml_type_name(v),
                            ggml_type_name(o.cache_type_k), ggml_type_name(o.cache_type_v),
                            ggml_type_name(o.cache_type_k), ggml_type_name(o.cache_type_v)));
  if (model.target != o.target)
    throw Error(fmt::format("{}: compiled for target {}, but the session runs on {}; recompile with `vtc compile --target {}`",
                            path, target_name(model.target), target_name(o.target), target_name(o.target)));
  ir::check_step_interface(model.module, path);
  if (o.embeddings && !model.module.find_function(ir::step_name(StepKind::Embed)))
    throw Error(fmt::format("{}: the artifact was compiled without the @embed step; serve the GGUF itself with embeddings", path));
  const int32_t max_step = std::min<int32_t>(o.max_step_tokens, int32_t(plan_bound(model, "T", o.max_step_tokens)));
  if (o.n_slots > plan_bound(model, "S", o.n_slots))
    throw Error(fmt::format("{}: compiled for at most {} sequences per step but {} slots were asked for; recompile with "
                            "--max-sequences {}", path, plan_bound(model, "S", o.n_slots), o.n_slots, o.n_slots));
  const gguf::GgufFile& file = model.file;
  const int64_t model_ctx = file.get_int(file.architecture() + ".context_length").value_or(4096);
  StateStoreConfig cfg{o.n_slots, o.n_ctx > 0 ? o.n_ctx : std::min<int64_t>(model_ctx, 4096), o.n_pages};
  try {
    impl_ = std::make_unique<Impl>(std::move(model), cfg, o, max_step);
  } catch (const std::bad_alloc&) {
    throw Error(fmt::format("{}: cannot allocate the state store ({} slots, {} positions): out of memory", path, cfg.n_slots,
                            cfg.n_ctx));
  }
}

Session::~Session() = default;

const gguf::GgufFile& Session::file() const { return impl_->model.file; }
const ir::Module& Session::module() const { return impl_->model.module; }
Target Session::target() const { return impl_->model.target; }
int64_t Session::n_ctx() const { return impl_->states.config().n_ctx; }
KvMemory Session::kv_memory() const {
  KvMemory m;
  std::tie(m.k_type, m.v_type) = kv_cache_types_of(module());
  const StateStore& s = impl_->states;
  for (const auto& l : s.layouts())
    if (l.paged()) m.bytes_per_token += uint64_t(l.halves) * l.row_bytes(), m.reserved_bytes += l.bytes;
  m.pages = s.n_pages();
  m.page_size = s.page_size();
  return m;
}
int64_t Session::n_vocab() const { return impl_->n_vocab; }
int32_t Session::max_step_tokens() const { return impl_->max_step_tokens; }
bool Session::generates_text() const { return impl_->generates_text; }
bool Session::reads_whole_sequences() const { return impl_->whole_sequences; }
void Session::require_text_generation(std::string_view command) const {
  if (!generates_text())
    throw Error(fmt::format("{}: architecture '{}' is an encoder: it computes embeddings and generates no text, so `{}` "
                            "cannot run it; serve it with `vtc serve --embeddings`",
                            file().path(), file().architecture(), command));
}
Backend& Session::backend() { return *impl_->backend; }
StateStore& Session::states() { return impl_->states; }
void Session::reset(int32_t slot) { impl_->states.reset_slot(slot); }
void Session::truncate(int32_t slot, int64_t n_positions) { impl_->states.truncate(slot, n_positions); }

HostTensor Session::prefill(int32_t slot, std::span<const int32_t> tokens, int32_t n_past, bool all_logits) {
  require_text_generation("prefill");
  if (tokens.empty()) throw Error("prefill: no tokens");
  impl_->states.check_slot(slot);
  if (n_past < 0 || n_past + int64_t(tokens.size()) > n_ctx())
    throw Error(fmt::format("prefill: {} tokens at position {} exceed the context of {}", tokens.size(), n_past, n_ctx()));
  check_tokens(tokens, n_vocab(), "prefill");
  // Chunks of max_step_tokens. With all_logits every chunk's rows are kept
  // and concatenated; otherwise only the last chunk's last row is asked for.
  HostTensor out;
  const size_t step = size_t(max_step_tokens());
  for (size_t begin = 0; begin < tokens.size(); begin += step) {
    const size_t n = std::min(step, tokens.size() - begin);
    const bool last = begin + n == tokens.size();
    SeqChunk chunk{slot, tokens.subspan(begin, n), int32_t(n_past + int64_t(begin)), last};
    HostTensor part = impl_->run_prefill({&chunk, 1}, all_logits);
    if (out.bytes.empty()) {
      out = std::move(part);
    } else if (part.numel() > 0) {
      out.shape[0] += part.shape[0];
      out.bytes.insert(out.bytes.end(), part.bytes.begin(), part.bytes.end());
    }
  }
  return out;
}

HostTensor Session::step(std::span<const SeqChunk> chunks) {
  require_text_generation("step");
  impl_->check_chunks(chunks, "step");
  return impl_->run_prefill(chunks, false);
}

HostTensor Session::embed(std::span<const SeqChunk> chunks) {
  if (!impl_->model.module.find_function(ir::step_name(StepKind::Embed))) throw Error("embed: the session was built without embeddings");
  impl_->check_chunks(chunks, "embed");
  return impl_->run_embed(chunks);
}

void Session::set_last_id(int32_t slot, int32_t token) {
  require_text_generation("decode");
  check_tokens({&token, 1}, n_vocab(), "decode");
  impl_->backend->write_slot_row(impl_->states.layout(step::kLastIds), slot, {reinterpret_cast<const uint8_t*>(&token), 4});
}

HostTensor Session::decode(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                           std::span<const int32_t> positions) {
  if (slots.size() != tokens.size()) throw Error("decode: need one token and one position per sequence");
  check_tokens(tokens, n_vocab(), "decode");
  impl_->check_decode_rows(slots, positions);
  for (size_t i = 0; i < slots.size(); ++i) set_last_id(slots[i], tokens[i]);
  const DeviceSampling greedy = DeviceSampling::greedy();  // the step samples too; the caller takes the logits
  return std::move(impl_->backend->run(impl_->decode_request(slots, positions, {&greedy, 1})).at(0));
}

std::vector<int32_t> Session::decode_sampled(std::span<const int32_t> slots, std::span<const int32_t> positions,
                                             std::span<const DeviceSampling> sampling) {
  require_text_generation("decode");
  impl_->check_decode_rows(slots, positions);
  return impl_->backend->run_sampled(impl_->decode_request(slots, positions, sampling));
}

std::vector<int32_t> Session::finish_sampled() { return impl_->backend->wait_sampled(); }

namespace {
// Constant dims of `decl` from index `first` on.
std::vector<int64_t> tail_dims(const ir::StateDecl& decl, size_t first) {
  std::vector<int64_t> dims;
  for (size_t i = first; i < decl.type.shape.size(); ++i) {
    auto c = decl.type.shape[i].constant();
    if (!c) throw Error(fmt::format("snapshot: state @{} has a symbolic dim {} past the slot/page dims", decl.name, i));
    dims.push_back(*c);
  }
  return dims;
}
}  // namespace

std::vector<StateSnapshot> Session::snapshot(int32_t slot) {
  StateStore& store = impl_->states;
  store.check_slot(slot);
  std::vector<StateSnapshot> out;
  for (const StateStore::Layout& l : store.layouts()) {
    StateSnapshot s{"@" + l.decl->name, {l.elem, {}, {}}};
    if (l.paged()) {
      // The slot's pages in table order are its positions in order.
      const auto& table = store.page_table(slot);
      s.value.shape = {l.halves, int64_t(table.size()) * store.page_size()};
      for (int half = 0; half < l.halves; ++half)
        for (int32_t page : table) {
          std::vector<uint8_t> rows = impl_->backend->read_page(l, half, page);
          s.value.bytes.insert(s.value.bytes.end(), rows.begin(), rows.end());
        }
      for (int64_t d : tail_dims(*l.decl, 3)) s.value.shape.push_back(d);
    } else {
      s.value.shape = tail_dims(*l.decl, 1);
      if (s.value.shape.empty()) s.value.shape = {1};
      s.value.bytes = impl_->backend->read_slot_row(l, slot);
    }
    out.push_back(std::move(s));
  }
  return out;
}

void Session::start_device_drafts(int32_t slot, std::span<const int32_t> tokens, const DeviceSampling& sampling) {
  require_text_generation("speculate");
  impl_->states.check_slot(slot);
  check_tokens(tokens, n_vocab(), "speculate");
  if (tokens.empty() || int64_t(tokens.size()) > n_ctx())
    throw Error(fmt::format("speculate: a history of {} tokens does not fit the context of {}", tokens.size(), n_ctx()));
  impl_->backend->start_device_drafts(slot, tokens, sampling);
}

std::vector<DeviceVerifyOutcome> Session::verify_on_device(std::span<const DeviceVerifyRows> seqs) {
  const int32_t most = impl_->backend->rows_with_decode_bits() - 1;  // a verify row keeps decode's bits
  std::vector<int32_t> slots, seq;
  for (const DeviceVerifyRows& s : seqs) {
    impl_->states.check_slot(s.slot);
    if (s.drafts < 0 || s.drafts > most || s.n_positions > n_ctx())
      throw Error(fmt::format("speculate: {} drafts with {} positions reserved (at most {} and {})", s.drafts,
                              s.n_positions, most, n_ctx()));
    if (std::find(slots.begin(), slots.end(), s.slot) != slots.end())
      throw Error(fmt::format("speculate: slot {} appears twice in one verify step", s.slot));
    slots.push_back(s.slot);
    seq.insert(seq.end(), size_t(s.drafts) + 1, int32_t(slots.size()) - 1);
  }
  if (seqs.empty()) throw Error("speculate: a verify step needs a sequence");
  for (const DeviceVerifyRows& s : seqs) impl_->reserve(s.slot, s.n_positions, "speculate");
  std::vector<int32_t> zeros(seq.size(), 0), order(seq.size());
  std::iota(order.begin(), order.end(), 0);
  StepRequest req = step_request(StepKind::Prefill, std::move(slots));
  set_arg(req, step::kIds, HostTensor::i32(zeros));  // written on the device
  set_arg(req, step::kPos, HostTensor::i32(zeros));  // written on the device
  set_arg(req, step::kSeq, HostTensor::i32(seq));
  set_arg(req, step::kRows, HostTensor::i32(order));
  req.rows_as_decode = true;
  return impl_->backend->run_device_verify(req);
}

std::vector<DeviceVerifyOutcome> Session::finish_device_verify() { return impl_->backend->wait_device_verify(); }

int32_t DeviceSampling::draw_on_host(std::span<const float> row, int32_t pos) const {
  // The settings decode_request passes, and the op's bound on candidates
  // as the step builders declare it.
  const std::array<float, 4> params = op_params();
  return cpu::sample_row(row.data(), int64_t(row.size()), params.data(), seed, pos, arch::kSampleMaxCandidates);
}

}  // namespace vtc
