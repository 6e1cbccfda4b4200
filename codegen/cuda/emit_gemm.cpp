// The prefill matmul on tensor cores, y[m, n] = sum_k x[m, k] * w[n, k] for
// the T rows of a prefill step, integer-block and f16/bf16 weights.
//
// Algorithm (mma.sync through helpers_mma.cpp; the simulated device runs
// the same instructions, codegen/cuda/helpers_mma.cpp's header gives the
// fragment tables):
//  1. Integer-block weights (q4_0 ... q6_K, iq4_nl, iq4_xs, mxfp4), K a
//     multiple of 256:
//       - the GEMV's quantize kernel rounds x to the CPU's activation codes
//         (q8_1 or q8_K, emit_gemv.cpp), so the integer sums are the CPU's;
//       - blocks of 4 warps own a tile of 32 weight rows x 64 activation
//         rows and walk K in steps of 256 values (8 chunks of 32). Per step:
//         the activation codes arrive by cp.async (16 bytes a copy,
//         zero-filled past M); each thread decodes weight chunks from the
//         raw row bytes in shared memory (vload32_<type>, the GEMV's
//         decoders) into int8 codes and a scale record; the raw bytes of
//         the next step are then requested by cp.async, so they stream in
//         while the tensor cores run; warp w multiplies weight rows
//         16 (w % 2) .. + 15 with activation rows 32 (w / 2) .. + 31 as
//         4 mma tiles of m16n8k32 per chunk (two m16n8k16 for the types
//         whose 16-value halves carry their own scales: q2_K, q3_K, q6_K);
//       - each mma's int32 sums are scaled per chunk exactly as the GEMV's
//         vtc_wdot scales them (the CPU's isum, offsets and mins), into f32
//         accumulators.
//  2. f16/bf16 weights: tiles of 64 weight rows x 64 activation rows,
//     K steps of 32; the weight tile by cp.async, the activations rounded
//     to the weight's type as the CPU rounds them; warp w's 16 weight rows
//     by ldmatrix.x4, each 8-row activation tile by ldmatrix.x2, and
//     m16n8k16 mma with f32 accumulators.
// Shared rows are padded so the fragment reads of a warp's 32 lanes fall
// in 32 different banks (a row stride of 4 words mod 32).
#include <fmt/format.h>

#include "codegen/cuda/emit.h"
#include "support/error.h"

namespace vtc::cuda {
namespace {

constexpr int64_t kStep = 256;  // values of K per step (integer weights)

// Halves with their own multipliers need one k16 mma per half.
bool split_halves(GgmlType t) { return t == GgmlType::Q2_K || t == GgmlType::Q3_K || t == GgmlType::Q6_K; }

// Requests the raw weight bytes of the step at K offset `k` for the
// block's 32 rows: 16-byte cp.async copies from the 16-byte boundary at or
// below a row's first byte (any row alignment), the ragged last word byte
// by byte (never past the row), then closes the group.
std::string stage_raw(const std::string& k) {
  return fmt::format(R"(for (int e = tid; e < 32 * (RAW / 16); e += 128) {{
          const int r = e / (RAW / 16), o = e % (RAW / 16);
          if (n0 + r >= N) continue;
          const unsigned long long s0 = (unsigned long long)(wbase + (n0 + r) * ROW_BYTES + ({0} / UV) * UB);
          const unsigned long long a0 = s0 & ~15ull, end = s0 + SB, a1 = end & ~15ull, src = a0 + 16ull * o;
          if (src < a1) vtc_cp_async16(&raw_s[r][16 * o], (const void*)src, true);
          else if (src < end)
            for (unsigned long long b = src; b < end; ++b) raw_s[r][b - a0] = *(const u8*)b;
        }}
        vtc_cp_commit();)",
                     k);
}

