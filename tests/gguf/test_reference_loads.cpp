// Every generated architecture loads in the llama.cpp reference and gives
// finite logits, and the models are sensitive: zeroing one layer's
// attention output projection moves the reference's logits by more than
// 10x the CPU-vs-reference tolerance (DESIGN.md, "Correctness references").
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "samples/synthetic_model.h"
#include "tests/reference_logits.h"
#include "tests/reference_tolerances.h"
#include "tests/test_process.h"

using namespace vtc;
namespace fs = std::filesystem;

namespace {

using ReferenceRun = test::ReferenceLogits;

constexpr const char* kPrompt = "1,450,4996,310,278,3186,29889";

ReferenceRun reference_logits(const std::string& model, const std::string& extra = "",
                              const std::string& tokens = kPrompt) {
  return test::reference_logits(VTC_REF_TOOL, fmt::format("{} --tokens {} --n-predict 4{}", model, tokens, extra));
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


// Chunked prefill must reproduce the one-shot run: finite logits, each
// position within the dense f32 tolerance, and the same greedy tokens.
void check_same_run(const ReferenceRun& whole, const ReferenceRun& chunked) {
  CHECK(whole.all_finite);
  CHECK(chunked.all_finite);
  REQUIRE(chunked.logits.size() == whole.logits.size());
  for (size_t pos = 0; pos < whole.logits.size(); ++pos) {
    INFO("position " << pos);
    CHECK(test::relative_l2(chunked.logits[pos], whole.logits[pos]) < test::kLogitsRelL2Tolerance);
  }
  CHECK(chunked.greedy == whole.greedy);
}

}  // namespace

TEST_CASE("generated models load in the reference with finite, layer-sensitive logits",
          "[gguf][synth][reference]") {
  for (const auto& arch : synth::known_archs()) {
    // An encoder has no logits: bert's file is checked against the
    // reference's embeddings (tests/serve/embeddings_test.sh).
    if (arch == "bert") continue;
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

// The hybrids' DeltaNet layers carry a recurrent state (conv window and
// delta-rule state) across ubatches: prefilling 2 tokens at a time must give
// the one-shot logits, so the cache round trip is exercised, not bypassed.
TEST_CASE("hybrid models give the same reference logits with chunked prefill", "[gguf][synth][reference]") {
  for (const std::string arch : {"qwen35", "qwen35moe", "qwen3next", "qwen4exp"}) {
    INFO("arch " << arch);
    auto path = generate(arch, -1);
    check_same_run(reference_logits(path), reference_logits(path, " --ubatch 2"));
    fs::remove(path);
  }
}

// qwen4exp keeps more state across ubatches: the PLE hash reads its
// predecessors from the KV cells, the PLE conv history sits in the
// recurrent cache, and QSA pools indexer keys of earlier ubatches into
// blocks. 75 tokens (past the 8-block budget of 4-token blocks, so the
// attention is sparse) with the vocabulary's EOS in the middle (where the
// n-gram hash restarts), prefilled in chunks of 7 that cut blocks and
// n-grams apart, must give the one-shot logits. One thread: the result
// does not depend on it, and 11 ubatches of 4 spinning threads on a busy
// 2-core machine take a minute instead of seconds.
TEST_CASE("qwen4exp gives the same reference logits with chunked prefill of a sparse prompt",
          "[gguf][synth][reference]") {
  auto path = generate("qwen4exp", -1);
  const int eos = 151643;  // ggml-vocab-qwen2.gguf's tokenizer.ggml.eos_token_id
  std::string tokens;
  for (int i = 0; i < 75; ++i)
    tokens += fmt::format("{}{}", i ? "," : "", i == 37 ? eos : (i * 7919 + 13) % 150000);
  ReferenceRun whole = reference_logits(path, " --threads 1", tokens);
  REQUIRE(whole.logits.size() == 75);
  check_same_run(whole, reference_logits(path, " --threads 1 --ubatch 7", tokens));
  fs::remove(path);
}
