// The decode GEMV, y[m, n] = sum_k x[m, k] * w[n, k] for the few rows of a
// decode step (M = S or R, no prefill symbol), every weight type.
//
// Algorithm:
//  1. Integer-block weights (q4_0 ... q6_K, iq4_nl, iq4_xs, mxfp4): a
//     quantize kernel first rounds x to the codes the CPU's dot products
//     use (runtime/cpu/kernels/quant_scalar.cpp): q8_1 for the 32-value
//     block types, q8_K for the 256-value super-block ones. Codes [M][K]
//     int8 in windows of 1024 values, each chunk's two 16-byte halves
//     apart (helpers_dot.cpp's code_layout), then one 8-byte scale record
//     per 32 values, in the step's scratch buffer. generate_step drops a
//     quantize whose codes the scratch already holds (q, k and v read one
//     x), so an x is quantized once while the scratch keeps it.
//  2. The GEMV: blocks of NW warps, each warp RPW weight rows. A row is
//     walked in windows of KW values:
//       - integer weights: lane c loads chunk c of the window of every
//         activation row (up to MR = 8) into registers, with 16-byte loads
//         that are consecutive across lanes; then for each of its rows the
//         warp copies the row's window bytes into its shared buffer
//         (consecutive lanes load consecutive 16-byte words from the
//         16-byte boundary at or below the window, so any row alignment
//         coalesces; the ragged last word byte by byte, never past the
//         row), lane c decodes chunk c once (vload32_<type>) and dots it
//         with every activation row (vtc_wdot, __dp4a). Each weight byte
//         is read from DRAM and from shared memory once per 8 activation
//         rows; the activation codes once per window per RPW rows.
//       - float weights (f32/f16/bf16): the block stages the window's
//         activations, rounded as the CPU rounds them, in shared memory;
//         lane l takes values l, l+32, ... (conflict-free reads).
//     Warp sums close each (row, activation row); lane 0 stores through
//     the caller's store (a plain store or a matmul_epilogue chain).
#include <fmt/format.h>

#include <numeric>

#include "codegen/cuda/emit.h"
#include "support/error.h"

namespace vtc::cuda {
namespace {

constexpr int kWarps = 8;     // warps per block
constexpr int kActRows = 8;   // activation rows per pass (one weight load serves them all)

// Rows per warp: a warp's activation chunks serve its RPW rows and a
// block's activation reads (L1, then L2 once a block) its kWarps * RPW
// rows, so more rows per warp cut x's traffic; fewer keep at least about
// one block per SM of a large GPU (128 blocks) on short outputs.
int rows_per_warp(int64_t n) { return n >= 16384 ? 8 : n >= 4096 ? 4 : n >= 2048 ? 2 : 1; }

// The bytes a block takes in the GEMV's window where the decoder reads it
// restaged (0: in place). q3_K's 110-byte blocks are 2-byte aligned in
// place; unaligned, its chunk decode took 11 shared loads (53% of HBM,
// bound by shared memory) where the aligned one takes 5.
int staged_block_bytes(GgmlType t) { return t == GgmlType::Q3_K ? 112 : 0; }

// vload32_<type> -> vload32s_<type>, its form for the restaged window.
std::string staged_load(const std::string& load_fn) { return "vload32s_" + load_fn.substr(8); }

}  // namespace

DotForm dot_form(GgmlType t) {
  switch (t) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16: return {Codes::None, 0, 0};
    case GgmlType::Q4_0: return {Codes::Q8_1, 8, 0};
    case GgmlType::Q5_0: return {Codes::Q8_1, 16, 0};
    case GgmlType::Q4_1: case GgmlType::Q5_1: return {Codes::Q8_1, 0, 1};
    case GgmlType::Q2_K: case GgmlType::Q4_K: case GgmlType::Q5_K: return {Codes::Q8_K, 0, 3};
    case GgmlType::Q3_K: return {Codes::Q8_K, 4, 2};
    case GgmlType::Q6_K: return {Codes::Q8_K, 32, 2};
    case GgmlType::IQ4_XS: return {Codes::Q8_K, 0, 2};
    default: return {Codes::Q8_1, 0, 0};  // q8_0, iq4_nl, mxfp4
  }
}

