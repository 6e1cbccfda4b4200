// The CUDA driver API entry points of the simulated device: the C ABI
// runtime/cuda/driver.cpp binds (cuda.h names, CUDA 12 `_v2` variants),
// exported from libvtc_cuda_sim.so. One device (ordinal 0) with sm_90's
// compute capability, named "CUDA (simulated device)".
#include <dlfcn.h>
#include <link.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "runtime/cuda/sim/memory.h"
#include "runtime/cuda/sim/streams.h"

using namespace vtc::cuda::sim;
using DevPtr = unsigned long long;

namespace {

constexpr const char* kDeviceName = "CUDA (simulated device)";
constexpr char kImageMagic[] = "//VTCSIM1 ";  // the sim NVRTC's image: magic, length, newline, ELF

// One loaded kernel object.
struct Object {
  ModuleMemory memory;
  void* handle = nullptr;
  int fd = -1;  // open while loaded: the loader knows a library by its path, /proc/self/fd/<fd>
};

// A module: its object, and in profile mode the instrumented variant.
struct Module {
  Object plain, profiled;
  std::map<std::string, Function> functions;
};

int check_range(DevPtr p, size_t bytes, const char* call) {
  if (find_allocation(uintptr_t(p), bytes)) return kSuccess;
  return fail_with(kInvalidValue, fmt::format("{}: [{:#x}, +{}) is not inside one device allocation: {} (simulated device)",
                                              call, p, bytes, describe_address(uintptr_t(p))));
}

Stream* as_stream(void* s) { return static_cast<Stream*>(s); }

// The loaded segments and the thread-local block size of a kernel object.
ModuleMemory module_memory(void* handle) {
  ModuleMemory mem;
  mem.handle = handle;
  struct link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map) return mem;
  struct Search {
    uintptr_t base;
    ModuleMemory* mem;
  } search{uintptr_t(map->l_addr), &mem};
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* arg) {
        auto* s = static_cast<Search*>(arg);
        if (uintptr_t(info->dlpi_addr) != s->base) return 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const auto& ph = info->dlpi_phdr[i];
          if (ph.p_type == PT_LOAD)
            s->mem->segments.emplace_back(s->base + ph.p_vaddr, s->base + ph.p_vaddr + ph.p_memsz);
          if (ph.p_type == PT_TLS) s->mem->tls_bytes = ph.p_memsz;
        }
        return 1;
      },
      &search);
  return mem;
}

}  // namespace

#define VTC_SIM_API extern "C" __attribute__((visibility("default")))

VTC_SIM_API int cuInit(unsigned) { return kSuccess; }
VTC_SIM_API int cuDeviceGetCount(int* n) {
  *n = 1;
  return kSuccess;
}
VTC_SIM_API int cuDeviceGet(int* d, int ordinal) {
  if (ordinal != 0) return fail_with(kInvalidValue, "the simulated device has ordinal 0 only");
  *d = 0;
  return kSuccess;
}
VTC_SIM_API int cuDeviceGetName(char* name, int len, int) {
  std::snprintf(name, size_t(len), "%s", kDeviceName);
  return kSuccess;
}
VTC_SIM_API int cuDeviceGetAttribute(int* v, int attr, int) {
  *v = attr == 75 ? 9 : 0;  // compute capability 9.0: what sm_90 kernels assume
  return kSuccess;
}
VTC_SIM_API int cuDeviceTotalMem_v2(size_t* bytes, int) {
  *bytes = size_t(sysconf(_SC_PHYS_PAGES)) * size_t(sysconf(_SC_PAGESIZE));
  return kSuccess;
}
namespace {
// The primary context: retained by each Device; released by the last, it
// is reset and a sticky error goes with it, as the driver's does.
std::atomic<int> g_context_refs{0};
}  // namespace
VTC_SIM_API int cuDevicePrimaryCtxRetain(void** ctx, int) {
  static int context;
  *ctx = &context;
  ++g_context_refs;
  return kSuccess;
}
VTC_SIM_API int cuDevicePrimaryCtxRelease_v2(int) {
  if (--g_context_refs == 0) reset_sticky();
  return kSuccess;
}
VTC_SIM_API int cuCtxSetCurrent(void*) { return kSuccess; }

