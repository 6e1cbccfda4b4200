// `vtc bench` through the real binary: the batched decode step
// (--batch-rows), the DRAM bandwidth loop (--memory-bandwidth), the
// roofline's bytes per token, and the flags passed on to vtc-ref
// (--vs-reference, --reference-first). Timings are not asserted (shared
// machines); shapes, counts, signs and exact byte sums are. Cases with a
// model are [reference]: the generator takes its vocab from the reference.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <fstream>
#include <nlohmann/json.hpp>

#include "frontends/gguf/gguf.h"
#include "tests/e2e/e2e_fixtures.h"
#include "tests/test_process.h"

using namespace vtc;

namespace {
nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

void check_positive(const nlohmann::json& values, size_t n) {
  REQUIRE(values.is_array());
  CHECK(values.size() == n);
  for (double v : values.get<std::vector<double>>()) CHECK(v > 0);
}
}  // namespace

TEST_CASE("vtc bench --batch-rows times 1-row and B-row decode steps", "[cli][bench][reference]") {
  const std::string model = test::model_path("llama", "f32");
  const std::string json = test::unique_temp_path("bench-batch.json");
  const std::string out = test::run_capture(fmt::format(
      "{} bench {} -p 16 -n 8 -r 2 -t 2 --batch-rows 4 --batch-context 8 --batch-steps 2 --json {}", VTC_TOOL, model, json));
  INFO(out);
  CHECK_THAT(out, Catch::Contains("| step1 ms |") && Catch::Contains("| step4 ms |") &&
                      Catch::Contains("| step4 / step1 |"));
  const auto j = read_json(json);
  CHECK(j.at("batch") == nlohmann::json({{"rows", 4}, {"context", 8}, {"steps", 2}}));
  check_positive(j.at("vtc").at("pp"), 2);
  check_positive(j.at("vtc").at("tg"), 2);
  check_positive(j.at("vtc").at("step1_ms"), 2);
  check_positive(j.at("vtc").at("stepn_ms"), 2);
  CHECK_FALSE(j.contains("llama.cpp"));
  // Bytes per token: every tensor but token_embd (the model has an output.weight).
  const auto file = gguf::GgufFile::open(model);
  REQUIRE(file.find_tensor("output.weight") != nullptr);
  uint64_t expected = 0;
  for (const auto& t : file.tensors()) expected += t.n_bytes;
  expected -= file.find_tensor("token_embd.weight")->n_bytes;
  CHECK(j.at("weight_bytes_per_token").get<uint64_t>() == expected);
  std::filesystem::remove(json);
}

// -p 0 -n 0: only the batched steps' session is opened (it loads the model
// once, not twice); the step's bytes come from it.
TEST_CASE("vtc bench -p 0 -n 0 --batch-rows runs the batched steps alone and still counts the step's bytes",
          "[cli][bench][reference]") {
  const std::string model = test::model_path("llama", "f32");
  const std::string json = test::unique_temp_path("bench-batch-only.json");
  const std::string out = test::run_capture(fmt::format(
      "{} bench {} -p 0 -n 0 -r 1 -t 2 --batch-rows 2 --batch-context 8 --batch-steps 2 --json {}", VTC_TOOL, model, json));
  INFO(out);
  CHECK_THAT(out, Catch::Contains("| step2 / step1 |") && !Catch::Contains("tok/s |"));
  const auto j = read_json(json);
  check_positive(j.at("vtc").at("step1_ms"), 1);
  check_positive(j.at("vtc").at("stepn_ms"), 1);
  const auto file = gguf::GgufFile::open(model);
  uint64_t expected = 0;
  for (const auto& t : file.tensors()) expected += t.n_bytes;
  expected -= file.find_tensor("token_embd.weight")->n_bytes;
  CHECK(j.at("weight_bytes_per_token").get<uint64_t>() == expected);
  CHECK(j.at("kv_bytes_per_token").get<uint64_t>() > 0);
  std::filesystem::remove(json);
}

TEST_CASE("vtc bench --memory-bandwidth runs without a model", "[cli][bench]") {
  const std::string json = test::unique_temp_path("bench-bw.json");
  const std::string out = test::run_capture(
      fmt::format("{} bench --memory-bandwidth -t 2 -r 6 --bandwidth-mib 64 --json {}", VTC_TOOL, json));
  CHECK_THAT(out, Catch::Contains("DRAM read bandwidth, 2 threads:") && Catch::Contains("GB/s"));
  const auto j = read_json(json);
  const auto& bw = j.at("memory_bandwidth");
  CHECK(bw.at("bytes") == 64u << 20);
  check_positive(bw.at("gb_per_s"), 6);  // max(repetitions, 5) passes
  for (double g : bw.at("gb_per_s").get<std::vector<double>>()) CHECK(g < 10000);  // 10 TB/s: a broken timer
  CHECK_FALSE(j.contains("vtc"));
  std::filesystem::remove(json);
}

