// Choosing the simulated CUDA device (see sim_device.h).
#include "codegen/cuda/sim_device.h"

#include <cstdlib>
#include <filesystem>

namespace vtc::cuda {

DeviceChoice device_choice(std::string* why) {
  const char* env = std::getenv("VTC_CUDA_DEVICE");
  if (!env || !*env) return DeviceChoice::Hardware;
  if (std::string(env) == "sim") return DeviceChoice::Simulated;
  if (why)
    *why = "VTC_CUDA_DEVICE=" + std::string(env) +
           " is not a device vtc knows: leave it unset for the GPU, or set it to `sim` for the simulated device";
  return DeviceChoice::Invalid;
}

std::string simulated_device_library() {
  if (const char* env = std::getenv("VTC_CUDA_SIM_LIBRARY"); env && *env) return env;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec)
    for (const auto& candidate : {exe.parent_path() / "libvtc_cuda_sim.so", exe.parent_path() / "../lib/libvtc_cuda_sim.so"})
      if (std::filesystem::exists(candidate, ec)) return candidate.string();
  return VTC_CUDA_SIM_BUILD_PATH;
}

}  // namespace vtc::cuda