Kernels integer_gemm(const ir::Op& op, const std::string& what, const ir::Dim& m, int64_t N, int64_t K,
                     const MatmulIo& io) {
  const GgmlType wtype = weight_type(op.operands[1].type().elem);
  const DotForm form = dot_form(wtype);
  const GgmlTypeTraits& tr = ggml_traits(wtype);
  const bool halves = split_halves(wtype);
  Kernels out;
  out.push_back(quantize_kernel(form.codes, io.x, m, K, what));

  KernelBuilder kb("gemm_mma", what);
  const std::string codes = kb.scratch(codes_scratch_bytes(m, K));
  const std::string w = kb.in(io.w, "w");
  const StoreFn store = io.bind_out(kb);
  const std::string load_fn = vload32_helper(wtype);
  kb.need(load_fn);
  kb.need("code_layout");
  kb.need("mma");
  kb.need("mma_scale");
  const uint64_t row_bytes = *ggml_bytes_for(wtype, uint64_t(K));
  const int64_t step_bytes = kStep / tr.block_size * tr.block_bytes;
  // A row's step bytes from the 16-byte boundary below them, and 32 bytes
  // for vtc_loadw's realigning load past a chunk.
  const int64_t raw_stride = (step_bytes + 15 + 15) / 16 * 16 + 32;
  // q8_1 codes of a weight with an offset need the halves' code sums; q8_K
  // carries them as bsums; q4_1/q5_1 (KIND 1) need the block's s instead.
  std::string sums = "0u";
  if (form.codes == Codes::Q8_K) sums = "xm.y";
  else if (form.kind == 1) sums = "xm.y";
  else if (form.offset != 0)
    sums = "((u32)vtc_code_sum((const int*)&x_s[r][32 * c], 0, 4) & 0xffffu) | "
           "((u32)vtc_code_sum((const int*)&x_s[r][32 * c], 4, 8) << 16)";
  const std::string mma = halves ? R"(unsigned ah0[2] = {a[0], a[1]}, ah1[2] = {a[2], a[3]};
          vtc_mma_s8_k16(s0, ah0, &b[0]);
          vtc_mma_s8_k16(s1, ah1, &b[1]);)"
                                 : "vtc_mma_s8_k32(s0, a, b);";
  kb.body(fmt::format(R"(  constexpr long long N = {0}, K = {1}, ROW_BYTES = {2}, UV = {3}, UB = {4}, SB = {5};
  constexpr int RAW = {6};
  const long long M = {7};
  alignas(16) __shared__ u8 raw_s[32][RAW];
  alignas(16) __shared__ u8 wc_s[32][272];
  alignas(16) __shared__ u8 x_s[64][272];
  __shared__ float4 wm_s[32][9];
  // [chunk][row]: rows 2t and 2t + 1 of a tile are one 16-byte load.
  alignas(16) __shared__ uint2 xm_s[8][64 + 2];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int wr = 16 * (warp & 1), wt = 32 * (warp >> 1);
  const long long n0 = blockIdx.x * 32LL;
  const u8* xcodes = (const u8*){8};
  const uint2* xmeta = (const uint2*)((const u8*){8} + M * K);
  const u8* wbase = (const u8*){9};
  for (long long m0 = blockIdx.y * 64LL; m0 < M; m0 += gridDim.y * 64LL) {{
    float acc[4][4];
    for (int j = 0; j < 4; ++j)
      for (int i = 0; i < 4; ++i) acc[j][i] = 0.0f;
    for (long long k0 = 0; k0 < K; k0 += 256) {{
      // The raw weight bytes of this step (the first step's; later ones
      // were requested during the previous step's mma).
      if (k0 == 0) {{
        {10}
      }}
      // This step's activation codes: row r, chunk c, half h at x_s[r][32c + 16h].
      for (int e = tid; e < 64 * 16; e += 128) {{
        const int r = e >> 4, c = (e >> 1) & 7, h = e & 1;
        const long long mm = m0 + r;
        vtc_cp_async16(&x_s[r][32 * c + 16 * h], xcodes + (mm < M ? mm : 0) * K + vtc_code_at(k0 + 32 * c + 16 * h, K), mm < M);
      }}
      vtc_cp_commit();
      vtc_cp_wait<0>();
      __syncthreads();
      // Decode: weight chunk (r, c) into codes and a scale record.
      for (int e = tid; e < 32 * 8; e += 128) {{
        const int r = e >> 3, c = e & 7;
        vtc_wq q;
        if (n0 + r < N) {{
          const unsigned long long s0 = (unsigned long long)(wbase + (n0 + r) * ROW_BYTES + (k0 / UV) * UB);
          {11}<false>(&raw_s[r][s0 & 15], c, q);
        }} else {{
          for (int i = 0; i < 8; ++i) q.q[i] = 0;
          q.a0 = q.a1 = q.m0 = q.m1 = 0, q.d = q.dm = q.mw = 0.0f;
        }}
        uint4* dst = (uint4*)&wc_s[r][32 * c];
        dst[0] = make_uint4((u32)q.q[0], (u32)q.q[1], (u32)q.q[2], (u32)q.q[3]);
        dst[1] = make_uint4((u32)q.q[4], (u32)q.q[5], (u32)q.q[6], (u32)q.q[7]);
        const u32 packed = ((u32)q.a0 & 255u) | (((u32)q.a1 & 255u) << 8) | (((u32)q.m0 & 255u) << 16) | ((u32)q.m1 << 24);
        wm_s[r][c] = make_float4(q.d, q.dm, q.mw, __uint_as_float(packed));
      }}
      // Activation scale records: d, then the halves' code sums or s.
      for (int e = tid; e < 64 * 8; e += 128) {{
        const int r = e >> 3, c = e & 7;
        const long long mm = m0 + r;
        const uint2 xm = mm < M ? xmeta[mm * (K / 32) + k0 / 32 + c] : make_uint2(0u, 0u);
        xm_s[c][r] = make_uint2(xm.x, {12});
      }}
      __syncthreads();
      // The next step's raw weight bytes stream in during the mma.
      if (k0 + 256 < K) {{
        const long long k0n = k0 + 256;
        {13}
      }}
      for (int c = 0; c < 8; ++c) {{
        const u32* w0 = (const u32*)&wc_s[wr + g][32 * c];
        const u32* w1 = (const u32*)&wc_s[wr + g + 8][32 * c];
        unsigned a[4] = {{w0[t], w1[t], w0[4 + t], w1[4 + t]}};
        const float4 ma = wm_s[wr + g][c], mb = wm_s[wr + g + 8][c];
        for (int j = 0; j < 4; ++j) {{
          const u32* xr = (const u32*)&x_s[wt + 8 * j + g][32 * c];
          unsigned b[2] = {{xr[t], xr[4 + t]}};
          int s0[4] = {{0, 0, 0, 0}}, s1[4] = {{0, 0, 0, 0}};
          {14}
          const uint4 xm = vtc_load16(&xm_s[c][wt + 8 * j + 2 * t]);
          for (int i = 0; i < 4; ++i)
            acc[j][i] += vtc_mma_scale<{16}, {17}, {18}>(s0[i], s1[i], i < 2 ? ma : mb, (i & 1) ? make_uint2(xm.z, xm.w) : make_uint2(xm.x, xm.y));
        }}
      }}
      __syncthreads();
    }}
    for (int j = 0; j < 4; ++j)
      for (int i = 0; i < 4; ++i) {{
        const long long nn = n0 + wr + g + 8 * (i >> 1), mm = m0 + wt + 8 * j + 2 * t + (i & 1);
        if (mm < M && nn < N) {{ {15} }}
      }}
  }}
)",
                      N, K, row_bytes, tr.block_size, tr.block_bytes, step_bytes, raw_stride, kb.expr(m), codes, w,
                      stage_raw("k0"), load_fn, sums, stage_raw("k0n"), mma, store("acc[j][i]", "mm", "nn"), form.offset, form.kind, halves));
  kb.launch(ir::Dim(((N + 31) / 32) * 128), 128, m, 64);
  Kernel k = kb.finish();
  k.reads_codes_of = io.x.data();
  // The integer products run as mma (counted); the float work is the
  // per-chunk scaling, about 4 flops per (row, activation row, chunk).
  k.fp32_flops = m * N * (K / 32) * 4;
  out.push_back(std::move(k));
  return out;
}