TEST_CASE("vtc bench with a model and --memory-bandwidth prints the tg roofline", "[cli][bench][reference]") {
  const std::string model = test::model_path("llama", "f32");
  const std::string out = test::run_capture(
      fmt::format("{} bench {} -p 0 -n 4 -r 1 --memory-bandwidth --bandwidth-mib 64", VTC_TOOL, model));
  INFO(out);
  CHECK_THAT(out, Catch::Contains("tg roofline") && Catch::Contains("MB of weights per token): vtc "));
  CHECK_THAT(out, !Catch::Contains("| pp0"));
}

TEST_CASE("vtc bench rejects a missing model and bad batch settings", "[cli][bench][reference]") {
  const std::string model = test::model_path("llama", "f32");
  auto fails_with = [&](const std::string& args, const std::string& message) {
    std::string out = test::run_capture(fmt::format("{} bench {} 2>&1; echo \"exit=$?\"", VTC_TOOL, args));
    INFO(out);
    CHECK_THAT(out, Catch::Contains(message) && Catch::Contains("exit=1"));
  };
  fails_with("", "give a MODEL");
  fails_with(model + " -p 0 -n 0 --batch-rows 2 --batch-steps 0", "steps >= 1");
  fails_with(model + " -p 4 -n 4 -r 0", "--repetitions must be at least 1");
}

TEST_CASE("vtc bench --vs-reference --batch-rows runs the batched step in llama.cpp too", "[cli][bench][reference]") {
  const std::string model = test::model_path("llama", "f32");
  const std::string json = test::unique_temp_path("bench-ref.json");
  const std::string out = test::run_capture(
      fmt::format("( {} bench {} -p 16 -n 4 -r 3 --batch-rows 3 --batch-context 8 --batch-steps 2 --vs-reference "
                  "--reference-first --ref-tool {} --json {} 2>&1 )",
                  VTC_TOOL, model, VTC_REF_TOOL, json));
  INFO(out);
  // --reference-first: llama.cpp's run is logged before vtc's.
  const size_t ref_at = out.find("bench: llama.cpp reference"), vtc_at = out.find("bench: vtc, CPU interpreter, ");
  REQUIRE(ref_at != std::string::npos);
  REQUIRE(vtc_at != std::string::npos);
  CHECK(ref_at < vtc_at);
  // Which kernels each engine ran: vtc's ISA level, the reference's CPU backend.
  CHECK(out.find(fmt::format("kernels, 2 threads")) != std::string::npos);
  CHECK(out.find("kernels: vtc ") != std::string::npos);
  CHECK(out.find("llama.cpp CPU backend built for ") != std::string::npos);
  const auto j = read_json(json);
  for (const char* engine : {"vtc", "llama.cpp"}) {
    INFO(engine);
    check_positive(j.at(engine).at("pp"), 3);
    check_positive(j.at(engine).at("tg"), 3);
    check_positive(j.at(engine).at("step1_ms"), 3);
    check_positive(j.at(engine).at("stepn_ms"), 3);
    // the 3 x 8 context tokens' prefill, timed in each engine
    CHECK(j.at(engine).at("context_prefill_ms").get<double>() > 0);
  }
  CHECK(out.find("| context 3 x 8 tok/s (once) |") != std::string::npos);
  std::filesystem::remove(json);
}

