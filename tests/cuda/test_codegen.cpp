// CUDA codegen without a GPU: every kernel the generator emits compiles
// through NVRTC to PTX, for every op case (op_cases.vtcir) on sm_80 and
// sm_90, and for the decode and prefill graphs of the tiny llama, qwen2 and
// qwen3 models lowered with the CUDA pipeline. A failure names the kernel
// and quotes the generated line. Also: compile errors point at source
// lines, the disk cache hits on the second compile and misses on another
// arch, equal layers share kernels, unsupported ops are named. The QSA
// indexer (indexer_cases.vtcir) and attention with a selection likewise.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "codegen/cuda/emit.h"
#include "codegen/cuda/model_kernels.h"
#include "codegen/cuda/nvrtc.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "samples/synthetic_model.h"
#include "support/error.h"

namespace {

using vtc::cuda::CodeKind;
using vtc::cuda::Nvrtc;

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A private cache folder per test run, so "compiled" really compiles.
struct ScopedCache {
  std::filesystem::path dir;
  explicit ScopedCache(const std::string& name) {
    dir = std::filesystem::temp_directory_path() / fmt::format("vtc-kcache-{}-{}", name, ::getpid());
    std::filesystem::remove_all(dir);
    setenv("VTC_KERNEL_CACHE", dir.c_str(), 1);
  }
  ~ScopedCache() {
    std::filesystem::remove_all(dir);
    unsetenv("VTC_KERNEL_CACHE");
  }
};

Nvrtc& nvrtc() {
  static std::unique_ptr<Nvrtc> n = [] {
    std::string why;
    auto p = Nvrtc::load(&why);
    if (!p) FAIL("NVRTC: " << why);
    return p;
  }();
  return *n;
}

// Compiles every distinct kernel; returns how many.
size_t compile_all(const vtc::cuda::ModelKernels& mk, int arch) {
  size_t n = 0;
  for (const auto& s : mk.steps)
    for (const auto* k : s.unique()) {
      INFO("kernel " << k->entry << ": " << k->what);
      auto c = nvrtc().compile(*k, arch, CodeKind::Ptx);
      CHECK(c.image.find(".entry " + k->entry) != std::string::npos);
      ++n;
    }
  return n;
}

std::string tiny_model(const std::string& arch) {
  const auto dir = std::filesystem::path(VTC_TEST_DATA_DIR) / "cuda";
  std::filesystem::create_directories(dir);
  const auto path = (dir / (arch + "-tiny.gguf")).string();
  if (!std::filesystem::exists(path)) {
    vtc::synth::Options o;
    o.arch = arch;
    o.size = "tiny";
    o.vocab_path = vtc::synth::find_default_vocab(arch);
    vtc::synth::write_model(o, path + ".partial");
    std::filesystem::rename(path + ".partial", path);
  }
  return path;
}

// Generates every case of an op-case file and compiles its kernels for
// sm_80 and sm_90; returns how many compiles ran. `min_cases` guards against
// a file that silently lost its cases.
size_t compile_case_file(const std::string& path, size_t min_cases) {
  const auto cases = vtc::ir::split_source_cases(read(path));
  REQUIRE(cases.size() >= min_cases);
  size_t kernels = 0;
  for (const auto& c : cases) {
    INFO("op case at " << path << ":" << c.first_line);
    vtc::ir::Module m = vtc::ir::parse(c.text, {c.first_line});
    vtc::ir::verify(m);
    auto mk = vtc::cuda::generate_model(std::move(m));
    size_t launches = 0;
    for (const auto& s : mk.steps) launches += s.kernels.size();
    CHECK(launches > 0);
    for (int arch : {80, 90}) kernels += compile_all(mk, arch);
  }
  return kernels;
}

}  // namespace

TEST_CASE("every op case generates kernels that compile to PTX for sm_80 and sm_90", "[nvrtc]") {
  ScopedCache cache("ops");
  CHECK(compile_case_file(VTC_CUDA_OP_CASES, 40) >= 2 * 85);
}

// l2_norm, causal_conv1d (K = 4, dilation 1 and 3), delta_rule (Dk = Dv =
// 64 and 128, H = 4; Dk = 48, Dv = 32; a per-key gate, Dk = 40) and rope
// multi/imulti.
TEST_CASE("linear-attention and multi-section rope cases compile to PTX for sm_80 and sm_90", "[nvrtc]") {
  ScopedCache cache("linear");
  CHECK(compile_case_file(VTC_CUDA_LINEAR_CASES, 8) >= 2 * 21);
}

// indexer_select feeding attention's selection operand: f16 and f32 side
// caches, rope neox/imulti/multi/normal, ratios 1..4, head dims 48..128.
TEST_CASE("QSA indexer and attention-with-selection cases compile to PTX for sm_80 and sm_90", "[nvrtc]") {
  ScopedCache cache("indexer");
  CHECK(compile_case_file(VTC_CUDA_INDEXER_CASES, 4) >= 2 * 4 * 11);
}

