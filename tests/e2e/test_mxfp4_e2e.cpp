// gpt-oss quantized by the reference's MXFP4_MOE recipe against the
// reference: the rescaled test-llama-archs gpt-oss file (llama_archs.h)
// through `vtc-ref quantize ... mxfp4_moe`, which (src/llama-quant.cpp)
// writes the 3-d expert stacks as MXFP4 and every other matrix as Q8_0.
// For seeds 1, 2, 3: a 12-token prefill (logits at every position) and 16
// greedy steps; relative L2 <= 1e-2 at every position against the closer of
// the reference's repack and --no-repack runs, top-1 agreement >= 99%, as
// the q8_0 files of test_llama_archs. The file must really hold MXFP4
// expert stacks, so the case cannot pass on a recipe that wrote none.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "frontends/gguf/gguf.h"
#include "tests/e2e/llama_archs.h"
#include "tests/e2e/logits_run.h"
#include "tests/reference_tolerances.h"

using namespace vtc;
namespace la = vtc::test::llama_archs;

namespace {

constexpr uint64_t kSeeds[] = {1, 2, 3};
constexpr size_t kPromptTokens = 12;

double worst_rel_l2(const test::LogitsRun& a, const test::LogitsRun& ref) {
  REQUIRE(a.logits.size() == ref.logits.size());
  double worst = 0;
  for (size_t p = 0; p < ref.logits.size(); ++p) worst = std::max(worst, test::relative_l2(a.logits[p], ref.logits[p]));
  return worst;
}

}  // namespace

TEST_CASE("llama-archs gpt-oss mxfp4_moe: vtc matches the reference", "[llama-archs][mxfp4]") {
  if (la::generator().empty()) {
    WARN("SKIPPED: no test-llama-archs binary was configured (VTC_LLAMA_ARCHS_BIN)");
    return;
  }
  const la::ArchModel& model = la::arch_model("gpt-oss");
  for (uint64_t seed : kSeeds) {
    const std::string path = la::model_path(model, seed, "mxfp4_moe");
    size_t mxfp4_tensors = 0;
    const auto file = gguf::GgufFile::open(path);
    for (const auto& t : file.tensors()) mxfp4_tensors += t.type == GgmlType::MXFP4;
    REQUIRE(mxfp4_tensors >= 3);  // gate, up and down stacks of at least one layer

    const auto prompt = la::prompt(seed, kPromptTokens);
    const std::vector<test::LogitsRun> refs = {test::reference_run(path, prompt, false, "--threads 1"),
                                               test::reference_run(path, prompt, true, "--threads 1")};
    const test::LogitsRun ours = test::vtc_run(path, prompt);
    double worst = 1e30;
    const test::LogitsRun* best = nullptr;
    for (const auto& ref : refs)
      if (const double w = worst_rel_l2(ours, ref); w < worst) worst = w, best = &ref;
    size_t agree = 0;
    for (size_t p = 0; p < prompt.size(); ++p)
      agree += test::argmax_of(ours.logits[p]) == test::argmax_of(best->logits[p]);
    const size_t same = size_t(std::mismatch(ours.greedy.begin(), ours.greedy.end(), best->greedy.begin()).first -
                               ours.greedy.begin());
    fmt::print("llama-archs gpt-oss seed {} mxfp4_moe ({} MXFP4 tensors): rel-L2 max {:.2e} (tolerance {:.0e}), "
               "top-1 {}/{}, greedy {}/{} identical\n",
               seed, mxfp4_tensors, worst, test::kQuantLogitsRelL2Tolerance, agree, prompt.size(), same, test::kDecode);
    INFO(path);
    CHECK(worst <= test::kQuantLogitsRelL2Tolerance);
    CHECK(double(agree) / double(prompt.size()) >= 0.99);
  }
}
