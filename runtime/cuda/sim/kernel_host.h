// What a generated CUDA kernel sees when the simulated device compiles it
// with the host C++ compiler instead of NVRTC (passed with -include): the
// CUDA built-ins the code generator uses, mapped to host C++.
//
// Scope: exactly the dialect codegen/cuda emits (no headers, no templates
// of the CUDA runtime). A kernel using a built-in missing here fails to
// compile on the simulated device with the compiler's message naming it;
// add it here with its CUDA semantics.
//
// Execution model (see block_runner.h): a block's threads are fibers on one
// host thread, so `__shared__` is `static thread_local` (one copy per host
// worker, which runs one block at a time) and the thread coordinates are a
// per-fiber pointer that every yielding built-in restores after the switch.
#pragma once

#include "kernel_abi.h"

#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline __attribute__((always_inline))
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __shared__ static thread_local
#define VTC_SIM_EXPORT extern "C" __attribute__((visibility("default")))

typedef VtcSimDim3 uint3;
typedef VtcSimDim3 dim3;
// CUDA's vector types the kernels use, with their alignment: a copy of a
// uint4 is one 16-byte access, as on a GPU (checked and profile modes see
// __asan_load16/__asan_store16).
struct __attribute__((aligned(8))) uint2 { unsigned x, y; };
struct __attribute__((aligned(16))) uint4 { unsigned x, y, z, w; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
static inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
// One 8- or 16-byte access, as a GPU's ld.v2/ld.v4: a vector load the host
// compiler keeps whole (it may split a struct load whose fields are read
// one by one into 4-byte loads, which profile mode would count as such).
typedef unsigned vtc_sim_u32x2 __attribute__((vector_size(8)));
typedef unsigned vtc_sim_u32x4 __attribute__((vector_size(16)));
static inline uint2 vtc_sim_load8(const void* p) {
  const vtc_sim_u32x2 v = *(const vtc_sim_u32x2*)p;
  return uint2{v[0], v[1]};
}
static inline uint4 vtc_sim_load16(const void* p) {
  const vtc_sim_u32x4 v = *(const vtc_sim_u32x4*)p;
  return uint4{v[0], v[1], v[2], v[3]};
}
static inline void vtc_sim_copy16(void* d, const void* s) { *(vtc_sim_u32x4*)d = *(const vtc_sim_u32x4*)s; }

static const VtcSimRuntime* vtc_sim_rt;
static thread_local const VtcSimThread* vtc_sim_self;
VTC_SIM_EXPORT __attribute__((no_sanitize("kernel-address"))) void vtc_sim_bind(const VtcSimRuntime* rt) { vtc_sim_rt = rt; }

#define threadIdx (vtc_sim_self->thread_idx)
#define blockIdx (vtc_sim_self->block_idx)
#define blockDim (vtc_sim_self->block_dim)
#define gridDim (vtc_sim_self->grid_dim)
#define warpSize 32

// --- checked mode (VTC_CUDA_SIM_CHECK=1 compiles with
// -fsanitize=kernel-address and an instrumentation call per access) --------
#ifdef VTC_SIM_CHECKED
#define VTC_SIM_UNCHECKED __attribute__((no_sanitize("kernel-address")))
VTC_SIM_UNCHECKED static inline void vtc_sim_access(const void* p, unsigned long n, int is_write, const void* site) {
  // The thread's own coordinates pointer is per-fiber bookkeeping, not data.
  if (p == (const void*)&vtc_sim_self) return;
  vtc_sim_rt->access(vtc_sim_self, p, n, is_write, site);
}
// noinline: the return address is then the instrumented instruction in the
// kernel, the call site profile mode groups a warp's accesses by.
#define VTC_SIM_ACCESS_FN(kind, n, w)                                                   \
  extern "C" VTC_SIM_UNCHECKED __attribute__((noinline)) void __asan_##kind##n##_noabort(unsigned long p) { \
    vtc_sim_access((const void*)p, n, w, __builtin_return_address(0));                                              \
  }