// [reference]: the generator copies a real vocabulary from the reference.
TEST_CASE("decode and prefill graphs of the tiny models compile to PTX", "[nvrtc][reference]") {
  ScopedCache cache("models");
  for (const std::string arch : {"llama", "qwen2", "qwen3"}) {
    INFO("model " << arch);
    auto mk = vtc::cuda::generate_model_file(tiny_model(arch));
    REQUIRE(mk.steps.size() == 2);
    for (const auto& s : mk.steps) {
      INFO("step @" << s.function);
      CHECK(s.kernels.size() > 10);
      // Two layers of equal shapes: the second layer reuses the first's kernels.
      CHECK(s.unique().size() < s.kernels.size());
    }
    CHECK(compile_all(mk, 90) > 10);
  }
}

TEST_CASE("the Gated DeltaNet hybrid qwen35 compiles to PTX, both steps", "[nvrtc][reference]") {
  ScopedCache cache("hybrid");
  auto mk = vtc::cuda::generate_model_file(tiny_model("qwen35"));
  REQUIRE(mk.steps.size() == 2);
  // @prefill's buckets of few and of many rows (kernel.h, RowsGuard) each
  // launch one delta rule per layer, as @decode does.
  for (const auto& s : mk.steps)
    for (const int64_t t_rows : {int64_t(1), vtc::cuda::kDecodeFormRows + 1}) {
      INFO("step @" << s.function << ", T = " << t_rows);
      size_t conv = 0, delta = 0;
      for (const auto& k : s.kernels) {
        if (!vtc::cuda::launches_in(k, t_rows)) continue;
        conv += k.what.find("causal_conv1d") != std::string::npos;
        delta += k.what.find("delta_rule") != std::string::npos;
      }
      CHECK(conv >= 1);
      CHECK(delta == 1);
    }
  CHECK(compile_all(mk, 90) > 10);
}

TEST_CASE("a compile error names the kernel and shows the generated line", "[nvrtc]") {
  ScopedCache cache("error");
  vtc::cuda::Kernel k;
  k.entry = "broken_0000";
  k.what = "a deliberately broken kernel";
  k.source = "extern \"C\" __global__ void broken_0000(float* y) {\n  y[0] = 1.0f;\n  y[1] = undefined_name;\n}\n";
  try {
    nvrtc().compile(k, 90, CodeKind::Ptx);
    FAIL("the broken kernel compiled");
  } catch (const vtc::Error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("broken_0000") != std::string::npos);
    CHECK(msg.find("a deliberately broken kernel") != std::string::npos);
    CHECK(msg.find(">    3:   y[1] = undefined_name;") != std::string::npos);
  }
}

// The tensor cores' inline PTX (mma.sync, ldmatrix, cp.async;
// codegen/cuda/helpers_mma.cpp) reaches ptxas only when a kernel is
// assembled: every prefill GEMM kind compiles to a CUBIN for sm_80 and
// sm_90, so a wrong operand count or constraint fails here, not on a GPU.
TEST_CASE("the tensor-core GEMM kernels assemble to CUBIN for sm_80 and sm_90", "[nvrtc]") {
  for (const char* w : {"f16", "bf16", "q4_0", "q4_k", "q6_k", "q8_0"}) {
    INFO("weight type " << w);
    const std::string text = fmt::format(
        "func @prefill(%x: tensor<T x 512 x f32, device>, %w: tensor<40 x 512 x {}, device>) {{\n"
        "  %y = matmul(%x, %w) : tensor<T x 40 x f32, device>\n  return(%y)\n}}\n",
        w);
    auto mk = vtc::cuda::generate_model(vtc::ir::parse(text));
    size_t mma = 0;
    for (const auto& s : mk.steps)
      for (const auto* k : s.unique()) {
        if (k->entry.rfind("gemm_mma_", 0) != 0) continue;
        ++mma;
        for (int arch : {80, 90}) CHECK(!nvrtc().compile(*k, arch, CodeKind::Cubin).image.empty());
      }
    CHECK(mma == 1);
  }
}

TEST_CASE("the kernel cache hits on the same source and arch only", "[nvrtc]") {
  ScopedCache cache("hits");
  vtc::cuda::Kernel k;
  k.entry = "cache_probe";
  k.source = "extern \"C\" __global__ void cache_probe(float* y) { y[threadIdx.x] = 2.0f; }\n";
  auto first = nvrtc().compile(k, 90, CodeKind::Ptx);
  CHECK_FALSE(first.from_cache);
  auto second = nvrtc().compile(k, 90, CodeKind::Ptx);
  CHECK(second.from_cache);
  CHECK(second.image == first.image);
  CHECK_FALSE(nvrtc().compile(k, 80, CodeKind::Ptx).from_cache);
  k.source += "// changed\n";
  CHECK_FALSE(nvrtc().compile(k, 90, CodeKind::Ptx).from_cache);
  size_t files = 0;
  for (auto& e : std::filesystem::directory_iterator(cache.dir)) files += e.path().extension() == ".ptx";
  CHECK(files == 3);
}

TEST_CASE("kernel cache folder: VTC_KERNEL_CACHE, then XDG_CACHE_HOME, then HOME") {
  setenv("VTC_KERNEL_CACHE", "/x/k", 1);
  CHECK(vtc::cuda::kernel_cache_dir() == "/x/k");
  setenv("VTC_KERNEL_CACHE", "off", 1);
  CHECK(vtc::cuda::kernel_cache_dir().empty());
  unsetenv("VTC_KERNEL_CACHE");
  setenv("XDG_CACHE_HOME", "/x/xdg", 1);
  CHECK(vtc::cuda::kernel_cache_dir() == "/x/xdg/vtc/kernels");
  unsetenv("XDG_CACHE_HOME");
  CHECK(vtc::cuda::kernel_cache_dir() == std::string(std::getenv("HOME")) + "/.cache/vtc/kernels");
}

