// The prefill matmul on tensor cores, y[m, n] = sum_k x[m, k] * w[n, k] for
// the T rows of a prefill step, integer-block and f16/bf16 weights.
//
// Algorithm (mma.sync through helpers_mma.cpp; the simulated device runs
// the same instructions, codegen/cuda/helpers_mma.cpp's header gives the
// fragment tables):
//  1. Integer-block weights (q4_0 ... q6_K, iq4_nl, iq4_xs, mxfp4), K a
//     multiple of 128:
//       - the GEMV's quantize kernel rounds x to the CPU's activation codes
//         (q8_1 or q8_K, emit_gemv.cpp), so the integer sums are the CPU's;
//       - blocks of 4 warps own a tile of 128 weight rows x 128 activation
//         rows (a 512 x 4096 output is 128 blocks, about one per SM of an
//         H100/H200) and walk K in steps of 128 values (4 chunks of 32).
//         Per step: the activation codes arrive by cp.async (16 bytes a
//         copy, zero-filled past M) while each thread decodes weight chunks
//         straight from the row bytes in global memory (vload32_<type>,
//         the GEMV's decoders; 4 lanes a row share its sectors) into int8
//         codes in shared memory and a scale record (d, dm or mw, the
//         packed multipliers), in arrays strided so the stores hit 32 banks;
//       - warp w multiplies weight rows 64 (w % 2) .. + 63 with activation
//         rows 64 (w / 2) .. + 63: per chunk, 4 A and 8 B fragments (each
//         read once) make 32 m16n8k32 s8 mma (two m16n8k16 for the types
//         whose 16-value halves carry their own scales: q2_K, q3_K, q6_K);
//       - each mma's int32 sums are scaled per chunk exactly as the GEMV's
//         vtc_wdot scales them (the CPU's isum, offsets and mins), into f32
//         accumulators. A type reads only the scale operands it has (plain
//         32-value blocks no multipliers or mins), and the K-quants' d and
//         dm, constant over a 256-value super-block, once a step.
//     The decoders read a chunk's bytes as the aligned 16-byte words that
//     cover it, up to one word past the row's last chunk: the executor
//     allocates weights with 32 readable bytes past their end.
//  2. f16/bf16 weights: a kernel rounds x to the weight's type once, as
//     the CPU rounds it (into the scratch); then tiles of 128 weight rows
//     x 128 activation rows, K steps of 32 double-buffered by cp.async;
//     warp w's 4 A fragments by ldmatrix.x4, its 8 B fragments by
//     ldmatrix.x2, and 32 m16n8k16 mma with f32 accumulators per 16 of K.
// Shared rows are padded so the fragment reads of a warp's 32 lanes fall
// in 32 different banks: integer rows of 36 words (4 mod 32) for the
// lanes' 4-byte fragment loads; f16 rows of 20 words, so ldmatrix's 8 rows
// of 16 bytes fall in 8 different 4-bank groups.
// A short prefill stages and multiplies only its activation rows, rounded
// up to a whole 8-row B tile (warp-uniform skips).
#include <fmt/format.h>

#include "codegen/cuda/emit.h"
#include "support/error.h"

namespace vtc::cuda {
namespace {

constexpr int64_t kStep = 128;  // values of K per step (integer weights)

// Halves with their own multipliers need one k16 mma per half.
bool split_halves(GgmlType t) { return t == GgmlType::Q2_K || t == GgmlType::Q3_K || t == GgmlType::Q6_K; }

// Both GEMMs' loop over the 128-row activation tiles, opened, with warp
// w's 64 x 64 accumulators zeroed: 4 A tiles x 8 B tiles x the 4 values
// of an mma's C fragment.
constexpr const char* kTileOpen = R"(  for (long long m0 = blockIdx.y * 128LL; m0 < M; m0 += gridDim.y * 128LL) {
    float acc[4][8][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;
    // The tile's activation rows, to a whole 8-row B tile: a short prefill
    // stages and multiplies only those (warp-uniform skips below).
    const int mrows = (int)min(128LL, (M - m0 + 7) / 8 * 8);
)";

// Warp w's stores (C fragment value q of tile (i, j) is weight row
// n0 + wr + 16i + g + 8 (q / 2), activation row m0 + wt + 8j + 2t + q % 2),
// then the tile loop's close.
std::string tile_close(const std::string& store) {
  return fmt::format(R"(#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) {{
          const long long nn = n0 + wr + 16 * i + g + 8 * (q >> 1), mm = m0 + wt + 8 * j + 2 * t + (q & 1);
          if (mm < M && nn < N) {{ {} }}
        }}
  }}
)",
                     store);
}

}  // namespace

