// Quantized matmul and embedding lookup.
//
// matmul(W, x) -> y, W [rows][cols] in a ggml type, x [n_tokens][cols] f32:
//   1. Convert each activation row once to the weight type's activation type
//      (ggml's vec_dot_type: q8_0, q8_1, q8_K, f16, bf16 or f32), in
//      parallel over tokens when there are several.
//   2. Split the output into tiles of kRowTile weight rows x kTokTile tokens,
//      numbered row-tile-major, and hand contiguous ranges of tiles (the
//      pool's chunks) to its workers. A chunk therefore covers a band of
//      weight rows and walks every token tile for it: each weight row is read
//      from memory once per matmul and reused from cache for all tokens.
//      Matmuls that share their input (matmul_shared_input, matmul_groups)
//      convert it once and put all their tiles in one such range; a
//      group's outputs (gate and up) share each item, whose epilogue
//      (silu*mul, rope) runs right after it on the values still in cache,
//      and a prologue (rms_norm) makes each input row just before its
//      conversion.
//   3. With several tokens, a tile kernel (gemm_avx2.cpp) computes
//      tiles.rows weight rows x up to tiles.toks tokens at once, decoding
//      each weight block once for all of them; the rows left over, and
//      single tokens, go through the type's dot kernel. Tiles are
//      bit-identical to dot, so an output's value does not depend on the
//      thread count, the tiling or the batch.
//   4. Weights in the interleaved-8 layout (weight-layout pass) go through
//      the x8 kernels instead (packed_x8*.cpp): groups of 8 rows against
//      4-aligned groups of up to 4 tokens; the Q4_0 ones also read each
//      q8_0 block's sum of quants, computed with the conversion.
// Types without a native dot kernel dequantize one weight row at a time into
// a thread-local buffer and use an f32 dot; no whole-weight dequantization.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "frontends/gguf/dequant.h"
#include "runtime/cpu/kernels/internal.h"
#include "runtime/cpu/kernels/kernels.h"
#include "support/error.h"