// The cost model's report (docs/cuda.md, "The cost model"): on the simulated
// device `vtc bench --target cuda` prices each step instead of timing it,
// and every figure says it is predicted; --kernel-times prints the same
// steps kernel by kernel against that report (the calibration gpu-check
// runs on a GPU; here only its plumbing, labelled as simulator time).
TEST_CASE("vtc bench --target cuda on the simulated device predicts and never measures", "[cli][bench][reference]") {
  const std::string model = test::model_path("llama", "f32");
  const std::string pred = test::unique_temp_path("bench-pred.json");
  const std::string out = test::run_capture(fmt::format(
      "VTC_CUDA_DEVICE=sim {} bench {} --target cuda --gpu h100 -p 16 --batch-rows 4 --batch-context 8 "
      "--scale-layers 6 --json {}",
      VTC_TOOL, model, pred));
  INFO(out);
  CHECK_THAT(out, Catch::Contains("prefill, 16 tokens on NVIDIA H100") && Catch::Contains("PREDICTED") &&
                      Catch::Contains("decode, 1 row(s)") && Catch::Contains("decode, 4 row(s)") &&
                      Catch::Contains("| gemv |") && Catch::Contains("roofline:"));
  CHECK_THAT(out, !Catch::Contains("tok/s"));
  const auto j = read_json(pred);
  CHECK(j.at("predicted") == true);
  REQUIRE(j.at("steps").size() == 3);
  for (const auto& step : j.at("steps")) {
    CHECK(step.at("gpu") == "h100");
    CHECK(step.at("predicted_us").get<double>() > step.at("kernel_us").get<double>() - 1e-9);
    double dram = 0;
    for (const auto& f : step.at("families")) dram += f.at("dram_bytes").get<double>();
    CHECK(dram > 0);
  }
  // --scale-layers 6 on the 2-layer model: each layer's kernels count 3
  // times, the embedding and the head once.
  const auto& decode1 = j.at("steps").at(1);
  std::map<std::string, double> launches;
  for (const auto& f : decode1.at("families")) launches[f.at("family")] = f.at("launches").get<double>();
  CHECK(launches["attn_decode"] == 6);
  // Decode attention is one launch: it stores the step's K/V rows and
  // combines its key slices itself.
  CHECK(launches["kv_append"] == 0);
  CHECK(launches["attn_combine"] == 0);
  CHECK(launches["embed"] == 1);
  // Per layer: q, k and v in one launch, the output, gate and up (with the
  // activation) in one, down; then the head.
  CHECK(launches["gemv"] == 6 * 4 + 1);
  // A decode step reads every weight once: its DRAM bytes are at least the weights a token reads.
  double dram = 0;
  for (const auto& f : decode1.at("families")) dram += f.at("dram_bytes").get<double>();
  CHECK(dram >= decode1.at("weight_bytes").get<double>());

  const std::string timed = test::run_capture(fmt::format(
      "VTC_CUDA_DEVICE=sim {} bench {} --target cuda --kernel-times --predicted {} -p 16 --batch-rows 4 --batch-context 8",
      VTC_TOOL, model, pred));
  INFO(timed);
  CHECK_THAT(timed, Catch::Contains("SIMULATOR host time per kernel") && Catch::Contains("against the cost model"));
  CHECK_THAT(timed, !Catch::Contains("MEASURED"));
  const std::string bad = test::run_capture(fmt::format(
      "VTC_CUDA_DEVICE=sim {} bench {} --target cuda --gpu v100 -p 16 2>&1; echo exit=$?", VTC_TOOL, model));
  CHECK_THAT(bad, Catch::Contains("unknown GPU 'v100'") && Catch::Contains("h200") && Catch::Contains("exit=1"));
  std::filesystem::remove(pred);
}