TEST_CASE("codegen is deterministic and names kernels by content") {
  const auto cases = vtc::ir::split_source_cases(read(VTC_CUDA_OP_CASES));
  auto gen = [&] { return vtc::cuda::generate_model(vtc::ir::parse(cases.at(0).text, {cases[0].first_line})); };
  auto a = gen(), b = gen();
  REQUIRE(a.steps.at(0).kernels.size() == b.steps.at(0).kernels.size());
  for (size_t i = 0; i < a.steps[0].kernels.size(); ++i) {
    CHECK(a.steps[0].kernels[i].entry == b.steps[0].kernels[i].entry);
    CHECK(a.steps[0].kernels[i].source == b.steps[0].kernels[i].source);
  }
}

TEST_CASE("unsupported ops and types are errors that name the op") {
  auto expect_error = [](const std::string& text, const std::string& needle) {
    INFO(text);
    try {
      vtc::cuda::generate_model(vtc::ir::parse(text));
      FAIL("no error");
    } catch (const vtc::Error& e) {
      CHECK_THAT(e.what(), Catch::Contains(needle));
    }
  };
  expect_error(R"(func @prefill(%x: tensor<T x 2 x 64 x f16, device>, %pos: tensor<T x i32, device>) {
  %y = rope(%x, %pos) {mode = neox, n_rot = 64, base = 10000.0} : tensor<T x 2 x 64 x f16, device>
  return(%y)
})",
               "op 'rope'");
  expect_error(R"(func @prefill(%x: tensor<T x 2 x 64 x f32, device>, %pos: tensor<T x 4 x i32, device>) {
  %y = rope(%x, %pos) {mode = multi, n_rot = 64, base = 10000.0, sections = [0, 0, 0, 0]} : tensor<T x 2 x 64 x f32, device>
  return(%y)
})",
               "sections must not all be zero");
  expect_error(R"(func @decode(%x: tensor<S x 256 x f32, device>, %w: tensor<8 x 256 x iq3_s, device>) {
  %y = matmul(%x, %w) : tensor<S x 8 x f32, device>
  return(%y)
})",
               "iq3_s has no CUDA kernel");
  // The CPU's x8 weight layout (weight-layout{target=cpu}) is refused, not
  // misread as rows: as a weight declaration, and as a value's type.
  expect_error(R"(weight @w : tensor<8 x 256 x q4_k_x8, device> = gguf("w")
func @decode(%x: tensor<S x 256 x f32, device>) {
  %w = weight() {name = @w} : tensor<8 x 256 x q4_k_x8, device>
  %y = matmul(%x, %w) : tensor<S x 8 x f32, device>
  return(%y)
})",
               "weight @w is q4_k_x8, a CPU weight layout; the CUDA kernels read the rows layout (q4_k)");
  expect_error(R"(func @decode(%x: tensor<S x 256 x f32, device>, %w: tensor<8 x 256 x q4_0_x8, device>) {
  %y = matmul(%x, %w) : tensor<S x 8 x f32, device>
  return(%y)
})",
               "weight type q4_0_x8 is a CPU weight layout");
}

namespace {

// The kernels of the only function of a one-function module.
std::vector<vtc::cuda::Kernel> kernels_of(const std::string& text) {
  auto mk = vtc::cuda::generate_model(vtc::ir::parse(text));
  REQUIRE(mk.steps.size() == 1);
  return mk.steps[0].kernels;
}

bool has_arg(const vtc::cuda::Kernel& k, vtc::cuda::KernelArg::Kind kind, const std::string& state = "") {
  for (const auto& a : k.args)
    if (a.kind == kind && a.state == state) return true;
  return false;
}

// Index of the first kernel whose entry is <prefix><hash> (size() if none).
size_t find_kernel(const std::vector<vtc::cuda::Kernel>& ks, const std::string& prefix) {
  for (size_t i = 0; i < ks.size(); ++i)
    if (ks[i].entry.size() == prefix.size() + 16 && ks[i].entry.rfind(prefix, 0) == 0) return i;
  return ks.size();
}

const char* kConvK1 = R"(state @c : plain<S x 0 x 16 x f32, device>
func @decode(%x: tensor<S x 16 x f32, device>, %w: tensor<16 x 1 x f32, device>, %seq: tensor<S x i32, device>) {
  %y = causal_conv1d(%x, %w, %seq) {state = @c} : tensor<S x 16 x f32, device>
  return(%y)
})";

const char* kL2NormHalf = R"(func @prefill(%x: tensor<T x 8 x 96 x f16, device>, %b: tensor<T x 40 x bf16, device>) {
  %y = l2_norm(%x) {eps = 0.000001} : tensor<T x 8 x 96 x f16, device>
  %z = l2_norm(%b) {eps = 0.000001} : tensor<T x 40 x bf16, device>
  return(%y, %z)
})";

// sum over f16 and bf16 rows (the op cases are f32 only: the CPU side of
// their GPU comparison takes f32).
const char* kSumHalf = R"(func @prefill(%x: tensor<T x 8 x 96 x f16, device>, %b: tensor<T x 300 x bf16, device>) {
  %y = sum(%x) : tensor<T x 8 x 1 x f32, device>
  %z = sum(%b) : tensor<T x 1 x f32, device>
  return(%y, %z)
})";