namespace vtc::cpu {

using detail::ActType;

static_assert(detail::kSlotF32 == static_cast<int>(GgmlType::F32) && detail::kSlotF16 == static_cast<int>(GgmlType::F16) &&
              detail::kSlotQ4_0 == static_cast<int>(GgmlType::Q4_0) && detail::kSlotQ4_1 == static_cast<int>(GgmlType::Q4_1) &&
              detail::kSlotQ5_0 == static_cast<int>(GgmlType::Q5_0) && detail::kSlotQ5_1 == static_cast<int>(GgmlType::Q5_1) &&
              detail::kSlotQ8_0 == static_cast<int>(GgmlType::Q8_0) && detail::kSlotQ2_K == static_cast<int>(GgmlType::Q2_K) &&
              detail::kSlotQ3_K == static_cast<int>(GgmlType::Q3_K) && detail::kSlotQ4_K == static_cast<int>(GgmlType::Q4_K) &&
              detail::kSlotQ5_K == static_cast<int>(GgmlType::Q5_K) && detail::kSlotQ6_K == static_cast<int>(GgmlType::Q6_K) &&
              detail::kSlotIQ4_NL == static_cast<int>(GgmlType::IQ4_NL) &&
              detail::kSlotMXFP4 == static_cast<int>(GgmlType::MXFP4) &&
              detail::kSlotIQ4_XS == static_cast<int>(GgmlType::IQ4_XS) && detail::kSlotBF16 == static_cast<int>(GgmlType::BF16),
              "TypeSlot values must match GgmlType");

namespace {

constexpr int64_t kRowTile = 16;  // a multiple of 8: whole groups of interleaved rows
constexpr int64_t kTokTile = 16;
static_assert(kRowTile % 8 == 0);

struct ActInfo {
  ActType act;
  GgmlType type;
};

// ggml's vec_dot_type per weight type (ggml-cpu.c, type_traits_cpu).
bool native_act(GgmlType w, ActInfo& out) {
  switch (w) {
    case GgmlType::F32: out = {ActType::F32, GgmlType::F32}; return true;
    case GgmlType::F16: out = {ActType::F16, GgmlType::F16}; return true;
    case GgmlType::BF16: out = {ActType::BF16, GgmlType::BF16}; return true;
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0:
    case GgmlType::IQ4_NL:
    case GgmlType::MXFP4: out = {ActType::Q8_0, GgmlType::Q8_0}; return true;
    case GgmlType::Q4_1:
    case GgmlType::Q5_1: out = {ActType::Q8_1, GgmlType::Q8_1}; return true;
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::IQ4_XS: out = {ActType::Q8_K, GgmlType::Q8_K}; return true;
    default: return false;
  }
}

// True if the environment variable `name` is "0" (a kernel path turned off).
bool env_zero(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::string(v) == "0";
}

// VTC_CPU_GEMM=0 turns the multi-token tiles off (benchmarks, tests: the
// results are the same bits either way).
bool tiles_disabled() {
  static const bool off = env_zero("VTC_CPU_GEMM");
  return off;
}

// VTC_CPU_X16=0: x8 weights one 8-row group per call even where the level
// has 16-row kernels (same bits; for comparisons).
bool x16_disabled() {
  static const bool off = env_zero("VTC_CPU_X16");
  return off;
}

int64_t row_bytes(GgmlType t, int64_t cols) {
  const auto& tr = ggml_traits(t);
  return cols / tr.block_size * tr.block_bytes;
}

void check_cols(GgmlType t, int64_t cols, const char* what) {
  const auto& tr = ggml_traits(t);
  if (cols < 0 || cols % tr.block_size != 0)
    throw Error(fmt::format("{}: {} columns is not a whole number of {}-value {} blocks", what, cols, tr.block_size,
                            tr.name));
}

}  // namespace

bool matmul_native(GgmlType wtype) {
  ActInfo a{};
  return native_act(wtype, a);
}

bool matmul_supported(GgmlType wtype) { return matmul_native(wtype) || can_dequantize(wtype); }

GgmlType matmul_activation_type(GgmlType wtype) {
  ActInfo a{};
  return native_act(wtype, a) ? a.type : GgmlType::F32;
}

namespace {

void check_matmul_args(GgmlType wtype, WeightLayout layout, int64_t rows, int64_t cols, int64_t n_tokens) {
  if (find_ggml_type(static_cast<uint32_t>(wtype)) == nullptr)
    throw Error(fmt::format("matmul: unknown weight type {}", static_cast<uint32_t>(wtype)));
  if (!matmul_supported(wtype)) throw Error(fmt::format("matmul: weight type {} is not supported", ggml_type_name(wtype)));
  if (!matmul_layout_supported(wtype, layout, rows))
    throw Error(fmt::format("matmul: a {}-row {} weight cannot be read in the {} layout", rows, ggml_type_name(wtype),
                            weight_layout_name(layout)));
  check_cols(wtype, cols, "matmul");
  if (rows < 0 || n_tokens < 0) throw Error("matmul: negative shape");
}

// Row-dequantizing fallback: f32 dot on one dequantized row at a time.
void matmul_dequantizing(GgmlType wtype, const uint8_t* wb, int64_t rows, int64_t cols, const float* x,
                         int64_t n_tokens, float* y, ThreadPool& pool) {
  const int64_t w_row = row_bytes(wtype, cols);
  const int64_t n_row_tiles = (rows + kRowTile - 1) / kRowTile;
  const int64_t n_tok_tiles = (n_tokens + kTokTile - 1) / kTokTile;
  const auto& fk = detail::active_float_kernels();
  pool.parallel_for(n_row_tiles * n_tok_tiles, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> buf;
    buf.resize(static_cast<size_t>(cols));
    int64_t last_row = -1;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t r0 = item / n_tok_tiles * kRowTile, t0 = item % n_tok_tiles * kTokTile;
      for (int64_t r = r0; r < std::min(rows, r0 + kRowTile); ++r) {
        if (r != last_row) dequantize_row(wtype, wb + r * w_row, buf.data(), cols);
        last_row = r;
        for (int64_t t = t0; t < std::min(n_tokens, t0 + kTokTile); ++t)
          y[t * rows + r] = fk.dot_f32(buf.data(), x + t * cols, cols);
      }
    }
  });
}

// Activations converted to one activation type: n_tokens rows of
// row_bytes; with `wide`, also those values widened back to f32 (f16 and
// bf16 only: the rows the F16/BF16 tiles read, GemmKernels::widened_x).
// With `sums`, also the sum of each q8_0 block's quants, [n_tokens][cols/32]
// (the Q4_0 x8 kernels subtract 8 times it: PackedFn).
struct Activations {
  const uint8_t* data;
  int64_t row_bytes;
  const float* wide;
  const int32_t* block_sums;
};

