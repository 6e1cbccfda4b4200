// Every generated architecture loads in the llama.cpp reference and gives
// finite logits, and the models are sensitive: zeroing one layer's
// attention output projection moves the reference's logits by more than
// 10x the CPU-vs-reference tolerance (DESIGN.md, "Correctness references").
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "samples/synthetic_model.h"
#include "tests/reference_tolerances.h"
#include "tests/test_process.h"

using namespace vtc;
namespace fs = std::filesystem;

namespace {

struct ReferenceRun {
  std::vector<std::vector<float>> logits;
  std::vector<int> greedy;
  bool all_finite = false;
};

ReferenceRun reference_logits(const std::string& model) {
  auto out = test::run_capture(fmt::format("{} logits {} --tokens 1,450,4996,310,278,3186,29889 --n-predict 4",
                                     VTC_REF_TOOL, model));
  auto j = nlohmann::json::parse(out);
  ReferenceRun r;
  r.logits = j.at("logits").get<std::vector<std::vector<float>>>();
  r.greedy = j.at("greedy").get<std::vector<int>>();
  r.all_finite = j.at("all_finite").get<bool>();
  return r;
}

std::string generate(const std::string& arch, int zero_layer) {
  synth::Options o;
  o.arch = arch;
  o.vocab_path = synth::find_default_vocab(arch);
  o.zero_attn_output_layer = zero_layer;
  auto path = test::unique_temp_path(fmt::format("ref_{}_{}.gguf", arch, zero_layer));
  synth::write_model(o, path);
  return path;
}

}  // namespace

TEST_CASE("generated models load in the reference with finite, layer-sensitive logits",
          "[gguf][synth][reference]") {
  for (const auto& arch : synth::known_archs()) {
    INFO("arch " << arch);
    auto normal = generate(arch, -1);
    auto ablated = generate(arch, 1);
    ReferenceRun a = reference_logits(normal);
    ReferenceRun b = reference_logits(ablated);
    CHECK(a.all_finite);
    CHECK(b.all_finite);
    REQUIRE(a.logits.size() == 7);
    REQUIRE(a.greedy.size() == 4);
    for (size_t pos = 0; pos < a.logits.size(); ++pos) {
      double moved = test::relative_l2(b.logits[pos], a.logits[pos]);
      INFO("position " << pos << ": zeroing blk.1.attn_output moved logits by rel-L2 " << moved);
      CHECK(moved > 10 * test::kLogitsRelL2Tolerance);
    }
    fs::remove(normal);
    fs::remove(ablated);
  }
}