std::string vload32_helper(GgmlType t) {
  std::string name(ggml_type_name(t));
  for (auto& ch : name) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return "vload32_" + name;
}

// Scratch: codes [M][K] int8, then [M][K/32] 8-byte scale records.
ir::Dim codes_scratch_bytes(const ir::Dim& m, int64_t k) { return m * (k + (k / 32) * 8); }

namespace {

// The rounding of one block of activation values to codes and its scale
// record: q8_1 (ggml's x86 quantize_row_q8_1: d = amax/127, q =
// nearest-even(x * 127/amax), d and s = d * sum(q) rounded to f16) for a
// warp's 32 values, lane l's value `v`; or q8_K (quantize_row_q8_K_ref:
// max = the first x of largest |x|, iscale = -127/max, q = min(127,
// nearest-even(iscale * x)), d = 1/iscale, and the code sums of each 16
// values) for a warp's 256, lane l's v[i] = x[l + 32 i]. The code expects
// `base` (the block's first value, flattened), `wid` (the block's scale
// record) and K, codes, meta, lane in scope.
std::string q8_1_block() {
  return R"(  const float amax = vtc_warp_max(fabsf(v));
  const float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
  const int q = __float2int_rn(__fmul_rn(v, id));
  codes[(base / K) * K + vtc_code_at(base % K + lane, K)] = (signed char)q;
  const float sum = vtc_warp_sum((float)q);
  if (lane == 0) meta[wid] = make_uint2(__float_as_uint(vtc_h2f(vtc_f2h(d))), __float_as_uint(vtc_h2f(vtc_f2h(__fmul_rn(d, sum)))));
)";
}

std::string q8_k_block() {
  return R"(  float amax = 0.0f, mx = 0.0f;
  int at = 0x7fffffff;
  for (int i = 0; i < 8; ++i)
    if (fabsf(v[i]) > amax) { amax = fabsf(v[i]); mx = v[i]; at = lane + 32 * i; }
  for (int o = 16; o > 0; o >>= 1) {
    const float oa = __shfl_xor_sync(0xffffffffu, amax, o), om = __shfl_xor_sync(0xffffffffu, mx, o);
    const int oat = __shfl_xor_sync(0xffffffffu, at, o);
    if (oa > amax || (oa == amax && oat < at)) { amax = oa; mx = om; at = oat; }
  }
  const float iscale = amax != 0.0f ? -127.0f / mx : 0.0f;
  for (int i = 0; i < 8; ++i) {
    const int q = amax != 0.0f ? min(127, __float2int_rn(__fmul_rn(iscale, v[i]))) : 0;
    codes[(base / K) * K + vtc_code_at(base % K + lane + 32 * i, K)] = (signed char)q;
    float s = (float)q;  // the code sum of this lane's 16-value group
    for (int o = 8; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    const int lo = (int)__shfl_sync(0xffffffffu, s, 0), hi = (int)__shfl_sync(0xffffffffu, s, 16);
    if (lane == 0)
      meta[wid * 8 + i] = make_uint2(__float_as_uint(amax != 0.0f ? 1.0f / iscale : 0.0f), ((u32)lo & 0xffffu) | ((u32)hi << 16));
  }
)";
}

// `codes_at`: the codes' first byte (the scratch, or a region of it).
std::string codes_head(int64_t K, const std::string& m, const std::string& codes_at) {
  return fmt::format(R"(  constexpr long long K = {0};
  const long long M = {1};
  signed char* codes = (signed char*)({2});
  uint2* meta = (uint2*)((u8*)codes + M * K);
  const int lane = threadIdx.x & 31;
)",
                     K, m, codes_at);
}

