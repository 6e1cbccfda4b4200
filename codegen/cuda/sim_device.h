// Choosing the simulated CUDA device (VTC_CUDA_DEVICE=sim).
//
// The simulated device (runtime/cuda/sim, docs/cuda.md) is a library that
// exports the same driver-API and NVRTC entry points as libcuda and
// libnvrtc, so the executor, the code generator and the NVRTC wrapper run
// unchanged on it. It is never chosen silently: only VTC_CUDA_DEVICE=sim
// selects it, and the device then names itself "CUDA (simulated device)"
// in every banner.
#pragma once

#include <string>

namespace vtc::cuda {

enum class DeviceChoice { Hardware, Simulated, Invalid };

// From VTC_CUDA_DEVICE: unset or empty is the hardware; "sim" the
// simulator; anything else Invalid, with the reason in *why.
DeviceChoice device_choice(std::string* why);

// libvtc_cuda_sim.so: $VTC_CUDA_SIM_LIBRARY, else next to the running
// executable, else where this build tree put it.
std::string simulated_device_library();

}  // namespace vtc::cuda
