// `vtc run` end to end through the real binary: greedy ids equal the
// reference's, and --dump-logits writes exactly the documented layout.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/e2e/e2e_fixtures.h"
#include "tests/gguf/no_vocab_copy.h"
#include "tests/reference_logits.h"
#include "tests/reference_tolerances.h"
#include "tests/test_process.h"

using namespace vtc;

namespace {
std::vector<int32_t> parse_ids(const std::string& line) {
  std::vector<int32_t> ids;
  std::stringstream ss(line);
  std::string item;
  while (std::getline(ss, item, ',')) ids.push_back(std::stoi(item));
  return ids;
}
}  // namespace

TEST_CASE("vtc run greedy ids match the reference and --dump-logits has the documented layout", "[cli][reference]") {
  const std::string model = test::model_path("qwen3", "f32");
  const auto prompt = test::sample_prompt(model);
  const std::string dump = test::unique_temp_path("logits.f32");
  const std::string out = test::run_capture(fmt::format("{} run {} --tokens {} -n 8 --temp 0 -t 2 -q --dump-logits {} 2>/dev/null",
                                                        VTC_TOOL, model, fmt::join(prompt, ","), dump));
  const std::vector<int32_t> generated = parse_ids(out.substr(0, out.find('\n')));
  const test::ReferenceLogits ref =
      test::reference_logits(VTC_REF_TOOL, fmt::format("{} --tokens {} --n-predict 8", model, fmt::join(prompt, ",")));
  CHECK(generated == ref.greedy);

  auto meta = nlohmann::json::parse(std::ifstream(dump + ".json"));
  const int64_t n_vocab = meta.at("n_vocab");
  const size_t rows = meta.at("rows");
  CHECK(rows == prompt.size() + generated.size());
  CHECK(meta.at("prompt").get<std::vector<int32_t>>() == prompt);
  CHECK(meta.at("generated").get<std::vector<int32_t>>() == generated);
  CHECK(std::filesystem::file_size(dump) == rows * size_t(n_vocab) * sizeof(float));
  // Prompt rows are the reference's logits; row P-1 predicts generated[0].
  std::ifstream in(dump, std::ios::binary);
  std::vector<float> row(static_cast<size_t>(n_vocab));
  for (size_t p = 0; p < prompt.size(); ++p) {
    in.read(reinterpret_cast<char*>(row.data()), std::streamsize(row.size() * sizeof(float)));
    CHECK(test::relative_l2(row, ref.logits[p]) < test::kLogitsRelL2Tolerance);
  }
  CHECK(std::max_element(row.begin(), row.end()) - row.begin() == generated[0]);
  std::filesystem::remove(dump);
  std::filesystem::remove(dump + ".json");

  // -n 0: the prompt's rows alone (bench/kv-cache-kl.sh reads them).
  test::run_capture(fmt::format("{} run {} --tokens {} -n 0 -t 2 -q --dump-logits {} 2>/dev/null", VTC_TOOL, model,
                                fmt::join(prompt, ","), dump));
  CHECK(nlohmann::json::parse(std::ifstream(dump + ".json")).at("rows") == prompt.size());
  REQUIRE(std::filesystem::file_size(dump) == prompt.size() * size_t(n_vocab) * sizeof(float));
  std::ifstream prompt_only(dump, std::ios::binary);
  for (size_t p = 0; p < prompt.size(); ++p) {
    prompt_only.read(reinterpret_cast<char*>(row.data()), std::streamsize(row.size() * sizeof(float)));
    CHECK(test::relative_l2(row, ref.logits[p]) < test::kLogitsRelL2Tolerance);
  }
  std::filesystem::remove(dump);
  std::filesystem::remove(dump + ".json");
}

TEST_CASE("vtc run reports bad input clearly", "[cli][reference]") {
  const std::string model = test::model_path("llama", "f32");
  auto fails_with = [&](const std::string& args, const std::string& message) {
    std::string out = test::run_capture(fmt::format("{} run {} {} 2>&1; echo \"exit=$?\"", VTC_TOOL, model, args));
    INFO(out);
    CHECK_THAT(out, Catch::Contains(message) && Catch::Contains("exit=1"));
  };
  fails_with("--tokens 1,abc", "'abc' is not a token id");
  fails_with("--tokens 1,99999999", "outside the vocabulary");
  fails_with("", "give a prompt");
  fails_with("-p hi -c 2 --tokens 1,2,3", "context holds 2");
}

