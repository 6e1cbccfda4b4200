#include "runtime/cpu/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <thread>

#include "frontends/gguf/arch/arch.h"
#include "ir/verifier.h"
#include "support/error.h"

namespace vtc::cpu {

struct Session::Impl {
  gguf::GgufFile file;
  ir::Module module;
  ThreadPool pool;
  StateStore states;
  Interpreter interp;
  int64_t n_vocab;

  Impl(gguf::GgufFile f, ir::Module m, int threads, StateStoreConfig cfg)
      : file(std::move(f)), module(std::move(m)), pool(threads), states(module, cfg),
        interp(module, file, states, pool), n_vocab(int64_t(file.find_tensor("token_embd.weight")->dims[1])) {}
};

namespace {
int resolve_threads(int requested) {
  if (requested > 0) return requested;
  return int(std::max(1u, std::thread::hardware_concurrency()));
}
}  // namespace

Session::Session(const std::string& path, const SessionOptions& o) {
  gguf::GgufFile file = gguf::GgufFile::open(path);
  ir::Module module = arch::build_module(file);
  ir::verify(module);
  int64_t model_ctx = file.get_int(file.architecture() + ".context_length").value_or(4096);
  StateStoreConfig cfg{o.n_slots, o.n_ctx > 0 ? o.n_ctx : std::min<int64_t>(model_ctx, 4096)};
  impl_ = std::make_unique<Impl>(std::move(file), std::move(module), resolve_threads(o.threads), cfg);
}

Session::~Session() = default;

const gguf::GgufFile& Session::file() const { return impl_->file; }
const ir::Module& Session::module() const { return impl_->module; }
int64_t Session::n_ctx() const { return impl_->states.config().n_ctx; }
int64_t Session::n_vocab() const { return impl_->n_vocab; }
Interpreter& Session::interpreter() { return impl_->interp; }
StateStore& Session::states() { return impl_->states; }
void Session::reset(int32_t slot) { impl_->states.reset_slot(slot); }

HostTensor Session::prefill(int32_t slot, std::span<const int32_t> tokens, int32_t n_past, bool all_logits) {
  if (tokens.empty()) throw Error("prefill: no tokens");
  if (n_past + int64_t(tokens.size()) > n_ctx())
    throw Error(fmt::format("prefill: {} tokens at position {} exceed the context of {}", tokens.size(), n_past, n_ctx()));
  for (int32_t t : tokens)
    if (t < 0 || t >= n_vocab()) throw Error(fmt::format("prefill: token id {} is outside the vocabulary [0, {})", t, n_vocab()));
  const int32_t n = int32_t(tokens.size());
  std::vector<int32_t> pos(static_cast<size_t>(n)), seq(static_cast<size_t>(n), 0), rows;
  std::iota(pos.begin(), pos.end(), n_past);
  if (all_logits) {
    rows.resize(size_t(n));
    std::iota(rows.begin(), rows.end(), 0);
  } else {
    rows = {n - 1};
  }
  StepRequest req{"prefill", {slot}, {}};
  req.args["ids"] = HostTensor::i32(std::vector<int32_t>(tokens.begin(), tokens.end()));
  req.args["pos"] = HostTensor::i32(pos);
  req.args["seq"] = HostTensor::i32(seq);
  req.args["rows"] = HostTensor::i32(rows);
  return std::move(impl_->interp.run(req).at(0));
}

HostTensor Session::decode(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                           std::span<const int32_t> positions) {
  if (slots.size() != tokens.size() || slots.size() != positions.size() || slots.empty())
    throw Error("decode: need one token and one position per sequence");
  StateStore::Buffer& last = impl_->states.buffer("last_ids");
  for (size_t i = 0; i < slots.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= n_vocab())
      throw Error(fmt::format("decode: token id {} is outside the vocabulary [0, {})", tokens[i], n_vocab()));
    if (positions[i] < 0 || positions[i] >= n_ctx())
      throw Error(fmt::format("decode: position {} is outside the context of {}", positions[i], n_ctx()));
    std::memcpy(impl_->states.slot_bytes(last, slots[i]).data(), &tokens[i], 4);
  }
  std::vector<int32_t> seq(slots.size());
  std::iota(seq.begin(), seq.end(), 0);
  StepRequest req{"decode", std::vector<int32_t>(slots.begin(), slots.end()), {}};
  req.args["pos"] = HostTensor::i32(std::vector<int32_t>(positions.begin(), positions.end()));
  req.args["seq"] = HostTensor::i32(seq);
  return std::move(impl_->interp.run(req).at(0));
}

}  // namespace vtc::cpu