// The IR's sample op at a real vocabulary, max_k 256.
const char* kSample = R"(func @decode(%logits: tensor<S x 32000 x f32, device>, %params: tensor<S x 4 x f32, device>, %seed: tensor<S x 2 x i32, device>, %pos: tensor<S x i32, device>) {
  %tok = sample(%logits, %params, %seed, %pos) {max_k = 256} : tensor<S x i32, device>
  return(%tok)
})";

}  // namespace

// The op's kernels read no draw counter (the row's pos is the counter) and
// no state: only the op's values, the step's scratch (the candidates) and S.
TEST_CASE("sample: per-chunk candidates over many blocks, then a block per row, no counter or state, compiles to PTX", "[nvrtc]") {
  ScopedCache cache("sample-op");
  const auto ks = kernels_of(kSample);
  REQUIRE(ks.size() == 2);
  const auto& partial = ks[size_t(find_kernel(ks, "sample_partial_"))];
  const auto& pick = ks[1];
  CHECK(find_kernel(ks, "sample_partial_") == 0);
  CHECK(pick.entry.rfind("sample_", 0) == 0);
  // 32000 logits: 16 chunks of 2048 a row, rows along grid y.
  CHECK(partial.threads_x == vtc::ir::Dim(16 * 256));
  CHECK(partial.rows_y == vtc::ir::Dim::symbol("S"));
  CHECK(pick.threads_x == vtc::ir::Dim::symbol("S") * 256);
  CHECK(pick.block == 256);
  for (const auto* k : {&partial, &pick}) {
    int values = 0;
    for (const auto& a : k->args) {
      INFO(k->entry << " argument " << a.name);
      CHECK((a.kind == vtc::cuda::KernelArg::Kind::Value || a.kind == vtc::cuda::KernelArg::Kind::Symbol ||
             a.kind == vtc::cuda::KernelArg::Kind::Scratch));
      values += a.kind == vtc::cuda::KernelArg::Kind::Value;
    }
    CHECK(values == (k == &partial ? 2 : 4));  // logits, params | params, seed, pos, tokens
  }
  CHECK(partial.source.find("constexpr long long N = 32000, CH = 2048, NB = 16;") != std::string::npos);
  CHECK(pick.source.find("constexpr int K = 256;") != std::string::npos);
  CHECK(pick.source.find("0x9E3779B97F4A7C15ULL * ((unsigned long long)(long long)pos[r] + 1ULL)") != std::string::npos);
  for (const auto* k : {&partial, &pick})
    for (int arch : {80, 90}) CHECK(nvrtc().compile(*k, arch, CodeKind::Ptx).image.find(".entry " + k->entry) != std::string::npos);
  // A vocabulary the kernel cannot bake in is refused by name.
  std::string symbolic = kSample;
  symbolic.replace(symbolic.find("S x 32000"), 9, "S x V");
  try {
    vtc::cuda::generate_model(vtc::ir::parse(symbolic));
    FAIL("no error");
  } catch (const vtc::Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("op 'sample'") && Catch::Contains("the vocabulary must be a positive constant"));
  }
}

TEST_CASE("sum is one block per row in double, the PLE gate after it one fused kernel") {
  // The PLE gate case of op_cases.vtcir (the one with a sum and a sign).
  std::string ple;
  for (const auto& c : vtc::ir::split_source_cases(read(VTC_CUDA_OP_CASES)))
    if (c.text.find("sum(") != std::string::npos && c.text.find("sign(") != std::string::npos) ple = c.text;
  REQUIRE(!ple.empty());
  const auto ks = kernels_of(ple);
  // mul, sum, then scale..sigmoid as one region: once abs..sigmoid are one
  // region, the scale has a single user and joins it.
  REQUIRE(ks.size() == 3);
  const auto& sum = ks[1];
  CHECK(find_kernel(ks, "sum_") == 1);
  CHECK(sum.source.find("double acc = 0.0;") != std::string::npos);
  CHECK(sum.source.find("vtc_block_sum_d(acc)") != std::string::npos);
  CHECK(sum.source.find("constexpr long long N = 64;") != std::string::npos);
  CHECK(sum.threads_x.str() == "T*1024");  // T*4 rows of 256 threads
  const std::string& fused = ks[2].source;
  CHECK(find_kernel(ks, "fused_") == 2);
  for (const char* op : {"// scale", "// abs", "// clamp", "// sqrt", "// sign", "// mul", "// sigmoid"}) {
    INFO(op);
    CHECK(fused.find(op) != std::string::npos);
  }
  // ggml's clamp ternaries with an infinite max, and ggml's sgn.
  CHECK(fused.find("< __int_as_float(0x7f800000) ?") != std::string::npos);
  CHECK(fused.find("> 0.0f ? 1.0f : (") != std::string::npos);
  // f16/bf16 rows convert on load.
  const auto half = kernels_of(kSumHalf);
  REQUIRE(half.size() == 2);
  CHECK(half[0].source.find("vtc_h2f(") != std::string::npos);
  CHECK(half[1].source.find("vtc_bf2f(") != std::string::npos);
}