// Runs a row function on every token: in parallel when there are several.
void run_rows(RowFn f, int64_t n_tokens, ThreadPool& pool) {
  if (n_tokens >= 4) pool.parallel_for(n_tokens, [&](int64_t begin, int64_t end) { f.fn(f.context, begin, end); });
  else f.fn(f.context, 0, n_tokens);
}

void q8_0_block_sums(const uint8_t* xb, int64_t x_row, int64_t cols, int64_t t, int32_t* sums) {
  const auto* blocks = reinterpret_cast<const detail::BlockQ8_0*>(xb + t * x_row);
  for (int64_t b = 0; b < cols / 32; ++b) {
    int32_t s = 0;
    for (int i = 0; i < 32; ++i) s += blocks[b].qs[i];
    sums[t * (cols / 32) + b] = s;
  }
}

// Converts x once, into buffers owned by the calling thread (valid until
// its next matmul), in parallel over tokens when there are several.
// A prologue (matmul_groups) first produces each range of rows of x.
Activations convert_activations(const ActInfo& act, const float* x, int64_t cols, int64_t n_tokens, bool widen,
                                bool sums, ThreadPool& pool, RowFn prologue = {}) {
  check_cols(act.type, cols, "matmul activations");
  if (act.act == ActType::F32) {
    if (prologue.fn != nullptr) run_rows(prologue, n_tokens, pool);
    return {reinterpret_cast<const uint8_t*>(x), cols * 4, x, nullptr};
  }
  widen = widen && (act.act == ActType::F16 || act.act == ActType::BF16);
  const int64_t x_row = row_bytes(act.type, cols);
  const detail::QuantizeFn quantize = detail::active_quant_kernels().quantize[static_cast<int>(act.act)];
  thread_local std::vector<uint8_t> xbuf;
  thread_local std::vector<float> wide;
  thread_local std::vector<int32_t> block_sums;
  sums = sums && act.act == ActType::Q8_0;
  xbuf.resize(static_cast<size_t>(x_row * n_tokens));
  if (widen) wide.resize(static_cast<size_t>(cols * n_tokens));
  if (sums) block_sums.resize(static_cast<size_t>(cols / 32 * n_tokens));
  uint8_t* xb = xbuf.data();
  float* xw = wide.data();
  int32_t* bs = block_sums.data();
  auto convert = [&](int64_t begin, int64_t end) {
    if (prologue.fn != nullptr) prologue.fn(prologue.context, begin, end);
    for (int64_t t = begin; t < end; ++t) {
      quantize(x + t * cols, xb + t * x_row, cols);
      if (widen) dequantize_row(act.type, xb + t * x_row, xw + t * cols, cols);
      if (sums) q8_0_block_sums(xb, x_row, cols, t, bs);
    }
  };
  if (n_tokens >= 4) pool.parallel_for(n_tokens, convert);
  else convert(0, n_tokens);
  return {xb, x_row, widen ? xw : nullptr, sums ? bs : nullptr};
}

// One weight's native matmul against converted activations, computed a box
// of rows x tokens at a time (GroupItems cuts the boxes).
struct NativeMatmul {
  const uint8_t* w;
  int64_t rows, cols, w_row, n_tokens;
  detail::DotFn dot;
  const detail::GemmKernels* tiles;     // null: no tiles for this type or batch
  const detail::PackedKernels* packed;  // interleaved-8 weights; null for Rows
  int64_t n_blocks;                     // weight blocks per row
  bool block_sums;                      // the kernel reads Activations::block_sums (Q4_0 x8)
  detail::PackedFn full_group = nullptr;  // x8: the kernel for a full group of kMaxGemmToks tokens