VTC_SIM_API int cuMemAlloc_v2(DevPtr* p, size_t bytes) {
  if (int e = sticky()) return e;
  void* m = device_alloc(bytes);
  if (!m) return fail_with(kOutOfMemory, fmt::format("cannot allocate {} bytes of simulated device memory", bytes));
  *p = DevPtr(uintptr_t(m));
  return kSuccess;
}
VTC_SIM_API int cuMemFree_v2(DevPtr p) {
  if (!p) return kSuccess;
  return device_free(reinterpret_cast<void*>(uintptr_t(p))) ? kSuccess
                                                            : fail_with(kInvalidValue, "cuMemFree: not a device allocation");
}
VTC_SIM_API int cuMemHostAlloc(void** p, size_t bytes, unsigned) {
  *p = pinned_alloc(bytes);
  return *p ? kSuccess : kOutOfMemory;
}
VTC_SIM_API int cuMemFreeHost(void* p) {
  return pinned_free(p) ? kSuccess : fail_with(kInvalidValue, "cuMemFreeHost: not a pinned allocation");
}

namespace {
// A copy or memset of `bytes` at dst/src, issued on `stream`.
Op memory_op(Op::Kind kind, void* dst, const void* src, size_t bytes) {
  Op op;
  op.kind = kind;
  op.dst = dst;
  op.src = src;
  op.bytes = bytes;
  return op;
}
void* host_pointer(DevPtr p) { return reinterpret_cast<void*>(uintptr_t(p)); }
}  // namespace

VTC_SIM_API int cuMemcpyHtoDAsync_v2(DevPtr dst, const void* src, size_t bytes, void* stream) {
  if (int e = check_range(dst, bytes, "cuMemcpyHtoDAsync")) return e;
  Op op = memory_op(Op::Kind::CopyIn, host_pointer(dst), src, bytes);
  if (!is_pinned(src, bytes)) op.staged.assign(static_cast<const uint8_t*>(src), static_cast<const uint8_t*>(src) + bytes);
  return submit(as_stream(stream), std::move(op));
}
VTC_SIM_API int cuMemcpyDtoHAsync_v2(void* dst, DevPtr src, size_t bytes, void* stream) {
  if (int e = check_range(src, bytes, "cuMemcpyDtoHAsync")) return e;
  return submit(as_stream(stream), memory_op(Op::Kind::CopyOut, dst, host_pointer(src), bytes));
}
VTC_SIM_API int cuMemcpyDtoDAsync_v2(DevPtr dst, DevPtr src, size_t bytes, void* stream) {
  if (int e = check_range(dst, bytes, "cuMemcpyDtoDAsync")) return e;
  if (int e = check_range(src, bytes, "cuMemcpyDtoDAsync")) return e;
  return submit(as_stream(stream), memory_op(Op::Kind::CopyDevice, host_pointer(dst), host_pointer(src), bytes));
}
VTC_SIM_API int cuMemsetD8Async(DevPtr dst, unsigned char value, size_t bytes, void* stream) {
  if (int e = check_range(dst, bytes, "cuMemsetD8Async")) return e;
  Op op = memory_op(Op::Kind::Memset, host_pointer(dst), nullptr, bytes);
  op.value = value;
  return submit(as_stream(stream), std::move(op));
}

VTC_SIM_API int cuStreamCreate(void** s, unsigned) {
  *s = create_stream();
  return kSuccess;
}
VTC_SIM_API int cuStreamDestroy_v2(void* s) {
  destroy_stream(as_stream(s));
  return kSuccess;
}
VTC_SIM_API int cuStreamSynchronize(void* s) { return synchronize(as_stream(s)); }