// The quantize kernel's body: the f32 rows at `xp` [M, K] to codes at
// `codes_at`, one warp per block of values.
void quantize_body(KernelBuilder& kb, Codes codes, const std::string& xp, const ir::Dim& m, int64_t K,
                   const std::string& codes_at) {
  kb.need("code_layout");
  const std::string head = codes_head(K, kb.expr(m), codes_at) +
                           "  const long long wid = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;\n";
  if (codes == Codes::Q8_1) {
    kb.body(head + fmt::format("  if (wid >= M * (K / 32)) return;\n  const long long base = wid * 32;\n  const float v = {}[base + lane];\n", xp) +
            q8_1_block());
    kb.launch(m * (K / 32) * 32, 256);
  } else {
    kb.body(head + fmt::format("  if (wid >= M * (K / 256)) return;\n  const long long base = wid * 256;\n  float v[8];\n"
                               "  for (int i = 0; i < 8; ++i) v[i] = {}[base + lane + 32 * i];\n",
                               xp) +
            q8_k_block());
    kb.launch(m * (K / 256) * 32, 256);
  }
}

}  // namespace

// Rounds x [M, K] to the CPU's activation codes, into the scratch: one
// warp per block of values.
Kernel quantize_kernel(Codes codes, const ir::Value& x, const ir::Dim& m, int64_t K, const std::string& what) {
  KernelBuilder kb(codes == Codes::Q8_1 ? "quantize_q8_1" : "quantize_q8_k", what);
  const std::string xp = kb.in(x, "x");
  quantize_body(kb, codes, xp, m, K, kb.scratch(codes_scratch_bytes(m, K)));
  Kernel k = kb.finish();
  k.writes_codes_of = x.data();
  k.fp32_flops = m * K * 4;  // |x|, the max, the scaling, the sum per value
  return k;
}

Kernel quantize_scratch_kernel(Codes codes, const ir::Dim& m, int64_t K, const ScratchRegions& regions,
                               const std::string& what) {
  KernelBuilder kb(codes == Codes::Q8_1 ? "quantize_q8_1" : "quantize_q8_k", what);
  const std::string scratch = kb.scratch(regions.total);
  quantize_body(kb, codes, fmt::format("((const float*)((const u8*){} + ({})))", scratch, kb.expr(regions.from)), m, K,
                fmt::format("(u8*){} + ({})", scratch, kb.expr(regions.to)));
  Kernel k = kb.finish();
  k.fp32_flops = m * K * 4;
  return k;
}

std::string activation_chunk(const DotForm& form, const std::string& indent) {
  // q8_1 codes of a weight with an offset need the halves' code sums; q8_K
  // carries them as bsums.
  std::string sums = "xq.b0 = xq.b1 = 0;";
  if (form.codes == Codes::Q8_K)
    sums = "xq.b0 = vtc_bsum(xm.y, 0), xq.b1 = vtc_bsum(xm.y, 1);";
  else if (form.offset != 0)
    sums = "xq.b0 = vtc_code_sum(xq.q, 0, 4), xq.b1 = vtc_code_sum(xq.q, 4, 8);";
  const std::string lines[] = {
      "{",
      "  const uint4 lo = vtc_load16(xr + 16 * lane), hi = vtc_load16(xr + 16 * (nc + lane));",
      "  xq.q[0] = (int)lo.x, xq.q[1] = (int)lo.y, xq.q[2] = (int)lo.z, xq.q[3] = (int)lo.w;",
      "  xq.q[4] = (int)hi.x, xq.q[5] = (int)hi.y, xq.q[6] = (int)hi.z, xq.q[7] = (int)hi.w;",
      "  const uint2 xm = vtc_load8(xmr + lane);",
      "  xq.d = __uint_as_float(xm.x), xq.s = __uint_as_float(xm.y);",
      "  " + sums,
      "}",
  };
  std::string out;
  for (const auto& l : lines) out += indent + l + "\n";
  return out;
}

