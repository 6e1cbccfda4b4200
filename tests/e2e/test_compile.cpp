// The compile pipeline changes no results, the interpreter runs with the
// compiled memory plan, and the .vtc artifact round-trips (issue 5).
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "frontends/gguf/arch/arch.h"
#include "ir/op_attrs.h"
#include "runtime/compile/artifact.h"
#include "runtime/compile/compile.h"
#include "runtime/session.h"
#include "tests/session_util.h"
#include "support/error.h"
#include "tests/e2e/e2e_fixtures.h"
#include "tests/reference_tolerances.h"
#include "tests/test_process.h"

using namespace vtc;

namespace {

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// Logits of every prompt position, then of 8 greedy decode steps.
std::vector<float> run_logits(Session& s, const std::vector<int32_t>& prompt) {
  HostTensor p = s.prefill(0, prompt, 0, /*all_logits=*/true);
  std::vector<float> out(p.f32(), p.f32() + p.numel());
  int32_t tok = 0, pos = int32_t(prompt.size());
  std::vector<float> last = p.row(p.shape[0] - 1);
  for (int step = 0; step < 8; ++step, ++pos) {
    tok = int32_t(std::max_element(last.begin(), last.end()) - last.begin());
    int32_t slot = 0;
    HostTensor d = s.decode({&slot, 1}, {&tok, 1}, {&pos, 1});
    last = d.row(0);
    out.insert(out.end(), last.begin(), last.end());
  }
  return out;
}

SessionOptions options(bool optimize) {
  SessionOptions o;
  o.threads = 2;
  o.n_ctx = 128;
  o.optimize = optimize;
  return o;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / fmt::format("vtc-compile-{}-{}", ::getpid(), name)).string();
}

}  // namespace

TEST_CASE("the optimized pipeline gives the logits of the unoptimized one on f32", "[compile][reference]") {
  for (const char* arch : {"llama", "qwen2", "qwen3"}) {
    INFO(arch);
    const std::string path = test::model_path(arch, "f32");
    CompileOptions c;
    CompiledModel fused = compile_model(gguf::GgufFile::open(path), c);
    // Not vacuous: the optimized module really is fused.
    REQUIRE(fused.after.at("decode").regions > 0);
    REQUIRE(fused.after.at("decode").kernels < fused.before.at("decode").kernels);
    // Every region the CPU runs op by op is in the report: none for llama
    // and qwen2; qwen3's QK-norm sits inside its attention regions.
    std::string op_by_op;
    for (const auto& line : fused.report)
      if (line.rfind("fusion:", 0) == 0) op_by_op += line + "\n";
    INFO(op_by_op);
    if (std::string(arch) == "qwen3")
      CHECK(op_by_op.find("fusion: @decode: 2 norm_matmul regions run op by op on cpu: a rope chain holds a QK-norm") !=
            std::string::npos);
    else
      CHECK(op_by_op.empty());
    Session optimized(path, options(true)), plain(path, options(false));
    const auto prompt = test::sample_prompt(path);
    double err = rel_l2(run_logits(optimized, prompt), run_logits(plain, prompt));
    INFO("relative L2 " << err);
    CHECK(err <= 1e-5);
  }
}

TEST_CASE("steps run with the compiled memory plan while they fit its bounds", "[compile][reference]") {
  const std::string path = test::model_path("llama", "f32");
  Session s(path, options(true));
  const auto prompt = test::sample_prompt(path);
  s.prefill(0, prompt, 0, /*all_logits=*/false);  // R = 1 <= bound
  CHECK(vtc::test::cpu_interpreter(s).last_stats().compiled_plan);
  const uint64_t compiled_arena = vtc::test::cpu_interpreter(s).last_stats().arena_bytes;
  s.reset(0);
  s.prefill(0, prompt, 0, /*all_logits=*/true);  // R = 25 > the bound of 4: planned for this step
  CHECK_FALSE(vtc::test::cpu_interpreter(s).last_stats().compiled_plan);
  CHECK(vtc::test::cpu_interpreter(s).last_stats().arena_bytes != compiled_arena);
  CHECK(vtc::test::cpu_interpreter(s).last_stats().arena_bytes < vtc::test::cpu_interpreter(s).last_stats().naive_bytes);
}

// The interpreter keeps each step's placement for the same sizes
// (interpreter.cpp, `placements`) while the arena stays where it was: a
// step that grows the arena makes the kept ones stale, and the steps after
// it are placed anew; then reused, with their own stats and the bits of
// their first runs.
TEST_CASE("a step of sizes run before reuses its placement and never a stale one", "[compile][reference]") {
  const std::string path = test::model_path("llama", "f32");
  Session s(path, options(true));
  const auto prompt = test::sample_prompt(path);
  const auto& stats = vtc::test::cpu_interpreter(s).last_stats();
  auto step = [&](const std::vector<int32_t>& tokens, bool all_logits) {
    s.reset(0);
    return s.prefill(0, tokens, 0, all_logits).bytes;
  };
  const auto one = step(prompt, false);
  CHECK_FALSE(stats.reused_placement);
  CHECK(stats.compiled_plan);
  uint64_t arena = stats.arena_bytes;
  const auto all = step(prompt, true);  // R = 25: planned now
  CHECK_FALSE(stats.reused_placement);
  CHECK_FALSE(stats.compiled_plan);
  arena = std::max(arena, stats.arena_bytes);
  CHECK(step(prompt, false) == one);
  // Four times the prompt, every row's logits: an arena larger than any
  // before, so the host arena is reallocated.
  std::vector<int32_t> longer;
  for (int i = 0; i < 4; ++i) longer.insert(longer.end(), prompt.begin(), prompt.end());
  step(longer, true);
  REQUIRE(stats.arena_bytes > arena);
  CHECK(step(prompt, false) == one);
  CHECK_FALSE(stats.reused_placement);  // kept, but in the old arena
  CHECK(step(prompt, true) == all);
  CHECK_FALSE(stats.reused_placement);
  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    CHECK(step(prompt, true) == all);
    CHECK(stats.reused_placement);
    CHECK_FALSE(stats.compiled_plan);  // the 25-row step's own stats, not the 1-row step's before it
    CHECK(step(prompt, false) == one);
    CHECK(stats.reused_placement);
    CHECK(stats.compiled_plan);
  }
}

TEST_CASE("a compiled artifact runs like its GGUF, packed or referenced", "[compile][reference]") {
  const std::string gguf_copy = temp_path("model.gguf");
  std::filesystem::copy_file(test::model_path("qwen3", "f32"), gguf_copy, std::filesystem::copy_options::overwrite_existing);
  const auto prompt = test::sample_prompt(gguf_copy);
  std::vector<float> expected;
  {
    Session s(gguf_copy, options(true));
    expected = run_logits(s, prompt);
  }
  CompiledModel m = compile_model(gguf::GgufFile::open(gguf_copy), {});
  const std::string referenced = temp_path("ref.vtc"), packed = temp_path("packed.vtc");
  save_artifact(m, referenced, {false});
  save_artifact(m, packed, {true});
  CHECK(is_artifact(referenced));
  CHECK_FALSE(is_artifact(gguf_copy));
  {
    Session s(referenced, options(true));
    CHECK(rel_l2(run_logits(s, prompt), expected) == 0.0);
  }
  std::filesystem::remove(gguf_copy);  // the packed artifact carries its own weights
  {
    Session s(packed, options(true));
    CHECK(rel_l2(run_logits(s, prompt), expected) == 0.0);
  }
  CHECK_THROWS_WITH(load_artifact(referenced), Catch::Contains("cannot open"));
  std::filesystem::remove(referenced);
  std::filesystem::remove(packed);
}

