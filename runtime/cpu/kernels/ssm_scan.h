// CPU kernel of the selective state-space scan of Mamba-1 and Mamba-2
// (docs/ir.md: ssm_scan), after the reference's ggml_ssm_scan
// (ggml-cpu/ops.cpp, ggml_compute_forward_ssm_scan_f32). See ssm_scan.cpp
// for the summation order.
#pragma once

#include <cstdint>

#include "runtime/cpu/thread_pool.h"

namespace vtc::cpu {

struct SsmScanParams {
  int64_t n_tokens = 0;
  int64_t n_heads = 0;     // H
  int64_t head_dim = 0;    // P: rows of a head's state (Mamba-1: 1)
  int64_t state_size = 0;  // N: columns of a row (d_state)
  int64_t n_groups = 0;    // G: B and C groups; head h reads group h / (H / G)
  bool per_element_decay = false;  // A is [H, N] (Mamba-1), else [H, 1] (Mamba-2)
  int64_t n_seqs = 0;      // sequences of the batch (valid values of seq[t])
};

// For each token t of sequence s = seq[t], in batch order, and each head h,
// row p of the head's state S = states[s] + (h*P + p)*N:
//   d = softplus(dt[t, h]); xd = x[t, h, p] * d
//   S[i] = S[i] * exp(d * A[h, i or 0]) + B[t, g, i] * xd      (i < N)
//   y[t, h, p] = sum_i S[i] * C[t, g, i]
// x, y [n_tokens][H][P]; dt [n_tokens][H]; A [H][N] or [H]; B, C
// [n_tokens][G][N]. Throws vtc::Error for a seq[t] outside [0, n_seqs). The
// (sequence, head, row) triples are independent and split over the pool.
void ssm_scan(const float* x, const float* dt, const float* a, const float* b, const float* c, const int32_t* seq,
              float* const* states, const SsmScanParams& params, float* y, ThreadPool& pool);

}  // namespace vtc::cpu
