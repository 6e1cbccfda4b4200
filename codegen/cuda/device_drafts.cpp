// The device drafting kernels (device_drafts.h has the algorithm).
#include "codegen/cuda/device_drafts.h"

#include <fmt/format.h>

#include "codegen/cuda/emit.h"

namespace vtc::cuda {

namespace {
using R = DeviceDraftRecord;
}  // namespace

Kernel spec_rows_kernel() {
  KernelBuilder kb("spec_rows", "device drafting: a verify step's ids and positions");
  const std::string rec = kb.extra("record", "int*"), ids = kb.extra("ids", "int*"),
                    pos = kb.extra("pos", "int*"), rows = kb.extra("rows", "long long");
  kb.body(fmt::format(R"(  const int len = {0}[{4}], run = {0}[{8}];
  for (long long t = threadIdx.x; t < {3}; t += blockDim.x) {{
    const int at = run + (int)t;
    {1}[t] = at < len ? {0}[{5} + at] : {0}[{6} + at - len];
    {2}[t] = {0}[{7} + t] = at;
  }}
)",
                      rec, ids, pos, rows, R::kLen, R::kHistory, R::kDrafts, R::kRowPos, R::kRun));
  kb.launch(ir::Dim(32), 32);
  return kb.finish();
}

Kernel spec_restore_kernel() {
  KernelBuilder kb("spec_restore", "device drafting: a rejected draft's recurrent states from the checkpoint");
  const std::string rec = kb.extra("record", "const int*"), to = kb.extra("to", "unsigned int*"),
                    from = kb.extra("from", "const unsigned int*"), bytes = kb.extra("bytes", "long long");
  kb.body(fmt::format(R"(  if (!{0}[{4}]) return;
  const long long words = {3} / 4;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < words; i += (long long)gridDim.x * blockDim.x)
    {1}[i] = {2}[i];
)",
                      rec, to, from, bytes, R::kRestore));
  kb.launch(ir::Dim(256), 256);
  return kb.finish();
}

Kernel spec_accept_kernel(int64_t n_vocab) {
  KernelBuilder kb("spec_accept", "device drafting: accept a verify step's rows, draft the next");
  const std::string rec = kb.extra("record", "int*"), x = kb.extra("logits", "const float*"),
                    rows = kb.extra("rows", "long long"), cap = kb.extra("capacity", "long long"),
                    drawn = kb.extra("drawn", "long long");
  kb.need("block_argmax");
  // {0} record, {1} logits, {2} rows, {3} capacity, {4} V, then the
  // record's word offsets, {16} drawn, then more word offsets.
  kb.body(fmt::format(R"(  constexpr long long V = {4}, CH = {13}, NB = (V + CH - 1) / CH;
  constexpr int KD = {5};
  __shared__ float sv[256];
  __shared__ long long si[256];
  __shared__ int best[KD + 1];
  __shared__ int found[256];
  __shared__ int s_last;
  int* hist = {0} + {6};
  int* drafts = {0} + {7};
  int* out = {0} + {8};
  volatile int* part = {0} + {6} + {3};
  if ({2} > 0 && {16}) {{
    for (long long r = threadIdx.x; r < {2}; r += blockDim.x) best[r] = {0}[{15} + r];
    __syncthreads();
  }} else if ({2} > 0) {{
    const long long r = blockIdx.y, c0 = blockIdx.x * CH, n = V - c0 < CH ? V - c0 : CH;
    const long long b = vtc_block_argmax({1} + r * V + c0, n, sv, si);
    if (threadIdx.x == 0) {{
      part[r * NB + blockIdx.x] = __float_as_int(sv[0]);
      part[(KD + 1) * NB + r * NB + blockIdx.x] = b == 0x7fffffffffffffffLL ? -1 : (int)(c0 + b);
    }}
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {{
      s_last = atomicAdd(&{0}[{14}], 1) == (int)({2} * NB) - 1;
      if (s_last) {0}[{14}] = 0;
    }}
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    for (long long r = threadIdx.x; r < {2}; r += blockDim.x) {{
      float bv = 0.0f;
      int bi = -1;
      for (long long c = 0; c < NB; ++c) {{
        const float v = __int_as_float(part[r * NB + c]);
        const int i = part[(KD + 1) * NB + r * NB + c];
        if (i >= 0 && (bi < 0 || v > bv)) bv = v, bi = i;
      }}
      best[r] = bi < 0 ? 0 : bi;
    }}
    __syncthreads();
  }}
  if (threadIdx.x == 0 && {2} > 0) {{
    const int len = {0}[{9}], run = {0}[{17}], replay = len - 1 - run;
    {0}[{20}] = 0;
    if ({2} <= replay) {{
      {0}[{17}] = run + (int){2};
      {0}[{10}] = 0;
      {0}[{11}] = 0;
      {0}[{18}] = (int){2};
    }} else {{
      const int d = (int){2} - 1 - replay;
      int n = 0;
      while (n < d && best[replay + n] == drafts[n]) ++n;
      for (int i = 0; i < n; ++i) out[i] = drafts[i];
      out[n] = best[replay + n];
      for (int i = 0; i <= n; ++i)
        if (len + i < {3}) hist[len + i] = out[i];
      const int grown = len + n + 1 < {3} ? len + n + 1 : (int){3};
      {0}[{9}] = grown;
      {0}[{10}] = n + 1;
      {0}[{11}] = {0}[{12}] ? d : 0;
      {0}[{18}] = replay;
      const bool restore = n < d && {0}[{19}];
      {0}[{17}] = restore ? run : grown - 1;
      {0}[{20}] = restore ? 1 : 0;
    }}
  }}
  __syncthreads();
  const int len = {0}[{9}];
  int from = -1;
  for (int N = 4; N >= 1 && from < 0; --N) {{
    int e_best = -1;
    for (int e = N + (int)threadIdx.x; e <= len - 1; e += blockDim.x) {{
      bool same = true;
      for (int i = 1; i <= N && same; ++i) same = hist[e - i] == hist[len - i];
      if (same) e_best = e;
    }}
    found[threadIdx.x] = e_best;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {{
      if (threadIdx.x < s && found[threadIdx.x + s] > found[threadIdx.x]) found[threadIdx.x] = found[threadIdx.x + s];
      __syncthreads();
    }}
    from = found[0];
    __syncthreads();
  }}
  if (threadIdx.x == 0) {{
    for (int i = 0; i < KD; ++i) {{
      const int at = from + i;
      drafts[i] = from < 0 ? hist[len - 1] : at < len ? hist[at] : drafts[at - len];
    }}
    {0}[{12}] = from >= 0 ? 1 : 0;
  }}
)",
                      rec, x, rows, cap, n_vocab, R::kMaxDrafts, R::kHistory, R::kDrafts, R::kOut, R::kLen,
                      R::kOutCount, R::kOutDrafted, R::kMatched, R::kChunk, R::kDone, R::kDrawn, drawn, R::kRun,
                      R::kOutReplayed, R::kRecurrent, R::kRestore));
  kb.launch(ir::Dim(256), 256);  // the executor launches spec_accept_grid() blocks
  return kb.finish();
}

}  // namespace vtc::cuda
