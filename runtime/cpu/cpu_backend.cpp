#include "runtime/cpu/cpu_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "runtime/cpu/kernels/attention_internal.h"
#include "runtime/cpu/kernels/kernels.h"
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

CpuBackend::CpuBackend(const BackendInputs& inputs, const CpuBackendOptions& options) {
  best_isa();  // a bad VTC_CPU_ISA is an error here, before any step runs
  impl_ = std::make_unique<Impl>(inputs, options);
}
CpuBackend::~CpuBackend() = default;

int32_t CpuBackend::rows_with_decode_bits() const { return int32_t(detail::kAttentionTileQ - 1); }

std::string CpuBackend::describe() const {
  return fmt::format("CPU interpreter, {} kernels{}, {} threads", isa_name(active_isa()),
                     isa_forced() ? " (VTC_CPU_ISA)" : "", impl_->pool.size());
}
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

std::vector<int32_t> CpuBackend::run_sampled(const StepRequest& request) {
  std::vector<HostTensor> out = run(request);
  const HostTensor& ids = out.back();
  if (!(ids.elem == ir::ElemType::I32) || ids.shape.size() != 1)
    throw Error(fmt::format("@{} does not return sampled ids last", request.step));
  std::vector<int32_t> previous = std::move(impl_->sampled);
  impl_->sampled.assign(ids.i32_data(), ids.i32_data() + ids.numel());
  return previous;
}

std::vector<int32_t> CpuBackend::wait_sampled() { return std::move(impl_->sampled); }

}  // namespace vtc::cpu