// rms_norm then the quantize of its result: NB blocks of 256 per row,
// each with 8 warps rounding one block of values each. Every block of a
// row computes the norm's sum of squares and scale exactly as
// emit_rms_norm (the same double accumulation over the whole row and block
// sum, (x * s) * w), so a row's blocks agree and the row is spread over
// the GPU instead of one SM; the normalized row itself is never stored.
Kernel norm_quantize_kernel(const ir::Op& norm, Codes codes, const ir::Dim& m, int64_t K, const std::string& what) {
  KernelBuilder kb(codes == Codes::Q8_1 ? "rms_norm_q8_1" : "rms_norm_q8_k", what);
  kb.need("code_layout");
  const std::string x = kb.in(norm.operands[0], "x"), g = kb.in(norm.operands[1], "gain");
  const int64_t bv = codes == Codes::Q8_1 ? 32 : 256, nb = (K / bv + 7) / 8;
  const std::string load =
      codes == Codes::Q8_1 ? "const float v = (xr[c0 + lane] * s) * gr[c0 + lane];\n"
                           : "float v[8];\n  for (int i = 0; i < 8; ++i) v[i] = (xr[c0 + lane + 32 * i] * s) * gr[c0 + lane + 32 * i];\n";
  kb.body(codes_head(K, kb.expr(m), kb.scratch(codes_scratch_bytes(m, K))) +
          fmt::format(R"(  constexpr long long NB = {3};
  const long long r = blockIdx.x / NB, b = (blockIdx.x % NB) * 8 + (threadIdx.x >> 5);
  if (r >= M) return;
  const float* xr = {0} + r * K;
  const float* gr = {1};
  double acc = 0.0;
  for (long long c = threadIdx.x; c < K; c += blockDim.x) acc += (double)xr[c] * (double)xr[c];
  acc = vtc_block_sum_d(acc);
  const float mean = (float)(acc / (double)K);
  const float s = 1.0f / sqrtf(mean + {2});
  if (b >= K / {4}) return;
  const long long c0 = b * {4}, base = r * K + c0, wid = r * (K / {4}) + b;
  {5}{6})",
                      x, g, flit(ir::RmsNormAttrs::of(norm).eps), nb, bv, load,
                      codes == Codes::Q8_1 ? q8_1_block() : q8_k_block()));
  kb.launch(m * (nb * 256), 256);
  Kernel k = kb.finish();
  k.writes_codes_of = norm.results[0].data();
  k.fp32_flops = m * K * (2 * nb + 4);  // each block's squares and sum, then the quantize's 4
  return k;
}

namespace {

// The head shared by every part: sizes, each warp's weight buffer (the
// largest window of the parts), the lanes.
std::string gemv_head(int64_t K, int64_t kw, uint64_t window_bytes, const std::string& m) {
  // Each warp's buffer: the window, 15 bytes of realignment and the ragged
  // end, rounded to 16 so every warp's buffer starts 16-byte aligned (a
  // 16-byte shared store must be: 440 + 32 bytes would misalign warp 1);
  // the 32 spare bytes also cover vtc_loadw's realigning load past a
  // chunk's last bytes.
  return fmt::format(R"(  constexpr long long K = {0}, KW = {1};
  constexpr int NW = {2}, MR = {3};
  const long long M = {4};
  alignas(16) __shared__ u8 w_s[NW][{5} + 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
)",
                     K, kw, kWarps, kActRows, m, window_bytes);
}

// Copies row n's window [k0, k0 + kw) of weight `w` into the warp's buffer
// and sets wwin to its first byte there.
std::string stage_row(const std::string& w) {
  return fmt::format(R"(        // The window's bytes, from the 16-byte boundary at or below them.
        const unsigned long long s0 = (unsigned long long)((const u8*){0} + n * ROW_BYTES + (k0 / UV) * UB);
        const unsigned long long a0 = s0 & ~15ull, e = s0 + (unsigned long long)(kw / UV) * UB, a1 = e & ~15ull;
        __syncwarp();
        for (unsigned long long o = 16ull * lane; a0 + o < a1; o += 512) vtc_copy16(&w_s[warp][o], (const u8*)(a0 + o));
        // The ragged end (under 16 bytes) by one lane: byte stores of two
        // lanes into one shared word would race in checked mode's view.
        if (lane == 0)
          for (unsigned long long o = a1 - a0; a0 + o < e; ++o) w_s[warp][o] = *(const u8*)(a0 + o);
        __syncwarp();
        const u8* wwin = &w_s[warp][s0 - a0];
)",
                     w);
}