// --verify-cost on the simulated device prices a verify step of 1 + k rows
// (a @prefill chunk, every row's logits) against a 1-row decode step. A
// verify step of at most 16 rows runs decode's kernels as a CUDA graph
// (codegen/cuda/kernel.h, runtime/cuda/executor.h), so one row costs about
// what a decode step does (1.03x on the 2-layer model; 1.49x eager), and
// the launches are decode's: GEMVs and flash decoding, no GEMM.
TEST_CASE("vtc bench --verify-cost on the simulated device predicts verify steps against a decode step", "[cli][bench][reference]") {
  const std::string model = test::model_path("llama", "f32");
  const std::string pred = test::unique_temp_path("bench-verify.json");
  const std::string out = test::run_capture(fmt::format(
      "VTC_CUDA_DEVICE=sim {} bench {} --target cuda --gpu h200 --verify-cost --verify-max 2 --batch-context 8 --json {}",
      VTC_TOOL, model, pred));
  INFO(out);
  CHECK_THAT(out, Catch::Contains("verify step of 1 + k rows against a 1-row decode step") &&
                      Catch::Contains("PREDICTED by the cost model, not measured"));
  const auto j = read_json(pred);
  // decode, then verify steps of 1, 2, 3 rows drafted on the host, then
  // drafted on the device
  REQUIRE(j.at("steps").size() == 7);
  const double decode_us = j.at("steps").at(0).at("predicted_us").get<double>();
  std::vector<double> verify_us;
  for (size_t i = 1; i < 4; ++i) {
    const auto& step = j.at("steps").at(i);
    CHECK(step.at("step").get<std::string>() == fmt::format("verify, {} row(s) after 8 tokens of context", i));
    verify_us.push_back(step.at("predicted_us").get<double>());
    std::map<std::string, double> launches;
    for (const auto& f : step.at("families")) launches[f.at("family")] = f.at("launches").get<double>();
    CHECK(launches["gemv"] > 0);
    CHECK(launches["gemm"] + launches["gemm_mma"] + launches["attn_prefill"] + launches["attn_prefill_mma"] == 0);
    CHECK(step.at("graph_launches").get<double>() > 0);
  }
  CHECK(verify_us[0] < 1.2 * decode_us);
  CHECK(verify_us[0] <= verify_us[1]);
  CHECK(verify_us[1] <= verify_us[2]);
  // Drafted on the device (docs/speculative.md): spec_rows and spec_accept
  // run beside the step's kernels, only the accepted ids come back (no
  // logits rows, no pageable copy), the host waits once (for the outcome,
  // at the window's end) where the host-drafted step waits per download,
  // and the step is predicted no dearer for it.
  for (size_t i = 1; i < 4; ++i) {
    const auto& host = j.at("steps").at(i);
    const auto& device = j.at("steps").at(i + 3);
    INFO(device.at("step").get<std::string>());
    CHECK(device.at("step").get<std::string>() == fmt::format("verify drafted on the device, {} row(s) after 8 tokens of context", i));
    std::map<std::string, double> launches;
    for (const auto& f : device.at("families")) launches[f.at("family")] = f.at("launches").get<double>();
    CHECK(launches["spec_rows"] == 1);
    CHECK(launches["spec_accept"] == 1);
    for (const auto& l : device.at("launches"))  // a block per 2048 of the 32000 logits, per row
      if (l.at("entry").get<std::string>().rfind("spec_accept", 0) == 0) CHECK(l.at("blocks").get<double>() == 16 * double(i));
    CHECK(device.at("pageable_copies").get<double>() == 0);
    CHECK(device.at("host_waits").get<double>() == 1);
    CHECK(host.at("host_waits").get<double>() > 1);
    CHECK(device.at("predicted_us").get<double>() <= host.at("predicted_us").get<double>());
  }
  const std::string spec = test::run_capture(fmt::format(
      "VTC_CUDA_DEVICE=sim {} bench {} --target cuda --spec ngram 2>&1; echo exit=$?", VTC_TOOL, model));
  CHECK_THAT(spec, Catch::Contains("--verify-cost for the predicted cost") && Catch::Contains("exit=1"));
  std::filesystem::remove(pred);
}

// --spec (tools/vtc/bench_spec.h): greedy generation with speculation off
// and on, in one run; the columns, one figure per repetition, the counts,
// and the greedy output unchanged by speculation. No timing asserted.
TEST_CASE("vtc bench --spec ngram,draft prints tok/s, acceptance and the ratio to off per mode",
          "[cli][bench][spec][reference]") {
  const std::string model = test::model_path("llama", "f32");
  const std::string draft = test::model_path("llama", "q8_0");
  const std::string json = test::unique_temp_path("bench-spec.json");
  const std::string out = test::run_capture(
      fmt::format("{} bench {} --spec ngram,draft --draft-model {} --draft-p-min 0 -p 48 --spec-prompt repeat "
                  "--spec-passage 8 -n 24 -r 2 -t 2 --json {}",
                  VTC_TOOL, model, draft, json));
  INFO(out);
  CHECK_THAT(out, Catch::Contains("| mode | tok/s | min-max | vs off | acceptance | accepted per verify step |"));
  CHECK_THAT(out, Catch::Contains("| off | ") && Catch::Contains("| ngram | ") && Catch::Contains("| draft | "));
  CHECK_THAT(out, Catch::Contains("medians of 2 repetitions") && Catch::Contains("--spec-prompt repeat, passage 8"));
  const auto j = read_json(json);
  const auto& modes = j.at("spec").at("modes");
  CHECK(j.at("spec").at("prompt_tokens") == 48);
  for (const char* m : {"off", "ngram", "draft"}) {
    INFO(m);
    check_positive(modes.at(m).at("tok_s"), 2);
    CHECK(modes.at(m).at("generated").get<int64_t>() > 0);
    CHECK(modes.at(m).at("generated").get<int64_t>() <= 24);  // fewer only at an end-of-generation token
    CHECK(modes.at(m).at("same_tokens_as_off") == true);
  }
  CHECK(modes.at("off").at("draft_n") == 0);
  for (const char* m : {"ngram", "draft"}) {
    INFO(m);
    const auto& c = modes.at(m);
    CHECK(c.at("draft_n_accepted").get<int64_t>() <= c.at("draft_n").get<int64_t>());
    CHECK(c.at("verify_steps").get<int64_t>() <= c.at("steps").get<int64_t>());
    // Each step makes at least one token: at most 23 after the prompt's, per repetition.
    CHECK(c.at("steps").get<int64_t>() <= 2 * 23);
    CHECK(c.at("steps").get<int64_t>() > 0);
  }
  // No check that the n-gram drafter found drafts: a random-weight model
  // does not copy the repeated passage, and 24 tokens may hold no cycle yet.
  std::filesystem::remove(json);
}