TEST_CASE("linear-attention ops: kernels, state arguments and launch shapes") {
  using Kind = vtc::cuda::KernelArg::Kind;
  const auto cases = vtc::ir::split_source_cases(read(VTC_CUDA_LINEAR_CASES));
  // Case 2: causal_conv1d K = 4 -> outputs, then the state update (both on @conv, by slot).
  auto conv = vtc::cuda::generate_model(vtc::ir::parse(cases.at(1).text, {cases[1].first_line}));
  for (const auto& step : conv.steps) {
    INFO("step @" << step.function);
    const size_t i_out = find_kernel(step.kernels, "conv1d_"), i_upd = find_kernel(step.kernels, "conv1d_state_");
    REQUIRE(i_upd < step.kernels.size());
    REQUIRE(i_out < i_upd);  // the outputs read the old history
    const auto& out = step.kernels[i_out];
    const auto& upd = step.kernels[i_upd];
    for (const auto* k : {&out, &upd}) {
      CHECK(has_arg(*k, Kind::StateRows, "conv"));
      CHECK(has_arg(*k, Kind::Slots));
    }
    CHECK(out.source.find("constexpr long long C = 96, K = 4, DIL = 1") != std::string::npos);
    CHECK(upd.threads_x.str() == "S*96");
  }
  // K = 1 keeps no history: no state update.
  auto k1 = kernels_of(kConvK1);
  REQUIRE(k1.size() == 1);
  CHECK(find_kernel(k1, "conv1d_") == 0);
  // Case 4: delta_rule with Dk = Dv = 64: one warp per (sequence, head, row).
  auto dr = vtc::cuda::generate_model(vtc::ir::parse(cases.at(3).text, {cases[3].first_line}));
  for (const auto& step : dr.steps) {
    INFO("step @" << step.function);
    REQUIRE(find_kernel(step.kernels, "delta_rule_") < step.kernels.size());
    const auto& k = step.kernels[find_kernel(step.kernels, "delta_rule_")];
    CHECK(has_arg(k, Kind::StateRows, "ssm"));
    CHECK(has_arg(k, Kind::Slots));
    CHECK(k.threads_x.str() == "S*8192");
    CHECK(k.source.find("constexpr long long H = 4, DK = 64, DV = 64;") != std::string::npos);
  }
  // l2_norm on f16/bf16 converts on load and store.
  auto half = kernels_of(kL2NormHalf);
  REQUIRE(half.size() == 2);
  CHECK(half[0].source.find("vtc_f2h(") != std::string::npos);
  CHECK(half[1].source.find("vtc_f2bf(") != std::string::npos);
  // Multi-section rope picks the position component per pair (the case
  // with the `mode = multi` rope, wherever the file puts it).
  const auto multi = std::find_if(cases.begin(), cases.end(),
                                  [](const auto& c) { return c.text.find("mode = multi,") != std::string::npos; });
  REQUIRE(multi != cases.end());
  auto rope = vtc::cuda::generate_model(vtc::ir::parse(multi->text, {multi->first_line}));
  const std::string& src = rope.steps.at(0).kernels.at(0).source;
  CHECK(src.find("const long long sector = i % 16;") != std::string::npos);
  CHECK(src.find("const int comp = sector < 6 ? 0 : sector < 11 ? 1 : sector < 16 ? 2 : 3;") != std::string::npos);
  CHECK(src.find("(float)pos[t * 4 + comp]") != std::string::npos);
}

TEST_CASE("l2_norm and sum on f16/bf16 and a K = 1 convolution compile to PTX", "[nvrtc]") {
  ScopedCache cache("linear-extra");
  for (const char* text : {kConvK1, kL2NormHalf, kSumHalf})
    for (const auto& k : kernels_of(text)) {
      INFO("kernel " << k.entry << ": " << k.what);
      CHECK(nvrtc().compile(k, 90, CodeKind::Ptx).image.find(".entry " + k.entry) != std::string::npos);
    }
}

namespace {

// A bf16 side cache with a head dim over 128 (each lane holds 5 elements),
// one indexer head; the CUDA side supports it although the GPU cases stick
// to f16/f32.
const char* kIndexerBf16 = R"(state @idx : paged<1 x P x 16 x 160 x bf16, device>
func @decode(%q: tensor<S x 1 x 160 x f32, device>, %k: tensor<S x 160 x f32, device>, %kn: tensor<160 x f32, device>, %pos: tensor<S x i32, device>, %seq: tensor<S x i32, device>) {
  %sel = indexer_select(%q, %k, %kn, %pos, %seq) {state = @idx, ratio = 8, top_k = 64, eps = 0.000001, mode = neox, n_rot = 64, base = 10000.0} : tensor<S x 71 x i32, device>
  return(%sel)
})";

}  // namespace