// The same for a type whose blocks the decoder reads restaged at SB bytes
// a block (16-byte aligned, q3_K's 110 at 112): lane l copies piece l % P
// of block l / P (P = SB / 16 pieces a block) by the two aligned global
// words that cover it; the last piece's bytes past the block are the next
// block's or the row's readable tail (executor.cpp's kWeightTailBytes).
std::string stage_row_restrided(const std::string& w) {
  return fmt::format(R"(        const u8* src = (const u8*){0} + n * ROW_BYTES + (k0 / UV) * UB;
        constexpr int P = SB / 16;
        __syncwarp();
        if (lane < P * (kw / UV)) {{
          u32 t[4];
          vtc_loadw<4, false>(src + UB * (lane / P) + 16 * (lane % P), t);
          const uint4 piece = make_uint4(t[0], t[1], t[2], t[3]);
          vtc_copy16(&w_s[warp][SB * (lane / P) + 16 * (lane % P)], &piece);
        }}
        __syncwarp();
        const u8* wwin = &w_s[warp][0];
)",
                     w);
}

// A pass over up to MR activation rows: the accumulators of each of the
// part's NQ weights, and the window loop (closed by the body).
std::string open_pass() {
  return R"(  for (long long m0 = 0; m0 < M; m0 += MR) {
    const int mr = (int)min((long long)MR, M - m0);
    float acc[NQ][RPW][MR];
    for (int q = 0; q < NQ; ++q)
      for (int j = 0; j < RPW; ++j)
        for (int r = 0; r < MR; ++r) acc[q][j][r] = 0.0f;
    for (long long k0 = 0; k0 < K; k0 += KW) {
      const int kw = (int)min(KW, K - k0);
)";
}

// The warp sums and stores of a pass of activation rows: the value of the
// row, or the pair's combination of its two weights' sums.
std::string close_rows(const GemvPart& part, KernelBuilder& kb, const StoreFn& store) {
  std::string value = "s0";
  if (part.combine) {
    bool gelu = false;
    value = part.combine("s0", "s1", gelu);
    if (gelu) kb.need("gelu");
  }
  return fmt::format(R"(    for (int j = 0; j < RPW; ++j) {{
      const long long n = row0 + j;
      if (n >= N) break;
      for (int r = 0; r < MR; ++r) {{
        if (r >= mr) break;  // warp-uniform
        const float s0 = vtc_warp_sum(acc[0][j][r]);
        const float s1 = NQ > 1 ? vtc_warp_sum(acc[NQ - 1][j][r]) : 0.0f;
        (void)s1;
        if (lane == 0) {{ const float v = {0}; {1} }}
      }}
    }}
)",
                     value, store("v", "(m0 + r)", "n"));
}

