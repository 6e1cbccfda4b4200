// Dequantization and type traits checked against the llama.cpp reference.
//
// Fixture: a synthetic f32 llama model ("small": every matrix dimension a
// multiple of 256) is written by vtc's own generator and quantized by the
// reference (`vtc-ref quantize`) into one file per entry of kQuantSpecs,
// chosen so that every type vtc dequantizes appears in some file. The test
// then dequantizes every tensor of every file with vtc::dequantize_row and
// compares the float bits with `vtc-ref dequant` (ggml's to_float).
//
// Built only when the reference is found; each case exits 77 (ctest SKIPPED)
// with a reason if vtc-ref went missing after configuration.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "frontends/gguf/dequant.h"
#include "frontends/gguf/gguf.h"
#include "samples/synthetic_model.h"
#include "support/ggml_type.h"

namespace fs = std::filesystem;
using vtc::GgmlType;

namespace {

const std::string kRefExe = VTC_REF_EXE;
const fs::path kDataDir = VTC_QUANT_DATA_DIR;
const std::string kVocab = VTC_REF_VOCAB;

void require_reference() {
  if (!fs::exists(kRefExe)) {
    std::cout << "SKIPPED: " << kRefExe
              << " is missing; run tests/reference/fetch.sh and rebuild\n";
    std::exit(77);
  }
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs a shell command; returns its stdout, fails the test on non-zero exit.
std::string run(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = pclose(p);
  INFO("command: " << cmd);
  REQUIRE(rc == 0);
  return out;
}

std::vector<uint8_t> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// One quantized fixture file: llama_model_quantize's type and options.
struct QuantSpec {
  const char* file;     // stem of the output file
  const char* ftype;    // vtc-ref quantize TYPE
  const char* options;  // extra vtc-ref quantize options
};

// --pure keeps every matrix at the ftype's own type; the K-quant and IQ
// mixes are kept as the reference picks them. IQ3_XXS needs an importance
// matrix except on token_embd/output, so it is requested for those.
constexpr QuantSpec kQuantSpecs[] = {
    {"f16", "f16", ""},
    {"bf16", "bf16", ""},
    {"q4_0", "q4_0", "--pure"},
    {"q4_1", "q4_1", "--pure"},
    {"q5_0", "q5_0", "--pure"},
    {"q5_1", "q5_1", "--pure"},
    {"q8_0", "q8_0", "--pure"},
    {"q2_k", "q2_k", ""},
    {"q3_k_m", "q3_k_m", ""},
    {"q4_k_m", "q4_k_m", ""},
    {"q5_k_m", "q5_k_m", ""},
    {"q6_k", "q6_k", ""},
    {"iq4_nl", "iq4_nl", ""},
    {"iq4_xs", "iq4_xs", ""},
    {"iq3_s", "iq3_s", ""},
    {"iq3_xxs_embd", "q8_0", "--token-embedding-type iq3_xxs --output-tensor-type iq3_xxs"},
    {"mxfp4", "mxfp4_moe", "--pure"},  // without --pure only 3-d expert stacks get MXFP4
};

constexpr GgmlType kMustCover[] = {
    GgmlType::F32,  GgmlType::F16,  GgmlType::BF16,   GgmlType::Q4_0,    GgmlType::Q4_1,  GgmlType::Q5_0,
    GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K,   GgmlType::Q3_K,    GgmlType::Q4_K,  GgmlType::Q5_K,
    GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::IQ3_S, GgmlType::IQ3_XXS, GgmlType::MXFP4};

std::string spec_fingerprint() {
  std::string s = "v1 small seed=7 vocab=" + kVocab + "\n";
  for (const auto& q : kQuantSpecs) s += std::string(q.file) + " " + q.ftype + " " + q.options + "\n";
  return s;
}

// Writes the f32 model and its quantized copies once; a stamp file records
// the spec list so a change regenerates them.
void ensure_fixture() {
  require_reference();
  const fs::path stamp = kDataDir / "fixture.stamp";
  const std::string want = spec_fingerprint();
  bool fresh = fs::exists(stamp);
  if (fresh) {
    std::ifstream in(stamp);
    std::string have((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    fresh = have == want;
  }
  for (const auto& q : kQuantSpecs) fresh = fresh && fs::exists(kDataDir / (std::string(q.file) + ".gguf"));
  if (fresh) return;

  fs::create_directories(kDataDir);
  fs::remove(stamp);
  const fs::path f32 = kDataDir / "model-f32.gguf";
  vtc::synth::Options opt;
  opt.arch = "llama";
  opt.size = "small";
  opt.seed = 7;
  opt.vocab_path = kVocab;
  const auto summary = vtc::synth::write_model(opt, f32.string());
  REQUIRE(summary.shape.n_embd % 256 == 0);
  REQUIRE(summary.shape.n_ff % 256 == 0);
  for (const auto& q : kQuantSpecs) {
    const fs::path out = kDataDir / (std::string(q.file) + ".gguf");
    run(quote(kRefExe) + " quantize " + quote(f32.string()) + " " + quote(out.string()) + " " + q.ftype +
        " --threads 2 " + q.options);
  }
  std::ofstream(stamp) << want;
}

}  // namespace

TEST_CASE("reference fixture: quantized models", "[reference][fixture]") {
  ensure_fixture();
  for (const auto& q : kQuantSpecs) CHECK(fs::exists(kDataDir / (std::string(q.file) + ".gguf")));
}

TEST_CASE("ggml type table matches the reference", "[reference][traits]") {
  require_reference();
  const auto j = nlohmann::json::parse(run(quote(kRefExe) + " type-traits"));
  std::map<uint32_t, nlohmann::json> ref;
  for (const auto& t : j.at("types")) ref[t.at("id").get<uint32_t>()] = t;

  int compared = 0;
  for (auto it = vtc::ggml_type_table_begin(); it != vtc::ggml_type_table_end(); ++it) {
    const auto id = static_cast<uint32_t>(it->type);
    INFO("vtc type " << it->name << " (" << id << ")");
    REQUIRE(ref.count(id) == 1);
    const auto& r = ref.at(id);
    CHECK(r.at("name").get<std::string>() == it->name);
    CHECK(r.at("blck_size").get<uint32_t>() == it->block_size);
    CHECK(r.at("type_size").get<uint32_t>() == it->block_bytes);
    CHECK(r.at("is_quantized").get<bool>() == it->quantized);
    ++compared;
  }
  // And nothing the reference knows is missing from vtc's table.
  for (const auto& [id, r] : ref) {
    INFO("reference type " << r.at("name").get<std::string>() << " (" << id << ")");
    CHECK(vtc::find_ggml_type(id) != nullptr);
  }
  std::cout << "type traits: " << compared << " types compared with the reference ("
            << j.at("type_count").get<int>() << " type numbers)\n";
}

TEST_CASE("f16 and bf16: every bit pattern converts like the reference", "[reference][fp16]") {
  require_reference();
  fs::create_directories(kDataDir);
  std::vector<uint8_t> all(65536 * 2);
  for (uint32_t h = 0; h < 65536; ++h) {
    all[2 * h] = static_cast<uint8_t>(h);
    all[2 * h + 1] = static_cast<uint8_t>(h >> 8);
  }
  vtc::gguf::GgufWriter w;
  w.set("general.name", "vtc fp16 bit patterns");
  w.add_tensor("all_f16", GgmlType::F16, {65536}, all);
  w.add_tensor("all_bf16", GgmlType::BF16, {65536}, all);
  const fs::path file = kDataDir / "bit-patterns.gguf";
  w.write(file.string());

  for (auto [name, type] : {std::pair{"all_f16", GgmlType::F16}, std::pair{"all_bf16", GgmlType::BF16}}) {
    const fs::path out = kDataDir / (std::string(name) + ".f32");
    run(quote(kRefExe) + " dequant " + quote(file.string()) + " " + name + " " + quote(out.string()));
    const auto ref = read_file(out);
    REQUIRE(ref.size() == 65536 * 4);
    std::vector<float> ours(65536);
    vtc::dequantize_row(type, all.data(), ours.data(), 65536);
    int mismatches = 0;
    for (uint32_t h = 0; h < 65536; ++h) {
      uint32_t a, b;
      std::memcpy(&a, &ours[h], 4);
      std::memcpy(&b, &ref[4 * h], 4);
      if (a != b && ++mismatches <= 10)
        std::cout << name << " 0x" << std::hex << h << ": vtc 0x" << a << " ref 0x" << b << std::dec << "\n";
    }
    INFO(name);
    CHECK(mismatches == 0);
  }
}

TEST_CASE("dequantization is bit-exact with the reference", "[reference][dequant]") {
  ensure_fixture();
  const fs::path scratch = kDataDir / "ref-dequant";

  std::map<GgmlType, uint64_t> elements_by_type, tensors_by_type;
  uint64_t total = 0;
  for (const auto& q : kQuantSpecs) {
    const fs::path file = kDataDir / (std::string(q.file) + ".gguf");
    fs::remove_all(scratch);
    fs::create_directories(scratch);
    const auto index = nlohmann::json::parse(
        run(quote(kRefExe) + " dequant " + quote(file.string()) + " --all " + quote(scratch.string())));

    const auto gguf = vtc::gguf::GgufFile::open(file.string());
    REQUIRE(index.size() == gguf.tensors().size());
    for (const auto& t : gguf.tensors()) {
      INFO(q.file << ": tensor " << t.name << " (" << vtc::ggml_type_name(t.type) << ")");
      REQUIRE(vtc::can_dequantize(t.type));
      const auto ref = read_file(scratch / (t.name + ".f32"));
      REQUIRE(ref.size() == t.n_elements * 4);
      std::vector<float> ours(t.n_elements);
      vtc::dequantize_row(t.type, t.data, ours.data(), static_cast<int64_t>(t.n_elements));
      if (std::memcmp(ours.data(), ref.data(), ref.size()) != 0) {
        uint64_t bad = 0, first = 0;
        for (uint64_t i = 0; i < t.n_elements; ++i)
          if (std::memcmp(&ours[i], &ref[4 * i], 4) != 0 && bad++ == 0) first = i;
        float r;
        std::memcpy(&r, &ref[4 * first], 4);
        FAIL(bad << " of " << t.n_elements << " values differ; first at " << first << ": vtc "
                  << ours[first] << " ref " << r);
      }
      elements_by_type[t.type] += t.n_elements;
      tensors_by_type[t.type] += 1;
      total += t.n_elements;
    }
  }
  fs::remove_all(scratch);

  std::cout << "dequant bit-exact: " << total << " values over " << std::size(kQuantSpecs) << " files\n";
  for (const auto& [type, n] : elements_by_type)
    std::cout << "  " << vtc::ggml_type_name(type) << ": " << tensors_by_type[type] << " tensors, " << n
              << " values\n";
  for (GgmlType t : kMustCover) {
    INFO("type " << vtc::ggml_type_name(t) << " never appeared in the quantized fixtures");
    CHECK(elements_by_type.count(t) == 1);
  }
}