TEST_CASE("a changed GGUF or a foreign format version is an error naming both values", "[compile][reference]") {
  const std::string gguf_copy = temp_path("changed.gguf"), vtc_path = temp_path("changed.vtc");
  std::filesystem::copy_file(test::model_path("llama", "f32"), gguf_copy, std::filesystem::copy_options::overwrite_existing);
  save_artifact(compile_model(gguf::GgufFile::open(gguf_copy), {}), vtc_path, {false});
  const std::string sum = fmt::format("{:016x}", gguf_header_checksum(gguf::GgufFile::open(gguf_copy)));
  {
    // Flip one byte of a metadata string (the architecture name's last letter).
    auto file = gguf::GgufFile::open(gguf_copy);
    auto bytes = file.bytes();
    std::string text(reinterpret_cast<const char*>(bytes.data()), std::min<size_t>(bytes.size(), 4096));
    size_t at = text.find("llama");
    REQUIRE(at != std::string::npos);
    std::fstream f(gguf_copy, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(at + 4));
    f.put('b');
  }
  const std::string changed = fmt::format("{:016x}", gguf_header_checksum(gguf::GgufFile::open(gguf_copy)));
  REQUIRE(changed != sum);
  CHECK_THROWS_WITH(load_artifact(vtc_path), Catch::Contains(sum) && Catch::Contains(changed) &&
                                                 Catch::Contains("recompile"));
  {
    std::fstream f(vtc_path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);
    const uint32_t version = 99;
    f.write(reinterpret_cast<const char*>(&version), 4);
  }
  CHECK_THROWS_WITH(load_artifact(vtc_path), Catch::Contains("format version 99") && Catch::Contains("version 3"));
  {
    // An older format: the message says what changed.
    std::fstream f(vtc_path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);
    const uint32_t version = 2;
    f.write(reinterpret_cast<const char*>(&version), 4);
  }
  CHECK_THROWS_WITH(load_artifact(vtc_path), Catch::Contains("format version 2") &&
                                                 Catch::Contains("stores packed weights in their IR layout") &&
                                                 Catch::Contains("recompile"));
  std::filesystem::remove(gguf_copy);
  std::filesystem::remove(vtc_path);
}