TEST_CASE("indexer_select: side cache append, block scores, heap selection, and attention walking the selection") {
  using Kind = vtc::cuda::KernelArg::Kind;
  const auto cases = vtc::ir::split_source_cases(read(VTC_CUDA_INDEXER_CASES));
  REQUIRE(cases.size() >= 4);
  // Case 1: neox, f16 side cache @idx.0, ratio 4, top_k 8 (W = 11), H = 2, D = 64.
  auto mk = vtc::cuda::generate_model(vtc::ir::parse(cases[0].text, {cases[0].first_line}));
  for (const auto& step : mk.steps) {
    INFO("step @" << step.function);
    const auto& ks = step.kernels;
    const size_t app = find_kernel(ks, "idx_append_"), score = find_kernel(ks, "idx_score_"),
                 sel = find_kernel(ks, "idx_select_"), kv = find_kernel(ks, "kv_append_");
    // Stores before scores before the selection, all before attention reads it.
    REQUIRE(app == 0);
    REQUIRE(score == 1);
    REQUIRE(sel == 2);
    REQUIRE(kv == 3);
    const std::string tokens = step.function == "prefill" ? "T" : "S";
    for (size_t i : {app, score}) {
      CHECK(has_arg(ks[i], Kind::StatePool, "idx.0"));
      CHECK(has_arg(ks[i], Kind::PageTable));
    }
    for (const auto& a : ks[app].args)
      if (a.kind == Kind::StatePool) CHECK(a.half == 0);  // the side cache has one half
    CHECK(ks[app].source.find("pool[row * D + i] = vtc_f2h(k[e]);") != std::string::npos);
    // One warp per (token, block): PT_STRIDE * ceil(16 / 4) blocks per token.
    CHECK(ks[score].threads_x.str() == "PT_STRIDE*" + tokens + "*128");
    CHECK(ks[score].source.find("vtc_h2f(pool[row * D + lane + 32 * i])") != std::string::npos);
    CHECK(ks[score].source.find("const long long a = i, b = a + 32;") != std::string::npos);  // neox pairs
    CHECK(ks[score].source.find("score = __fadd_rn(score, dot > 0.0f ? dot : 0.0f);") != std::string::npos);
    // Scores [T][PT_STRIDE * 4] f32 then heaps [T][11] i32, shared by both kernels.
    CHECK(ks[score].scratch_bytes.str() == ks[sel].scratch_bytes.str());
    CHECK(ks[sel].threads_x.str() == tokens);
    CHECK(ks[sel].source.find("constexpr long long R = 4, W = 11, NBP = 4;") != std::string::npos);
    CHECK(ks[sel].source.find("if (value(i) > value(heap[0])) adjust(0, i);") != std::string::npos);
    // Attention takes the selection and walks its entries.
    const size_t attn = kv + 1;
    REQUIRE(attn < ks.size());
    CHECK(ks[attn].source.find("const int* __restrict__ sel") != std::string::npos);
    CHECK(ks[attn].source.find("const long long j = srow[e];") != std::string::npos);
  }
  // Case 4: normal rope pairs (2i, 2i+1), ratio 1, f32 side cache stored as is.
  auto normal = vtc::cuda::generate_model(vtc::ir::parse(cases[3].text, {cases[3].first_line}));
  const auto& ks = normal.steps.at(0).kernels;
  CHECK(ks.at(0).source.find("pool[row * D + i] = k[e];") != std::string::npos);
  CHECK(ks.at(1).source.find("const long long a = 2 * i, b = a + 1;") != std::string::npos);
  CHECK(ks.at(1).source.find("y0 = __fmaf_rn(x0, c, -__fmul_rn(x1, s));") != std::string::npos);
  // Attention without a selection never mentions one.
  for (const auto& c : vtc::ir::split_source_cases(read(VTC_CUDA_OP_CASES))) {
    if (c.text.find("attention(") == std::string::npos) continue;
    for (const auto& step : vtc::cuda::generate_model(vtc::ir::parse(c.text, {c.first_line})).steps)
      for (const auto& k : step.kernels) CHECK(k.source.find("srow") == std::string::npos);
  }
}

TEST_CASE("a bf16 side cache with head dim 160 compiles to PTX", "[nvrtc]") {
  ScopedCache cache("indexer-bf16");
  const auto ks = kernels_of(kIndexerBf16);
  REQUIRE(ks.size() == 3);
  CHECK(ks[0].source.find("vtc_f2bf(k[e])") != std::string::npos);
  CHECK(ks[2].source.find("constexpr long long R = 8, W = 71, NBP = 2;") != std::string::npos);
  for (const auto& k : ks) {
    INFO("kernel " << k.entry << ": " << k.what);
    for (int arch : {80, 90})
      CHECK(nvrtc().compile(k, arch, CodeKind::Ptx).image.find(".entry " + k.entry) != std::string::npos);
  }
}

// Mixture of experts (moe_cases.vtcir): moe_route (softmax / sigmoid, with
// and without renormalization and scale) feeding moe_ffn over f32, f16,
// bf16, q8_0 and q4_k/q6_k expert stacks, decode and prefill; then the
// merged gate_up stack, split stacks with scales, gate_up with a down scale.
TEST_CASE("mixture-of-experts cases compile to PTX for sm_80 and sm_90", "[nvrtc]") {
  ScopedCache cache("moe");
  CHECK(compile_case_file(VTC_CUDA_MOE_CASES, 9) >= 2 * (8 * 2 * 3 + 2));
}

