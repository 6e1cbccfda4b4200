#include "runtime/cuda/driver.h"


#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <vector>

#include "codegen/cuda/sim_device.h"
#include "support/error.h"
#include "support/dynlib.h"

namespace vtc::cuda {

struct DriverApi {
  void* handle = nullptr;
  int (*init)(unsigned) = nullptr;
  int (*device_count)(int*) = nullptr;
  int (*device_get)(int*, int) = nullptr;
  int (*device_name)(char*, int, int) = nullptr;
  int (*device_attr)(int*, int, int) = nullptr;
  int (*device_mem)(size_t*, int) = nullptr;
  int (*ctx_retain)(void**, int) = nullptr;
  int (*ctx_release)(int) = nullptr;
  int (*ctx_set)(void*) = nullptr;
  int (*mem_alloc)(DevPtr*, size_t) = nullptr;
  int (*mem_free)(DevPtr) = nullptr;
  int (*host_alloc)(void**, size_t, unsigned) = nullptr;
  int (*host_free)(void*) = nullptr;
  int (*htod)(DevPtr, const void*, size_t, void*) = nullptr;
  int (*dtoh)(void*, DevPtr, size_t, void*) = nullptr;
  int (*dtod)(DevPtr, DevPtr, size_t, void*) = nullptr;
  int (*memset8)(DevPtr, unsigned char, size_t, void*) = nullptr;
  int (*stream_create)(void**, unsigned) = nullptr;
  int (*stream_destroy)(void*) = nullptr;
  int (*stream_sync)(void*) = nullptr;
  int (*module_load)(void**, const void*) = nullptr;
  int (*module_unload)(void*) = nullptr;
  int (*module_fn)(void**, void*, const char*) = nullptr;
  int (*launch)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**,
                void**) = nullptr;
  int (*begin_capture)(void*, int) = nullptr;
  int (*end_capture)(void*, void**) = nullptr;
  int (*graph_instantiate)(void**, void*, unsigned long long) = nullptr;
  int (*graph_launch)(void*, void*) = nullptr;
  int (*graph_exec_destroy)(void*) = nullptr;
  int (*graph_destroy)(void*) = nullptr;
  int (*event_create)(void**, unsigned) = nullptr;
  int (*event_record)(void*, void*) = nullptr;
  int (*event_query)(void*) = nullptr;
  int (*event_sync)(void*) = nullptr;
  int (*event_destroy)(void*) = nullptr;
  int (*error_string)(int, const char**) = nullptr;
  int (*event_elapsed)(float*, void*, void*) = nullptr;  // optional: kernel timing only
  ~DriverApi() {
    if (handle) dlclose(handle);
  }
};

namespace {

using vtc::bind_symbol;

bool bind_all(DriverApi& a) {
  void* h = a.handle;
  return bind_symbol(h, "cuInit", a.init) && bind_symbol(h, "cuDeviceGetCount", a.device_count) &&
         bind_symbol(h, "cuDeviceGet", a.device_get) && bind_symbol(h, "cuDeviceGetName", a.device_name) &&
         bind_symbol(h, "cuDeviceGetAttribute", a.device_attr) && bind_symbol(h, "cuDeviceTotalMem_v2", a.device_mem) &&
         bind_symbol(h, "cuDevicePrimaryCtxRetain", a.ctx_retain) && bind_symbol(h, "cuDevicePrimaryCtxRelease_v2", a.ctx_release) &&
         bind_symbol(h, "cuCtxSetCurrent", a.ctx_set) && bind_symbol(h, "cuMemAlloc_v2", a.mem_alloc) &&
         bind_symbol(h, "cuMemFree_v2", a.mem_free) && bind_symbol(h, "cuMemHostAlloc", a.host_alloc) &&
         bind_symbol(h, "cuMemFreeHost", a.host_free) && bind_symbol(h, "cuMemcpyHtoDAsync_v2", a.htod) &&
         bind_symbol(h, "cuMemcpyDtoHAsync_v2", a.dtoh) &&
         bind_symbol(h, "cuMemcpyDtoDAsync_v2", a.dtod) && bind_symbol(h, "cuMemsetD8Async", a.memset8) &&
         bind_symbol(h, "cuStreamCreate", a.stream_create) && bind_symbol(h, "cuStreamDestroy_v2", a.stream_destroy) &&
         bind_symbol(h, "cuStreamSynchronize", a.stream_sync) && bind_symbol(h, "cuModuleLoadData", a.module_load) &&
         bind_symbol(h, "cuModuleUnload", a.module_unload) && bind_symbol(h, "cuModuleGetFunction", a.module_fn) &&
         bind_symbol(h, "cuLaunchKernel", a.launch) && bind_symbol(h, "cuStreamBeginCapture_v2", a.begin_capture) &&
         bind_symbol(h, "cuStreamEndCapture", a.end_capture) && bind_symbol(h, "cuGraphInstantiateWithFlags", a.graph_instantiate) &&
         bind_symbol(h, "cuGraphLaunch", a.graph_launch) && bind_symbol(h, "cuGraphExecDestroy", a.graph_exec_destroy) &&
         bind_symbol(h, "cuGraphDestroy", a.graph_destroy) && bind_symbol(h, "cuEventCreate", a.event_create) &&
         bind_symbol(h, "cuEventRecord", a.event_record) && bind_symbol(h, "cuEventQuery", a.event_query) &&
         bind_symbol(h, "cuEventSynchronize", a.event_sync) && bind_symbol(h, "cuEventDestroy_v2", a.event_destroy) &&
         bind_symbol(h, "cuGetErrorString", a.error_string);
}

constexpr int kAttrCcMajor = 75, kAttrCcMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_*
constexpr int kNotReady = 600;                       // CUDA_ERROR_NOT_READY

}  // namespace