namespace {

void unload(Object& o) {
  if (o.handle) dlclose(o.handle);
  if (o.fd >= 0) close(o.fd);
  o = {};
}

// Loads the framed object at `text` into `o`; returns where the next frame
// starts, or null with the error recorded.
const char* load_object(const char* text, Object& o, int* rc) {
  *rc = kSuccess;
  if (std::strncmp(text, kImageMagic, sizeof kImageMagic - 1) != 0) {
    *rc = fail_with(kInvalidImage, "not an image of the simulated device's NVRTC (a real cubin or PTX cannot run on it)");
    return nullptr;
  }
  char* end = nullptr;
  const unsigned long long bytes = std::strtoull(text + sizeof kImageMagic - 1, &end, 10);
  if (!end || *end != '\n') {
    *rc = fail_with(kInvalidImage, "the simulated device's image header is damaged");
    return nullptr;
  }
  o.fd = memfd_create("vtc-sim-kernel", MFD_CLOEXEC);
  if (o.fd < 0 || write(o.fd, end + 1, bytes) != ssize_t(bytes)) {
    unload(o);
    *rc = fail_with(kInvalidImage, "cannot stage the kernel image in a memfd");
    return nullptr;
  }
  const std::string path = fmt::format("/proc/self/fd/{}", o.fd);
  o.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!o.handle) {
    *rc = fail_with(kInvalidImage, fmt::format("dlopen of the kernel image failed: {}", dlerror()));
    unload(o);
    return nullptr;
  }
  auto bind = reinterpret_cast<void (*)(const VtcSimRuntime*)>(dlsym(o.handle, "vtc_sim_bind"));
  if (!bind) {
    unload(o);
    *rc = fail_with(kInvalidImage, "the kernel image has no vtc_sim_bind");
    return nullptr;
  }
  bind(runtime_table());
  o.memory = module_memory(o.handle);
  return end + 1 + bytes + 1;  // the object, then its newline
}

bool find_kernel(const Object& o, const char* name, KernelFn* fn, const VtcSimParams** params) {
  *fn = reinterpret_cast<KernelFn>(dlsym(o.handle, fmt::format("vtc_sim_run_{}", name).c_str()));
  *params = static_cast<const VtcSimParams*>(dlsym(o.handle, fmt::format("vtc_sim_params_{}", name).c_str()));
  return *fn && *params;
}

}  // namespace

// The image holds one framed ELF shared object, or two in profile mode
// (nvrtc_api.cpp); each is loaded through a memfd so that every module is
// its own copy (a kernel's __shared__ arrays and the runtime table are per
// module).
VTC_SIM_API int cuModuleLoadData(void** module, const void* image) {
  auto m = std::make_unique<Module>();
  int rc = kSuccess;
  const char* next = load_object(static_cast<const char*>(image), m->plain, &rc);
  if (!next) return rc;
  if (std::strncmp(next, kImageMagic, sizeof kImageMagic - 1) == 0 && !load_object(next, m->profiled, &rc)) {
    unload(m->plain);
    return rc;
  }
  *module = m.release();
  return kSuccess;
}
VTC_SIM_API int cuModuleUnload(void* module) {
  auto* m = static_cast<Module*>(module);
  if (!m) return kInvalidHandle;
  unload(m->plain);
  unload(m->profiled);
  delete m;
  return kSuccess;
}
VTC_SIM_API int cuModuleGetFunction(void** fn, void* module, const char* name) {
  auto* m = static_cast<Module*>(module);
  auto it = m->functions.find(name);
  if (it == m->functions.end()) {
    Function f;
    f.entry = name;
    if (!find_kernel(m->plain, name, &f.fn, &f.params))
      return fail_with(kNotFound, fmt::format("the module has no kernel {}", name));
    f.module = &m->plain.memory;
    if (m->profiled.handle) {
      if (!find_kernel(m->profiled, name, &f.profiled.fn, &f.profiled.params))
        return fail_with(kNotFound, fmt::format("the module's profiled variant has no kernel {}", name));
      f.profiled.module = &m->profiled.memory;
    }
    it = m->functions.emplace(name, f).first;
  }
  *fn = &it->second;
  return kSuccess;
}