  NativeMatmul(GgmlType wtype, WeightLayout layout, const void* weights, int64_t rows_, int64_t cols_,
               int64_t n_tokens_, TokenOrder order)
      : w(static_cast<const uint8_t*>(weights)), rows(rows_), cols(cols_), w_row(row_bytes(wtype, cols_)),
        n_tokens(n_tokens_),
        n_blocks(cols_ / ggml_traits(wtype).block_size) {
    const detail::QuantKernels& qk = detail::active_quant_kernels();
    dot = qk.dot[static_cast<int>(wtype)];
    const detail::GemmKernels& g = qk.gemm[static_cast<int>(wtype)];
    // A single token too goes through the widened-x tiles (F16, BF16): the
    // dot kernel would widen the same activations again for every row,
    // which costs as much as the multiply-adds (same bits either way); and
    // through the tiles that ask for it (GemmKernels::one_token).
    tiles = g.rows > 0 && (n_tokens >= 2 || g.widened_x || g.one_token) && !tiles_disabled() ? &g : nullptr;
    packed = layout == WeightLayout::Interleaved8 ? &qk.x8[static_cast<int>(wtype)] : nullptr;
    block_sums = packed != nullptr && wtype == GgmlType::Q4_0;
    full_group = packed == nullptr ? nullptr
                 : order == TokenOrder::EachAsOne && packed->fn4_each_token != nullptr
                     ? packed->fn4_each_token
                     : packed->fn[detail::kMaxGemmToks];
  }
  bool wants_widened_x() const { return packed == nullptr && tiles != nullptr && tiles->widened_x; }
  bool wants_block_sums() const { return block_sums; }

  // Interleaved weights: groups of 8 rows (kRowTile is a multiple of 8, and
  // the rows are) against up to packed->toks tokens at a time.
  void run_packed(int64_t r0, int64_t r1, int64_t t0, int64_t t1, const Activations& xa, float* box,
                  int64_t ld) const {
    for (int64_t g = r0; g < r1;) {
      // Two groups at a time where the level has a 16-row kernel (boxes are
      // whole kRowTiles, so an odd group is only the last of the weight).
      const bool pair = g + 16 <= r1 && packed->fn16[packed->toks] != nullptr && !x16_disabled();
      for (int64_t t = t0; t < t1; t += packed->toks) {
        const int nt = static_cast<int>(std::min<int64_t>(packed->toks, t1 - t));
        const int32_t* sums = block_sums ? xa.block_sums + t * n_blocks : nullptr;
        const uint8_t* x = xa.data + t * xa.row_bytes;
        float* y = box + (t - t0) * ld + (g - r0);
        const detail::PackedFn fn = nt == detail::kMaxGemmToks ? full_group : packed->fn[nt];
        if (pair && packed->fn16[nt] != nullptr && fn == packed->fn[nt]) {
          packed->fn16[nt](n_blocks, w + g * w_row, x, xa.row_bytes, sums, n_blocks, y, ld);
        } else {
          fn(n_blocks, w + g * w_row, x, xa.row_bytes, sums, n_blocks, y, ld);
          if (pair) fn(n_blocks, w + (g + 8) * w_row, x, xa.row_bytes, sums, n_blocks, y + 8, ld);
        }
      }
      g += pair ? 16 : 8;
    }
  }

  // Rows [r0, r1) x tokens [t0, t1) (r0 a multiple of kRowTile) into `box`:
  // the value of (token t, row r) goes to box[(t - t0) * ld + (r - r0)].
  void run_box(int64_t r0, int64_t r1, int64_t t0, int64_t t1, const Activations& xa, float* box, int64_t ld) const {
    if (packed != nullptr) return run_packed(r0, r1, t0, t1, xa, box, ld);
    int64_t r = r0;
    if (tiles != nullptr)
      for (; r + tiles->rows <= r1; r += tiles->rows)
        for (int64_t t = t0; t < t1; t += tiles->toks) {
          const int nt = static_cast<int>(std::min<int64_t>(tiles->toks, t1 - t));
          float* out = box + (t - t0) * ld + (r - r0);
          if (tiles->widened_x)
            tiles->fn[nt](cols, w + r * w_row, w_row, xa.wide + t * cols, cols * 4, out, ld);
          else
            tiles->fn[nt](cols, w + r * w_row, w_row, xa.data + t * xa.row_bytes, xa.row_bytes, out, ld);
        }
    // Rows left over by the tiles, and single tokens: one row at a time.
    // (A decode step streams each weight row from DRAM once; one row at a
    // time is a single sequential stream, which the hardware prefetchers
    // follow best: reading 4 short rows side by side reached only ~60% of
    // its bandwidth for Q8_0 and Q6_K.)
    for (int64_t t = t0; t < t1; ++t) {
      const uint8_t* xr = xa.data + t * xa.row_bytes;
      float* yt = box + (t - t0) * ld;
      for (int64_t rr = r; rr < r1; ++rr) yt[rr - r0] = dot(cols, w + rr * w_row, xr);
    }
  }
};

}  // namespace

