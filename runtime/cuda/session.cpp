#include "runtime/cuda/session.h"

#include <fmt/format.h>

#include <chrono>
#include <numeric>
#include <sstream>

#include "codegen/cuda/model_kernels.h"
#include "frontends/gguf/arch/arch.h"
#include "ir/verifier.h"
#include "passes/pass_manager.h"
#include "support/error.h"

namespace vtc::cuda {

struct Session::Impl {
  gguf::GgufFile file;
  ir::Module module;
  StateStore states;
  Executor exec;
  int64_t n_vocab;

  Impl(gguf::GgufFile f, ir::Module m, StateStoreConfig cfg, bool graphs)
      : file(std::move(f)), module(std::move(m)), states(module, cfg),
        exec(module, file, states, ExecutorOptions{graphs, 0}),
        n_vocab(int64_t(file.find_tensor("token_embd.weight")->dims[1])) {}
};

namespace {
ir::Module lower(const gguf::GgufFile& file) {
  ir::Module m = arch::build_module(file);
  ir::verify(m);
  passes::PassManagerOptions o;
  std::ostringstream remarks;
  o.log = &remarks;
  passes::PassManager pm(o);
  pm.add_pipeline(kCudaPipeline);
  pm.run(m);
  return m;
}
}  // namespace

Session::Session(const std::string& path, const SessionOptions& o) {
  if (std::string why = cuda_unavailable_reason(); !why.empty()) throw Error("the cuda target is unavailable: " + why);
  gguf::GgufFile file = gguf::GgufFile::open(path);
  ir::Module module = lower(file);
  const int64_t model_ctx = file.get_int(file.architecture() + ".context_length").value_or(4096);
  StateStoreConfig cfg;
  cfg.n_slots = o.n_slots;
  cfg.n_ctx = o.n_ctx > 0 ? o.n_ctx : std::min<int64_t>(model_ctx, 4096);
  impl_ = std::make_unique<Impl>(std::move(file), std::move(module), cfg, o.graphs);
}
Session::~Session() = default;

int64_t Session::n_ctx() const { return impl_->states.config().n_ctx; }
int64_t Session::n_vocab() const { return impl_->n_vocab; }
const ir::Module& Session::module() const { return impl_->module; }
Executor& Session::executor() { return impl_->exec; }
StateStore& Session::states() { return impl_->states; }

cpu::HostTensor Session::prefill(int32_t slot, std::span<const int32_t> tokens, int32_t n_past) {
  if (tokens.empty()) throw Error("prefill: no tokens");
  for (int32_t t : tokens)
    if (t < 0 || t >= n_vocab()) throw Error(fmt::format("prefill: token id {} is outside the vocabulary [0, {})", t, n_vocab()));
  if (!impl_->states.reserve(slot, n_past + int64_t(tokens.size())))
    throw Error(fmt::format("prefill: the KV pool is out of pages for slot {}", slot));
  std::vector<int32_t> pos(tokens.size()), seq(tokens.size(), 0);
  std::iota(pos.begin(), pos.end(), n_past);
  cpu::StepRequest req{"prefill", {slot}, {}};
  req.args["ids"] = cpu::HostTensor::i32(std::vector<int32_t>(tokens.begin(), tokens.end()));
  req.args["pos"] = cpu::HostTensor::i32(pos);
  req.args["seq"] = cpu::HostTensor::i32(seq);
  req.args["rows"] = cpu::HostTensor::i32({int32_t(tokens.size()) - 1});
  return std::move(impl_->exec.run(req).at(0));
}

void Session::start_decode(int32_t slot, int32_t token) {
  if (token < 0 || token >= n_vocab()) throw Error(fmt::format("decode: token id {} is outside the vocabulary", token));
  impl_->exec.set_last_id(slot, token);
}

std::vector<int32_t> Session::decode(int32_t slot, int32_t position, const DeviceSampling& sampling) {
  if (position < 0 || position >= n_ctx()) throw Error(fmt::format("decode: position {} is outside the context of {}", position, n_ctx()));
  if (!impl_->states.reserve(slot, position + 1)) throw Error(fmt::format("decode: the KV pool is out of pages for slot {}", slot));
  const int32_t slots[1] = {slot}, positions[1] = {position};
  return impl_->exec.decode_sample(slots, positions, sampling);
}

std::vector<int32_t> Session::finish() { return impl_->exec.wait_tokens(); }

void Session::reset(int32_t slot) {
  impl_->exec.wait_tokens();
  impl_->states.reset_slot(slot);
  impl_->exec.upload_states();
}

BenchFigures bench_cuda(Session& session, const BenchSpec& spec, const std::function<void(const std::string&)>& progress) {
  if (spec.prompt_tokens + 1 > session.n_ctx() || spec.gen_tokens + 1 > session.n_ctx())
    throw Error(fmt::format("bench: pp{} / tg{} need a larger context (have {})", spec.prompt_tokens, spec.gen_tokens, session.n_ctx()));
  using clock = std::chrono::steady_clock;
  std::vector<int32_t> prompt(size_t(spec.prompt_tokens));
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 7919 + 13) % size_t(session.n_vocab()));
  BenchFigures f;
  for (int rep = -1; rep < spec.repetitions; ++rep) {  // rep -1 compiles, uploads and captures graphs
    session.reset(0);
    auto t0 = clock::now();
    if (spec.prompt_tokens > 0) session.prefill(0, prompt, 0);
    const double pp = std::chrono::duration<double>(clock::now() - t0).count();
    session.reset(0);
    session.start_decode(0, 1);
    t0 = clock::now();
    for (int32_t i = 0; i < spec.gen_tokens; ++i) session.decode(0, i, DeviceSampling{});
    session.finish();
    const double tg = std::chrono::duration<double>(clock::now() - t0).count();
    if (rep < 0) continue;
    if (spec.prompt_tokens > 0) f.pp_tokens_per_s.push_back(spec.prompt_tokens / pp);
    if (spec.gen_tokens > 0) f.tg_tokens_per_s.push_back(spec.gen_tokens / tg);
    if (progress)
      progress(fmt::format("rep {}/{}: pp{} {:.2f} tok/s, tg{} {:.2f} tok/s (cuda)", rep + 1, spec.repetitions,
                           spec.prompt_tokens, spec.prompt_tokens / pp, spec.gen_tokens, spec.gen_tokens / tg));
  }
  return f;
}

}  // namespace vtc::cuda
