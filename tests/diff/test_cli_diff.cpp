// `vtc diff` and `vtc run --fingerprint` through the real binary: exit
// statuses, the report's first-divergence line, clear errors for bad flags,
// and @last_ids holding each generated token step by step.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fmt/format.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "frontends/gguf/arch/arch.h"
#include "frontends/gguf/gguf.h"
#include "tests/diff/diff_fixtures.h"

using namespace vtc;

namespace {
std::string prompt_arg() { return fmt::format("--tokens {}", fmt::join(test::diff_prompt(), ",")); }

test::Outcome vtc_diff(const std::string& model, const std::string& args) {
  return test::run_status(fmt::format("{} diff {} {} {} -t 2", VTC_TOOL, model, prompt_arg(), args));
}
}  // namespace

TEST_CASE("vtc diff: clean arms exit 0", "[cli][reference]") {
  const std::string model = test::tiny_model("qwen3");
  const test::Outcome clean = vtc_diff(model, "--arms cpu,cpu-unfused --steps 3");
  INFO(clean.text);
  CHECK(clean.status == 0);
  CHECK_THAT(clean.text, Catch::Contains("no divergence: 4 steps (prefill + 3 decode)"));
  CHECK_THAT(clean.text, Catch::Contains("== step 3: decode, token"));
  // The table has the documented columns.
  CHECK_THAT(clean.text, Catch::Contains("tensor") && Catch::Contains("fingerprint cpu-unfused") &&
                             Catch::Contains("rel-L2") && Catch::Contains("verdict"));
}

#ifdef VTC_TEST_HOOKS
TEST_CASE("vtc diff --inject-bug stale-ids exits 2 naming the embedding input at step 1", "[cli][reference][hooks]") {
  const std::string model = test::tiny_model("llama");
  const test::Outcome stale = vtc_diff(model, "--arms cpu,cpu-unfused --steps 4 --inject-bug stale-ids --only-divergent");
  INFO(stale.text);
  CHECK(stale.status == 2);
  CHECK_THAT(stale.text, Catch::Contains("first divergence: step 1, %ids (op state_read @last_ids, read by embed)"));
  CHECK_THAT(stale.text, Catch::Contains("step 0: ") && Catch::Contains(", 0 diverged"));
}
#endif

TEST_CASE("vtc diff reports bad flags clearly", "[cli][reference]") {
  const std::string model = test::tiny_model("llama");
  auto fails_with = [&](const std::string& args, const std::string& message, int status = 1) {
    const test::Outcome o = test::run_status(fmt::format("{} diff {} {}", VTC_TOOL, model, args));
    INFO(args << "\n" << o.text);
    CHECK_THAT(o.text, Catch::Contains(message));
    CHECK(o.status == status);
  };
  const std::string p = prompt_arg();
  {  // the default arms are cpu,cuda; a missing driver (forced, so this holds on a GPU machine too) is named
    const test::Outcome o = test::run_status(
        fmt::format("VTC_CUDA_LIBRARY=/nonexistent/libcuda.so.1 {} diff {} {}", VTC_TOOL, model, p));
    INFO(o.text);
    CHECK_THAT(o.text, Catch::Contains("cuda target unavailable: the CUDA driver (libcuda.so.1) is not installed"));
    CHECK(o.status == 1);
  }
  fails_with("", "give the prompt as -p TEXT or as --tokens");
  fails_with(p + " -p hello", "give the prompt as -p TEXT or as --tokens");
  fails_with(p + " --arms cpu", "--arms takes exactly two arms");
  fails_with(p + " --arms cpu,gpu", "unknown arm 'gpu' (known: cpu, cpu-unfused, cuda)");
  fails_with(p + " --arms cpu,cpu-unfused --tap '('", "--tap '(' is not a valid regular expression");
  fails_with(p + " --arms cpu,cpu-unfused --tol f33=1", "DTYPE one of f32, f16, bf16, int");
  fails_with(p + " --arms cpu,cpu-unfused --steps 4 -c 8", "cannot hold the 9 prompt tokens and 4 decode steps");
  fails_with("--tokens 1,99999999 --arms cpu,cpu-unfused", "outside the vocabulary");
  fails_with(p + " --arms cpu,cpu-unfused --inject-bug nope",
#ifdef VTC_TEST_HOOKS
             "unknown --inject-bug 'nope' (known: stale-ids)");
#else
             "is a test switch and this build has no test hooks");
