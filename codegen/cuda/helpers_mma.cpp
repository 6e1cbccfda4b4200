// Device helpers for the tensor cores: mma.sync, ldmatrix and cp.async as
// inline PTX on a GPU, and as the simulated device's exact emulation of
// the same instructions without __CUDA_ARCH__ (runtime/cuda/sim/kernel_host.h),
// so a kernel is one source for both.
//
//   vtc_mma_s8_k32(int d[4], const unsigned a[4], const unsigned b[2])   d += a * b, m16n8k32 s8
//   vtc_mma_s8_k16(int d[4], const unsigned a[2], const unsigned b[1])   m16n8k16 s8
//   vtc_mma_f16(float d[4], const unsigned a[4], const unsigned b[2])   m16n8k16 f16 -> f32
//   vtc_mma_bf16(float d[4], const unsigned a[4], const unsigned b[2])  m16n8k16 bf16 -> f32
//   vtc_ldmatrix_x4(unsigned r[4], const void* row)                    m8n8.x4.b16 (also _x2, _x4_trans)
//   vtc_cp_async16(void* dst, const void* src, bool valid)             16 bytes, zero-filled when !valid
//   vtc_cp_commit(); vtc_cp_wait<N>()                                  commit_group, wait_group N
//
// Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k*"): lane l is in
// group g = l / 4 at position t = l % 4. s8 k32: a[i] holds row g + 8 (i & 1),
// columns 4t .. 4t + 3 (+ 16 for i >= 2); b[i] rows 4t .. 4t + 3 (+ 16 i),
// column g. s8 k16: a[0], a[1] and b[0] of that. f16/bf16: a[i] holds row
// g + 8 (i & 1), columns 2t, 2t + 1 (+ 8 for i >= 2); b[i] rows 2t, 2t + 1
// (+ 8 i), column g. C and D: d[i] is row g + 8 (i >> 1), column 2t + (i & 1).
#include "codegen/cuda/emit.h"

namespace vtc::cuda {

const std::map<std::string, HelperSource>& mma_helpers() {
  static const std::map<std::string, HelperSource> table = {
      {"mma", {{}, R"(#ifdef __CUDA_ARCH__
// The three instructions of 4 A, 2 B and 4 C/D registers; C is D.
#define VTC_MMA_A4B2(NAME, T, C, PTX)                                                                \
  __device__ __forceinline__ void NAME(T* d, const unsigned* a, const unsigned* b) {                  \
    asm volatile(PTX " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"                          \
                 : "+" C(d[0]), "+" C(d[1]), "+" C(d[2]), "+" C(d[3])                                  \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));                 \
  }
VTC_MMA_A4B2(vtc_mma_s8_k32, int, "r", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32")
VTC_MMA_A4B2(vtc_mma_f16, float, "f", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
VTC_MMA_A4B2(vtc_mma_bf16, float, "f", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32")
#undef VTC_MMA_A4B2
__device__ __forceinline__ void vtc_mma_s8_k16(int* d, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
               : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(b[0]));
}
__device__ __forceinline__ unsigned vtc_smem_addr(const void* p) {
  unsigned a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}
__device__ __forceinline__ void vtc_ldmatrix_x4(unsigned* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(vtc_smem_addr(p)));
}
__device__ __forceinline__ void vtc_ldmatrix_x2(unsigned* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(vtc_smem_addr(p)));
}
__device__ __forceinline__ void vtc_ldmatrix_x4_trans(unsigned* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(vtc_smem_addr(p)));
}
__device__ __forceinline__ void vtc_cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(vtc_smem_addr(dst)), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void vtc_cp_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void vtc_cp_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N)); }
#else
__device__ __forceinline__ void vtc_mma_s8_k32(int* d, const unsigned* a, const unsigned* b) { vtc_sim_mma_s8<32>(d, a, b, d); }
__device__ __forceinline__ void vtc_mma_s8_k16(int* d, const unsigned* a, const unsigned* b) { vtc_sim_mma_s8<16>(d, a, b, d); }
__device__ __forceinline__ void vtc_mma_f16(float* d, const unsigned* a, const unsigned* b) { vtc_sim_mma_f16<false>(d, a, b, d); }
__device__ __forceinline__ void vtc_mma_bf16(float* d, const unsigned* a, const unsigned* b) { vtc_sim_mma_f16<true>(d, a, b, d); }
__device__ __forceinline__ void vtc_ldmatrix_x4(unsigned* r, const void* p) { vtc_sim_ldmatrix<4, false>(r, p); }
__device__ __forceinline__ void vtc_ldmatrix_x2(unsigned* r, const void* p) { vtc_sim_ldmatrix<2, false>(r, p); }
__device__ __forceinline__ void vtc_ldmatrix_x4_trans(unsigned* r, const void* p) { vtc_sim_ldmatrix<4, true>(r, p); }
__device__ __forceinline__ void vtc_cp_async16(void* dst, const void* src, bool valid) { vtc_sim_cp_async(dst, valid ? src : 0, 16); }
__device__ __forceinline__ void vtc_cp_commit() { vtc_sim_cp_commit(); }
template <int N>
__device__ __forceinline__ void vtc_cp_wait() { vtc_sim_cp_wait(N); }
#endif
)"}},
  };
  return table;
}

}  // namespace vtc::cuda