void Device::check(int rc, const char* call) const {
  if (rc == 0) return;
  const char* msg = nullptr;
  if (api_ && api_->error_string) api_->error_string(rc, &msg);
  throw Error(fmt::format("cuda: {} failed: {} ({})", call, msg ? msg : "unknown error", rc));
}

std::unique_ptr<Device> Device::open(int ordinal, std::string* why) {
  auto fail = [&](std::string reason) -> std::unique_ptr<Device> {
    if (why) *why = std::move(reason);
    return nullptr;
  };
  auto api = std::make_unique<DriverApi>();
  std::string choice_error;
  const DeviceChoice choice = device_choice(&choice_error);
  if (choice == DeviceChoice::Invalid) return fail(choice_error);
  if (choice == DeviceChoice::Simulated) {
    const std::string lib = simulated_device_library();
    api->handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!api->handle) return fail(fmt::format("VTC_CUDA_DEVICE=sim: cannot load the simulated device {}: {}", lib, dlerror()));
  } else {
    const char* env = std::getenv("VTC_CUDA_LIBRARY");
    api->handle = dlopen(env && *env ? env : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!api->handle) return fail("the CUDA driver (libcuda.so.1) is not installed");
  }
  if (!bind_all(*api)) return fail("the CUDA driver is too old (CUDA 12 or newer is needed)");
  bind_symbol(api->handle, "cuEventElapsedTime", api->event_elapsed);
  if (int rc = api->init(0); rc != 0) return fail(fmt::format("cuInit failed ({}): no usable GPU", rc));
  int count = 0;
  api->device_count(&count);
  if (count <= ordinal) return fail(fmt::format("no CUDA device {} ({} found)", ordinal, count));
  std::unique_ptr<Device> d(new Device());
  d->api_ = std::move(api);
  d->ordinal_ = ordinal;
  d->simulated_ = choice == DeviceChoice::Simulated;
  DriverApi& a = *d->api_;
  d->check(a.device_get(&d->device_, ordinal), "cuDeviceGet");
  char name[256] = {};
  d->check(a.device_name(name, sizeof name, d->device_), "cuDeviceGetName");
  d->name_ = name;
  int major = 0, minor = 0;
  a.device_attr(&major, kAttrCcMajor, d->device_);
  a.device_attr(&minor, kAttrCcMinor, d->device_);
  d->arch_ = major * 10 + minor;
  size_t mem = 0;
  a.device_mem(&mem, d->device_);
  d->total_memory_ = mem;
  d->check(a.ctx_retain(&d->context_, d->device_), "cuDevicePrimaryCtxRetain");
  d->check(a.ctx_set(d->context_), "cuCtxSetCurrent");
  return d;
}

Device::~Device() {
  if (api_ && context_) api_->ctx_release(device_);
}