VTC_SIM_ACCESS_FN(load, 1, 0) VTC_SIM_ACCESS_FN(load, 2, 0) VTC_SIM_ACCESS_FN(load, 4, 0)
VTC_SIM_ACCESS_FN(load, 8, 0) VTC_SIM_ACCESS_FN(load, 16, 0)
VTC_SIM_ACCESS_FN(store, 1, 1) VTC_SIM_ACCESS_FN(store, 2, 1) VTC_SIM_ACCESS_FN(store, 4, 1)
VTC_SIM_ACCESS_FN(store, 8, 1) VTC_SIM_ACCESS_FN(store, 16, 1)
extern "C" VTC_SIM_UNCHECKED __attribute__((noinline)) void __asan_loadN_noabort(unsigned long p, unsigned long n) { vtc_sim_access((const void*)p, n, 0, __builtin_return_address(0)); }
extern "C" VTC_SIM_UNCHECKED __attribute__((noinline)) void __asan_storeN_noabort(unsigned long p, unsigned long n) { vtc_sim_access((const void*)p, n, 1, __builtin_return_address(0)); }
extern "C" VTC_SIM_UNCHECKED void __asan_handle_no_return() {}
#else
#define VTC_SIM_UNCHECKED
#endif

// --- barriers and warp collectives (they switch fibers) ---------------------
VTC_SIM_UNCHECKED static inline void __syncthreads() {
  const VtcSimThread* self = vtc_sim_self;
  vtc_sim_rt->sync_block(self);
  vtc_sim_self = self;
}
VTC_SIM_UNCHECKED static inline void __syncwarp(unsigned mask = 0xffffffffu) {
  const VtcSimThread* self = vtc_sim_self;
  vtc_sim_rt->sync_warp(self, mask);
  vtc_sim_self = self;
}
template <typename T>
VTC_SIM_UNCHECKED static inline T vtc_sim_shfl(unsigned mask, T v, int mode, int arg, int width) {
  static_assert(sizeof(T) <= 8, "a warp shuffle moves at most 8 bytes");
  const VtcSimThread* self = vtc_sim_self;
  T out;
  vtc_sim_rt->exchange(self, mask, &v, &out, sizeof(T), mode, arg, width);
  vtc_sim_self = self;
  return out;
}
template <typename T> static inline T __shfl_sync(unsigned m, T v, int lane, int w = 32) { return vtc_sim_shfl(m, v, VTC_SIM_SHFL_IDX, lane, w); }
template <typename T> static inline T __shfl_up_sync(unsigned m, T v, unsigned d, int w = 32) { return vtc_sim_shfl(m, v, VTC_SIM_SHFL_UP, int(d), w); }
template <typename T> static inline T __shfl_down_sync(unsigned m, T v, unsigned d, int w = 32) { return vtc_sim_shfl(m, v, VTC_SIM_SHFL_DOWN, int(d), w); }
template <typename T> static inline T __shfl_xor_sync(unsigned m, T v, int x, int w = 32) { return vtc_sim_shfl(m, v, VTC_SIM_SHFL_XOR, x, w); }
VTC_SIM_UNCHECKED static inline unsigned __ballot_sync(unsigned mask, int pred) {
  const VtcSimThread* self = vtc_sim_self;
  const unsigned bits = vtc_sim_rt->ballot(self, mask, pred);
  vtc_sim_self = self;
  return bits;
}
static inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
static inline int __all_sync(unsigned mask, int pred) { return __ballot_sync(mask, !pred) == 0; }

// --- bit casts ----------------------------------------------------------------
static inline float __int_as_float(int x) { return __builtin_bit_cast(float, x); }
static inline int __float_as_int(float x) { return __builtin_bit_cast(int, x); }
static inline float __uint_as_float(unsigned x) { return __builtin_bit_cast(float, x); }
static inline unsigned __float_as_uint(float x) { return __builtin_bit_cast(unsigned, x); }
static inline double __longlong_as_double(long long x) { return __builtin_bit_cast(double, x); }
static inline long long __double_as_longlong(double x) { return __builtin_bit_cast(long long, x); }

// f16 <-> f32 with round-to-nearest-even: the host form of the prelude's
// cvt.f32.f16 / cvt.rn.f16.f32 (x86-64 _Float16 conversions are IEEE).
static inline float vtc_sim_h2f(unsigned short h) { return (float)__builtin_bit_cast(_Float16, h); }
static inline unsigned short vtc_sim_f2h(float f) { return __builtin_bit_cast(unsigned short, (_Float16)f); }