// f16/bf16 weights: m16n8k16 tiles fed by ldmatrix.
Kernels float_gemm(const ir::Op& op, const std::string& what, const ir::Dim& m, int64_t N, int64_t K,
                   const MatmulIo& io) {
  const GgmlType wtype = weight_type(op.operands[1].type().elem);
  KernelBuilder kb("gemm_mma", what);
  const std::string x = kb.in(io.x, "x"), w = kb.in(io.w, "w");
  const StoreFn store = io.bind_out(kb);
  kb.need("mma");
  const bool bf16 = wtype == GgmlType::BF16;
  const std::string round = bf16 ? "vtc_f2bf" : "vtc_f2h";
  kb.body(fmt::format(R"(  constexpr long long N = {0}, K = {1};
  const long long M = {2};
  alignas(16) __shared__ unsigned short w_s[64][40];
  alignas(16) __shared__ unsigned short x_s[64][40];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const long long n0 = blockIdx.x * 64LL;
  const unsigned short* wp = (const unsigned short*){3};
  const float* xp = {4};
  const bool w_aligned = ((unsigned long long)wp & 15) == 0;
  for (long long m0 = blockIdx.y * 64LL; m0 < M; m0 += gridDim.y * 64LL) {{
    float acc[8][4];
    for (int j = 0; j < 8; ++j)
      for (int i = 0; i < 4; ++i) acc[j][i] = 0.0f;
    for (long long k0 = 0; k0 < K; k0 += 32) {{
      // The weight tile: row r's 64 bytes as four 16-byte copies.
      for (int e = tid; e < 256; e += 128) {{
        const int r = e >> 2, o = e & 3;
        const long long n = n0 + r;
        const unsigned short* src = wp + (n < N ? n : 0) * K + k0 + 8 * o;
        if (w_aligned) vtc_cp_async16(&w_s[r][8 * o], src, n < N);
        else
          for (int i = 0; i < 4; ++i)
            ((u32*)&w_s[r][8 * o])[i] = n < N ? (u32)src[2 * i] | ((u32)src[2 * i + 1] << 16) : 0u;
      }}
      vtc_cp_commit();
      // The activation tile, rounded as the CPU rounds it, a pair per store.
      for (int e = tid; e < 64 * 16; e += 128) {{
        const int r = e >> 4, p = e & 15;
        const long long mm = m0 + r;
        const float v0 = mm < M ? xp[mm * K + k0 + 2 * p] : 0.0f, v1 = mm < M ? xp[mm * K + k0 + 2 * p + 1] : 0.0f;
        ((u32*)&x_s[r][0])[p] = (u32){5}(v0) | ((u32){5}(v1) << 16);
      }}
      vtc_cp_wait<0>();
      __syncthreads();
      for (int kk = 0; kk < 32; kk += 16) {{
        unsigned a[4];
        vtc_ldmatrix_x4(a, &w_s[16 * warp + (lane & 15)][kk + 8 * (lane >> 4)]);
        for (int j = 0; j < 8; ++j) {{
          unsigned b[2];
          vtc_ldmatrix_x2(b, &x_s[8 * j + (lane & 7)][kk + 8 * ((lane >> 3) & 1)]);
          {6}(acc[j], a, b);
        }}
      }}
      __syncthreads();
    }}
    for (int j = 0; j < 8; ++j)
      for (int i = 0; i < 4; ++i) {{
        const long long nn = n0 + 16 * warp + g + 8 * (i >> 1), mm = m0 + 8 * j + 2 * t + (i & 1);
        if (mm < M && nn < N) {{ {7} }}
      }}
  }}
)",
                      N, K, kb.expr(m), w, x, round, bf16 ? "vtc_mma_bf16" : "vtc_mma_f16",
                      store("acc[j][i]", "mm", "nn")));
  kb.launch(ir::Dim(((N + 63) / 64) * 128), 128, m, 64);
  Kernel k = kb.finish();
  k.fp32_flops = m * K * 2;  // the activations' rounding; the products run as mma (counted)
  return {std::move(k)};
}

}  // namespace

bool gemm_mma_supported(GgmlType w, int64_t K) {
  if (w == GgmlType::F16 || w == GgmlType::BF16) return K % 32 == 0;
  return w != GgmlType::F32 && quant_supported(w) && K % kStep == 0;
}

Kernels emit_gemm_mma(const ir::Op& op, const std::string& what, const ir::Dim& m, int64_t N, int64_t K,
                      const MatmulIo& io) {
  const GgmlType wtype = weight_type(op.operands[1].type().elem);
  if (!gemm_mma_supported(wtype, K))
    throw Error(fmt::format("cuda: {}: no tensor-core matmul for weight type {} with K = {}", what,
                            ggml_type_name(wtype), K));
  if (wtype == GgmlType::F16 || wtype == GgmlType::BF16) return float_gemm(op, what, m, N, K, io);
  return integer_gemm(op, what, m, N, K, io);
}

}  // namespace vtc::cuda