TEST_CASE("moe_route and moe_ffn: routing options, expert decoders, scratch and launches") {
  const auto cases = vtc::ir::split_source_cases(read(VTC_CUDA_MOE_CASES));
  REQUIRE(cases.size() >= 6);
  auto decode_of = [&](size_t i) {
    auto mk = vtc::cuda::generate_model(vtc::ir::parse(cases[i].text, {cases[i].first_line}));
    REQUIRE(mk.steps.at(0).function == "decode");
    return mk.steps.at(0).kernels;
  };
  // Case 1: f32 experts, softmax, renormalized, no scale.
  auto f32 = decode_of(0);
  REQUIRE(f32.size() == 3);
  CHECK(find_kernel(f32, "moe_route_") == 0);
  CHECK(find_kernel(f32, "moe_up_") == 1);
  CHECK(find_kernel(f32, "moe_down_") == 2);
  CHECK(f32[0].source.find("const float v = expf(lr[e] - mx);") != std::string::npos);
  CHECK(f32[0].source.find("fmaxf((float)wsum, 6.103515625e-5f)") != std::string::npos);
  CHECK(f32[0].source.find("wr[j] *=") == std::string::npos);
  CHECK(f32[0].source.find("__shared__ float p_s[WPB][E], q_s[WPB][E];") != std::string::npos);  // a warp a row
  CHECK(f32[0].threads_x == vtc::ir::Dim::symbol("S") * 32);
  CHECK(f32[1].source.find("deq32_f32(gr, c, wv);") != std::string::npos);
  CHECK(f32[1].source.find("(g / (1.0f + expf(-g))) * u") != std::string::npos);
  CHECK(f32[2].source.find("o = j == 0 ? yj : o + yj;") != std::string::npos);
  // Both FFN launches share the [S * k][F] hidden scratch; up has a warp per (row, f).
  for (size_t i : {1, 2}) {
    CHECK(has_arg(f32[i], vtc::cuda::KernelArg::Kind::Scratch));
    CHECK(f32[i].scratch_bytes == vtc::ir::Dim::symbol("S") * (2 * 96 * 4));
  }
  CHECK(f32[1].threads_x == vtc::ir::Dim::symbol("S") * (2 * 96 * 32));
  CHECK(f32[2].threads_x == vtc::ir::Dim::symbol("S") * (64 * 32));
  // Case 2: f16 experts round activations to f16; sigmoid routing, scale 2.5.
  auto f16 = decode_of(1);
  CHECK(f16[0].source.find("p[e] = 1.0f / (1.0f + expf(-lr[e]));") != std::string::npos);
  CHECK(f16[0].source.find("wr[j] *= 0x1.4p+1f;") != std::string::npos);
  CHECK(f16[1].source.find("vtc_h2f(vtc_f2h(xr[32 * c + l]))") != std::string::npos);
  CHECK(f16[2].source.find("vtc_h2f(vtc_f2h(hr[32 * c + l]))") != std::string::npos);
  // Case 3: q8_0 without renormalization; case 4: q4_k gate/up, q6_k down.
  // Quantized stacks run on codes: x's quantize, moe_up, h's quantize
  // (from the scratch), moe_down, the dots by __dp4a.
  auto q8 = decode_of(2);
  REQUIRE(q8.size() == 5);
  CHECK(q8[0].source.find("6.103515625e-5f") == std::string::npos);
  CHECK(find_kernel(q8, "quantize_q8_1_") == 1);
  CHECK(q8[1].writes_codes_of == q8[2].reads_codes_of);
  CHECK(q8[2].source.find("vload32_q8_0<true>(wwin, lane, wq);") != std::string::npos);
  CHECK(q8[2].source.find("g += vtc_wdot<0, 0>(wq, xq);") != std::string::npos);
  CHECK(q8[3].entry.rfind("quantize_q8_1_", 0) == 0);
  CHECK(q8[4].source.find("acc += vtc_wdot<0, 0>(wq, xq);") != std::string::npos);
  auto k = decode_of(3);
  REQUIRE(k.size() == 5);
  CHECK(find_kernel(k, "quantize_q8_k_") == 1);
  CHECK(k[2].source.find("vload32_q4_k<true>(wwin, lane, wq);") != std::string::npos);
  CHECK(k[4].source.find("vload32_q6_k<true>(wwin, lane, wq);") != std::string::npos);
  CHECK(k[4].source.find("vtc_wdot<32, 2>(wq, xq)") != std::string::npos);
  CHECK(k[0].source.find("wr[j] *= 0x1p-1f;") != std::string::npos);
  // The split unscaled form has no scale parameter and no multiply.
  CHECK(f32[1].source.find("gate_scale") == std::string::npos);
  CHECK(f32[2].source.find("down_scale") == std::string::npos);
}

