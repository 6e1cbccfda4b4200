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
  // The record's word offsets are named w_*; `drawn`: the rows' tokens were
  // drawn into the record (sampled requests) instead of taken by argmax.
  kb.body(fmt::format(R"(  constexpr long long V = {n_vocab}, CH = {chunk}, NB = (V + CH - 1) / CH;
  constexpr int KD = {max_drafts};
  __shared__ float sv[256];
  __shared__ long long si[256];
  __shared__ int best[KD + 1];
  __shared__ int found[256];
  __shared__ int s_last;
  int* hist = {rec} + {w_history};
  int* drafts = {rec} + {w_drafts};
  int* out = {rec} + {w_out};
  volatile int* part = {rec} + {w_history} + {cap};
  if ({rows} > 0 && {drawn}) {{
    for (long long r = threadIdx.x; r < {rows}; r += blockDim.x) best[r] = {rec}[{w_drawn} + r];
    __syncthreads();
  }} else if ({rows} > 0) {{
    const long long r = blockIdx.y, c0 = blockIdx.x * CH, n = V - c0 < CH ? V - c0 : CH;
    const long long b = vtc_block_argmax({logits} + r * V + c0, n, sv, si);
    if (threadIdx.x == 0) {{
      part[r * NB + blockIdx.x] = __float_as_int(sv[0]);
      part[(KD + 1) * NB + r * NB + blockIdx.x] = b == 0x7fffffffffffffffLL ? -1 : (int)(c0 + b);
    }}
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {{
      s_last = atomicAdd(&{rec}[{w_done}], 1) == (int)({rows} * NB) - 1;
      if (s_last) {rec}[{w_done}] = 0;
    }}
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    for (long long r = threadIdx.x; r < {rows}; r += blockDim.x) {{
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
  if (threadIdx.x == 0 && {rows} > 0) {{
    const int len = {rec}[{w_len}], run = {rec}[{w_run}], replay = len - 1 - run;
    {rec}[{w_restore}] = 0;
    if ({rows} <= replay) {{
      {rec}[{w_run}] = run + (int){rows};
      {rec}[{w_out_count}] = 0;
      {rec}[{w_out_drafted}] = 0;
      {rec}[{w_out_replayed}] = (int){rows};
    }} else {{
      const int d = (int){rows} - 1 - replay;
      int n = 0;
      while (n < d && best[replay + n] == drafts[n]) ++n;
      for (int i = 0; i < n; ++i) out[i] = drafts[i];
      out[n] = best[replay + n];
      for (int i = 0; i <= n; ++i)
        if (len + i < {cap}) hist[len + i] = out[i];
      const int grown = len + n + 1 < {cap} ? len + n + 1 : (int){cap};
      {rec}[{w_len}] = grown;
      {rec}[{w_out_count}] = n + 1;
      {rec}[{w_out_drafted}] = {rec}[{w_matched}] ? d : 0;
      {rec}[{w_out_replayed}] = replay;
      const bool restore = n < d && {rec}[{w_recurrent}];
      {rec}[{w_run}] = restore ? run : grown - 1;
      {rec}[{w_restore}] = restore ? 1 : 0;
    }}
  }}
  __syncthreads();
  const int len = {rec}[{w_len}];
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
    {rec}[{w_matched}] = from >= 0 ? 1 : 0;
  }}
)",
                      fmt::arg("rec", rec), fmt::arg("logits", x), fmt::arg("rows", rows), fmt::arg("cap", cap),
                      fmt::arg("n_vocab", n_vocab), fmt::arg("max_drafts", R::kMaxDrafts),
                      fmt::arg("w_history", R::kHistory), fmt::arg("w_drafts", R::kDrafts), fmt::arg("w_out", R::kOut),
                      fmt::arg("w_len", R::kLen), fmt::arg("w_out_count", R::kOutCount),
                      fmt::arg("w_out_drafted", R::kOutDrafted), fmt::arg("w_matched", R::kMatched),
                      fmt::arg("chunk", R::kChunk), fmt::arg("w_done", R::kDone), fmt::arg("w_drawn", R::kDrawn),
                      fmt::arg("drawn", drawn), fmt::arg("w_run", R::kRun), fmt::arg("w_out_replayed", R::kOutReplayed),
                      fmt::arg("w_recurrent", R::kRecurrent), fmt::arg("w_restore", R::kRestore)));
  kb.launch(ir::Dim(256), 256);  // the executor launches spec_accept_grid() blocks
  return kb.finish();
}

}  // namespace vtc::cuda
