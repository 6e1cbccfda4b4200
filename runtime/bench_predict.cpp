// Predicted step costs on the simulated device (see bench_predict.h).
#include "runtime/bench_predict.h"

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <cstdlib>
#include <numeric>
#include <span>
#include <set>

#include "codegen/cuda/sim_device.h"
#include "frontends/gguf/gguf.h"
#include "runtime/bench.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/executor.h"
#include "runtime/session.h"
#include "support/error.h"

namespace vtc {
namespace {

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

namespace {

// What happens around each benchmarked step: the simulated device's
// profile window, or kernel timing on a GPU.
struct StepWindow {
  virtual ~StepWindow() = default;
  virtual void begin() = 0;
  virtual void end(std::string name, const char* function, const cuda::StepShape& shape) = 0;
};

Session open_session(const std::string& model, const SessionOptions& base, const PredictSpec& spec) {
  const int32_t rows = spec.batch_rows.empty() ? 1 : *std::max_element(spec.batch_rows.begin(), spec.batch_rows.end());
  SessionOptions o = base;
  o.target = Target::Cuda;
  o.n_slots = std::max(rows, 1);
  const int32_t verify = spec.verify_rows.empty() ? 0 : *std::max_element(spec.verify_rows.begin(), spec.verify_rows.end());
  o.n_ctx = std::max<int64_t>(spec.prompt_tokens, spec.batch_context + std::max(verify, 4)) + 16;
  o.max_step_tokens = std::max({o.max_step_tokens, spec.prompt_tokens, verify});
  return Session(model, o);
}

// The benchmarked steps (bench_predict.h), each inside `window`.
void run_steps(Session& session, const PredictSpec& spec, StepWindow& window,
               const std::function<void(const std::string&)>& say) {
  if (spec.prompt_tokens > 0) {
    say(fmt::format("the prefill of {} tokens", spec.prompt_tokens));
    session.reset(0);
    window.begin();
    session.prefill(0, bench_tokens(spec.prompt_tokens, 0, session.n_vocab()), 0);
    const int64_t t = spec.prompt_tokens;
    window.end(fmt::format("prefill, {} tokens", t), "prefill", {{"T", t}, {"S", 1}, {"R", 1}, {"KEYS", (t + 1) / 2}});
  }
  const DeviceSampling greedy = DeviceSampling::greedy();
  for (int32_t b : spec.batch_rows) {
    say(fmt::format("a decode step of {} row(s) after {} tokens each", b, spec.batch_context));
    std::vector<int32_t> slots(static_cast<size_t>(b)), pos(static_cast<size_t>(b), spec.batch_context);
    std::iota(slots.begin(), slots.end(), 0);
    // Every sequence's context in one step: the weights are read once.
    std::vector<std::vector<int32_t>> contexts;
    std::vector<SeqChunk> chunks;
    for (int32_t s = 0; s < b; ++s) {
      session.reset(s);
      contexts.push_back(bench_tokens(spec.batch_context, int64_t{s} * spec.batch_context, session.n_vocab()));
    }
    for (int32_t s = 0; s < b; ++s) chunks.push_back({s, contexts[size_t(s)], 0, true});
    session.step(chunks);
    for (int32_t s = 0; s < b; ++s) session.set_last_id(s, 1);
    const std::vector<DeviceSampling> sampling(size_t(b), greedy);
    session.decode_sampled(slots, pos, sampling);  // warm-up: graph capture, pages
    session.finish_sampled();
    for (int32_t& p : pos) ++p;
    window.begin();
    session.decode_sampled(slots, pos, sampling);
    session.finish_sampled();
    window.end(fmt::format("decode, {} row(s) at {} tokens of context", b, spec.batch_context + 1), "decode",
               {{"T", b}, {"S", b}, {"R", b}, {"KEYS", spec.batch_context + 2}});
  }
  // A verify step of v rows after the context (one sequence, every row's logits).
  const auto verify_shape = [&](int32_t v) {
    return cuda::StepShape{{"T", v}, {"S", 1}, {"R", v}, {"KEYS", spec.batch_context + (v + 1) / 2}};
  };
  for (int32_t v : spec.verify_rows) {
    say(fmt::format("a verify step of {} row(s) after {} tokens", v, spec.batch_context));
    session.reset(0);
    session.prefill(0, bench_tokens(spec.batch_context, 0, session.n_vocab()), 0);
    const std::vector<int32_t> rows = bench_tokens(v, spec.batch_context, session.n_vocab());
    window.begin();
    session.prefill(0, rows, spec.batch_context, true);
    window.end(fmt::format("verify, {} row(s) after {} tokens of context", v, spec.batch_context), "prefill",
               verify_shape(v));
  }
  // A model with recurrent state drafts on the host (its rollback is a
  // host-ordered checkpoint restore): no device-drafted steps.
  if (spec.device_drafted && !session.states().carries_recurrent_state())
    for (int32_t v : spec.verify_rows) {
      say(fmt::format("a verify step of {} row(s) drafted on the device after {} tokens", v, spec.batch_context));
      session.reset(0);
      std::vector<int32_t> context = bench_tokens(spec.batch_context + 1, 0, session.n_vocab());
      session.prefill(0, std::span<const int32_t>(context).first(size_t(spec.batch_context)), 0);
      session.start_device_drafts(0, context);  // compiles the two kernels the first time
      window.begin();  // the bucket's graph was captured by the host-drafted step of v rows above
      const Session::DeviceVerifyRows rows{0, v - 1, spec.batch_context + v};
      session.verify_on_device({&rows, 1});
      try {
        session.finish_device_verify();
      } catch (const Error&) {
        // With sampled blocks most blocks do not run, so spec_accept's last
        // block never finishes and the outcome is not one: only its cost is.
        if (spec.sample_blocks <= 1) throw;
      }
      window.end(fmt::format("verify drafted on the device, {} row(s) after {} tokens of context", v, spec.batch_context),
                 "prefill", verify_shape(v));
    }
}

struct ProfileWindow : StepWindow {
  Pricer& pricer;
  uint64_t sample_every;
  std::vector<PredictedStep> out;
  ProfileWindow(Pricer& p, uint64_t n) : pricer(p), sample_every(n) {}
  void begin() override { cuda::sim_profile_begin(sample_every); }
  void end(std::string name, const char* function, const cuda::StepShape& shape) override {
    out.push_back(pricer.price(std::move(name), cuda::sim_profile_end(), function, shape));
  }
};

const nlohmann::json* predicted_step(const nlohmann::json* predicted, const std::string& name) {
  if (!predicted || !predicted->contains("steps")) return nullptr;
  for (const auto& step : predicted->at("steps"))
    if (step.value("step", "") == name) return &step;
  return nullptr;
}

MeasuredStep measured_step(std::string name, const std::vector<cuda::Device::KernelTime>& times,
                           const nlohmann::json* predicted, bool simulated) {
  struct Family {
    int launches = 0;
    double measured_us = 0, predicted_us = -1;
  };
  std::map<std::string, Family> families;
  MeasuredStep m;
  for (const auto& t : times) {
    Family& f = families[cuda::kernel_family(t.entry)];
    ++f.launches;
    f.measured_us += t.ms * 1e3;
    m.measured_us += t.ms * 1e3;
  }
  const nlohmann::json* pred = predicted_step(predicted, name);
  if (pred) {
    m.predicted_us = pred->value("kernel_us", -1.0);
    for (const auto& f : pred->value("families", nlohmann::json::array()))
      families[f.value("family", "")].predicted_us = f.value("predicted_us", -1.0);
  }
  auto ratio = [](double measured, double predicted) {
    return predicted > 0 ? fmt::format("{:.2f}", measured / predicted) : std::string("-");
  };
  m.table = fmt::format("{}: {}{}\n", name,
                        simulated ? "SIMULATOR host time per kernel (not a GPU measurement: the plumbing only)"
                                  : "MEASURED kernel times (CUDA events, graphs off)",
                        pred ? ", against the cost model's prediction" : "");
  m.table += fmt::format("| kernel family | launches | {} us | predicted us | {} / predicted |\n|---|---|---|---|---|\n",
                         simulated ? "simulator" : "measured", simulated ? "simulator" : "measured");
  nlohmann::json j = {{"step", name}, {"measured_us", m.measured_us}, {"predicted_kernel_us", m.predicted_us},
                      {"simulated", simulated}};
  for (const auto& [family, f] : families) {
    m.table += fmt::format("| {} | {} | {:.1f} | {} | {} |\n", family, f.launches, f.measured_us,
                           f.predicted_us >= 0 ? fmt::format("{:.1f}", f.predicted_us) : "-",
                           ratio(f.measured_us, f.predicted_us));
    j["families"].push_back({{"family", family}, {"launches", f.launches}, {"measured_us", f.measured_us},
                             {"predicted_us", f.predicted_us}});
  }
  m.table += fmt::format("step kernels: measured {:.1f} us, predicted {} us, measured / predicted {}\n",
                         m.measured_us, m.predicted_us >= 0 ? fmt::format("{:.1f}", m.predicted_us) : "-",
                         ratio(m.measured_us, m.predicted_us));
  m.json = j.dump(1);
  return m;
}

// Measured kernel times per family, against the predicted ones when given.
struct TimingWindow : StepWindow {
  const cuda::Device& device;
  const nlohmann::json* predicted;  // a simulated run's --json, or null
  std::vector<MeasuredStep> out;
  TimingWindow(const cuda::Device& d, const nlohmann::json* p) : device(d), predicted(p) {}
  void begin() override {
    device.kernel_times();  // forget the warm-up's
    device.set_kernel_timing(true);
  }
  void end(std::string name, const char*, const cuda::StepShape&) override {
    device.set_kernel_timing(false);
    out.push_back(measured_step(std::move(name), device.kernel_times(), predicted, device.simulated()));
  }
};

}  // namespace

std::vector<PredictedStep> predict_cuda_steps(const std::string& model, const SessionOptions& base,
                                              const PredictSpec& spec,
                                              const std::function<void(const std::string&)>& progress) {
  const cuda::GpuSpec& gpu = cuda::find_gpu(spec.gpu);
  Session session = open_session(model, base, spec);
  session.require_text_generation("vtc bench");
  Pricer pricer{session, gpu, weight_shape(session.file(), spec.scale_layers)};
  if (spec.scale_layers > 0 && pricer.weights.n_layers > 0)
    pricer.layer_scale = double(spec.scale_layers) / pricer.weights.n_layers;
  ProfileWindow window(pricer, uint64_t(std::max(spec.sample_blocks, 1)));
  run_steps(session, spec, window, [&](const std::string& s) {
    if (progress) progress("profiling " + s + " on the simulated device");
  });
  return std::move(window.out);
}

std::vector<MeasuredStep> measure_cuda_steps(const std::string& model, const SessionOptions& base,
                                             const PredictSpec& spec, const nlohmann::json* predicted,
                                             const std::function<void(const std::string&)>& progress) {
  SessionOptions o = base;
  o.cuda_graphs = false;  // timing events inside a replayed graph would time nothing apart
  Session session = open_session(model, o, spec);
  session.require_text_generation("vtc bench");
  const auto* executor = dynamic_cast<const cuda::Executor*>(&session.backend());
  if (!executor) throw Error("bench: --kernel-times needs the cuda target");
  TimingWindow window(executor->device(), predicted);
  run_steps(session, spec, window, [&](const std::string& s) {
    if (progress) progress("timing the kernels of " + s);
  });
  return std::move(window.out);
}

}  // namespace vtc