// The integer GEMM's kernel: plain (x's M rows of codes at the scratch's
// start, weight rows 0 .. N-1) or grouped by expert (GemmGrouping).
Kernel integer_gemm_kernel(GgmlType wtype, const std::string& what, const ir::Dim& m, int64_t N, int64_t K,
                           const MatmulIo& io, const GemmGrouping* grouped) {
  const DotForm form = dot_form(wtype);
  const bool halves = split_halves(wtype);
  KernelBuilder kb(grouped ? "gemm_mma_grouped" : "gemm_mma", what);
  const std::string scratch = kb.scratch(grouped ? grouped->scratch_bytes : codes_scratch_bytes(m, K));
  const std::string codes = grouped ? fmt::format("((const u8*){} + ({}))", scratch, kb.expr(grouped->codes_at)) : scratch;
  const std::string w = kb.in(io.w, "w");
  StoreFn store;
  std::string preamble, tile_open = kTileOpen, x_row = "mm", w_row = "n0 + r";
  if (grouped) {
    const GemmGrouping& g = *grouped;
    preamble = fmt::format(
        "  constexpr long long KS = {0};\n  const int* perm = (const int*)((const u8*){1} + ({2}));\n"
        "  const int* tiles = (const int*)((const u8*){1} + ({3}));\n  float* yout = (float*)((u8*){1} + ({4}));\n",
        g.slots, scratch, kb.expr(g.perm_at), kb.expr(g.tiles_at), kb.expr(g.out_at));
    tile_open = R"(  for (long long ti = blockIdx.y; ti < (long long)tiles[0]; ti += gridDim.y) {
    const long long expert = tiles[1 + 3 * ti], lo = tiles[2 + 3 * ti], m0 = 0;
    const long long M = tiles[3 + 3 * ti] - lo;  // the tile's rows (the outer M counts the codes' rows)
)" + std::string(kTileOpen).substr(std::string(kTileOpen).find('\n') + 1);
    x_row = g.codes_per_token ? "((long long)perm[lo + mm] / KS)" : "((long long)perm[lo + mm])";
    w_row = fmt::format("expert * {} + {} + n0 + r", g.rows_per_expert, g.first_row);
    store = [](const std::string& v, const std::string& row, const std::string& col) {
      return fmt::format("yout[(long long)perm[lo + {}] * N + {}] = {};", row, col, v);
    };
  } else {
    store = io.bind_out(kb);
  }
  const std::string load_fn = vload32_helper(wtype);
  kb.need(load_fn);
  kb.need("code_layout");
  kb.need("mma");
  kb.need("mma_scale");
  const uint64_t row_bytes = *ggml_bytes_for(wtype, uint64_t(K));
  // q8_1 codes of a weight with an offset need the halves' code sums; q8_K
  // carries them as bsums; q4_1/q5_1 (KIND 1) need the block's s instead.
  std::string sums = "xm.y";
  if (form.codes != Codes::Q8_K && form.kind != 1 && form.offset != 0)
    sums = "((u32)vtc_code_sum((const int*)&x_s[r][32 * c], 0, 4) & 0xffffu) | "
           "((u32)vtc_code_sum((const int*)&x_s[r][32 * c], 4, 8) << 16)";
  else if (form.codes != Codes::Q8_K && form.kind != 1)
    sums = "0u";
  const std::string mma = halves ? R"(unsigned ah0[2] = {a[i][0], a[i][1]}, ah1[2] = {a[i][2], a[i][3]};
            vtc_mma_s8_k16(s0, ah0, &b[0]);
            vtc_mma_s8_k16(s1, ah1, &b[1]);)"
                                 : "vtc_mma_s8_k32(s0, a[i], b);";
  // Which scale operands the type reads: plain 32-value blocks (q8_1
  // codes) multiply by 1 and have no mins; mw (KIND 1) or dm (KIND 3);
  // the activation's sums or s; q8_K codes and the weight's d and dm are
  // per 256-value super-block, so one 128-value step reads them once.
  const bool plain = form.codes != Codes::Q8_K, need_wm = form.kind == 1 || form.kind == 3;
  const bool need_sums = form.kind == 1 || form.kind == 3 || form.offset != 0, per_step = form.codes == Codes::Q8_K;
  kb.body(fmt::format(R"(  constexpr long long N = {0}, K = {1}, ROW_BYTES = {2};
  constexpr bool PLAIN = {13}, NEED_WM = {14}, NEED_SUMS = {15}, PER_STEP = {16};
  const long long M = {3};
  // Step k0's 4 chunks: decoded weight codes and activation codes (row r,
  // chunk c, half h at [r][32c + 16h]); per chunk and row, the weights'
  // d, dm or mw and packed multipliers, the activations' d and sums (136
  // words a chunk: the decode's stores, 8 rows x 4 chunks, hit 32 banks).
  alignas(16) __shared__ u8 wc_s[128][144];
  alignas(16) __shared__ u8 x_s[128][144];
  alignas(16) __shared__ float wd_s[4][136], wm_s[4][136], xd_s[4][136];
  alignas(16) __shared__ u32 wp_s[4][136], xs_s[4][136];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int wr = 64 * (warp & 1), wt = 64 * (warp >> 1);
  const long long n0 = blockIdx.x * 128LL;
  const u8* xcodes = (const u8*){4};
  const uint2* xmeta = (const uint2*)((const u8*){4} + M * K);
  const u8* wbase = (const u8*){5};
{18}{17}    for (long long k0 = 0; k0 < K; k0 += 128) {{
      // This step's activation codes, by cp.async (zero-filled past M).
      for (int e = tid; e < mrows * 8; e += 128) {{
        const int r = e >> 3, c = (e >> 1) & 3, h = e & 1;
        const long long mm = m0 + r;
        vtc_cp_async16(&x_s[r][32 * c + 16 * h], xcodes + (mm < M ? {19} : 0) * K + vtc_code_at(k0 + 32 * c + 16 * h, K), mm < M);
      }}
      vtc_cp_commit();
      // Decode while the codes land: weight chunk (r, c) from the row's
      // bytes in global memory (4 lanes a row: they share its sectors).
      for (int e = tid; e < 128 * 4; e += 128) {{
        const int r = e >> 2, c = e & 3;
        vtc_wq q;
        if (n0 + r < N) {{
          {6}<false>(wbase + ({20}) * ROW_BYTES, (int)(k0 >> 5) + c, q);
        }} else {{
          #pragma unroll
          for (int i = 0; i < 8; ++i) q.q[i] = 0;
          q.a0 = q.a1 = q.m0 = q.m1 = 0, q.d = q.dm = q.mw = 0.0f;
        }}
        const uint4 lo = make_uint4((u32)q.q[0], (u32)q.q[1], (u32)q.q[2], (u32)q.q[3]);
        const uint4 hi = make_uint4((u32)q.q[4], (u32)q.q[5], (u32)q.q[6], (u32)q.q[7]);
        vtc_copy16(&wc_s[r][32 * c], &lo);  // one 16-byte store each
        vtc_copy16(&wc_s[r][32 * c + 16], &hi);
        wd_s[c][r] = q.d;
        if (NEED_WM) wm_s[c][r] = {7} == 1 ? q.mw : q.dm;
        if (!PLAIN) wp_s[c][r] = ((u32)q.a0 & 255u) | (((u32)q.a1 & 255u) << 8) | (((u32)q.m0 & 255u) << 16) | ((u32)q.m1 << 24);
      }}
      vtc_cp_wait<0>();
      __syncthreads();
      // Activation scale records: d, then the halves' code sums or s.
      for (int e = tid; e < 4 * 128; e += 128) {{
        const int r = e & 127, c = e >> 7;
        if (r >= mrows) continue;
        const long long mm = m0 + r;
        const uint2 xm = mm < M ? xmeta[{19} * (K / 32) + k0 / 32 + c] : make_uint2(0u, 0u);
        xd_s[c][r] = __uint_as_float(xm.x);
        if (NEED_SUMS) xs_s[c][r] = {8};
      }}
      __syncthreads();
      // Warp w: weight rows wr .. wr + 63 (4 A tiles) x activation rows
      // wt .. wt + 63 (8 B tiles); each fragment and scale is read once a
      // chunk (the weights' per-super-block ones once a step).
      float wdv[8], wmv[8];
#pragma unroll
      for (int c = 0; c < 4 && wt < mrows; ++c) {{
        if (!PER_STEP || c == 0) {{
#pragma unroll
          for (int i = 0; i < 8; ++i) {{
            const int r = wr + 16 * (i >> 1) + g + 8 * (i & 1);
            wdv[i] = wd_s[c][r];
            wmv[i] = NEED_WM ? wm_s[c][r] : 0.0f;
          }}
        }}
        unsigned a[4][4];
        u32 pv[8];
        #pragma unroll
        for (int i = 0; i < 4; ++i) {{
          const int r = wr + 16 * i + g;
          const u32* w0 = (const u32*)&wc_s[r][32 * c];
          const u32* w1 = (const u32*)&wc_s[r + 8][32 * c];
          a[i][0] = w0[t], a[i][1] = w1[t], a[i][2] = w0[4 + t], a[i][3] = w1[4 + t];
          pv[2 * i] = PLAIN ? 0x0101u : wp_s[c][r];
          pv[2 * i + 1] = PLAIN ? 0x0101u : wp_s[c][r + 8];
        }}
        #pragma unroll
        for (int j = 0; j < 8; ++j) {{
          if (wt + 8 * j >= mrows) break;
          const u32* xr = (const u32*)&x_s[wt + 8 * j + g][32 * c];
          unsigned b[2] = {{xr[t], xr[4 + t]}};
          const uint2 xs = NEED_SUMS ? vtc_load8(&xs_s[c][wt + 8 * j + 2 * t]) : make_uint2(0u, 0u);
          const uint2 xd = vtc_load8(&xd_s[PER_STEP ? 0 : c][wt + 8 * j + 2 * t]);
          #pragma unroll
          for (int i = 0; i < 4; ++i) {{
            int s0[4] = {{0, 0, 0, 0}}, s1[4] = {{0, 0, 0, 0}};
            {9}
            #pragma unroll
            for (int q = 0; q < 4; ++q) {{
              const int wi = 2 * i + (q >> 1);
              acc[i][j][q] += vtc_mma_scale<{10}, {7}, {11}>(s0[q], s1[q], wdv[wi], wmv[wi], pv[wi], __uint_as_float((q & 1) ? xd.y : xd.x), (q & 1) ? xs.y : xs.x);
            }}
          }}
        }}
      }}
      __syncthreads();
    }}
{12})",
                      N, K, row_bytes, kb.expr(m), codes, w, load_fn, form.kind, sums, mma, form.offset, halves,
                      tile_close(store("acc[i][j][q]", "mm", "nn")), plain, need_wm, need_sums, per_step,
                      tile_open, preamble, x_row, w_row));
  kb.launch(ir::Dim(((N + 127) / 128) * 128), 128, grouped ? grouped->rows + 128 * grouped->experts : m, 128);
  Kernel k = kb.finish();
  if (!grouped) k.reads_codes_of = io.x.data();
  // The integer products run as mma (counted); the float work is the
  // per-chunk scaling, about 4 flops per (row, activation row, chunk).
  k.fp32_flops = (grouped ? grouped->rows : m) * N * (K / 32) * 4;
  return k;
}

