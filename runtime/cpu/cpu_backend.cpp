#include "runtime/cpu/cpu_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "runtime/sampler.h"
#include "support/error.h"

namespace vtc::cpu {
namespace {
int resolve_threads(int requested) {
  if (requested > 0) return requested;
  return int(std::max(1u, std::thread::hardware_concurrency()));
}
}  // namespace

struct CpuBackend::Impl {
  ThreadPool pool;
  HostStates states;
  Interpreter interp;
  std::vector<int32_t> sampled;  // the last decode_sampled call's ids

  Impl(const BackendInputs& in, const CpuBackendOptions& o)
      : pool(resolve_threads(o.threads)), states(in.states), interp(in.module, in.file, states, pool) {
    interp.use_plans(in.plans);
    interp.set_fused_kernels(o.fused_kernels);
  }
};

CpuBackend::CpuBackend(const BackendInputs& inputs, const CpuBackendOptions& options)
    : impl_(std::make_unique<Impl>(inputs, options)) {}
CpuBackend::~CpuBackend() = default;

std::string CpuBackend::describe() const { return fmt::format("CPU interpreter, {} threads", impl_->pool.size()); }
std::vector<HostTensor> CpuBackend::run(const StepRequest& request) { return impl_->interp.run(request); }
void CpuBackend::set_observer(OpObserver observer) { impl_->interp.set_observer(std::move(observer)); }
Interpreter& CpuBackend::interpreter() { return impl_->interp; }
HostStates& CpuBackend::host_states() { return impl_->states; }

std::vector<uint8_t> CpuBackend::read_slot_row(const StateStore::Layout& state, int32_t slot) {
  auto row = impl_->states.slot_bytes(impl_->states.buffer(state.decl->name), slot);
  return {row.begin(), row.end()};
}

void CpuBackend::write_slot_row(const StateStore::Layout& state, int32_t slot, std::span<const uint8_t> bytes) {
  auto row = impl_->states.slot_bytes(impl_->states.buffer(state.decl->name), slot);
  if (bytes.size() != row.size())
    throw Error(fmt::format("state @{}: a slot row holds {} bytes, got {}", state.decl->name, row.size(), bytes.size()));
  std::memcpy(row.data(), bytes.data(), row.size());
}

std::vector<uint8_t> CpuBackend::read_page(const StateStore::Layout& state, int half, int32_t page) {
  HostStates::Buffer& b = impl_->states.buffer(state.decl->name);
  const uint64_t bytes = state.page_bytes(impl_->states.page_size());
  const uint8_t* first = impl_->states.pool_base(b, half) + uint64_t(page) * bytes;
  return {first, first + bytes};
}

// @decode's logits, then one draw per row on the host: greedy is the
// argmax with the lowest id on ties, as on the device.
std::vector<int32_t> CpuBackend::decode_sampled(std::span<const int32_t> slots, std::span<const int32_t> positions,
                                                const DeviceSampling& s) {
  StepRequest req{"decode", std::vector<int32_t>(slots.begin(), slots.end()), {}};
  std::vector<int32_t> seq(slots.size());
  for (size_t i = 0; i < seq.size(); ++i) seq[i] = int32_t(i);
  req.args["pos"] = HostTensor::i32(std::vector<int32_t>(positions.begin(), positions.end()));
  req.args["seq"] = HostTensor::i32(seq);
  HostTensor logits = std::move(run(req).at(0));
  SamplingParams p = SamplingParams::greedy();
  if (s.temperature > 0) p = {.temperature = s.temperature, .top_k = s.top_k, .top_p = s.top_p, .min_p = s.min_p, .seed = s.seed, .seed_exact = true};
  std::vector<int32_t> previous = std::move(impl_->sampled);
  impl_->sampled.clear();
  const StateStore::Layout& last = impl_->states.store().layout("last_ids");
  for (size_t i = 0; i < slots.size(); ++i) {
    Sampler sampler(p);
    const int32_t id = sampler.sample(logits.row(int64_t(i)));
    write_slot_row(last, slots[i], {reinterpret_cast<const uint8_t*>(&id), 4});
    impl_->sampled.push_back(id);
  }
  return previous;
}

std::vector<int32_t> CpuBackend::wait_sampled() { return std::move(impl_->sampled); }

}  // namespace vtc::cpu
