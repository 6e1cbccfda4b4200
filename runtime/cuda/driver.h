// The CUDA driver API, loaded at run time.
//
// libcuda.so.1 is dlopen'ed (VTC_CUDA_LIBRARY overrides; VTC_CUDA_DEVICE=sim
// loads the simulated device instead), so vtc runs on
// machines without a GPU or driver and says why the cuda target is
// unavailable instead of failing to start. Only the entry points the
// executor uses are bound, by their C ABI (cuda.h, CUDA 12/13 `_v2` names
// where the ABI has them). Every call goes through check(), which turns a
// CUresult into vtc::Error with the driver's message and the call's name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace vtc::cuda {

using DevPtr = unsigned long long;  // CUdeviceptr

struct DriverApi;  // function pointers (driver.cpp)

class Device {
 public:
  // Loads the driver, initializes it and retains device `ordinal`'s primary
  // context. Returns null with the reason in *why when there is no driver
  // or no device.
  static std::unique_ptr<Device> open(int ordinal, std::string* why);
  ~Device();

  const std::string& name() const { return name_; }
  // The simulated device (VTC_CUDA_DEVICE=sim; codegen/cuda/sim_device.h).
  bool simulated() const { return simulated_; }
  int arch() const { return arch_; }  // 80, 90, ...
  uint64_t total_memory() const { return total_memory_; }

  DevPtr alloc(size_t bytes);  // zeroed
  void free(DevPtr p);
  void* alloc_host(size_t bytes);  // pinned, for asynchronous copies out
  void free_host(void* p);
  void upload(DevPtr dst, const void* src, size_t bytes, void* stream);  // async on `stream`
  void download(void* dst, DevPtr src, size_t bytes, void* stream);
  void copy(DevPtr dst, DevPtr src, size_t bytes, void* stream);  // device to device, async on `stream`
  void memset(DevPtr dst, uint8_t value, size_t bytes, void* stream);

  void* create_stream();
  void destroy_stream(void* s);
  void sync(void* stream);

  void* load_module(const std::string& image);  // cubin or PTX
  void unload_module(void* module);
  void* function(void* module, const std::string& entry);
  void launch(void* fn, unsigned gx, unsigned gy, unsigned block, void** params, void* stream);

  // CUDA graphs: capture everything launched on `stream` between begin and
  // end into an executable graph, launched later with one call.
  void begin_capture(void* stream);
  void* end_capture(void* stream);  // returns an executable graph
  void launch_graph(void* exec, void* stream);
  void destroy_graph(void* exec);

  void* create_event();
  void record(void* event, void* stream);
  bool event_done(void* event);
  void wait(void* event);
  void destroy_event(void* event);

  // Kernel timing (the cost model's calibration, scripts/gpu-check): while
  // on, every launch is bracketed by two timing events on its stream (so a
  // graph captured meanwhile would carry them: time with graphs off).
  // kernel_times() waits for the events and returns each launch's entry
  // and milliseconds, in launch order, and forgets them.
  struct KernelTime {
    std::string entry;
    double ms = 0;
  };
  void set_kernel_timing(bool on) const;
  std::vector<KernelTime> kernel_times() const;

 private:
  Device() = default;
  void check(int rc, const char* call) const;
  std::unique_ptr<DriverApi> api_;
  int ordinal_ = 0;
  bool simulated_ = false;
  int device_ = 0;
  void* context_ = nullptr;
  std::string name_;
  int arch_ = 0;
  uint64_t total_memory_ = 0;
  // Kernel timing (instrumentation, hence mutable: the executor hands out
  // its device as const).
  mutable bool timing_ = false;
  std::map<void*, std::string> entries_;  // function -> entry
  struct TimedLaunch {
    void* fn;
    void* start;
    void* end;
  };
  mutable std::vector<TimedLaunch> timed_;
};

}  // namespace vtc::cuda