namespace {

Kernels integer_gemm(const ir::Op& op, const std::string& what, const ir::Dim& m, int64_t N, int64_t K,
                     const MatmulIo& io) {
  const GgmlType wtype = weight_type(op.operands[1].type().elem);
  return {quantize_kernel(dot_form(wtype).codes, io.x, m, K, what),
          integer_gemm_kernel(wtype, what, m, N, K, io, nullptr)};
}

// Rounds x [M, K] to the weight's 16-bit type as the CPU rounds it, into
// the scratch (M x K halves): 8 values a thread, so the GEMM's blocks read
// 2 bytes a value instead of 4 and round nothing.
Kernel round_kernel(const ir::Value& x, const ir::Dim& m, int64_t K, bool bf16, const std::string& what) {
  KernelBuilder kb(bf16 ? "round_bf16" : "round_f16", what);
  kb.need("copy16");
  const std::string xp = kb.in(x, "x");
  const std::string out = kb.scratch(m * (K * 2));
  kb.body(fmt::format(R"(  const long long n = {0} * {1}LL, i = 8 * (blockIdx.x * (long long)blockDim.x + threadIdx.x);
  if (i >= n) return;
  const float* src = {2} + i;
  u32 h[4];
  for (int p = 0; p < 4; ++p) h[p] = (u32){3}(src[2 * p]) | ((u32){3}(src[2 * p + 1]) << 16);
  const uint4 v = make_uint4(h[0], h[1], h[2], h[3]);
  vtc_copy16((unsigned short*){4} + i, &v);
)",
                      kb.expr(m), K, xp, bf16 ? "vtc_f2bf" : "vtc_f2h", out));
  kb.launch(m * (K / 8), 256);
  Kernel k = kb.finish();
  k.writes_codes_of = x.data();
  k.fp32_flops = m * K;  // one rounding a value
  return k;
}