// --- IEEE-rounded intrinsics (the host evaluates in the stated precision;
// kernels are compiled with -ffp-contract=off, so nothing fuses unasked) ---
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __frcp_rn(float a) { return 1.0f / a; }
static inline float __fsqrt_rn(float a) { return __builtin_sqrtf(a); }
static inline float __fmaf_rn(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __fma_rn(double a, double b, double c) { return __builtin_fma(a, b, c); }

// --- math (libm; CUDA's are within a few ulp of these) -----------------------
extern "C" {
float expf(float); float logf(float); float tanhf(float); float sinf(float); float cosf(float);
float powf(float, float); float erff(float); float floorf(float); float ceilf(float); float roundf(float);
float truncf(float); float fabsf(float); float sqrtf(float); float fmaxf(float, float); float fminf(float, float);
float fmaf(float, float, float); float log1pf(float); float expm1f(float); float exp2f(float); float log2f(float);
double exp(double); double log(double); double sqrt(double); double fabs(double); double floor(double);
double pow(double, double); double fmax(double, double); double fmin(double, double); double tanh(double);
}
static inline float rsqrtf(float x) { return 1.0f / __builtin_sqrtf(x); }
// Profile mode counts special functions (the GPU's MUFU unit) where they
// are called: each name below becomes a wrapper that counts, then calls it.
#ifdef VTC_SIM_PROFILED
#define VTC_SIM_COUNT(cls, n) vtc_sim_rt->count(vtc_sim_self, cls, n)
#define VTC_SIM_SFU_WRAP(name) \
  VTC_SIM_UNCHECKED static inline float vtc_sim_sfu_##name(float x) { VTC_SIM_COUNT(VTC_SIM_WORK_SFU, 1); return name(x); }
VTC_SIM_SFU_WRAP(expf) VTC_SIM_SFU_WRAP(logf) VTC_SIM_SFU_WRAP(exp2f) VTC_SIM_SFU_WRAP(log2f)
VTC_SIM_SFU_WRAP(sinf) VTC_SIM_SFU_WRAP(cosf) VTC_SIM_SFU_WRAP(tanhf) VTC_SIM_SFU_WRAP(sqrtf) VTC_SIM_SFU_WRAP(rsqrtf)
VTC_SIM_UNCHECKED static inline float vtc_sim_sfu_powf(float a, float b) { VTC_SIM_COUNT(VTC_SIM_WORK_SFU, 2); return powf(a, b); }
#define expf vtc_sim_sfu_expf
#define logf vtc_sim_sfu_logf
#define exp2f vtc_sim_sfu_exp2f
#define log2f vtc_sim_sfu_log2f
#define sinf vtc_sim_sfu_sinf
#define cosf vtc_sim_sfu_cosf
#define tanhf vtc_sim_sfu_tanhf
#define sqrtf vtc_sim_sfu_sqrtf
#define rsqrtf vtc_sim_sfu_rsqrtf
#define powf vtc_sim_sfu_powf
#else
#define VTC_SIM_COUNT(cls, n) ((void)0)
#endif
static inline float __expf(float x) { return expf(x); }
static inline float __logf(float x) { return logf(x); }
static inline float __sinf(float x) { return sinf(x); }
static inline float __cosf(float x) { return cosf(x); }
static inline float __tanhf(float x) { return tanhf(x); }
static inline float __powf(float a, float b) { return powf(a, b); }
// Round to nearest even (the host's default rounding mode), as cvt.rni.
static inline int __float2int_rn(float x) { return (int)__builtin_nearbyintf(x); }
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
static inline bool isnan(float x) { return __builtin_isnan(x); }
static inline bool isnan(double x) { return __builtin_isnan(x); }
static inline bool isinf(float x) { return __builtin_isinf(x); }
static inline bool isinf(double x) { return __builtin_isinf(x); }
static inline bool isfinite(float x) { return __builtin_isfinite(x); }
static inline bool isfinite(double x) { return __builtin_isfinite(x); }
static inline bool signbit(float x) { return __builtin_signbit(x); }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
template <typename T> static inline T __ldg(const T* p) { return *p; }
// __dp4a: the dot of four signed (or unsigned) bytes of a and b, plus c.
static inline int __dp4a(int a, int b, int c) {
  VTC_SIM_COUNT(VTC_SIM_WORK_DP4A, 1);
  for (int i = 0; i < 32; i += 8) c += int((signed char)(a >> i)) * int((signed char)(b >> i));
  return c;
}
static inline unsigned __dp4a(unsigned a, unsigned b, unsigned c) {
  VTC_SIM_COUNT(VTC_SIM_WORK_DP4A, 1);
  for (int i = 0; i < 32; i += 8) c += ((a >> i) & 0xffu) * ((b >> i) & 0xffu);
  return c;
}

// --- tensor cores: mma.sync, ldmatrix, cp.async ------------------------------
// Exactly the PTX instructions' register semantics (PTX ISA, "Matrix
// Fragments for mma.m16n8k16 / m16n8k32", "ldmatrix", "cp.async"): every
// lane posts its fragment registers, the warp meets (the runtime's gather),
// and each lane computes its own result registers from all 32 lanes' posts.
// Lane l is in group g = l / 4 at t = l % 4 of it. A wrong fragment layout
// in a kernel therefore gives wrong values here as on a GPU.
// An integer mma accumulates exactly (int32, wrapping); an f16/bf16 mma
// forms each exact product and adds them to C one by one in f32, k in
// order (a GPU's tensor core adds in its own order and width: results may
// differ in the last bits).
struct VtcSimFrag {
  unsigned a[4], b[2];
};
VTC_SIM_UNCHECKED static inline void vtc_sim_gather(const void* in, unsigned bytes, void* out) {
  const VtcSimThread* self = vtc_sim_self;
  vtc_sim_rt->gather(self, in, bytes, out);
  vtc_sim_self = self;
}
VTC_SIM_UNCHECKED static inline unsigned vtc_sim_lane() {
  const VtcSimThread* t = vtc_sim_self;
  return (t->thread_idx.x + t->block_dim.x * (t->thread_idx.y + t->block_dim.y * t->thread_idx.z)) & 31u;
}
// Element (row r, k) of A and (k, col c) of B as posted by the warp, for
// m16n8k32 / m16n8k16 with 8-bit elements (KB = 32 or 16).
template <int KB>
VTC_SIM_UNCHECKED static inline int vtc_sim_s8_a(const VtcSimFrag* w, int r, int k) {
  const unsigned reg = (unsigned)(r / 8 + 2 * (k / 16));
  return (int)(signed char)(w[(r % 8) * 4 + (k % 16) / 4].a[reg] >> (8 * (k % 4)));
}
VTC_SIM_UNCHECKED static inline int vtc_sim_s8_b(const VtcSimFrag* w, int k, int c) {
  return (int)(signed char)(w[c * 4 + (k % 16) / 4].b[k / 16] >> (8 * (k % 4)));
}
// The same for 16-bit elements (m16n8k16), as raw halves.
VTC_SIM_UNCHECKED static inline unsigned short vtc_sim_h_a(const VtcSimFrag* w, int r, int k) {
  return (unsigned short)(w[(r % 8) * 4 + (k % 8) / 2].a[r / 8 + 2 * (k / 8)] >> (16 * (k % 2)));
}
VTC_SIM_UNCHECKED static inline unsigned short vtc_sim_h_b(const VtcSimFrag* w, int k, int c) {
  return (unsigned short)(w[c * 4 + (k % 8) / 2].b[k / 8] >> (16 * (k % 2)));
}
// mma.sync.aligned.m16n8k{KB}.row.col.s32.s8.s8.s32: d = a * b + c. A has
// KB / 8 registers, B KB / 16; C and D: rows g, g + 8, columns 2t, 2t + 1.
template <int KB>
VTC_SIM_UNCHECKED static inline void vtc_sim_mma_s8(int* d, const unsigned* a, const unsigned* b, const int* c) {
  VtcSimFrag mine = {}, warp[32];
  for (int i = 0; i < KB / 8; ++i) mine.a[i] = a[i];
  for (int i = 0; i < KB / 16; ++i) mine.b[i] = b[i];
  vtc_sim_gather(&mine, sizeof mine, warp);
  VTC_SIM_COUNT(KB == 32 ? VTC_SIM_WORK_MMA_S8 : VTC_SIM_WORK_MMA_S8_K16, 1);
  const int lane = (int)vtc_sim_lane(), g = lane / 4, t = lane % 4;
  for (int i = 0; i < 4; ++i) {
    const int r = g + 8 * (i / 2), col = 2 * t + i % 2;
    unsigned acc = (unsigned)c[i];
    for (int k = 0; k < KB; ++k) acc += (unsigned)(vtc_sim_s8_a<KB>(warp, r, k) * vtc_sim_s8_b(warp, k, col));
    d[i] = (int)acc;
  }
}
// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32.
template <bool BF16>
VTC_SIM_UNCHECKED static inline void vtc_sim_mma_f16(float* d, const unsigned* a, const unsigned* b, const float* c) {
  VtcSimFrag mine = {{a[0], a[1], a[2], a[3]}, {b[0], b[1]}}, warp[32];
  vtc_sim_gather(&mine, sizeof mine, warp);
  VTC_SIM_COUNT(BF16 ? VTC_SIM_WORK_MMA_BF16 : VTC_SIM_WORK_MMA_F16, 1);
  auto value = [](unsigned short h) { return BF16 ? __builtin_bit_cast(float, (unsigned)h << 16) : vtc_sim_h2f(h); };
  const int lane = (int)vtc_sim_lane(), g = lane / 4, t = lane % 4;
  for (int i = 0; i < 4; ++i) {
    const int r = g + 8 * (i / 2), col = 2 * t + i % 2;
    float acc = c[i];
    for (int k = 0; k < 16; ++k) acc += value(vtc_sim_h_a(warp, r, k)) * value(vtc_sim_h_b(warp, k, col));
    d[i] = acc;
  }
}
// ldmatrix.sync.aligned.m8n8.x{N}{.trans}.shared.b16: lanes 8j .. 8j + 7
// give the 16-byte rows of matrix j; register j of lane l gets row l / 4,
// halves 2 (l % 4) and 2 (l % 4) + 1 (.trans: column l / 4, rows 2 (l % 4)
// and 2 (l % 4) + 1). The row reads are the kernel's own shared loads.
VTC_SIM_UNCHECKED static inline void vtc_sim_ldmatrix_rows(const void* p, const void** rows) {
  vtc_sim_gather(&p, sizeof p, rows);
}
template <int N, bool TRANS>
static inline void vtc_sim_ldmatrix(unsigned* r, const void* p) {
  const void* rows[32];
  vtc_sim_ldmatrix_rows(p, rows);
  const int lane = (int)vtc_sim_lane();
  for (int j = 0; j < N; ++j) {
    if (!TRANS) {
      r[j] = *(const unsigned*)((const char*)rows[8 * j + lane / 4] + 4 * (lane % 4));
    } else {
      const unsigned lo = *(const unsigned short*)((const char*)rows[8 * j + 2 * (lane % 4)] + 2 * (lane / 4));
      const unsigned hi = *(const unsigned short*)((const char*)rows[8 * j + 2 * (lane % 4) + 1] + 2 * (lane / 4));
      r[j] = lo | (hi << 16);
    }
  }
}
// cp.async.{ca,cg}.shared.global [dst], [src], n{, src-size 0}; commit_group; wait_group n.
VTC_SIM_UNCHECKED static inline void vtc_sim_cp_async(void* dst, const void* src, unsigned bytes) {
  vtc_sim_rt->cp_async(vtc_sim_self, VTC_SIM_CP_ISSUE, dst, src, bytes);
}
VTC_SIM_UNCHECKED static inline void vtc_sim_cp_commit() { vtc_sim_rt->cp_async(vtc_sim_self, VTC_SIM_CP_COMMIT, 0, 0, 0); }
VTC_SIM_UNCHECKED static inline void vtc_sim_cp_wait(unsigned n) { vtc_sim_rt->cp_async(vtc_sim_self, VTC_SIM_CP_WAIT, 0, 0, n); }

// --- atomics: blocks run on several host threads, so these are real ----------
static inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
static inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
static inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
static inline float atomicAdd(float* p, float v) {
  unsigned old = __atomic_load_n((unsigned*)p, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n((unsigned*)p, &old, __float_as_uint(__uint_as_float(old) + v), true, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {
  }
  return __uint_as_float(old);
}
static inline int atomicMax(int* p, int v) {
  int old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (old < v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
}
static inline int atomicMin(int* p, int v) {
  int old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (old > v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
}
static inline int atomicExch(int* p, int v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }
static inline int atomicCAS(int* p, int cmp, int v) {
  __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return cmp;
}
static inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long cmp, unsigned long long v) {
  __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return cmp;
}
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