void matmul(GgmlType wtype, const void* w, int64_t rows, int64_t cols, const float* x, int64_t n_tokens, float* y,
            ThreadPool& pool, WeightLayout layout, TokenOrder order) {
  check_matmul_args(wtype, layout, rows, cols, n_tokens);
  if (rows == 0 || n_tokens == 0) return;
  ActInfo act{};
  if (!native_act(wtype, act)) {
    matmul_dequantizing(wtype, static_cast<const uint8_t*>(w), rows, cols, x, n_tokens, y, pool);
    return;
  }
  const MatmulOutput out{wtype, w, rows, y, layout};
  const MatmulGroup group{&out, 1, 0, {}};
  matmul_groups(&group, 1, cols, x, n_tokens, pool, {}, order);
}

void matmul_shared_input(const MatmulOutput* outputs, size_t n_outputs, int64_t cols, const float* x,
                         int64_t n_tokens, ThreadPool& pool, TokenOrder order) {
  std::vector<MatmulGroup> groups;
  for (size_t i = 0; i < n_outputs; ++i) groups.push_back({&outputs[i], 1, 0, {}});
  matmul_groups(groups.data(), groups.size(), cols, x, n_tokens, pool, {}, order);
}

namespace {

// One group of matmul_groups, cut into items of item_rows rows x kTokTile
// tokens (row-band-major, so a band's weight rows stay in cache across its
// token tiles).
struct GroupItems {
  const MatmulGroup* group;
  std::vector<NativeMatmul> parts;  // one per output
  int64_t item_rows, rows, n_tokens, n_tok_tiles;

  int64_t n_items() const { return (rows + item_rows - 1) / item_rows * n_tok_tiles; }
  void run_item(int64_t item, const Activations& xa) const {
    const int64_t r0 = item / n_tok_tiles * item_rows, t0 = item % n_tok_tiles * kTokTile;
    const int64_t r1 = std::min(rows, r0 + item_rows), t1 = std::min(n_tokens, t0 + kTokTile);
    TileBox box{r0, r1, t0, t1, {}, group->in_scratch ? item_rows : rows};
    thread_local std::vector<float> scratch;
    if (group->in_scratch) scratch.resize(parts.size() * static_cast<size_t>(item_rows * kTokTile));
    for (size_t i = 0; i < parts.size(); ++i) {
      float* out = group->in_scratch ? scratch.data() + i * static_cast<size_t>(item_rows * kTokTile)
                                     : group->outputs[i].y + t0 * rows + r0;
      parts[i].run_box(r0, r1, t0, t1, xa, out, box.ld);
      box.out[i] = out;
    }
    if (group->epilogue.fn != nullptr) group->epilogue.fn(group->epilogue.context, box);
  }
};

// True when every output of every group has a native path with one
// activation type (then x is converted once for all); `act` gets it.
bool one_activation_type(const MatmulGroup* groups, size_t n_groups, int64_t cols, int64_t n_tokens, ActInfo& act) {
  bool shared = n_tokens > 0;
  bool first = true;
  for (size_t g = 0; g < n_groups; ++g) {
    if (groups[g].n_outputs == 0 || groups[g].n_outputs > kMaxGroupOutputs)
      throw Error(fmt::format("matmul_groups: a group has {} outputs (1 to {})", groups[g].n_outputs, kMaxGroupOutputs));
    if (groups[g].item_rows % kRowTile != 0 || groups[g].item_rows < 0)
      throw Error(fmt::format("matmul_groups: item_rows {} is not a multiple of {}", groups[g].item_rows, kRowTile));
    for (size_t i = 0; i < groups[g].n_outputs; ++i) {
      const MatmulOutput& o = groups[g].outputs[i];
      check_matmul_args(o.wtype, o.layout, o.rows, cols, n_tokens);
      if (o.rows != groups[g].outputs[0].rows)
        throw Error(fmt::format("matmul_groups: a group mixes {} and {} rows", groups[g].outputs[0].rows, o.rows));
      ActInfo a{};
      shared = shared && o.rows > 0 && native_act(o.wtype, a) && (first || a.act == act.act);
      if (first) act = a;
      first = false;
    }
  }
  return shared && !first;
}

// Without one activation type: the steps one after the other, the
// epilogue on one box of the whole output (in scratch: a buffer of it).
void matmul_groups_in_sequence(const MatmulGroup* groups, size_t n_groups, int64_t cols, const float* x,
                               int64_t n_tokens, ThreadPool& pool, RowFn prologue, TokenOrder order) {
  if (prologue.fn != nullptr && n_tokens > 0) run_rows(prologue, n_tokens, pool);
  for (size_t g = 0; g < n_groups; ++g) {
    const MatmulGroup& group = groups[g];
    const int64_t rows = group.outputs[0].rows;
    TileBox box{0, rows, 0, n_tokens, {}, rows};
    std::vector<std::vector<float>> whole(group.in_scratch ? group.n_outputs : 0);
    for (size_t i = 0; i < group.n_outputs; ++i) {
      const MatmulOutput& o = group.outputs[i];
      float* y = o.y;
      if (group.in_scratch) {
        whole[i].resize(static_cast<size_t>(rows * n_tokens));
        y = whole[i].data();
      }
      matmul(o.wtype, o.w, o.rows, cols, x, n_tokens, y, pool, o.layout, order);
      box.out[i] = y;
    }
    if (group.epilogue.fn != nullptr && rows > 0 && n_tokens > 0) group.epilogue.fn(group.epilogue.context, box);
  }
}

}  // namespace