TEST_CASE("truncated or garbled artifacts are clear errors", "[compile][reference]") {
  const std::string vtc_path = temp_path("whole.vtc"), bad = temp_path("bad.vtc");
  save_artifact(compile_model(gguf::GgufFile::open(test::model_path("llama", "f32")), {}), vtc_path, {false});
  std::string whole;
  {
    std::ifstream in(vtc_path, std::ios::binary);
    whole.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (size_t cut : {size_t(0), size_t(5), size_t(20), size_t(30), whole.size() / 2, whole.size() - 1}) {
    INFO("cut at " << cut);
    std::ofstream(bad, std::ios::binary | std::ios::trunc).write(whole.data(), std::streamsize(cut));
    CHECK_THROWS_AS(load_artifact(bad), Error);
  }
  std::string garbled = whole;
  garbled[24] = '[';  // the manifest no longer parses as an object
  std::ofstream(bad, std::ios::binary | std::ios::trunc).write(garbled.data(), std::streamsize(garbled.size()));
  CHECK_THROWS_WITH(load_artifact(bad), Catch::Contains("manifest"));
  std::string broken_ir = whole;
  size_t at = broken_ir.find("func @decode");
  REQUIRE(at != std::string::npos);
  broken_ir.replace(at, 4, "fnuc");
  std::ofstream(bad, std::ios::binary | std::ios::trunc).write(broken_ir.data(), std::streamsize(broken_ir.size()));
  CHECK_THROWS_WITH(load_artifact(bad), Catch::Contains("lowered IR"));
  std::filesystem::remove(vtc_path);
  std::filesystem::remove(bad);
}

TEST_CASE("a cuda artifact carries its kernel sources and the CPU session refuses it", "[compile][reference]") {
  const std::string path = test::model_path("llama", "f32"), vtc_path = temp_path("cuda.vtc");
  CompileOptions c;
  c.target = vtc::Target::Cuda;
  CompiledModel m = compile_model(gguf::GgufFile::open(path), c);
  REQUIRE(m.kernels.count("decode"));
  REQUIRE_FALSE(m.kernels.at("decode").empty());
  save_artifact(m, vtc_path, {false});
  CompiledModel loaded = load_artifact(vtc_path);
  REQUIRE(loaded.kernels.at("decode").size() == m.kernels.at("decode").size());
  CHECK(loaded.kernels.at("decode")[0].source == m.kernels.at("decode")[0].source);
  CHECK(loaded.target == vtc::Target::Cuda);
  CHECK_THROWS_WITH(Session(vtc_path, options(true)), Catch::Contains("compiled for target cuda"));
  std::filesystem::remove(vtc_path);
}

TEST_CASE("qwen35 on cuda: the decode step keeps its recurrent states, ids and sampling on the device", "[compile][reference][hybrid]") {
  // The seed's bug class (stale host copies of device data) for the hybrid:
  // nothing inside @decode may move to the host, and every op touching a
  // conv ring or delta-rule state runs on the device.
  CompileOptions c;
  c.target = vtc::Target::Cuda;
  CompiledModel m = compile_model(gguf::GgufFile::open(test::model_path("qwen35", "f32")), c);
  const ir::Function* decode = m.module.find_function("decode");
  REQUIRE(decode != nullptr);
  size_t recurrent_ops = 0;
  for (const auto& op : decode->ops) {
    INFO(op->mnemonic());
    CHECK(op->kind != ir::OpKind::ToHost);
    if (op->kind == ir::OpKind::CausalConv1d || op->kind == ir::OpKind::DeltaRule) {
      ++recurrent_ops;
      CHECK(op->results[0].type().placement == ir::Placement::Device);
    }
  }
  CHECK(recurrent_ops == 2);
  for (const auto& s : m.module.states) {
    INFO("@" << s.name);
    CHECK(s.type.placement == ir::Placement::Device);
  }
  CHECK(m.module.find_state("gdn_conv.0") != nullptr);
  CHECK(m.module.find_state("gdn_state.0") != nullptr);
}

TEST_CASE("qwen4exp on cuda: n-gram hash, indexer, id feedback and every state stay on the device in @decode", "[compile][reference][hybrid]") {
  // The seed's bug (a decode step hashing a stale host copy of the ids) by
  // construction: the ids come from @last_ids on the device, ngram_hash and
  // ngram_roll run there, the next ids are sampled there by the step's own
  // `sample` op and written back to @last_ids there, and nothing inside
  // @decode moves to the host; the only device-to-host traffic is the
  // sampled token the runtime streams (the returned %next).
  CompileOptions c;
  c.target = vtc::Target::Cuda;
  CompiledModel m = compile_model(gguf::GgufFile::open(test::model_path("qwen4exp", "f32")), c);
  const ir::Function* decode = m.module.find_function("decode");
  REQUIRE(decode != nullptr);
  std::map<ir::OpKind, int> on_device;
  for (const auto& op : decode->ops) {
    INFO(op->mnemonic());
    CHECK(op->kind != ir::OpKind::ToHost);
    for (const auto& r : op->results) CHECK(r.type().placement == ir::Placement::Device);
    if (op->kind == ir::OpKind::StateRead && *ir::state_symbol(*op) == "last_ids") ++on_device[op->kind];
    // Sampling is an op of the step, and its ids go straight back to
    // @last_ids on the device: no transfer between them.
    if (op->kind == ir::OpKind::StateWrite && *ir::state_symbol(*op) == "last_ids") {
      ++on_device[op->kind];
      const ir::Op* producer = op->operands.at(0)->def;
      REQUIRE(producer != nullptr);
      CHECK(producer->kind == ir::OpKind::Sample);
      CHECK(producer->operands.at(0).type().placement == ir::Placement::Device);  // the logits
    }
    for (ir::OpKind k : {ir::OpKind::NgramHash, ir::OpKind::NgramRoll, ir::OpKind::IndexerSelect, ir::OpKind::Attention,
                         ir::OpKind::CausalConv1d, ir::OpKind::DeltaRule, ir::OpKind::Sample})
      if (op->kind == k) ++on_device[k];
  }
  CHECK(on_device[ir::OpKind::StateRead] == 1);  // the id feedback: read,
  CHECK(on_device[ir::OpKind::Sample] == 1);     // drawn,
  CHECK(on_device[ir::OpKind::StateWrite] == 1);  // and written back, all on the device
  CHECK(on_device[ir::OpKind::NgramHash] == 1);
  CHECK(on_device[ir::OpKind::NgramRoll] == 1);
  CHECK(on_device[ir::OpKind::IndexerSelect] == 1);
  CHECK(on_device[ir::OpKind::Attention] == 1);
  CHECK(on_device[ir::OpKind::CausalConv1d] == 2);  // the DeltaNet conv and the PLE conv
  CHECK(on_device[ir::OpKind::DeltaRule] == 1);
  // The states the seed names: GDN conv ring and temporal state, PLE conv
  // ring and n-gram history, paged K/V, indexer side cache, the ids.
  for (const char* name : {"gdn_conv.0", "gdn_state.0", "ple_conv.0", "ngram_hist", "kv.1", "idx.1", "last_ids"}) {
    INFO("@" << name);
    const ir::StateDecl* s = m.module.find_state(name);
    REQUIRE(s != nullptr);
    CHECK(s->type.placement == ir::Placement::Device);
  }
  for (const std::string& line : m.report) CHECK(line.find("to_host") == std::string::npos);
}

TEST_CASE("vtc compile reports per phase and vtc run takes the artifact", "[compile][cli][reference]") {
  const std::string model = test::model_path("qwen3", "f32"), out = temp_path("cli.vtc"), dump = temp_path("dump");
  const std::string log = test::run_capture(
      fmt::format("{} compile {} -o {} --dump-ir {} 2>&1; echo \"exit=$?\"", VTC_TOOL, model, out, dump));
  INFO(log);
  CHECK(log.find("exit=0") != std::string::npos);
  for (const char* line : {"compile: building IR", "compile: running passes", "kernel launches per step",
                           "memory plan", "compile: writing", "compile: done"})
    CHECK(log.find(line) != std::string::npos);
  CHECK(std::filesystem::exists(std::filesystem::path(dump) / "decode" / "02-fuse.vtcir"));
  const std::string ids = " --tokens 1,450,4996,17354 -n 6 --temp 0 -t 2 -q 2>/dev/null";
  const std::string from_gguf = test::run_capture(fmt::format("{} run {}{}", VTC_TOOL, model, ids));
  const std::string from_vtc = test::run_capture(fmt::format("{} run {}{}", VTC_TOOL, out, ids));
  CHECK(from_vtc == from_gguf);
  const std::string bad = test::run_capture(fmt::format("{} run {}.missing -n 1 2>&1; echo \"exit=$?\"", VTC_TOOL, out));
  CHECK(bad.find("exit=0") == std::string::npos);
  std::filesystem::remove(out);
  std::filesystem::remove_all(dump);
}

// `vtc compile --stats`: one line per step with the layer count, the op
// counts and the fused regions per layer by kind, and how many regions the
// target runs op by op (runtime/compile/compile.h, compile_stats). The
// llama test model has 2 layers; per layer: Q/K/V and gate/up under their
// norms (3 norm_matmul regions in 2 layers), one swiglu, and the output and
// down projections with their residual adds as matmul_epilogue. On cuda the
// norm_matmul and swiglu regions run their ops' kernels; the epilogues are
// one kernel each.
TEST_CASE("vtc compile --stats prints fused regions per layer by kind, per target", "[compile][cli][reference]") {
  const std::string model = test::model_path("llama", "f32");
  struct Expect {
    const char* target;
    const char* step;
    const char* regions;  // "fused regions per layer: ..." up to the ';'
    const char* op_by_op;
  };
  const Expect expect[] = {
      {"cpu", "prefill", "elementwise 0, norm_matmul 1.5, swiglu 1, qk_rope 0, matmul_epilogue 2", "op by op on cpu: 0 of 9 regions"},
      {"cpu", "decode", "elementwise 0, norm_matmul 1.5, swiglu 1, qk_rope 0, matmul_epilogue 2", "op by op on cpu: 0 of 9 regions"},
      {"cuda", "prefill", "elementwise 0, norm_matmul 1.5, swiglu 1, qk_rope 0, matmul_epilogue 2", "op by op on cuda: 5 of 9 regions"},
      {"cuda", "decode", "elementwise 0, norm_matmul 1.5, swiglu 1, qk_rope 0, matmul_epilogue 2", "op by op on cuda: 5 of 9 regions"},
  };
  for (const char* target : {"cpu", "cuda"}) {
    const std::string out = temp_path(std::string("stats-") + target + ".vtc");
    const std::string log = test::run_capture(
        fmt::format("{} compile {} -o {} --target {} --stats 2>/dev/null; echo \"exit=$?\"", VTC_TOOL, model, out, target));
    INFO(log);
    CHECK(log.find("exit=0") != std::string::npos);
    for (const Expect& e : expect) {
      if (std::string(e.target) != target) continue;
      const std::string head = fmt::format("stats: @{}: 2 layers, ", e.step);
      const size_t at = log.find(head);
      REQUIRE(at != std::string::npos);
      const std::string line = log.substr(at, log.find('\n', at) - at);
      INFO(line);
      CHECK(line.find(std::string("fused regions per layer: ") + e.regions + "; ") != std::string::npos);
      CHECK(line.find(e.op_by_op) != std::string::npos);
    }
    std::filesystem::remove(out);
  }
  // --help says what the line holds.
  const std::string help = test::run_capture(fmt::format("{} compile --help", VTC_TOOL));
  CHECK(help.find("--stats") != std::string::npos);
}

namespace {

// The bytes of `src` with metadata key `key` set to `value` (tensors copied).
std::vector<uint8_t> with_key(const gguf::GgufFile& src, const std::string& key, gguf::Value value) {
  gguf::GgufWriter w;
  for (const auto& kv : src.metadata()) w.set(kv.key, kv.key == key ? value : kv.value);
  w.set(key, value);
  for (const auto& t : src.tensors())
    w.add_tensor(t.name, t.type, t.dims, [&t](uint8_t* dst, uint64_t n) { std::memcpy(dst, t.data, n); });
  return w.to_bytes();
}

gguf::Value u32_array(std::vector<uint32_t> items) {
  std::vector<gguf::Value> values;
  for (uint32_t i : items) values.emplace_back(i);
  return gguf::Value::array(gguf::ValueType::U32, std::move(values));
}

gguf::Value u64_array(std::vector<uint64_t> items) {
  std::vector<gguf::Value> values;
  for (uint64_t i : items) values.emplace_back(i);
  return gguf::Value::array(gguf::ValueType::U64, std::move(values));
}

}  // namespace

TEST_CASE("qwen4exp: bad hyper-connection, PLE and indexer metadata is an error naming the key", "[compile][hybrid]") {
  const std::string path = temp_path("qwen4exp-tiny.gguf");
  synth::Options o;
  o.arch = "qwen4exp";
  o.size = "tiny";
  o.vocab_path = synth::find_default_vocab("qwen4exp");
  synth::write_model(o, path);
  const gguf::GgufFile src = gguf::GgufFile::open(path);
  REQUIRE_NOTHROW(arch::build_module(src));
  const struct {
    std::string key;
    gguf::Value value;
    std::string message;
  } cases[] = {
      {"qwen4exp.hyper_connection.count", gguf::Value(uint32_t(1)), "hyper_connection.count must be at least 2"},
      {"qwen4exp.ple.layers", u32_array({1}), "ple.layers must name one DeltaNet layer"},
      {"qwen4exp.ple.ngram_size", gguf::Value(uint32_t(40)), "ngram_size must be in [2, 16]"},
      {"qwen4exp.ple.head_offsets", u64_array({0, 1, 2, 1u << 30}), "PLE head 3 rows"},
      {"qwen4exp.ple.head_vocab_sizes", u64_array({5, 0, 7, 9}), "PLE head 1 rows"},
      {"qwen4exp.ple.layer_multipliers", u64_array({3}), "layer_multipliers has 1 entries, at least 3"},
      {"qwen4exp.attention.compress_ratios", u32_array({0, 100}), "compress_ratios entry 100"},
      {"qwen4exp.attention.indexer.top_k", gguf::Value(uint32_t(0)), "indexer.top_k"},
      {"qwen4exp.attention.indexer.top_k", gguf::Value(uint32_t(1u << 30)), "exceeds the context length"},
  };
  for (const auto& c : cases) {
    INFO(c.key << " = " << c.value.to_display());
    const std::vector<uint8_t> bytes = with_key(src, c.key, c.value);
    const gguf::GgufFile bad = gguf::GgufFile::parse(bytes, "bad.gguf");
    CHECK_THROWS_WITH(arch::build_module(bad), Catch::Contains(c.message));
  }
  std::filesystem::remove(path);
}

// Issue 19, defects 4 and 10: an edited artifact is an error naming the
// field, never an out-of-bounds write; a relative GGUF path is resolved
// against the artifact's directory; a weights checksum refuses a different
// GGUF with the same header.
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
}