DevPtr Device::alloc(size_t bytes) {
  DevPtr p = 0;
  check(api_->mem_alloc(&p, bytes ? bytes : 1), "cuMemAlloc");
  // Zeroed on the legacy stream, which the executor's non-blocking stream
  // does not wait for: finish it here.
  check(api_->memset8(p, 0, bytes ? bytes : 1, nullptr), "cuMemsetD8Async");
  check(api_->stream_sync(nullptr), "cuStreamSynchronize");
  return p;
}
void Device::free(DevPtr p) {
  if (p) api_->mem_free(p);
}
void* Device::alloc_host(size_t bytes) {
  void* p = nullptr;
  check(api_->host_alloc(&p, bytes ? bytes : 1, 0), "cuMemHostAlloc");
  return p;
}
void Device::free_host(void* p) {
  if (p) api_->host_free(p);
}
void Device::upload(DevPtr dst, const void* src, size_t bytes, void* stream) {
  if (bytes) check(api_->htod(dst, src, bytes, stream), "cuMemcpyHtoDAsync");
}
void Device::download(void* dst, DevPtr src, size_t bytes, void* stream) {
  if (bytes) check(api_->dtoh(dst, src, bytes, stream), "cuMemcpyDtoHAsync");
}
void Device::copy(DevPtr dst, DevPtr src, size_t bytes, void* stream) {
  if (bytes) check(api_->dtod(dst, src, bytes, stream), "cuMemcpyDtoDAsync");
}
void Device::memset(DevPtr dst, uint8_t value, size_t bytes, void* stream) {
  if (bytes) check(api_->memset8(dst, value, bytes, stream), "cuMemsetD8Async");
}
void* Device::create_stream() {
  void* s = nullptr;
  check(api_->stream_create(&s, 1 /* non-blocking */), "cuStreamCreate");
  return s;
}
void Device::destroy_stream(void* s) {
  if (s) api_->stream_destroy(s);
}
void Device::sync(void* stream) { check(api_->stream_sync(stream), "cuStreamSynchronize"); }

void* Device::load_module(const std::string& image) {
  void* m = nullptr;
  check(api_->module_load(&m, image.c_str()), "cuModuleLoadData");
  return m;
}
void Device::unload_module(void* module) {
  if (module) api_->module_unload(module);
}
void* Device::function(void* module, const std::string& entry) {
  void* f = nullptr;
  check(api_->module_fn(&f, module, entry.c_str()), "cuModuleGetFunction");
  entries_[f] = entry;
  return f;
}
void Device::launch(void* fn, unsigned gx, unsigned gy, unsigned block, void** params, void* stream) {
  TimedLaunch t{fn, nullptr, nullptr};
  if (timing_) {
    check(api_->event_create(&t.start, 0), "cuEventCreate");
    check(api_->event_create(&t.end, 0), "cuEventCreate");
    record(t.start, stream);
  }
  check(api_->launch(fn, gx, gy, 1, block, 1, 1, 0, stream, params, nullptr), "cuLaunchKernel");
  if (timing_) {
    record(t.end, stream);
    timed_.push_back(t);
  }
}

void Device::set_kernel_timing(bool on) const {
  if (on && !api_->event_elapsed) throw Error("cuda: kernel timing needs cuEventElapsedTime, which the driver lacks");
  timing_ = on;
}

std::vector<Device::KernelTime> Device::kernel_times() const {
  std::vector<KernelTime> out;
  for (const TimedLaunch& t : timed_) {
    check(api_->event_sync(t.end), "cuEventSynchronize");
    float ms = 0;
    check(api_->event_elapsed(&ms, t.start, t.end), "cuEventElapsedTime");
    auto it = entries_.find(t.fn);
    out.push_back({it == entries_.end() ? "?" : it->second, double(ms)});
    api_->event_destroy(t.start);
    api_->event_destroy(t.end);
  }
  timed_.clear();
  return out;
}

void Device::begin_capture(void* stream) {
  check(api_->begin_capture(stream, 2 /* CU_STREAM_CAPTURE_MODE_RELAXED */), "cuStreamBeginCapture");
}
void* Device::end_capture(void* stream) {
  void* graph = nullptr;
  check(api_->end_capture(stream, &graph), "cuStreamEndCapture");
  void* exec = nullptr;
  const int rc = api_->graph_instantiate(&exec, graph, 0);
  api_->graph_destroy(graph);
  check(rc, "cuGraphInstantiate");
  return exec;
}
void Device::launch_graph(void* exec, void* stream) { check(api_->graph_launch(exec, stream), "cuGraphLaunch"); }
void Device::destroy_graph(void* exec) {
  if (exec) api_->graph_exec_destroy(exec);
}

void* Device::create_event() {
  void* e = nullptr;
  check(api_->event_create(&e, 2 /* CU_EVENT_DISABLE_TIMING */), "cuEventCreate");
  return e;
}
void Device::record(void* event, void* stream) { check(api_->event_record(event, stream), "cuEventRecord"); }
bool Device::event_done(void* event) {
  const int rc = api_->event_query(event);
  if (rc == kNotReady) return false;
  check(rc, "cuEventQuery");
  return true;
}
void Device::wait(void* event) { check(api_->event_sync(event), "cuEventSynchronize"); }
void Device::destroy_event(void* event) {
  if (event) api_->event_destroy(event);
}

}  // namespace vtc::cuda