void matmul_groups(const MatmulGroup* groups, size_t n_groups, int64_t cols, const float* x, int64_t n_tokens,
                   ThreadPool& pool, RowFn prologue, TokenOrder order) {
  ActInfo act{};
  if (!one_activation_type(groups, n_groups, cols, n_tokens, act))
    return matmul_groups_in_sequence(groups, n_groups, cols, x, n_tokens, pool, prologue, order);
  std::vector<GroupItems> all;
  std::vector<int64_t> item_end;  // running total of items after each group
  bool widen = false, sums = false;
  const int64_t n_tok_tiles = (n_tokens + kTokTile - 1) / kTokTile;
  for (size_t g = 0; g < n_groups; ++g) {
    const MatmulGroup& group = groups[g];
    GroupItems items{&group, {}, group.item_rows > 0 ? group.item_rows : kRowTile, group.outputs[0].rows, n_tokens,
                     n_tok_tiles};
    for (size_t i = 0; i < group.n_outputs; ++i) {
      const MatmulOutput& o = group.outputs[i];
      items.parts.emplace_back(o.wtype, o.layout, o.w, o.rows, cols, n_tokens, order);
      widen = widen || items.parts.back().wants_widened_x();
      sums = sums || items.parts.back().wants_block_sums();
    }
    item_end.push_back((item_end.empty() ? 0 : item_end.back()) + items.n_items());
    all.push_back(std::move(items));
  }
  const Activations xa = convert_activations(act, x, cols, n_tokens, widen, sums, pool, prologue);
  pool.parallel_for(item_end.back(), [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const size_t g = static_cast<size_t>(std::upper_bound(item_end.begin(), item_end.end(), item) - item_end.begin());
      all[g].run_item(item - (g == 0 ? 0 : item_end[g - 1]), xa);
    }
  });
}

void embed_rows(GgmlType type, const void* table, int64_t n_rows, int64_t cols, const int32_t* ids, int64_t n,
                float* out) {
  if (find_ggml_type(static_cast<uint32_t>(type)) == nullptr || !can_dequantize(type))
    throw Error(fmt::format("embed_rows: type {} is not supported", static_cast<uint32_t>(type)));
  check_cols(type, cols, "embed_rows");
  const int64_t stride = row_bytes(type, cols);
  const auto* tb = static_cast<const uint8_t*>(table);
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= n_rows)
      throw Error(fmt::format("embed_rows: id {} at position {} is outside [0, {})", ids[i], i, n_rows));
  }
  for (int64_t i = 0; i < n; ++i) dequantize_row(type, tb + ids[i] * stride, out + i * cols, cols);
}

}  // namespace vtc::cpu