// Requests step k's tiles into buffer `buf`: 128 weight rows and 128
// activation rows of 32 halves (64 bytes: 4 copies a row), zero-filled
// past N and M; a weight not 16-byte aligned is copied by 4-byte loads.
std::string stage_float_tiles(const std::string& buf, const std::string& k) {
  return fmt::format(R"(for (int e = tid; e < 512; e += 128) {{
          const int r = e >> 2, o = e & 3;
          const long long n = n0 + r, mm = m0 + r;
          const unsigned short* src = wp + (n < N ? n : 0) * K + {1} + 8 * o;
          if (w_aligned) vtc_cp_async16(&w_s[{0}][r][8 * o], src, n < N);
          else
            for (int i = 0; i < 4; ++i)
              ((u32*)&w_s[{0}][r][8 * o])[i] = n < N ? (u32)src[2 * i] | ((u32)src[2 * i + 1] << 16) : 0u;
          if (r < mrows) vtc_cp_async16(&x_s[{0}][r][8 * o], xp + (mm < M ? mm : 0) * K + {1} + 8 * o, mm < M);
        }}
        vtc_cp_commit();)",
                     buf, k);
}

// f16/bf16 weights: the activations rounded once (round_kernel), then
// 128 x 128 tiles, K steps of 32 double-buffered by cp.async; warp w
// multiplies weight rows 64 (w % 2) .. + 63 (4 A fragments by ldmatrix.x4)
// with activation rows 64 (w / 2) .. + 63 (8 B fragments by
// ldmatrix.x2): 32 m16n8k16 mma into f32 per 16 values of K.
Kernels float_gemm(const ir::Op& op, const std::string& what, const ir::Dim& m, int64_t N, int64_t K,
                   const MatmulIo& io) {
  const GgmlType wtype = weight_type(op.operands[1].type().elem);
  const bool bf16 = wtype == GgmlType::BF16;
  Kernels out;
  out.push_back(round_kernel(io.x, m, K, bf16, what));
  KernelBuilder kb("gemm_mma", what);
  const std::string xs = kb.scratch(m * (K * 2));
  const std::string w = kb.in(io.w, "w");
  const StoreFn store = io.bind_out(kb);
  kb.need("mma");
  kb.body(fmt::format(R"(  constexpr long long N = {0}, K = {1};
  const long long M = {2};
  // Rows of 32 halves padded to 40: ldmatrix's 8 rows of a matrix fall in
  // 8 different 4-bank groups.
  alignas(16) __shared__ unsigned short w_s[2][128][40];
  alignas(16) __shared__ unsigned short x_s[2][128][40];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int wr = 64 * (warp & 1), wt = 64 * (warp >> 1);
  const long long n0 = blockIdx.x * 128LL;
  const unsigned short* wp = (const unsigned short*){3};
  const unsigned short* xp = (const unsigned short*){4};
  const bool w_aligned = ((unsigned long long)wp & 15) == 0;
{9}    {{
      {5}
    }}
    for (long long k0 = 0; k0 < K; k0 += 32) {{
      const int s = (int)((k0 >> 5) & 1);
      // The next step's tiles stream in while this one's mma run.
      if (k0 + 32 < K) {{
        {6}
      }} else {{
        vtc_cp_commit();
      }}
      vtc_cp_wait<1>();
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < 32 && wt < mrows; kk += 16) {{
        unsigned a[4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i) vtc_ldmatrix_x4(a[i], &w_s[s][wr + 16 * i + (lane & 15)][kk + 8 * (lane >> 4)]);
#pragma unroll
        for (int j = 0; j < 8; ++j) {{
          if (wt + 8 * j >= mrows) break;
          unsigned b[2];
          vtc_ldmatrix_x2(b, &x_s[s][wt + 8 * j + (lane & 7)][kk + 8 * ((lane >> 3) & 1)]);
#pragma unroll
          for (int i = 0; i < 4; ++i) {7}(acc[i][j], a[i], b);
        }}
      }}
      __syncthreads();
    }}
{8})",
                      N, K, kb.expr(m), w, xs, stage_float_tiles("0", "0"), stage_float_tiles("s ^ 1", "k0 + 32"),
                      bf16 ? "vtc_mma_bf16" : "vtc_mma_f16", tile_close(store("acc[i][j][q]", "mm", "nn")), kTileOpen));
  kb.launch(ir::Dim(((N + 127) / 128) * 128), 128, m, 128);
  Kernel k = kb.finish();
  k.reads_codes_of = io.x.data();
  k.fp32_flops = ir::Dim(0);  // the products run as mma (counted); the rounding is round_kernel's
  out.push_back(std::move(k));
  return out;
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