uint64_t manifest_length(const std::string& whole) {
  uint64_t length = 0;
  std::memcpy(&length, whole.data() + 16, 8);
  return length;
}

json manifest_json(const std::string& whole) { return json::parse(whole.substr(24, manifest_length(whole))); }

// A referenced artifact's bytes with another manifest.
std::string with_manifest(const std::string& whole, const json& manifest) {
  const std::string text = manifest.dump();
  std::string out = whole.substr(0, 16);
  const uint64_t length = text.size();
  out.append(reinterpret_cast<const char*>(&length), 8);
  return out + text;
}

// A tiny llama in a fresh directory, and its artifact (T <= 16, S <= 2).
struct Tiny {
  std::string dir, gguf, vtc;
};

Tiny tiny_artifact(const std::string& name, SaveOptions save = {}) {
  Tiny t;
  t.dir = temp_path(name);
  fs::remove_all(t.dir);
  fs::create_directories(t.dir);
  t.gguf = t.dir + "/tiny.gguf";
  t.vtc = t.dir + "/tiny.vtc";
  synth::Options o;
  o.arch = "llama";
  o.size = "tiny";
  o.vocab_path = synth::find_default_vocab("llama");
  synth::write_model(o, t.gguf);
  CompileOptions c;
  c.max_step_tokens = 16;
  c.max_sequences = 2;
  save_artifact(compile_model(gguf::GgufFile::open(t.gguf), c), t.vtc, save);
  return t;
}

