// Profile windows on the simulated device (cost_model.h): the window entry
// points are exported by libvtc_cuda_sim.so next to the driver API, and
// reached here through the copy the driver wrapper already loaded.
#include <dlfcn.h>
#include <fmt/format.h>

#include "codegen/cuda/sim_device.h"
#include "runtime/cuda/cost_model.h"
#include "support/error.h"

namespace vtc::cuda {
namespace {

struct WindowApi {
  int (*begin)(unsigned long long) = nullptr;
  const VtcSimProfile* (*end)() = nullptr;
};

const WindowApi& window_api() {
  static const WindowApi api = [] {
    WindowApi a;
    // RTLD_NOLOAD: only the library the executor loaded (a second copy
    // would be a second device).
    void* h = dlopen(simulated_device_library().c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!h) return a;
    a.begin = reinterpret_cast<int (*)(unsigned long long)>(dlsym(h, "vtcSimProfileBegin"));
    a.end = reinterpret_cast<const VtcSimProfile* (*)()>(dlsym(h, "vtcSimProfileEnd"));
    return a;
  }();
  return api;
}

}  // namespace

void sim_profile_begin(uint64_t sample_every) {
  const WindowApi& api = window_api();
  if (!api.begin || !api.end)
    throw Error("the cost model needs the simulated device (VTC_CUDA_DEVICE=sim) loaded by a CUDA session first");
  if (api.begin(sample_every) != 0)
    throw Error("the simulated device is not in profile mode: set VTC_CUDA_SIM_PROFILE=1 before it is loaded");
}

const VtcSimProfile& sim_profile_end() {
  const WindowApi& api = window_api();
  if (!api.end) throw Error("the cost model needs the simulated device (VTC_CUDA_DEVICE=sim)");
  return *api.end();
}

}  // namespace vtc::cuda