// Integer weights: activation chunks in registers, each weight chunk
// decoded once and dotted with every activation row.
std::string integer_body(const DotForm& form, const std::string& load_fn, bool restrided, const std::string& close) {
  // 16-byte words straight from the window where its blocks keep them
  // aligned (q4_K, q5_K rows: 144 and 176 bytes a block, or restaged).
  const std::string decode =
      restrided ? fmt::format("            {}(wwin, lane, wv);\n", staged_load(load_fn))
                : fmt::format("            if (UB % 16 == 0 && ((unsigned long long)wwin & 15) == 0) {0}<true>(wwin, lane, wv);\n"
                              "            else {0}<false>(wwin, lane, wv);\n",
                              load_fn);
  const std::string sums = "          vtc_xq& xq = xv[r];\n"
                           "          const u8* xr = xcodes + (m0 + r) * K + k0;\n"
                           "          const uint2* xmr = xmeta + (m0 + r) * (K / 32) + k0 / 32;\n" +
                           activation_chunk(form, "          ");
  return fmt::format(R"({5}      const int nc = kw / 32;
      // The block's warps take each window together, so the activation
      // codes one warp loads are in L1 for the others.
      __syncthreads();
      vtc_xq xv[MR];
      if (lane < nc)
        for (int r = 0; r < MR; ++r) {{
          if (r >= mr) break;
{0}        }}
      // Every warp's activation loads before any weight stream, so the
      // weight bytes passing through L1 do not evict codes another warp
      // still has to read.
      __syncthreads();
      for (int j = 0; j < RPW; ++j) {{
        const long long n = row0 + j;
        if (n >= N) break;  // warp-uniform
        for (int q = 0; q < NQ; ++q) {{
          const u8* wq = q == 0 ? wp0 : wp1;
{1}          if (lane < nc) {{
            vtc_wq wv;
{2}            for (int r = 0; r < MR; ++r) {{
              if (r >= mr) break;
              acc[q][j][r] += vtc_wdot<{3}, {4}>(wv, xv[r]);
            }}
          }}
        }}
      }}
    }}
{6}  }}
)",
                     sums, restrided ? stage_row_restrided("wq") : stage_row("wq"), decode, form.offset, form.kind,
                     open_pass(), close);
}

// Float weights: the window's activations (rounded as the CPU rounds
// them) staged in shared memory by the block; lane l takes values l, l+32.
std::string float_body(GgmlType wtype, const std::string& close) {
  std::string wv;
  if (wtype == GgmlType::F32) wv = "((const float*)wwin)[i]";
  else if (wtype == GgmlType::F16) wv = "vtc_h2f(((const unsigned short*)wwin)[i])";
  else wv = "vtc_bf2f(((const unsigned short*)wwin)[i])";
  return fmt::format(R"({4}      __syncthreads();
      for (int e = threadIdx.x; e < mr * kw; e += blockDim.x) {{
        const int r = e / kw, i = e % kw;
        const float v = xf[(m0 + r) * K + k0 + i];
        x_s[r][i] = {0};
      }}
      __syncthreads();
      for (int j = 0; j < RPW; ++j) {{
        const long long n = row0 + j;
        if (n >= N) break;  // warp-uniform
        for (int q = 0; q < NQ; ++q) {{
          const u8* wq = q == 0 ? wp0 : wp1;
{1}          for (int r = 0; r < MR; ++r) {{
            if (r >= mr) break;
            for (int i = lane; i < kw; i += 32) acc[q][j][r] += {2} * x_s[r][i];
          }}
        }}
      }}
    }}
{3}  }}
)",
                     round_activation(wtype, "v"), stage_row("wq"), wv, close, open_pass());
}

}  // namespace

bool gemv_parts_mergeable(const std::vector<GgmlType>& types) {
  if (types.empty()) return false;
  const Codes codes = dot_form(types[0]).codes;
  for (GgmlType t : types)
    if (!quant_supported(t) || dot_form(t).codes != codes) return false;
  return true;
}