// Runs `fn` in a forked child, so a crash fails the check instead of the
// test binary: "ok", "error: <what>" for a vtc::Error, "exception: <what>"
// for any other exception, "signal N" or "exit N" when it died.
std::string in_child(const std::function<void()>& fn) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) std::signal(sig, SIG_DFL);  // not Catch's report
    std::string out;
    try {
      fn();
      out = "ok";
    } catch (const Error& e) {
      out = std::string("error: ") + e.what();
    } catch (const std::exception& e) {
      out = std::string("exception: ") + e.what();
    }
    for (size_t done = 0; done < out.size();) {
      ssize_t n = ::write(fds[1], out.data() + done, out.size() - done);
      if (n <= 0) break;
      done += size_t(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, size_t(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return fmt::format("signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return fmt::format("exit {}", WEXITSTATUS(status));
  return got;
}

// Loads `path` and runs a 3-token prefill and one decode step with its
// plans, as `vtc run` would.
void load_and_step(const std::string& path) {
  SessionOptions o;
  o.threads = 1;
  o.n_ctx = 32;
  o.max_step_tokens = 8;
  Session s(path, o);
  const std::vector<int32_t> prompt = {1, 2, 3};
  s.prefill(0, prompt, 0, false);
  int32_t slot = 0, tok = 4, pos = 3;
  s.decode({&slot, 1}, {&tok, 1}, {&pos, 1});
}

bool is_error(const std::string& outcome) { return outcome.rfind("error: ", 0) == 0; }

}  // namespace

TEST_CASE("an edited memory plan, manifest field or state is an error naming it, never an out-of-bounds write",
          "[compile][artifact]") {
  const Tiny t = tiny_artifact("edited");
  const std::string whole = read_file(t.vtc);
  const json manifest = manifest_json(whole);
  const std::string edited = t.dir + "/edited.vtc";
  const json& buffers = manifest["steps"]["decode"]["memory_plan"]["buffers"];
  // Two host buffers live at the same time, at different offsets.
  size_t a = 0, b = 0;
  for (size_t i = 0; i < buffers.size() && !b; ++i)
    for (size_t j = i + 1; j < buffers.size() && !b; ++j)
      if (buffers[i]["offset"] != buffers[j]["offset"] && buffers[i]["last"] >= buffers[j]["first"] &&
          buffers[j]["last"] >= buffers[i]["first"])
        a = i, b = j;
  REQUIRE(b > 0);
  const std::string state_line = "state @kv.0 : paged<2 x P x ";
  const struct {
    const char* what;
    std::function<void(json&)> edit;
    std::string field;
  } cases[] = {
      {"host arena of 64 bytes", [](json& m) { m["steps"]["decode"]["memory_plan"]["host_arena_bytes"] = 64; },
       "steps.decode.memory_plan.host_arena_bytes 64"},
      {"an offset + 2^40",
       [](json& m) {
         auto& o = m["steps"]["decode"]["memory_plan"]["buffers"][3]["offset"];
         o = o.get<uint64_t>() + (uint64_t(1) << 40);
       },
       "steps.decode.memory_plan.buffers[3].offset"},
      {"an arena of 2^62", [](json& m) { m["steps"]["prefill"]["memory_plan"]["host_arena_bytes"] = uint64_t(1) << 62; },
       "steps.prefill.memory_plan.host_arena_bytes"},
      {"a buffer smaller than its type", [](json& m) { m["steps"]["decode"]["memory_plan"]["buffers"][3]["bytes"] = 4; },
       "steps.decode.memory_plan.buffers[3].bytes"},
      {"a shortened live range",
       [](json& m) {
         auto& b = m["steps"]["decode"]["memory_plan"]["buffers"][3];
         b["last"] = b["last"].get<int64_t>() + 1000;
       },
       "steps.decode.memory_plan.buffers[3].last"},
      {"two live buffers at one offset",
       [&](json& m) {
         auto& bs = m["steps"]["decode"]["memory_plan"]["buffers"];
         bs[b]["offset"] = bs[a]["offset"];
       },
       fmt::format("steps.decode.memory_plan.buffers[{}].offset", b)},
      {"a negative offset", [](json& m) { m["steps"]["decode"]["memory_plan"]["buffers"][3]["offset"] = -64; },
       "must be a non-negative integer"},
      {"a misaligned offset",
       [](json& m) {
         auto& o = m["steps"]["decode"]["memory_plan"]["buffers"][3]["offset"];
         o = o.get<uint64_t>() + 4;
       },
       "not a multiple of the alignment"},
      {"a bound of 0", [](json& m) { m["steps"]["decode"]["memory_plan"]["bindings"]["S"] = 0; },
       "steps.decode.memory_plan.bindings.S"},
      {"a bound of 2^40", [](json& m) { m["steps"]["prefill"]["memory_plan"]["bindings"]["T"] = uint64_t(1) << 40; },
       "steps.prefill.memory_plan.bindings.T"},
      {"a missing bound", [](json& m) { m["steps"]["prefill"]["memory_plan"]["bindings"].erase("T"); },
       "steps.prefill.memory_plan.bindings"},
      {"an alignment of 3", [](json& m) { m["steps"]["decode"]["memory_plan"]["alignment"] = 3; },
       "steps.decode.memory_plan.alignment"},
      {"a dropped buffer", [](json& m) { m["steps"]["decode"]["memory_plan"]["buffers"].erase(5); },
       "steps.decode.memory_plan.buffers has"},
      {"a foreign key", [](json& m) { m["steps"]["decode"]["memory_plan"]["buffers"][0]["key"] = "op#999.r#0"; },
       "steps.decode.memory_plan.buffers[0].key"},
      {"another placement", [](json& m) { m["steps"]["decode"]["memory_plan"]["buffers"][0]["placement"] = "device"; },
       "steps.decode.memory_plan.buffers[0].placement"},
      {"an unknown placement", [](json& m) { m["steps"]["decode"]["memory_plan"]["buffers"][0]["placement"] = "gpu"; },
       "must be host or device"},
      {"a renamed plan", [](json& m) { m["steps"]["decode"]["memory_plan"]["function"] = "prefill"; },
       "steps.decode.memory_plan.function"},
      {"a plan for no function",
       [](json& m) { m["steps"]["extra"]["memory_plan"] = m["steps"]["decode"]["memory_plan"]; },
       "steps.extra.memory_plan"},
      {"a wrong naive sum", [](json& m) { m["steps"]["decode"]["memory_plan"]["naive_bytes"] = 1; },
       "steps.decode.memory_plan.naive_bytes"},
      {"a string size", [](json& m) { m["steps"]["decode"]["memory_plan"]["buffers"][1]["bytes"] = "64"; },
       "steps.decode.memory_plan.buffers[1].bytes"},
      {"an unknown target", [](json& m) { m["target"] = "tpu"; }, "target"},
      {"a negative op count", [](json& m) { m["ops_before"]["decode"]["ops"] = -1; }, "ops_before.decode.ops"},
      {"a wrong GGUF size", [](json& m) { m["gguf"]["size"] = 1; }, "size"},
      {"a huge state",
       [&](json& m) {
         std::string ir = m["module_ir"];
         size_t at = ir.find(state_line);
         REQUIRE(at != std::string::npos);
         ir.insert(at + state_line.size(), "1099511627776 x ");
         m["module_ir"] = ir;
       },
       "@kv.0"},
      {"a state of another type",
       [&](json& m) {
         std::string ir = m["module_ir"];
         size_t at = ir.find("state @last_ids : ");
         REQUIRE(at != std::string::npos);
         size_t i32 = ir.find("i32", at);
         ir.replace(i32, 3, "i64");
         m["module_ir"] = ir;
       },
       "state_read"},
  };
  {
    INFO("the unedited manifest, rewritten");
    write_file(edited, with_manifest(whole, manifest));
    CHECK(in_child([&] { load_and_step(edited); }) == "ok");
  }
  for (const auto& c : cases) {
    INFO(c.what);
    json m = manifest;
    c.edit(m);
    write_file(edited, with_manifest(whole, m));
    const std::string outcome = in_child([&] { load_and_step(edited); });
    INFO(outcome);
    CHECK(is_error(outcome));
    CHECK(outcome.find(c.field) != std::string::npos);
  }
  fs::remove_all(t.dir);
}

TEST_CASE("random byte mutations of an artifact load or fail with an error, never a signal", "[compile][artifact]") {
  const Tiny referenced = tiny_artifact("mutate-ref"), packed = tiny_artifact("mutate-packed", {true});
  const std::string ref_bytes = read_file(referenced.vtc), packed_bytes = read_file(packed.vtc);
  const uint64_t ref_manifest = manifest_length(ref_bytes), packed_manifest = manifest_length(packed_bytes);
  std::mt19937_64 rng(19);
  std::map<std::string, int> tally;
  const int kMutations = 256;
  for (int k = 0; k < kMutations; ++k) {
    // Three in four edit a referenced artifact's manifest; the rest a
    // packed one anywhere (header, manifest, the GGUF's header or weights).
    const bool is_packed = k % 4 == 3;
    std::string bytes = is_packed ? packed_bytes : ref_bytes;
    const uint64_t span = is_packed ? bytes.size() : 24 + ref_manifest;
    const int edits = 1 + int(rng() % 4);
    std::string where;
    for (int e = 0; e < edits; ++e) {
      uint64_t at = rng() % span;
      if (is_packed && rng() % 2) at = rng() % (24 + packed_manifest);  // half in the manifest
      const uint64_t kind = rng() % 3;
      bytes[at] = kind == 0 ? char(rng()) : kind == 1 ? char('0' + rng() % 10) : char(bytes[at] ^ (1 << (rng() % 8)));
      where += fmt::format(" {}", at);
    }
    const std::string path = (is_packed ? packed.dir : referenced.dir) + "/mutant.vtc";
    write_file(path, bytes);
    const std::string outcome = in_child([&] { load_and_step(path); });
    INFO("mutation " << k << (is_packed ? " (packed)" : "") << " at bytes" << where << ": " << outcome);
    CHECK((outcome == "ok" || is_error(outcome)));
    ++tally[outcome == "ok" ? "ok" : is_error(outcome) ? "error" : "crash"];
  }
  WARN(fmt::format("{} mutations: {} ran, {} errors, {} crashes", kMutations, tally["ok"], tally["error"], tally["crash"]));
  fs::remove_all(referenced.dir);
  fs::remove_all(packed.dir);
}

TEST_CASE("a relative GGUF path is resolved against the artifact's directory, and an absolute one stays absolute",
          "[compile][artifact][cli]") {
  const Tiny t = tiny_artifact("relative");
  fs::create_directories(t.dir + "/models");
  fs::create_directories(t.dir + "/out");
  fs::rename(t.gguf, t.dir + "/models/tiny.gguf");
  // Compiled from the directory above, naming the model relatively.
  const std::string log = test::run_capture(fmt::format(
      "cd {} && {} compile models/tiny.gguf -o out/tiny.vtc --max-step-tokens 16 2>&1; echo \"exit=$?\"", t.dir, VTC_TOOL));
  INFO(log);
  REQUIRE(log.find("exit=0") != std::string::npos);
  CHECK(manifest_json(read_file(t.dir + "/out/tiny.vtc"))["gguf"]["path"] == "../models/tiny.gguf");
  const std::string ids = " --tokens 1,450,4996 -n 4 --temp 0 -t 1 -q 2>&1";
  const std::string expected = test::run_capture(fmt::format("{} run {}/models/tiny.gguf{}", VTC_TOOL, t.dir, ids));
  // From another working directory, and after the whole tree moved.
  CHECK(test::run_capture(fmt::format("cd / && {} run {}/out/tiny.vtc{}", VTC_TOOL, t.dir, ids)) == expected);
  const std::string moved = t.dir + "-moved";
  fs::remove_all(moved);
  fs::rename(t.dir, moved);
  CHECK(test::run_capture(fmt::format("cd {}/out && {} run tiny.vtc{}", moved, VTC_TOOL, ids)) == expected);
  CHECK_NOTHROW(load_artifact(moved + "/out/tiny.vtc"));
  // The artifact without its model names both the path it tried and how
  // it got there.
  fs::rename(moved + "/models/tiny.gguf", moved + "/tiny.gguf");
  CHECK_THROWS_WITH(load_artifact(moved + "/out/tiny.vtc"),
                    Catch::Contains("models/tiny.gguf: cannot open") && Catch::Contains("relative to the artifact's directory"));
  // An absolute path is kept as it is.
  save_artifact(compile_model(gguf::GgufFile::open(moved + "/tiny.gguf"), {}), moved + "/out/abs.vtc", {});
  CHECK(manifest_json(read_file(moved + "/out/abs.vtc"))["gguf"]["path"] == moved + "/tiny.gguf");
  CHECK_NOTHROW(load_artifact(moved + "/out/abs.vtc"));
  fs::remove_all(moved);
}

TEST_CASE("a weights checksum refuses a different GGUF with the same header, and packed artifacts check theirs by default",
          "[compile][artifact][cli]") {
  CHECK(xxh64({}) == 0xEF46DB3751D8E999ull);  // the reference's test vectors
  const std::string abc = "abc", nobody = "Nobody inspects the spammish repetition";
  CHECK(xxh64({reinterpret_cast<const uint8_t*>(abc.data()), abc.size()}) == 0x44BC2CF5AD770999ull);
  CHECK(xxh64({reinterpret_cast<const uint8_t*>(nobody.data()), nobody.size()}) == 0xFBCEA83C8A378BF1ull);

  const Tiny t = tiny_artifact("checksum");
  CompileOptions c;
  c.max_step_tokens = 16;
  const std::string summed = t.dir + "/summed.vtc", packed = t.dir + "/packed.vtc";
  save_artifact(compile_model(gguf::GgufFile::open(t.gguf), c), summed, {false, true});
  const SaveInfo info = save_artifact(compile_model(gguf::GgufFile::open(t.gguf), c), packed, {true});
  REQUIRE(info.weights_checksum.has_value());
  CHECK(manifest_json(read_file(packed))["gguf"]["weights_checksum"] == fmt::format("xxh64:{:016x}", *info.weights_checksum));
  CHECK(manifest_json(read_file(t.vtc))["gguf"].count("weights_checksum") == 0);  // referenced: off unless asked
  CHECK_NOTHROW(load_artifact(summed));
  // Another GGUF in its place: same header and size, one weight changed.
  uint64_t weight_byte = 0;
  {
    const gguf::GgufFile f = gguf::GgufFile::open(t.gguf);
    weight_byte = f.data_offset() + (f.file_size() - f.data_offset()) / 2;
  }
  std::string other = read_file(t.gguf);
  other[weight_byte] = char(other[weight_byte] ^ 0x40);
  write_file(t.gguf + ".new", other);
  fs::rename(t.gguf + ".new", t.gguf);
  CHECK_THROWS_WITH(load_artifact(summed), Catch::Contains("weights changed") && Catch::Contains("content checksum") &&
                                               Catch::Contains("recompile"));
  CHECK_NOTHROW(load_artifact(t.vtc));  // without the checksum only the header is compared (docs/cli.md)
  // A packed artifact whose weights were damaged.
  std::string damaged = read_file(packed);
  const uint64_t offset = manifest_json(damaged)["gguf"]["offset"];
  damaged[offset + weight_byte] = char(damaged[offset + weight_byte] ^ 0x01);
  write_file(packed, damaged);
  CHECK_THROWS_WITH(load_artifact(packed), Catch::Contains("weights changed") && Catch::Contains("packed"));
  // The CLI: on by default with --pack, off with --no-checksum-weights.
  const std::string log = test::run_capture(
      fmt::format("{} compile {} -o {}/cli.vtc --pack 2>&1 && {} compile {} -o {}/cli-off.vtc --pack --no-checksum-weights "
                  "2>&1 && {} compile {} -o {}/cli-ref.vtc --checksum-weights 2>&1",
                  VTC_TOOL, t.gguf, t.dir, VTC_TOOL, t.gguf, t.dir, VTC_TOOL, t.gguf, t.dir));
  INFO(log);
  CHECK(manifest_json(read_file(t.dir + "/cli.vtc"))["gguf"].count("weights_checksum") == 1);
  CHECK(manifest_json(read_file(t.dir + "/cli-off.vtc"))["gguf"].count("weights_checksum") == 0);
  CHECK(manifest_json(read_file(t.dir + "/cli-ref.vtc"))["gguf"].count("weights_checksum") == 1);
  CHECK(log.find("weights checksum xxh64:") != std::string::npos);
  fs::remove_all(t.dir);
}

TEST_CASE("a mapped GGUF truncated under the process is reported and exits 1, not a bare SIGBUS", "[compile][artifact]") {
  const Tiny t = tiny_artifact("sigbus");
  const std::string err = t.dir + "/stderr.txt";
  auto touch_after_truncate = [&] {
    const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, STDERR_FILENO);
    CompiledModel m = load_artifact(t.vtc);  // maps the referenced GGUF
    const gguf::TensorInfo& last = m.file.tensors().back();
    REQUIRE(::truncate(t.gguf.c_str(), 0) == 0);  // what `cp new.gguf tiny.gguf` does first
    volatile uint8_t sum = 0;
    for (uint64_t i = 0; i < last.n_bytes; i += 4096) sum = uint8_t(sum + last.data[i]);
  };
  CHECK(in_child(touch_after_truncate) == "exit 1");
  const std::string message = read_file(err);
  INFO(message);
  CHECK(message.find("vtc: error: " + t.gguf + " changed while mapped") != std::string::npos);
  CHECK(message.find("restart") != std::string::npos);
  // A SIGBUS that is not a mapped model file keeps its default action.
  write_file(t.gguf, "");
  const Tiny u = tiny_artifact("sigbus-other");
  CHECK(in_child([&] {
          CompiledModel m = load_artifact(u.vtc);
          ::raise(SIGBUS);
        }).rfind("signal 7", 0) == 0);
  fs::remove_all(t.dir);
  fs::remove_all(u.dir);
}

// The weight-layout pass (passes/weight_layout.h) on real quantized models:
// a GGUF run (x8 weights repacked in memory at load), a referenced artifact
// (the same) and a packed one (the weights stored rearranged, read where
// they are mapped) give the same logits, bit for bit; keeping every weight
// in rows (--no-weight-layout) changes only the float order. qwen3 q4_k_m
// has q4_K and q6_K matrices and a q4_K token_embd read by embed alone;
// llama3 q4_0 has q4_0 matrices and a tied token_embd (embed and the head).
namespace {

// A packed artifact's bytes with another manifest, the GGUF kept at its
// offset (the manifest must still fit before it).
std::string with_packed_manifest(const std::string& whole, const json& manifest) {
  const uint64_t offset = manifest_json(whole)["gguf"]["offset"];
  const std::string text = manifest.dump();
  REQUIRE(24 + text.size() <= offset);
  std::string out = whole.substr(0, 16);
  const uint64_t length = text.size();
  out.append(reinterpret_cast<const char*>(&length), 8);
  out += text;
  out.append(offset - out.size(), '\0');
  return out + whole.substr(offset);
}

size_t count_layout(const ir::Module& m, WeightLayout layout) {
  size_t n = 0;
  for (const auto& w : m.weights) n += w.type.elem.layout() == layout && w.type.elem.is_quant();
  return n;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("x8 weights: a GGUF, a referenced and a packed artifact give the same logits, bit for bit",
          "[compile][reference][layout]") {
  for (const auto& [arch, type] : {std::pair<std::string, std::string>{"qwen3", "q4_k_m"}, {"llama3", "q4_0"}}) {
    INFO(arch << " " << type);
    const std::string dir = temp_path("layout-" + arch);
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string gguf_path = dir + "/model.gguf", referenced = dir + "/ref.vtc", packed = dir + "/packed.vtc";
    fs::copy_file(test::model_path(arch, type), gguf_path);
    const auto prompt = test::sample_prompt(gguf_path);
    std::vector<float> expected;
    {
      Session s(gguf_path, options(true));
      CHECK(vtc::test::cpu_interpreter(s).repacked_weights() == count_layout(s.module(), WeightLayout::Interleaved8));
      expected = run_logits(s, prompt);
    }
    const CompiledModel m = compile_model(gguf::GgufFile::open(gguf_path), {});
    const size_t n_x8 = count_layout(m.module, WeightLayout::Interleaved8);
    REQUIRE(n_x8 > 0);
    const ir::WeightDecl* embd = m.module.find_weight("token_embd");
    REQUIRE(embd != nullptr);
    CHECK(embd->type.elem.layout() == WeightLayout::Rows);  // read by embed (and, tied, by the head)
    bool reported = false;
    for (const auto& line : m.report) reported |= line.rfind(fmt::format("weight-layout: {} of ", n_x8), 0) == 0;
    CHECK(reported);
    save_artifact(m, referenced, {false});
    const SaveInfo info = save_artifact(m, packed, {true});
    CHECK(info.packed_weights == n_x8);
    CHECK(info.packed_bytes > 0);

    // The packed manifest lists the rearranged tensors, and their bytes are
    // not the GGUF's; the header and tensor table are.
    const std::string original = read_file(gguf_path), whole = read_file(packed);
    const json manifest = manifest_json(whole);
    const json& stored = manifest["gguf"]["stored_layouts"];
    REQUIRE(stored.is_object());
    CHECK(stored.size() == n_x8);
    const auto layouts = packed_layouts(m);
    CHECK(layouts.size() == n_x8);
    const uint64_t offset = manifest["gguf"]["offset"];
    CHECK(manifest_json(read_file(referenced))["gguf"].count("stored_layouts") == 0);
    {
      const gguf::GgufFile g = gguf::GgufFile::open(gguf_path);
      CHECK(whole.compare(offset, g.data_offset(), original, 0, g.data_offset()) == 0);
      size_t differ = 0;
      for (const auto& [name, layout] : layouts) {
        CHECK(stored.at(name) == "x8");
        const gguf::TensorInfo* t = g.find_tensor(name);
        const uint64_t at = uint64_t(t->data - g.bytes().data());
        differ += whole.compare(offset + at, t->n_bytes, original, at, t->n_bytes) != 0;
      }
      CHECK(differ == layouts.size());
      CHECK(whole.size() == offset + original.size());
    }

    // Referenced: repacked at load. Packed: nothing to repack, the weights
    // are read in the mapping.
    {
      Session s(referenced, options(true));
      CHECK(vtc::test::cpu_interpreter(s).repacked_weights() == n_x8);
      CHECK(bitwise_equal(run_logits(s, prompt), expected));
    }
    {
      const CompiledModel loaded = load_artifact(packed);
      for (const auto& [name, layout] : layouts) {
        const gguf::TensorInfo* t = loaded.file.find_tensor(name);
        CHECK(t->stored_layout == WeightLayout::Interleaved8);
        CHECK((t->data >= loaded.file.bytes().data() && t->data + t->n_bytes <= loaded.file.bytes().data() + loaded.file.file_size()));
      }
      CHECK(loaded.file.find_tensor(embd->source)->stored_layout == WeightLayout::Rows);
    }
    fs::remove(gguf_path);  // the packed artifact carries its own weights
    {
      Session s(packed, options(true));
      CHECK(vtc::test::cpu_interpreter(s).repacked_weights() == 0);
      CHECK(bitwise_equal(run_logits(s, prompt), expected));
    }

    // Without the pass: every weight in rows, which is another arithmetic
    // path (ggml's row kernels, llama.cpp's --no-repack), so the logits
    // differ. Each path is checked against its llama.cpp counterpart in
    // test_dense_reference.cpp; on these tiny models the two paths are ~1e-2
    // apart (an ulp can flip a q8 activation rounding), in llama.cpp too.
    {
      fs::copy_file(test::model_path(arch, type), gguf_path);
      SessionOptions o = options(true);
      passes::PassManagerOptions pm;
      pm.disabled_passes = {"weight-layout"};
      o.passes = pm;
      Session s(gguf_path, o);
      CHECK(count_layout(s.module(), WeightLayout::Interleaved8) == 0);
      CHECK(vtc::test::cpu_interpreter(s).repacked_weights() == 0);
      const double err = rel_l2(run_logits(s, prompt), expected);
      INFO("rows vs x8: relative L2 " << err);
      CHECK(err > 0);
    }
    fs::remove_all(dir);
  }
}

TEST_CASE("a packed artifact's stored_layouts are checked: an edited entry is an error naming it", "[compile][reference][layout]") {
  const std::string dir = temp_path("layout-edited");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string packed = dir + "/packed.vtc", edited = dir + "/edited.vtc";
  const CompiledModel m = compile_model(gguf::GgufFile::open(test::model_path("qwen3", "q4_k_m")), {});
  save_artifact(m, packed, {true});
  const std::string whole = read_file(packed);
  const json manifest = manifest_json(whole);
  const auto layouts = packed_layouts(m);
  REQUIRE(!layouts.empty());
  const std::string name = layouts.begin()->first;
  const std::string field = fmt::format("gguf.stored_layouts[\"{}\"]", name);
  const struct {
    const char* what;
    std::function<void(json&)> edit;
    std::string message;
  } cases[] = {
      {"an unknown layout", [&](json& j) { j["gguf"]["stored_layouts"][name] = "x9"; }, field + " is 'x9', not a weight layout"},
      {"a number", [&](json& j) { j["gguf"]["stored_layouts"][name] = 8; }, field + " must be a layout name"},
      {"a tensor the GGUF lacks", [&](json& j) { j["gguf"]["stored_layouts"]["blk.9.attn_q.weight"] = "x8"; },
       "gguf.stored_layouts[\"blk.9.attn_q.weight\"] names no tensor"},
      {"a layout the tensor's type has not",
       [&](json& j) { j["gguf"]["stored_layouts"]["output_norm.weight"] = "x8"; },
       "gguf.stored_layouts[\"output_norm.weight\"] is x8, a layout tensor 'output_norm.weight'"},
      {"a layout the IR does not declare",
       [&](json& j) { j["gguf"]["stored_layouts"]["token_embd.weight"] = "x8"; },
       "gguf.stored_layouts[\"token_embd.weight\"] is x8 but the lowered IR declares @token_embd as q4_k"},
      {"a dropped entry", [&](json& j) { j["gguf"]["stored_layouts"].erase(name); }, field + " is missing (rows)"},
      {"no map at all", [&](json& j) { j["gguf"].erase("stored_layouts"); }, "gguf.stored_layouts is missing"},
      {"not an object", [&](json& j) { j["gguf"]["stored_layouts"] = json::array(); }, "gguf.stored_layouts must be a JSON object"},
  };
  {
    INFO("the unedited manifest, rewritten");
    write_file(edited, with_packed_manifest(whole, manifest));
    CHECK(in_child([&] { load_and_step(edited); }) == "ok");
  }
  for (const auto& c : cases) {
    INFO(c.what);
    json j = manifest;
    c.edit(j);
    write_file(edited, with_packed_manifest(whole, j));
    const std::string outcome = in_child([&] { load_and_step(edited); });
    INFO(outcome);
    CHECK(is_error(outcome));
    CHECK(outcome.find(c.message) != std::string::npos);
  }
  // A referenced artifact names no stored layouts.
  const std::string referenced = dir + "/ref.vtc";
  save_artifact(m, referenced, {false});
  json j = manifest_json(read_file(referenced));
  j["gguf"]["stored_layouts"] = {{name, "x8"}};
  write_file(edited, with_manifest(read_file(referenced), j));
  const std::string outcome = in_child([&] { load_and_step(edited); });
  INFO(outcome);
  CHECK(outcome.find("gguf.stored_layouts must be empty") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("vtc compile --pack reports the repacking, and vtc run of the packed artifact repacks nothing",
          "[compile][cli][reference][layout]") {
  const std::string dir = temp_path("layout-cli");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string model = test::model_path("qwen3", "q4_k_m");
  const std::string log = test::run_capture(fmt::format("{} compile {} -o {}/p.vtc --pack 2>&1; {} compile {} -o {}/rows.vtc "
                                                        "--pack --no-weight-layout 2>&1",
                                                        VTC_TOOL, model, dir, VTC_TOOL, model, dir));
  INFO(log);
  CHECK(log.find("compile: weight-layout: ") != std::string::npos);
  CHECK(log.find("compile: packing ") != std::string::npos);
  CHECK(log.find(" weights into the x8 layout (") != std::string::npos);
  CHECK(manifest_json(read_file(dir + "/rows.vtc"))["gguf"]["stored_layouts"].empty());
  const std::string ids = " --tokens 1,450,4996,17354 -n 4 --temp 0 -t 2 -q";
  // (A subshell: run_capture redirects the stderr of the whole command.)
  const std::string from_gguf = test::run_capture(fmt::format("({} run {}{} 2>{}/gguf.err)", VTC_TOOL, model, ids, dir));
  const std::string from_packed = test::run_capture(fmt::format("({} run {}/p.vtc{} 2>{}/packed.err)", VTC_TOOL, dir, ids, dir));
  CHECK(from_packed == from_gguf);
  CHECK(read_file(dir + "/gguf.err").find("vtc: repacking ") != std::string::npos);
  CHECK(read_file(dir + "/packed.err").find("repacking") == std::string::npos);
  test::run_capture(fmt::format("({} run {}{} --no-weight-layout 2>{}/rows.err)", VTC_TOOL, model, ids, dir));
  CHECK(read_file(dir + "/rows.err").find("repacking") == std::string::npos);
  fs::remove_all(dir);
}

// The KV cache's memory against the state declarations: bytes per position
// = layers x (K + V) x kv heads x bytes of one head row at each half's type,
// from the GGUF's hparams; the pool = that x pages x page size; an artifact
// refuses other cache types, naming the flags.
TEST_CASE("kv cache types: bytes per token follow the declared types, and an artifact keeps its own", "[e2e][kv_cache]") {
  const std::string dir = temp_path("kv_cache_types");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string gguf = dir + "/small.gguf";
  synth::Options o;
  o.arch = "llama";
  o.size = "small";
  o.vocab_path = synth::find_default_vocab("llama");
  synth::write_model(o, gguf);
  const auto file = gguf::GgufFile::open(gguf);
  const int64_t layers = *file.get_int("llama.block_count"), heads_kv = *file.get_int("llama.attention.head_count_kv");
  const int64_t head_dim = *file.get_int("llama.embedding_length") / *file.get_int("llama.attention.head_count");
  struct Pair {
    GgmlType k, v;
  };
  for (Pair p : {Pair{GgmlType::F16, GgmlType::F16}, Pair{GgmlType::Q8_0, GgmlType::Q8_0}, Pair{GgmlType::Q4_0, GgmlType::Q4_0},
                 Pair{GgmlType::IQ4_NL, GgmlType::IQ4_NL}, Pair{GgmlType::Q5_1, GgmlType::Q5_1},
                 Pair{GgmlType::BF16, GgmlType::BF16}, Pair{GgmlType::F32, GgmlType::F32}, Pair{GgmlType::Q8_0, GgmlType::F16},
                 Pair{GgmlType::Q4_1, GgmlType::Q5_0}}) {
    SessionOptions so{.threads = 1, .n_ctx = 256};
    so.cache_type_k = p.k, so.cache_type_v = p.v;
    Session s(gguf, so);
    const KvMemory m = s.kv_memory();
    const uint64_t want = uint64_t(layers * heads_kv) * (*ggml_bytes_for(p.k, uint64_t(head_dim)) +
                                                         *ggml_bytes_for(p.v, uint64_t(head_dim)));
    INFO(ggml_type_name(p.k) << " / " << ggml_type_name(p.v));
    CHECK(m.k_type == p.k);
    CHECK(m.v_type == p.v);
    CHECK(m.bytes_per_token == want);
    CHECK(m.reserved_bytes == want * uint64_t(m.pages * m.page_size));
    CHECK(m.pages * m.page_size >= 256);
    // The declarations say it: the first layer's state(s).
    const ir::StateDecl* k0 = s.module().find_state("kv.0");
    REQUIRE(k0 != nullptr);
    CHECK(k0->type.elem.name() == std::string(ggml_type_name(p.k)));
    CHECK((s.module().find_state("kv.0.v") != nullptr) == (p.k != p.v));
  }
  // An artifact compiled with q8_0 keeps it; asking it for q4_0 is refused.
  CompileOptions c;
  c.cache_type_k = c.cache_type_v = GgmlType::Q8_0;
  const std::string vtc = dir + "/small.vtc";
  save_artifact(compile_model(gguf::GgufFile::open(gguf), c), vtc, {});
  CHECK(Session(vtc, {.threads = 1, .n_ctx = 64}).kv_memory().k_type == GgmlType::Q8_0);
  SessionOptions other{.threads = 1, .n_ctx = 64};
  other.cache_type_k = GgmlType::Q4_0;
  CHECK_THROWS_WITH(Session(vtc, other), Catch::Contains("compiled with a q8_0 / q8_0 KV cache") &&
                                             Catch::Contains("--cache-type-k q4_0"));
  fs::remove_all(dir);
}
