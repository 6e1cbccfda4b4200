#include "runtime/cpu/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <set>
#include <thread>

#include "frontends/gguf/arch/arch.h"
#include "ir/verifier.h"
#include "runtime/compile/compile.h"
#include "support/error.h"

namespace vtc::cpu {

struct Session::Impl {
  gguf::GgufFile file;
  ir::Module module;
  ThreadPool pool;
  StateStore states;
  Interpreter interp;
  int64_t n_vocab;
  int32_t max_step_tokens;

  Impl(gguf::GgufFile f, ir::Module m, int threads, StateStoreConfig cfg, int32_t max_step)
      : file(std::move(f)), module(std::move(m)), pool(threads), states(module, cfg),
        interp(module, file, states, pool), n_vocab(int64_t(file.find_tensor("token_embd.weight")->dims[1])),
        max_step_tokens(max_step) {}

  // One @prefill call. The logits rows are the last token of every chunk
  // that asks for them or, with every_row, every token of every chunk.
  HostTensor run_prefill(std::span<const SeqChunk> chunks, bool every_row);
};

namespace {
CompileOptions compile_options(const SessionOptions& o) {
  CompileOptions c;
  c.max_step_tokens = o.max_step_tokens;
  c.max_sequences = std::max(o.n_slots, 1);
  c.optimize = o.optimize;
  c.weight_layout_types = o.weight_layout_types;
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

int resolve_threads(int requested) {
  if (requested > 0) return requested;
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

void check_tokens(std::span<const int32_t> tokens, int64_t n_vocab, const char* what) {
  for (int32_t t : tokens)
    if (t < 0 || t >= n_vocab) throw Error(fmt::format("{}: token id {} is outside the vocabulary [0, {})", what, t, n_vocab));
}
}  // namespace

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
    if (!every_row && c.logits) rows.push_back(int32_t(ids.size()) - 1);
  }
  // The step must return at least one row; an all-silent step asks for the
  // last token's and drops it.
  const bool silent = rows.empty();
  if (silent) rows.push_back(int32_t(ids.size()) - 1);
  // Pages for every position first, so a full pool fails before any state
  // changes. A failed reservation keeps the pages it already holds: they
  // belong to the slot and go back on reset().
  for (const SeqChunk& c : chunks)
    if (!states.reserve(c.slot, c.n_past + int64_t(c.tokens.size())))
      throw Error(fmt::format("step: the KV pool is out of pages ({} of {} free) for slot {} at position {}",
                              states.free_pages(), states.n_pages(), c.slot, c.n_past + int64_t(c.tokens.size()) - 1));
  StepRequest req{"prefill", std::move(slots), {}};
  req.args["ids"] = HostTensor::i32(ids);
  req.args["pos"] = HostTensor::i32(pos);
  req.args["seq"] = HostTensor::i32(seq);
  req.args["rows"] = HostTensor::i32(rows);
  HostTensor out = std::move(interp.run(req).at(0));
  if (silent) out.shape[0] = 0, out.bytes.clear();
  return out;
}

Session::Session(const std::string& path, const SessionOptions& o) {
  if (o.max_step_tokens < 1) throw Error(fmt::format("session: max_step_tokens must be at least 1 (got {})", o.max_step_tokens));
  CompiledModel model = load_model(path, compile_options(o));
  if (model.target != "cpu")
    throw Error(fmt::format("{}: compiled for target {}; the CPU interpreter needs `vtc compile --target cpu`", path,
                            model.target));
  const int32_t max_step = std::min<int32_t>(o.max_step_tokens, int32_t(plan_bound(model, "T", o.max_step_tokens)));
  if (o.n_slots > plan_bound(model, "S", o.n_slots))
    throw Error(fmt::format("{}: compiled for at most {} sequences per step but {} slots were asked for; recompile with "
                            "--max-sequences {}", path, plan_bound(model, "S", o.n_slots), o.n_slots, o.n_slots));
  gguf::GgufFile& file = model.file;
  int64_t model_ctx = file.get_int(file.architecture() + ".context_length").value_or(4096);
  StateStoreConfig cfg{o.n_slots, o.n_ctx > 0 ? o.n_ctx : std::min<int64_t>(model_ctx, 4096), o.n_pages};
  try {
    impl_ = std::make_unique<Impl>(std::move(model.file), std::move(model.module), resolve_threads(o.threads), cfg, max_step);
  } catch (const std::bad_alloc&) {
    throw Error(fmt::format("{}: cannot allocate the state store ({} slots, {} positions): out of memory", path, cfg.n_slots,
                            cfg.n_ctx));
  }
  impl_->interp.use_plans(model.plans);
  impl_->interp.set_fused_kernels(o.fused_kernels);
}

Session::~Session() = default;

const gguf::GgufFile& Session::file() const { return impl_->file; }
const ir::Module& Session::module() const { return impl_->module; }
int64_t Session::n_ctx() const { return impl_->states.config().n_ctx; }
int64_t Session::n_vocab() const { return impl_->n_vocab; }
int32_t Session::max_step_tokens() const { return impl_->max_step_tokens; }
Interpreter& Session::interpreter() { return impl_->interp; }
StateStore& Session::states() { return impl_->states; }
void Session::reset(int32_t slot) { impl_->states.reset_slot(slot); }

HostTensor Session::prefill(int32_t slot, std::span<const int32_t> tokens, int32_t n_past, bool all_logits) {
  if (tokens.empty()) throw Error("prefill: no tokens");
  if (n_past + int64_t(tokens.size()) > n_ctx())
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
  if (chunks.empty()) throw Error("step: no sequences");
  int64_t total = 0;
  std::set<int32_t> seen;
  for (const SeqChunk& c : chunks) {
    impl_->states.check_slot(c.slot);
    if (!seen.insert(c.slot).second) throw Error(fmt::format("step: slot {} appears twice", c.slot));
    if (c.tokens.empty()) throw Error(fmt::format("step: slot {} has no tokens", c.slot));
    if (c.n_past < 0 || c.n_past + int64_t(c.tokens.size()) > n_ctx())
      throw Error(fmt::format("step: {} tokens at position {} exceed the context of {}", c.tokens.size(), c.n_past, n_ctx()));
    check_tokens(c.tokens, n_vocab(), "step");
    total += int64_t(c.tokens.size());
  }
  if (total > max_step_tokens())
    throw Error(fmt::format("step: {} tokens exceed the step bound of {}", total, max_step_tokens()));
  return impl_->run_prefill(chunks, false);
}

HostTensor Session::decode(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                           std::span<const int32_t> positions) {
  if (slots.size() != tokens.size() || slots.size() != positions.size() || slots.empty())
    throw Error("decode: need one token and one position per sequence");
  StateStore& states = impl_->states;
  StateStore::Buffer& last = states.buffer("last_ids");
  for (size_t i = 0; i < slots.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= n_vocab())
      throw Error(fmt::format("decode: token id {} is outside the vocabulary [0, {})", tokens[i], n_vocab()));
    if (positions[i] < 0 || positions[i] >= n_ctx())
      throw Error(fmt::format("decode: position {} is outside the context of {}", positions[i], n_ctx()));
    if (!states.reserve(slots[i], positions[i] + 1))
      throw Error(fmt::format("decode: the KV pool is out of pages for slot {} at position {}", slots[i], positions[i]));
    std::memcpy(states.slot_bytes(last, slots[i]).data(), &tokens[i], 4);
  }
  std::vector<int32_t> seq(slots.size());
  std::iota(seq.begin(), seq.end(), 0);
  StepRequest req{"decode", std::vector<int32_t>(slots.begin(), slots.end()), {}};
  req.args["pos"] = HostTensor::i32(std::vector<int32_t>(positions.begin(), positions.end()));
  req.args["seq"] = HostTensor::i32(seq);
  return std::move(impl_->interp.run(req).at(0));
}

}  // namespace vtc::cpu
