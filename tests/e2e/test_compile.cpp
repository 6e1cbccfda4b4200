// The compile pipeline changes no results, the interpreter runs with the
// compiled memory plan, and the .vtc artifact round-trips (issue 5).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "frontends/gguf/arch/arch.h"
#include "runtime/compile/artifact.h"
#include "runtime/compile/compile.h"
#include "runtime/cpu/session.h"
#include "support/error.h"
#include "tests/e2e/e2e_fixtures.h"
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
std::vector<float> run_logits(cpu::Session& s, const std::vector<int32_t>& prompt) {
  cpu::HostTensor p = s.prefill(0, prompt, 0, /*all_logits=*/true);
  std::vector<float> out(p.f32(), p.f32() + p.numel());
  int32_t tok = 0, pos = int32_t(prompt.size());
  std::vector<float> last = p.row(p.shape[0] - 1);
  for (int step = 0; step < 8; ++step, ++pos) {
    tok = int32_t(std::max_element(last.begin(), last.end()) - last.begin());
    int32_t slot = 0;
    cpu::HostTensor d = s.decode({&slot, 1}, {&tok, 1}, {&pos, 1});
    last = d.row(0);
    out.insert(out.end(), last.begin(), last.end());
  }
  return out;
}

cpu::SessionOptions options(bool optimize) {
  cpu::SessionOptions o;
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
    cpu::Session optimized(path, options(true)), plain(path, options(false));
    const auto prompt = test::sample_prompt(path);
    double err = rel_l2(run_logits(optimized, prompt), run_logits(plain, prompt));
    INFO("relative L2 " << err);
    CHECK(err <= 1e-5);
  }
}

TEST_CASE("steps run with the compiled memory plan while they fit its bounds", "[compile][reference]") {
  const std::string path = test::model_path("llama", "f32");
  cpu::Session s(path, options(true));
  const auto prompt = test::sample_prompt(path);
  s.prefill(0, prompt, 0, /*all_logits=*/false);  // R = 1 <= bound
  CHECK(s.interpreter().last_stats().compiled_plan);
  const uint64_t compiled_arena = s.interpreter().last_stats().arena_bytes;
  s.reset(0);
  s.prefill(0, prompt, 0, /*all_logits=*/true);  // R = 25 > the bound of 4: planned for this step
  CHECK_FALSE(s.interpreter().last_stats().compiled_plan);
  CHECK(s.interpreter().last_stats().arena_bytes != compiled_arena);
  CHECK(s.interpreter().last_stats().arena_bytes < s.interpreter().last_stats().naive_bytes);
}

TEST_CASE("a compiled artifact runs like its GGUF, packed or referenced", "[compile][reference]") {
  const std::string gguf_copy = temp_path("model.gguf");
  std::filesystem::copy_file(test::model_path("qwen3", "f32"), gguf_copy, std::filesystem::copy_options::overwrite_existing);
  const auto prompt = test::sample_prompt(gguf_copy);
  std::vector<float> expected;
  {
    cpu::Session s(gguf_copy, options(true));
    expected = run_logits(s, prompt);
  }
  CompiledModel m = compile_model(gguf::GgufFile::open(gguf_copy), {});
  const std::string referenced = temp_path("ref.vtc"), packed = temp_path("packed.vtc");
  save_artifact(m, referenced, {false});
  save_artifact(m, packed, {true});
  CHECK(is_artifact(referenced));
  CHECK_FALSE(is_artifact(gguf_copy));
  {
    cpu::Session s(referenced, options(true));
    CHECK(rel_l2(run_logits(s, prompt), expected) == 0.0);
  }
  std::filesystem::remove(gguf_copy);  // the packed artifact carries its own weights
  {
    cpu::Session s(packed, options(true));
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
  CHECK_THROWS_WITH(load_artifact(vtc_path), Catch::Contains("format version 99") && Catch::Contains("version 1"));
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
  c.target = "cuda";
  CompiledModel m = compile_model(gguf::GgufFile::open(path), c);
  REQUIRE(m.kernels.count("decode"));
  REQUIRE_FALSE(m.kernels.at("decode").empty());
  save_artifact(m, vtc_path, {false});
  CompiledModel loaded = load_artifact(vtc_path);
  REQUIRE(loaded.kernels.at("decode").size() == m.kernels.at("decode").size());
  CHECK(loaded.kernels.at("decode")[0].source == m.kernels.at("decode")[0].source);
  CHECK(loaded.target == "cuda");
  CHECK_THROWS_WITH(cpu::Session(vtc_path, options(true)), Catch::Contains("compiled for target cuda"));
  std::filesystem::remove(vtc_path);
}

TEST_CASE("qwen35 on cuda: the decode step keeps its recurrent states, ids and sampling on the device", "[compile][reference][hybrid]") {
  // The seed's bug class (stale host copies of device data) for the hybrid:
  // nothing inside @decode may move to the host, and every op touching a
  // conv ring or delta-rule state runs on the device.
  CompileOptions c;
  c.target = "cuda";
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
  // ngram_roll run there, and nothing inside @decode moves to the host; the
  // only device-to-host traffic is the sampled token the runtime streams.
  CompileOptions c;
  c.target = "cuda";
  CompiledModel m = compile_model(gguf::GgufFile::open(test::model_path("qwen4exp", "f32")), c);
  const ir::Function* decode = m.module.find_function("decode");
  REQUIRE(decode != nullptr);
  std::map<ir::OpKind, int> on_device;
  for (const auto& op : decode->ops) {
    INFO(op->mnemonic());
    CHECK(op->kind != ir::OpKind::ToHost);
    for (const auto& r : op->results) CHECK(r.type().placement == ir::Placement::Device);
    if (op->kind == ir::OpKind::StateRead && op->attr("state")->s == "last_ids") ++on_device[op->kind];
    for (ir::OpKind k : {ir::OpKind::NgramHash, ir::OpKind::NgramRoll, ir::OpKind::IndexerSelect, ir::OpKind::Attention,
                         ir::OpKind::CausalConv1d, ir::OpKind::DeltaRule})
      if (op->kind == k) ++on_device[k];
  }
  CHECK(on_device[ir::OpKind::StateRead] == 1);  // the id feedback
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
  CHECK(std::filesystem::exists(std::filesystem::path(dump) / "decode" / "02-fuse-qk-rope.vtcir"));
  const std::string ids = " --tokens 1,450,4996,17354 -n 6 --temp 0 -t 2 -q 2>/dev/null";
  const std::string from_gguf = test::run_capture(fmt::format("{} run {}{}", VTC_TOOL, model, ids));
  const std::string from_vtc = test::run_capture(fmt::format("{} run {}{}", VTC_TOOL, out, ids));
  CHECK(from_vtc == from_gguf);
  const std::string bad = test::run_capture(fmt::format("{} run {}.missing -n 1 2>&1; echo \"exit=$?\"", VTC_TOOL, out));
  CHECK(bad.find("exit=0") == std::string::npos);
  std::filesystem::remove(out);
  std::filesystem::remove_all(dump);
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