#endif
  const test::Outcome bad_tokens = test::run_status(fmt::format("{} diff {} --tokens 1,abc", VTC_TOOL, model));
  CHECK(bad_tokens.status != 0);
  CHECK_THAT(bad_tokens.text, Catch::Contains("--tokens"));
}

TEST_CASE("vtc run --fingerprint prints every declared state each step and @last_ids holds the generated ids", "[cli][reference]") {
  const std::string model = test::tiny_model("llama");
  const test::Outcome run = test::run_status(
      fmt::format("{} run {} {} -n 6 --temp 0 -t 2 -q --fingerprint", VTC_TOOL, model, prompt_arg()));
  INFO(run.text);
  REQUIRE(run.status == 0);
  // -q prints the generated ids as the last stdout line.
  std::vector<int32_t> generated;
  std::map<int, std::set<std::string>> states_at;
  std::map<int, int32_t> last_ids_at;
  const std::regex line_re(R"(^fingerprint: step (\d+) \((prefill|decode)\) (@\S+) (\S+) \[(\S+)\] .* first=\[([^\]]*)\]$)");
  const std::regex ids_re(R"(^\d+(,\d+)*$)");
  std::istringstream in(run.text);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, line_re)) {
      const int step = std::stoi(m[1]);
      CHECK(m[2] == (step == 0 ? "prefill" : "decode"));
      states_at[step].insert(m[3]);
      if (m[3] == "@last_ids") last_ids_at[step] = std::stoi(m[6]);
    } else if (std::regex_match(line, ids_re)) {
      std::stringstream ss(line);
      for (std::string item; std::getline(ss, item, ',');) generated.push_back(std::stoi(item));
    }
  }
  REQUIRE(generated.size() == 6);
  // One block per sampled token: step 0 (prefill) to step 5.
  REQUIRE(states_at.size() == generated.size());
  gguf::GgufFile file = gguf::GgufFile::open(model);
  std::set<std::string> declared;
  for (const auto& s : arch::build_module(file).states) declared.insert("@" + s.name);
  for (const auto& [step, names] : states_at) CHECK(names == declared);
  // The prefill leaves @last_ids untouched (0); decode step k was fed
  // generated[k-1] and its own `sample` op (greedy at --temp 0) wrote the
  // next id to @last_ids: the id the host sampler then picked from the
  // step's logits, generated[k].
  CHECK(last_ids_at.at(0) == 0);
  for (int k = 1; k < int(generated.size()); ++k) {
    INFO("step " << k);
    CHECK(last_ids_at.at(k) == generated[size_t(k)]);
  }
}