TEST_CASE("moe_ffn's merged and scaled forms: one gate_up parameter, scales after the warp sums") {
  const auto cases = vtc::ir::split_source_cases(read(VTC_CUDA_MOE_CASES));
  REQUIRE(cases.size() >= 9);
  auto decode_of = [&](size_t i) {
    auto mk = vtc::cuda::generate_model(vtc::ir::parse(cases[i].text, {cases[i].first_line}));
    REQUIRE(mk.steps.at(0).function == "decode");
    return mk.steps.at(0).kernels;
  };
  // Case 7: f32 gate_up [8, 192, 64]: F = 96, expert e's gate row f is row
  // 2F e + f and its up row 2F e + F + f of the one stack; no scales.
  auto merged = decode_of(6);
  REQUIRE(merged.size() == 3);
  CHECK(merged[1].source.find("constexpr long long E = 8, F = 96, D = 64,") != std::string::npos);
  CHECK(merged[1].source.find("const float* __restrict__ gate_up") != std::string::npos);
  CHECK(merged[1].source.find("GROW = 256, UROW = 256;") != std::string::npos);
  CHECK(merged[1].source.find("const u8* gr = (const u8*)gate_up + (e * 2 * F + f) * GROW;") != std::string::npos);
  CHECK(merged[1].source.find("const u8* ur = (const u8*)gate_up + (e * 2 * F + F + f) * UROW;") != std::string::npos);
  CHECK(merged[1].scratch_bytes == vtc::ir::Dim::symbol("S") * (2 * 96 * 4));
  CHECK(merged[1].source.find("gate_scale") == std::string::npos);
  CHECK(merged[2].source.find("down_scale") == std::string::npos);
  // Case 8: f16 split stacks with all three scales, each after its warp sum
  // (before silu for gate and up, before the routing weight for down).
  auto scaled = decode_of(7);
  REQUIRE(scaled.size() == 3);
  const std::string& up = scaled[1].source;
  CHECK(up.find("const float* __restrict__ gate_scale, const float* __restrict__ up_scale") != std::string::npos);
  const auto sum_at = up.find("u = vtc_warp_sum(u);"), scale_at = up.find("g *= gate_scale[e];"),
             silu_at = up.find("(g / (1.0f + expf(-g))) * u");
  CHECK(sum_at < scale_at);
  CHECK(scale_at < silu_at);
  CHECK(silu_at != std::string::npos);
  CHECK(up.find("u *= up_scale[e];") != std::string::npos);
  CHECK(scaled[2].source.find("vtc_warp_sum(acc) * (e >= 0 && e < E ? down_scale[e] : 0.0f) * weights[r]") !=
        std::string::npos);
  // Case 9: bf16 gate_up [4, 512, 256] (F = 256) with a bf16 down and only the down scale.
  auto both = decode_of(8);
  CHECK(both[1].source.find("constexpr long long E = 4, F = 256, D = 256,") != std::string::npos);
  CHECK(both[1].source.find("deq32_bf16(ur, c, wv);") != std::string::npos);
  CHECK(both[1].source.find("gate_scale") == std::string::npos);
  CHECK(both[1].source.find("up_scale") == std::string::npos);
  CHECK(both[2].source.find("down_scale[e]") != std::string::npos);
  CHECK(both[2].source.find("deq32_bf16(dr, c, wv);") != std::string::npos);
}

namespace {

// K = 8 (qwen4exp's hyper-connection projection), float weights.
const char* kSmallK = R"(func @prefill(%x: tensor<T x 8 x f32, device>, %a: tensor<24 x 8 x f32, device>, %b: tensor<24 x 8 x f16, device>, %c: tensor<5 x 40 x bf16, device>, %z: tensor<T x 40 x f32, device>) {
  %ya = matmul(%x, %a) : tensor<T x 24 x f32, device>
  %yb = matmul(%x, %b) : tensor<T x 24 x f32, device>
  %yc = matmul(%z, %c) : tensor<T x 5 x f32, device>
  return(%ya, %yb, %yc)
})";

}  // namespace

TEST_CASE("a matmul with K not a multiple of 32 has a float kernel that compiles to PTX", "[nvrtc]") {
  ScopedCache cache("small-k");
  const auto ks = kernels_of(kSmallK);
  REQUIRE(ks.size() == 3);
  for (const auto& k : ks) CHECK(k.entry.rfind("matmul_small_k_", 0) == 0);
  CHECK(ks[0].source.find("constexpr long long N = 24, K = 8;") != std::string::npos);
  CHECK(ks[0].source.find("s += w[n * K + k] * xr[k];") != std::string::npos);
  CHECK(ks[1].source.find("s += vtc_h2f(w[n * K + k]) * vtc_h2f(vtc_f2h(xr[k]));") != std::string::npos);
  CHECK(ks[2].source.find("s += vtc_bf2f(w[n * K + k]) * vtc_bf2f(vtc_f2bf(xr[k]));") != std::string::npos);
  CHECK(ks[0].threads_x == vtc::ir::Dim::symbol("T") * 24);
  for (const auto& k : ks) {
    INFO("kernel " << k.entry << ": " << k.what);
    for (int arch : {80, 90})
      CHECK(nvrtc().compile(k, arch, CodeKind::Ptx).image.find(".entry " + k.entry) != std::string::npos);
  }
}

// The models `vtc compile --target cuda` used to reject: qwen4exp (K = 8
// hyper-connection matmuls, the QSA indexer) and the MoE archs.
// [reference]: the generator copies a real vocabulary from the reference.
TEST_CASE("qwen4exp, qwen3moe and qwen35moe compile for cuda", "[nvrtc][reference]") {
  ScopedCache cache("moe-models");
  for (const std::string arch : {"qwen4exp", "qwen3moe", "qwen35moe"}) {
    INFO("model " << arch);
    auto mk = vtc::cuda::generate_model_file(tiny_model(arch));
    REQUIRE(mk.steps.size() == 2);
    for (const auto& s : mk.steps) {
      INFO("step @" << s.function);
      size_t moe = 0, small_k = 0;
      for (const auto& k : s.kernels) {
        moe += k.entry.rfind("moe_", 0) == 0;
        small_k += k.entry.rfind("matmul_small_k_", 0) == 0;
      }
      if (arch == "qwen4exp") CHECK(small_k > 0);
      else CHECK(moe >= 3);
    }
    CHECK(compile_all(mk, 90) > 10);
  }
}