// --spec-temp: the sampled workload (bench/spec-vs-llamacpp.sh's `sampled`).
// Seeded sampling draws in plain decoding's order, so speculation still
// gives off's tokens; a negative temperature is refused by name.
TEST_CASE("vtc bench --spec --spec-temp samples, seeded, with the tokens of off", "[cli][bench][spec]") {
  const std::string model = test::model_path("llama", "f32");
  const std::string json = test::unique_temp_path("bench-spec-temp.json");
  const std::string out = test::run_capture(
      fmt::format("{} bench {} --spec ngram --spec-temp 1 --spec-seed 7 -p 24 --spec-prompt repeat --spec-passage 6 "
                  "-n 16 -r 1 -t 2 --json {}",
                  VTC_TOOL, model, json));
  INFO(out);
  CHECK_THAT(out, Catch::Contains("(temperature 1, seed 7, prompt 24 tokens"));
  const auto j = read_json(json).at("spec");
  CHECK(j.at("temperature") == 1.0);
  CHECK(j.at("modes").at("ngram").at("same_tokens_as_off") == true);
  // Sampled, not greedy: another seed draws other tokens.
  const std::string json2 = test::unique_temp_path("bench-spec-temp2.json");
  test::run_capture(fmt::format("{} bench {} --spec ngram --spec-temp 1 --spec-seed 8 -p 24 --spec-prompt repeat "
                                "--spec-passage 6 -n 16 -r 1 -t 2 --json {}",
                                VTC_TOOL, model, json2));
  const auto tokens = j.at("modes").at("off").at("tokens").get<std::vector<int32_t>>();
  CHECK(tokens.size() == 16);
  CHECK(tokens != read_json(json2).at("spec").at("modes").at("off").at("tokens").get<std::vector<int32_t>>());
  std::filesystem::remove(json2);
  const std::string bad = test::run_capture(
      fmt::format("{} bench {} --spec ngram --spec-temp -1 -p 8 -n 4 2>&1; echo exit=$?", VTC_TOOL, model));
  CHECK_THAT(bad, Catch::Contains("--spec-temp") && !Catch::Contains("exit=0"));
  std::filesystem::remove(json);
}

TEST_CASE("vtc bench --verify-cost times verify steps of 1 + k rows against a decode step, and llama.cpp's",
          "[cli][bench][spec][reference]") {
  const std::string model = test::model_path("llama", "f32");
  const std::string json = test::unique_temp_path("bench-verify.json");
  const std::string out = test::run_capture(
      fmt::format("{} bench {} --verify-cost --verify-max 3 --batch-context 8 --batch-steps 2 -r 2 -t 2 --vs-reference "
                  "--ref-tool {} --json {}",
                  VTC_TOOL, model, VTC_REF_TOOL, json));
  INFO(out);
  CHECK_THAT(out, Catch::Contains("| step | vtc ms | vtc / decode | llama.cpp ms | llama.cpp / decode |"));
  CHECK_THAT(out, Catch::Contains("| decode, 1 row | ") && Catch::Contains("| verify k = 0 (1 rows) | ") &&
                      Catch::Contains("| verify k = 3 (4 rows) | ") && !Catch::Contains("k = 4"));
  const auto j = read_json(json).at("verify_cost");
  check_positive(j.at("decode_ms"), 2);
  REQUIRE(j.at("verify_ms").size() == 4);
  REQUIRE(j.at("llama.cpp_ms").size() == 4);
  for (size_t k = 0; k < 4; ++k) {
    check_positive(j.at("verify_ms").at(k), 2);
    check_positive(j.at("llama.cpp_ms").at(k), 2);
  }
  // --spec alone does not take --vs-reference (the script runs llama.cpp's tools).
  const std::string bad = test::run_capture(
      fmt::format("{} bench {} --spec ngram -p 8 -n 4 --vs-reference 2>&1; echo exit=$?", VTC_TOOL, model));
  CHECK_THAT(bad, Catch::Contains("bench/spec-vs-llamacpp.sh") && Catch::Contains("exit=1"));
  std::filesystem::remove(json);
}