TEST_CASE("vtc run --fingerprint: qwen4exp's @ngram_hist holds the last two ids of the sequence at every step", "[cli][reference][hybrid]") {
  // The PLE n-gram history of a 3-gram hash keeps the sequence's last 2
  // ids: after the prefill the prompt's last two (an EOS among them, stored
  // like any id), after decode step k the token fed at k and its predecessor.
  const std::string model = test::tiny_model("qwen4exp");
  const std::vector<int32_t> prompt = {1, 450, 4996, 17354, 151643, 1701};
  const test::Outcome run = test::run_status(fmt::format("{} run {} --tokens {} -n 5 --temp 0 -t 2 -q --fingerprint",
                                                         VTC_TOOL, model, fmt::join(prompt, ",")));
  INFO(run.text);
  REQUIRE(run.status == 0);
  std::map<int, std::string> history_at;
  std::vector<int32_t> generated;
  const std::regex hist_re(R"(^fingerprint: step (\d+) \((?:prefill|decode)\) @ngram_hist i64 \[2\] .* first=\[([^\]]*)\]$)");
  const std::regex ids_re(R"(^\d+(,\d+)*$)");
  std::istringstream in(run.text);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, hist_re)) {
      history_at[std::stoi(m[1])] = m[2];
    } else if (std::regex_match(line, ids_re)) {
      std::stringstream ss(line);
      for (std::string item; std::getline(ss, item, ',');) generated.push_back(std::stoi(item));
    }
  }
  REQUIRE(generated.size() == 5);
  REQUIRE(history_at.size() == generated.size());
  std::vector<int32_t> sequence = prompt;
  for (int k = 0; k < int(generated.size()); ++k) {
    if (k > 0) sequence.push_back(generated[size_t(k - 1)]);
    INFO("step " << k);
    CHECK(history_at.at(k) == fmt::format("{}, {}", sequence[sequence.size() - 2], sequence.back()));
  }
}

TEST_CASE("vtc diff --inject-bug stale-ids on qwen4exp names the ids the n-gram hash reads and the history it rolls", "[cli][reference][hooks][hybrid]") {
  // The seed's failure (docs/DESIGN.md, seed PR 2550) on its own
  // architecture: the decode step fed a stale copy of the ids hashes token 0
  // into the PLE n-gram history. The report's first divergence is the ids
  // value with all three readers, and @ngram_hist shows the 0 rolling in.
  const std::string model = test::tiny_model("qwen4exp");
  const test::Outcome stale = vtc_diff(model, "--arms cpu,cpu-unfused --steps 3 --inject-bug stale-ids --only-divergent");
  INFO(stale.text);
  CHECK(stale.status == 2);
  CHECK_THAT(stale.text, Catch::Contains("first divergence: step 1, %ids (op state_read @last_ids, read by embed, "
                                         "ngram_hash, ngram_roll)"));
  const auto& p = test::diff_prompt();
  const std::regex hist_re(fmt::format(R"(@ngram_hist +state +i64 +2 .*first=\[{}, [0-9]+\].*first=\[{}, 0\].*DIVERGED)",
                                       p.back(), p.back()));
  CHECK(std::regex_search(stale.text, hist_re));
  const test::Outcome clean = vtc_diff(model, "--arms cpu,cpu-unfused --steps 3");
  INFO(clean.text);
  CHECK(clean.status == 0);
}

// `vtc run --device-sampling on`: the ids come from @decode's own `sample`
// op, fed back through @last_ids, never through the host sampler. Greedy
// must give the host's tokens; a seeded draw must repeat.
TEST_CASE("vtc run samples in the decode step with --device-sampling on: greedy equals the host sampler", "[cli][reference]") {
  for (const std::string arch : {"llama", "qwen3"}) {
    INFO(arch);
    const std::string model = test::tiny_model(arch);
    auto run = [&](const std::string& extra) {
      const test::Outcome o =
          test::run_status(fmt::format("{} run {} {} -n 10 -t 2 -q {}", VTC_TOOL, model, prompt_arg(), extra));
      INFO(o.text);
      REQUIRE(o.status == 0);
      const size_t end = o.text.find_last_not_of('\n');
      const size_t start = o.text.find_last_of('\n', end);
      return o.text.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1) + 1);
    };
    const std::string host = run("--temp 0 --device-sampling off");
    CHECK(std::count(host.begin(), host.end(), ',') == 9);
    CHECK(run("--temp 0 --device-sampling on") == host);
    const std::string drawn = run("--temp 0.9 --seed 5 --device-sampling on");
    CHECK(run("--temp 0.9 --seed 5 --device-sampling on") == drawn);
    CHECK(run("--temp 0.9 --seed 6 --device-sampling on") != drawn);
  }
}