VTC_SIM_API int cuLaunchKernel(void* fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                               unsigned shared_bytes, void* stream, void** params, void** extra) {
  const auto* f = static_cast<const Function*>(fn);
  if (!f) return fail_with(kInvalidHandle, "cuLaunchKernel: null function");
  if (extra || shared_bytes)
    return fail_with(kInvalidValue, "cuLaunchKernel: `extra` and dynamic shared memory are not simulated");
  if (!gx || !gy || !gz || !bx || !by || !bz || uint64_t(bx) * by * bz > 1024)
    return fail_with(kInvalidValue, fmt::format("cuLaunchKernel {}: grid ({},{},{}) block ({},{},{}) is invalid (at most 1024 "
                                                "threads a block)", f->entry, gx, gy, gz, bx, by, bz));
  Op op;
  op.kind = Op::Kind::Launch;
  op.fn = f;
  op.grid = {gx, gy, gz};
  op.block = {bx, by, bz};
  op.param_words.assign(f->params->count, 0);
  for (unsigned i = 0; i < f->params->count; ++i) {
    if (f->params->sizes[i] > 8)
      return fail_with(kInvalidValue, fmt::format("kernel {}: parameter `{}` is wider than 8 bytes", f->entry, f->params->names[i]));
    std::memcpy(&op.param_words[i], params[i], f->params->sizes[i]);  // copied at the call, as the driver does
  }
  return submit(as_stream(stream), std::move(op));
}

VTC_SIM_API int cuStreamBeginCapture_v2(void* s, int) { return begin_capture(as_stream(s)); }
VTC_SIM_API int cuStreamEndCapture(void* s, void** graph) {
  Graph* g = nullptr;
  const int rc = end_capture(as_stream(s), &g);
  *graph = g;
  return rc;
}
VTC_SIM_API int cuGraphInstantiateWithFlags(void** exec, void* graph, unsigned long long) {
  if (!graph) return fail_with(kInvalidValue, "cuGraphInstantiate: null graph");
  *exec = new Graph(*static_cast<Graph*>(graph));
  return kSuccess;
}
VTC_SIM_API int cuGraphLaunch(void* exec, void* s) {
  if (!exec) return fail_with(kInvalidHandle, "cuGraphLaunch: null graph");
  return launch_graph(*static_cast<Graph*>(exec), as_stream(s));
}
VTC_SIM_API int cuGraphExecDestroy(void* exec) {
  delete static_cast<Graph*>(exec);
  return kSuccess;
}
VTC_SIM_API int cuGraphDestroy(void* graph) {
  delete static_cast<Graph*>(graph);
  return kSuccess;
}

VTC_SIM_API int cuEventCreate(void** e, unsigned) {
  *e = create_event();
  return kSuccess;
}
VTC_SIM_API int cuEventRecord(void* e, void* s) { return record(static_cast<Event*>(e), as_stream(s)); }
VTC_SIM_API int cuEventQuery(void* e) { return query(static_cast<Event*>(e)); }
VTC_SIM_API int cuEventSynchronize(void* e) { return wait(static_cast<Event*>(e)); }
VTC_SIM_API int cuEventElapsedTime(float* ms, void* start, void* end) {
  return elapsed_ms(ms, static_cast<Event*>(start), static_cast<Event*>(end));
}
VTC_SIM_API int cuEventDestroy_v2(void* e) {
  destroy_event(static_cast<Event*>(e));
  return kSuccess;
}
VTC_SIM_API int cuGetErrorString(int code, const char** text) {
  *text = error_text(code);
  return kSuccess;
}