Kernels emit_gemv_parts(const std::vector<GemvPart>& parts, const ir::Value& x, const std::string& what,
                        const ir::Dim& m, int64_t K) {
  std::vector<GgmlType> types;
  for (const GemvPart& p : parts) types.push_back(weight_type(p.w.type().elem));
  if (!gemv_parts_mergeable(types))
    throw Error(fmt::format("cuda: {}: the GEMV parts' weight types take different activation codes", what));
  const Codes codes = dot_form(types[0]).codes;
  // Window: 1024 values (one 32-value chunk per lane) for integer blocks,
  // 512 for float weights (their f32 activation staging is 4x larger).
  const int64_t kw_max = codes == Codes::None ? 512 : 1024;
  uint64_t window_bytes = 0;
  for (GgmlType t : types) {
    const GgmlTypeTraits& tr = ggml_traits(t);
    if (K % 32 != 0 || K % tr.block_size != 0) throw Error(fmt::format("cuda: {}: K = {} is not whole blocks", what, K));
    const uint64_t block_bytes = staged_block_bytes(t) ? staged_block_bytes(t) : tr.block_bytes;
    window_bytes = std::max(window_bytes, (uint64_t(kw_max / tr.block_size) * block_bytes + 15) / 16 * 16);
  }
  Kernels out;
  if (codes != Codes::None) out.push_back(quantize_kernel(codes, x, m, K, what));

  KernelBuilder kb("gemv", what);
  std::string body = gemv_head(K, kw_max, window_bytes, kb.expr(m));
  if (codes != Codes::None) {
    const std::string xsrc = kb.scratch(codes_scratch_bytes(m, K));
    body += fmt::format("  const u8* xcodes = (const u8*){0};\n  const uint2* xmeta = (const uint2*)((const u8*){0} + M * K);\n", xsrc);
  } else {
    body += fmt::format("  __shared__ float x_s[MR][KW];\n  const float* xf = {};\n", kb.in(x, "x"));
  }
  kb.need("copy16");
  // Each part's blocks follow the previous part's: blockIdx.x picks the part.
  int64_t first_block = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const GemvPart& part = parts[i];
    const GgmlType wtype = types[i];
    const GgmlTypeTraits& tr = ggml_traits(wtype);
    const int rpw = rows_per_warp(part.n);
    const int64_t blocks = (part.n + int64_t(kWarps) * rpw - 1) / (int64_t(kWarps) * rpw);
    const std::string w0 = kb.in(part.w, fmt::format("w{}", i));
    const std::string w1 = part.w_pair ? kb.in(*part.w_pair, fmt::format("w{}u", i)) : w0;
    const StoreFn store = part.bind_out(kb);
    std::string part_body;
    if (codes != Codes::None) {
      const std::string load_fn = vload32_helper(wtype);
      kb.need(load_fn);
      part_body = integer_body(dot_form(wtype), load_fn, staged_block_bytes(wtype) != 0, close_rows(part, kb, store));
    } else {
      part_body = float_body(wtype, close_rows(part, kb, store));
    }
    body += fmt::format(R"(  {0}if (blockIdx.x < {1}) {{
  constexpr long long N = {2}, ROW_BYTES = {3}, UV = {4}, UB = {5}{12};
  constexpr int RPW = {6}, NQ = {7};
  const long long row0 = ((blockIdx.x - {8}) * (long long)NW + warp) * RPW;
  const u8* wp0 = (const u8*){9};
  const u8* wp1 = (const u8*){10};
  (void)wp1;
{11}  }}
)",
                        i == 0 ? "" : "else ", first_block + blocks, part.n, *ggml_bytes_for(wtype, uint64_t(K)),
                        tr.block_size, tr.block_bytes, rpw, part.w_pair ? 2 : 1, first_block, w0, w1, part_body,
                        staged_block_bytes(wtype) ? fmt::format(", SB = {}", staged_block_bytes(wtype)) : "");
    first_block += blocks;
  }
  kb.body(body);
  kb.launch(ir::Dim(first_block * kWarps * 32), kWarps * 32);
  Kernel k = kb.finish();
  int64_t rows = 0;
  for (const GemvPart& p : parts) rows += p.n * (p.w_pair ? 2 : 1);
  if (codes != Codes::None) {
    k.reads_codes_of = x.data();
    // The integer products run as __dp4a (counted); the float work is the
    // per-chunk scaling: about 4 flops per (row, activation row, chunk).
    k.fp32_flops = m * rows * (K / 32) * 4;
  } else {
    k.fp32_flops = m * rows * K * 2;  // every part's multiply-adds, not only the first op's
  }
  out.push_back(std::move(k));
  return out;
}

Kernels emit_gemv(const ir::Op&, const std::string& what, const ir::Dim& m, int64_t N, int64_t, const MatmulIo& io) {
  const int64_t K = *io.w.type().shape[1].constant();
  return emit_gemv_parts({{io.w, std::nullopt, N, io.bind_out, nullptr}}, io.x, what, m, K);
}

}  // namespace vtc::cuda