TEST_CASE("vtc run on a model without a vocabulary takes ids and prints ids", "[cli][reference][no_vocab]") {
  const std::string full = test::unique_temp_path("tiny-llama.gguf");
  const std::string model = test::unique_temp_path("tiny-llama-no-vocab.gguf");
  test::run_capture(fmt::format("{} gen-model --arch llama --size tiny -q -o {}", VTC_TOOL, full));
  const int64_t n_vocab = test::write_no_vocab_copy(full, model);
  std::filesystem::remove(full);

  // Generated ids go to stdout, space-separated; the timings to stderr.
  const std::string out =
      test::run_capture(fmt::format("{} run {} --tokens 1,2,3 -n 4 --temp 0 -t 2 2>/dev/null", VTC_TOOL, model));
  std::stringstream ss(out);
  std::vector<int64_t> ids;
  for (int64_t id; ss >> id;) ids.push_back(id);
  INFO(out);
  CHECK(ids.size() == 4);
  for (int64_t id : ids) CHECK((id >= 0 && id < n_vocab));
  CHECK(out.find_first_not_of("0123456789 \n") == std::string::npos);

  auto fails_with = [&](const std::string& args) {
    const std::string res = test::run_capture(fmt::format("{} run {} {} 2>&1 >/dev/null; echo \"exit=$?\"", VTC_TOOL, model, args));
    INFO(res);
    CHECK_THAT(res, Catch::Contains("no vocabulary") && Catch::Contains("--tokens") && Catch::Contains("exit=1"));
  };
  fails_with("-p hello -n 4");
  fails_with("--chat -p hello -n 4");

  // bench feeds synthetic ids; inspect names the missing vocabulary.
  CHECK_NOTHROW(test::run_capture(fmt::format("{} bench {} -p 8 -n 4 -r 1 -t 2 2>/dev/null", VTC_TOOL, model)));
  const std::string summary = test::run_capture(fmt::format("{} inspect {}", VTC_TOOL, model));
  CHECK_THAT(summary, Catch::Contains(fmt::format("tokenizer:    none (no_vocab), {} tokens", n_vocab)));
  std::filesystem::remove(model);
}

// On the cuda target plain decoding samples with the step's `sample` op
// (--device-sampling auto), whose draw for a seed is not the host
// sampler's. A speculating run draws its verify rows by that op's rule, so
// a seeded sampled run gives the ids of --spec off on the simulated
// device; before, they parted at the second id. This checks the draw
// rule; that a verify row's logits have decode's bits on CUDA is
// test_llama_archs_spec's "a verify chunk's logits rows" case.
TEST_CASE("vtc run --target cuda: a seeded sampled --spec ngram run gives the ids of --spec off", "[cli][spec][sim]") {
  const std::string model = test::model_path("llama", "f32");
  const auto ids = [&](const std::string& flags) {
    const std::string out = test::run_capture(fmt::format(
        "VTC_CUDA_DEVICE=sim {} run {} --target cuda -p 'the cat sat on the mat' --temp 1 --seed 5 -n 8 -q {} 2>&1",
        VTC_TOOL, model, flags));
    INFO(flags << ": " << out);
    const std::string last = out.substr(out.find_last_of('\n', out.size() - 2) + 1);
    return parse_ids(last);
  };
  const std::vector<int32_t> off = ids("--spec off");
  REQUIRE(off.size() == 8);
  CHECK(ids("--spec ngram") == off);
  // The two samplers draw differently, so the check above is not vacuous.
  CHECK(ids("--spec off --device-sampling off") != off);
}

// --draft-on (docs/speculative.md, "Drafting on the device"): a greedy
// --spec ngram run on the simulated device drafts there by default, says
// so, and gives the ids of --spec off and of --draft-on host; so does a
// seeded sampled run (the device draws its rows by the `sample` op); where
// the device cannot draft, --draft-on device is refused naming why.
TEST_CASE("vtc run --draft-on: n-gram drafting on the device gives --spec off's ids, and refusals name why",
          "[cli][spec][sim]") {
  const std::string model = test::model_path("llama", "f32");
  const auto run = [&](const std::string& flags) {
    return test::run_capture(fmt::format("VTC_CUDA_DEVICE=sim {} run {} -p 'the cat sat on the mat the cat sat on the' "
                                         "-n 12 -q {} 2>&1; echo exit=$?",
                                         VTC_TOOL, model, flags));
  };
  const auto ids = [](const std::string& out) {
    const size_t end = out.rfind("exit=");
    const std::string body = out.substr(0, end);
    return parse_ids(body.substr(body.find_last_of('\n', body.size() - 2) + 1));
  };
  const std::string off = run("--target cuda --temp 0 --spec off"), device = run("--target cuda --temp 0 --spec ngram"),
                    host = run("--target cuda --temp 0 --spec ngram --draft-on host");
  INFO(off << device << host);
  REQUIRE(ids(off).size() == 12);
  CHECK(ids(device) == ids(off));
  CHECK(ids(host) == ids(off));
  CHECK_THAT(device, Catch::Contains("speculative ngram (drafted on the device)"));
  CHECK_THAT(host, !Catch::Contains("drafted on the device"));
  CHECK_THAT(run("--target cpu --temp 0 --spec ngram --draft-on device"),
             Catch::Contains("--draft-on device: the CPU interpreter") && Catch::Contains("drafts on the host") &&
                 Catch::Contains("exit=1"));
  const std::string sampled_off = run("--target cuda --temp 0.7 --seed 5 --spec off"),
                    sampled = run("--target cuda --temp 0.7 --seed 5 --spec ngram");
  INFO(sampled_off << sampled);
  REQUIRE(ids(sampled_off).size() == 12);
  CHECK(ids(sampled) == ids(sampled_off));
  CHECK(ids(sampled_off) != ids(off));
  CHECK_THAT(sampled, Catch::Contains("speculative ngram (drafted on the device)"));
  CHECK_THAT(run("--target cuda --temp 0.7 --spec ngram --draft-on device --device-sampling off"),
             Catch::Contains("with --device-sampling on") && Catch::Contains("exit=1"));
  CHECK_THAT(run("--target cuda --temp 0 --repeat-penalty 1.1 --spec ngram --draft-on device"),
             Catch::Contains("applies no penalties") && Catch::Contains("exit=1"));
  CHECK_THAT(run("--target cuda --temp 0 --spec off --draft-on device"),
             Catch::Contains("--draft-on device drafts with the n-gram drafter") && Catch::Contains("exit=1"));
}
