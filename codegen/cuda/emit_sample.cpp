// Device-side sampling kernels (declared in kernel.h): one block of 256
// threads per sequence row. Greedy is the argmax with the CPU's tie rule.
// Top-k/top-p selects the k best candidates with the same "best strictly
// after the previous pick" scan as top_k (emit_reduce.cpp), keeps them in
// shared memory, and thread 0 finishes the row: softmax at the temperature,
// cut to the smallest prefix whose mass reaches top_p and to candidates with
// p >= min_p * p_max, renormalize, draw. The CPU sampler draws with
// std::mt19937, so the two arms agree on the distribution, not on the draw.
#include <fmt/format.h>

#include "codegen/cuda/emit.h"

namespace vtc::cuda {

Kernel sample_greedy_kernel(int64_t vocab, const std::string& ids_state) {
  KernelBuilder kb("sample_greedy", fmt::format("greedy sampling into @{}", ids_state));
  kb.extra("logits", "const float*");
  kb.state_rows(ids_state, "ids", "int*");
  kb.slots();
  kb.extra("tokens", "int*");
  const ir::Dim rows = ir::Dim::symbol("S");
  kb.body(fmt::format(R"(  constexpr long long N = {0};
  __shared__ float sv[256];
  __shared__ long long si[256];
  for (long long r = blockIdx.x; r < {1}; r += gridDim.x) {{
    const float* xr = logits + r * N;
    float bv = -__int_as_float(0x7f800000);
    long long bi = 0x7fffffffffffffffLL;
    for (long long c = threadIdx.x; c < N; c += blockDim.x)
      if (xr[c] > bv) {{ bv = xr[c]; bi = c; }}
    __syncthreads();
    sv[threadIdx.x] = bv; si[threadIdx.x] = bi;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {{
      if (threadIdx.x < s) {{
        const float ov = sv[threadIdx.x + s]; const long long oi = si[threadIdx.x + s];
        if (ov > sv[threadIdx.x] || (ov == sv[threadIdx.x] && oi < si[threadIdx.x])) {{ sv[threadIdx.x] = ov; si[threadIdx.x] = oi; }}
      }}
      __syncthreads();
    }}
    if (threadIdx.x == 0) {{
      const int tok = si[0] == 0x7fffffffffffffffLL ? 0 : (int)si[0];
      ids[slots[r]] = tok;
      tokens[r] = tok;
    }}
  }}
)",
                      vocab, kb.expr(rows)));
  kb.launch(rows * 256, 256);
  return kb.finish();
}

Kernel sample_top_k_top_p_kernel(int64_t vocab, int top_k, const std::string& ids_state) {
  KernelBuilder kb("sample_top_p", fmt::format("top-k {} / top-p sampling into @{}", top_k, ids_state));
  kb.extra("logits", "const float*");
  kb.state_rows(ids_state, "ids", "int*");
  kb.slots();
  kb.extra("tokens", "int*");
  kb.extra("params", "const float*");
  kb.extra("counter", "unsigned long long*");
  kb.extra("seed", "const unsigned long long*");
  kb.need("order_before");
  const ir::Dim rows = ir::Dim::symbol("S");
  kb.body(fmt::format(R"(  constexpr long long N = {0};
  constexpr int K = {2};
  __shared__ float sv[256];
  __shared__ long long si[256];
  __shared__ float cand_v[K];
  __shared__ int cand_i[K];
  const unsigned long long draw = *counter;
  for (long long r = blockIdx.x; r < {1}; r += gridDim.x) {{
    const float* xr = logits + r * N;
    float pv = 0.0f; long long pi = -1;
    for (int j = 0; j < K; ++j) {{
      float bv = 0.0f; long long bi = -1;
      for (long long c = threadIdx.x; c < N; c += blockDim.x) {{
        const float v = xr[c];
        if (pi >= 0 && !vtc_before(pv, pi, v, c)) continue;
        if (bi < 0 || vtc_before(v, c, bv, bi)) {{ bv = v; bi = c; }}
      }}
      __syncthreads();
      sv[threadIdx.x] = bv; si[threadIdx.x] = bi;
      __syncthreads();
      for (int s = blockDim.x / 2; s > 0; s >>= 1) {{
        if (threadIdx.x < s) {{
          const float ov = sv[threadIdx.x + s]; const long long oi = si[threadIdx.x + s];
          if (oi >= 0 && (si[threadIdx.x] < 0 || vtc_before(ov, oi, sv[threadIdx.x], si[threadIdx.x]))) {{ sv[threadIdx.x] = ov; si[threadIdx.x] = oi; }}
        }}
        __syncthreads();
      }}
      pv = sv[0]; pi = si[0];
      if (threadIdx.x == 0) {{ cand_v[j] = pv; cand_i[j] = (int)pi; }}
    }}
    __syncthreads();
    if (threadIdx.x == 0) {{
      const float temp = params[0], top_p = params[1], min_p = params[2];
      float p[K], total = 0.0f;
      for (int j = 0; j < K; ++j) {{ p[j] = expf((cand_v[j] - cand_v[0]) / temp); total += p[j]; }}
      int keep = K;
      float mass = 0.0f;
      for (int j = 0; j < K; ++j) {{
        if (p[j] < min_p * p[0]) {{ keep = j; break; }}
        mass += p[j] / total;
        if (mass >= top_p) {{ keep = j + 1; break; }}
      }}
      if (keep < 1) keep = 1;
      float kept = 0.0f;
      for (int j = 0; j < keep; ++j) kept += p[j];
      unsigned long long z = seed[0] + 0x9E3779B97F4A7C15ULL * (draw + 1) + (unsigned long long)r;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
      z ^= z >> 31;
      const float u = (float)(z >> 40) * (1.0f / 16777216.0f) * kept;
      int pick = keep - 1;
      float acc = 0.0f;
      for (int j = 0; j < keep; ++j) {{ acc += p[j]; if (u < acc) {{ pick = j; break; }} }}
      ids[slots[r]] = cand_i[pick];
      tokens[r] = cand_i[pick];
    }}
    __syncthreads();
  }}
  if (blockIdx.x == 0 && threadIdx.x == 0) {{
    __threadfence();
    *counter = draw + 1;
  }}
)",
                      vocab, kb.expr(rows), top_k));
  // One block walks all rows: the draw counter is read at the start and
  // bumped at the end by the same block, with no cross-block race.
  kb.launch(ir::Dim(256), 256);
  return kb.finish();
}

}  // namespace vtc::cuda
