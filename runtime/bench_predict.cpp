// Predicted step costs on the simulated device (see bench_predict.h).
#include "runtime/bench_predict.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <set>

#include "codegen/cuda/sim_device.h"
#include "frontends/gguf/gguf.h"
#include "runtime/bench.h"
#include "runtime/session.h"
#include "support/error.h"

namespace vtc {
namespace {

std::vector<int32_t> tokens(int64_t n, int64_t first, int64_t n_vocab) {
  std::vector<int32_t> ids(size_t(std::max<int64_t>(n, 0)));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(((first + int64_t(i)) * 7919 + 13) % n_vocab);
  return ids;
}

// The layers of the file (distinct blk.N prefixes) and the bytes one token
// reads from the weights with the per-layer ones scaled to `layers`.
struct WeightShape {
  int n_layers = 0;
  double bytes = 0;
};

WeightShape weight_shape(const gguf::GgufFile& file, int32_t scale_layers) {
  std::set<std::string> blocks;
  double layer_bytes = 0;
  for (const auto& t : file.tensors())
    if (t.name.rfind("blk.", 0) == 0) {
      blocks.insert(t.name.substr(0, t.name.find('.', 4)));
      layer_bytes += double(t.n_bytes);
    }
  WeightShape w;
  w.n_layers = int(blocks.size());
  w.bytes = double(weight_bytes_per_token(file));
  if (scale_layers > 0 && w.n_layers > 0) w.bytes += layer_bytes * (double(scale_layers) / w.n_layers - 1);
  return w;
}

struct Pricer {
  const Session& session;
  const cuda::GpuSpec& gpu;
  WeightShape weights;
  double layer_scale = 1;

  PredictedStep price(std::string name, const VtcSimProfile& profile, const char* function,
                      const cuda::StepShape& shape) const {
    const ir::Function* fn = session.module().find_function(function);
    std::optional<cuda::StepKernels> kernels;
    if (fn) kernels = cuda::generate_step(session.module(), *fn);
    PredictedStep p;
    p.cost = cuda::predict_step(std::move(name), profile, kernels ? &*kernels : nullptr, shape, gpu, weights.bytes,
                                layer_scale);
    // The kernels die with this scope: the report keeps what it printed.
    for (auto& k : p.cost.kernels) k.kernel = nullptr;
    p.table = cuda::format_step(p.cost, gpu);
    p.json = cuda::step_json(p.cost, gpu);
    return p;
  }
};

}  // namespace

void enable_simulated_profile() {
  std::string why;
  if (cuda::device_choice(&why) != cuda::DeviceChoice::Simulated)
    throw Error("bench: predicted costs come from the simulated device: set VTC_CUDA_DEVICE=sim");
  ::setenv("VTC_CUDA_SIM_PROFILE", "1", 1);
}

std::vector<PredictedStep> predict_cuda_steps(const std::string& model, const SessionOptions& base,
                                              const PredictSpec& spec,
                                              const std::function<void(const std::string&)>& progress) {
  const cuda::GpuSpec& gpu = cuda::find_gpu(spec.gpu);
  const int32_t rows = spec.batch_rows.empty() ? 1 : *std::max_element(spec.batch_rows.begin(), spec.batch_rows.end());
  SessionOptions o = base;
  o.target = "cuda";
  o.n_slots = std::max(rows, 1);
  o.n_ctx = std::max<int64_t>(spec.prompt_tokens, spec.batch_context + 4) + 16;
  o.max_step_tokens = std::max(o.max_step_tokens, spec.prompt_tokens);
  Session session(model, o);
  session.require_text_generation("vtc bench");
  Pricer pricer{session, gpu, weight_shape(session.file(), spec.scale_layers)};
  if (spec.scale_layers > 0 && pricer.weights.n_layers > 0)
    pricer.layer_scale = double(spec.scale_layers) / pricer.weights.n_layers;
  auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };
  std::vector<PredictedStep> out;
  if (spec.prompt_tokens > 0) {
    say(fmt::format("profiling the prefill of {} tokens on the simulated device", spec.prompt_tokens));
    session.reset(0);
    cuda::sim_profile_begin(uint64_t(std::max(spec.sample_blocks, 1)));
    session.prefill(0, tokens(spec.prompt_tokens, 0, session.n_vocab()), 0);
    const VtcSimProfile& p = cuda::sim_profile_end();
    const int64_t t = spec.prompt_tokens;
    out.push_back(pricer.price(fmt::format("prefill, {} tokens", t), p, "prefill",
                               {{"T", t}, {"S", 1}, {"R", 1}, {"KEYS", (t + 1) / 2}}));
  }
  const DeviceSampling greedy = DeviceSampling::greedy();
  for (int32_t b : spec.batch_rows) {
    say(fmt::format("profiling a decode step of {} row(s) after {} tokens each", b, spec.batch_context));
    std::vector<int32_t> slots(static_cast<size_t>(b)), pos(static_cast<size_t>(b), spec.batch_context);
    std::iota(slots.begin(), slots.end(), 0);
    // Every sequence's context in one step: the weights are read once.
    std::vector<std::vector<int32_t>> contexts;
    std::vector<SeqChunk> chunks;
    for (int32_t s = 0; s < b; ++s) {
      session.reset(s);
      contexts.push_back(tokens(spec.batch_context, int64_t{s} * spec.batch_context, session.n_vocab()));
    }
    for (int32_t s = 0; s < b; ++s) chunks.push_back({s, contexts[size_t(s)], 0, true});
    session.step(chunks);
    for (int32_t s = 0; s < b; ++s) session.set_last_id(s, 1);
    const std::vector<DeviceSampling> sampling(size_t(b), greedy);
    session.decode_sampled(slots, pos, sampling);  // warm-up: graph capture, pages
    session.finish_sampled();
    for (int32_t& p : pos) ++p;
    cuda::sim_profile_begin(uint64_t(std::max(spec.sample_blocks, 1)));
    session.decode_sampled(slots, pos, sampling);
    session.finish_sampled();
    const VtcSimProfile& p = cuda::sim_profile_end();
    out.push_back(pricer.price(fmt::format("decode, {} row(s) at {} tokens of context", b, spec.batch_context + 1), p,
                               "decode", {{"T", b}, {"S", b}, {"R", b}, {"KEYS", spec.batch_context + 2}}));
  }
  return out;
}

}  // namespace vtc
