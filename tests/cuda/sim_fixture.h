// The simulated CUDA device for tests that launch hand-written kernels
// through the same wrappers the executor uses (test_cuda_sim,
// test_cost_model).
#pragma once

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "codegen/cuda/nvrtc.h"
#include "runtime/cuda/driver.h"
#include "support/error.h"

namespace vtc::cuda::test {

struct Sim {
  std::unique_ptr<Device> dev;
  std::unique_ptr<Nvrtc> nvrtc;
  void* stream = nullptr;
  Sim() {
    ::setenv("VTC_CUDA_DEVICE", "sim", 1);
    std::string why;
    dev = Device::open(0, &why);
    if (!dev) FAIL("the simulated device does not open: " << why);
    nvrtc = Nvrtc::load(&why);
    if (!nvrtc) FAIL("the simulated NVRTC does not load: " << why);
    stream = dev->create_stream();
  }
  ~Sim() {
    // A failed launch leaves the context's error sticky (as on a GPU).
    try {
      dev->sync(stream);
    } catch (const vtc::Error&) {
    }
    dev->destroy_stream(stream);
  }
  // Compiles `body` as `extern "C" __global__ void NAME(PARAMS)`, after
  // `prefix` (device helpers), and returns its function.
  void* kernel(const std::string& name, const std::string& params, const std::string& body,
               const std::string& prefix = "") {
    Kernel k;
    k.entry = name;
    k.what = "test kernel " + name;
    k.source = prefix + fmt::format("extern \"C\" __global__ void {}({}) {{\n{}\n}}\n", name, params, body);
    return dev->function(dev->load_module(nvrtc->compile(k, dev->arch(), CodeKind::Cubin).image), name);
  }
  template <typename T>
  std::vector<T> read(DevPtr p, size_t n) {
    std::vector<T> out(n);
    dev->download(out.data(), p, n * sizeof(T), stream);
    return out;
  }
};

}  // namespace vtc::cuda::test
