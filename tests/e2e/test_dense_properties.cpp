// Properties of the CPU runtime that need no reference numbers: the
// runtime holds no architecture (printed IR, parsed back, runs the same),
// chunked prefill equals one-shot prefill, batched sequences are
// independent, bad inputs are clear errors, the arena plan reuses memory,
// and fused regions run as one kernel with the bits of op by op.
#include <catch2/catch.hpp>

#include <cstring>
#include <map>

#include "frontends/gguf/arch/arch.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "runtime/cpu/kernels/kernels.h"
#include "runtime/session.h"
#include "tests/session_util.h"
#include "support/error.h"
#include "tests/e2e/e2e_fixtures.h"
#include "tests/reference_tolerances.h"

using namespace vtc;

namespace {
std::vector<int32_t> head(const std::vector<int32_t>& v, size_t n) { return {v.begin(), v.begin() + long(n)}; }
}  // namespace

TEST_CASE("the decode IR printed, parsed back and executed gives identical logits", "[e2e][reference]") {
  const std::string path = test::model_path("qwen3", "f32");
  auto file = gguf::GgufFile::open(path);
  ir::Module built = arch::build_module(file);
  ir::Module parsed = ir::parse(ir::print(built));
  ir::verify(parsed);
  REQUIRE(ir::structurally_equal(built, parsed));
  const auto prompt = test::sample_prompt(path);
  std::vector<std::vector<float>> logits;
  for (const ir::Module* m : {&built, &parsed}) {
    cpu::ThreadPool pool(2);
    StateStore states(*m, {1, 128});
    HostStates host(states);
    REQUIRE(states.reserve(0, 128));  // KV pages for the slot (a session does this itself)
    cpu::Interpreter interp(*m, file, host, pool);
    StepRequest prefill{"prefill", {0}, {}};
    std::vector<int32_t> pos(prompt.size()), seq(prompt.size(), 0);
    for (size_t i = 0; i < pos.size(); ++i) pos[i] = int32_t(i);
    prefill.args = {{"ids", HostTensor::i32(prompt)}, {"pos", HostTensor::i32(pos)},
                    {"seq", HostTensor::i32(seq)}, {"rows", HostTensor::i32({int32_t(prompt.size()) - 1})}};
    interp.run(prefill);
    int32_t next = 42;
    std::memcpy(host.slot_bytes(host.buffer("last_ids"), 0).data(), &next, 4);
    HostTensor greedy{ir::ElemType::F32, {1, 4}, std::vector<uint8_t>(16, 0)};  // temperature 0
    HostTensor seed = HostTensor::i32({0, 0});
    seed.shape = {1, 2};
    StepRequest decode{"decode", {0}, {{"pos", HostTensor::i32({int32_t(prompt.size())})}, {"seq", HostTensor::i32({0})},
                                       {"sampling", greedy}, {"seed", seed}}};
    logits.push_back(interp.run(decode).at(0).row(0));
  }
  CHECK(logits[0] == logits[1]);
}

TEST_CASE("chunked prefill equals one-shot prefill", "[e2e][reference]") {
  const std::string path = test::model_path("llama", "f32");
  const auto prompt = test::sample_prompt(path);
  Session s(path, {.threads = 2, .n_ctx = 128, .n_slots = 2});
  auto one_shot = s.prefill(0, prompt, 0);
  s.prefill(1, head(prompt, 10), 0);
  auto chunked = s.prefill(1, std::vector<int32_t>(prompt.begin() + 10, prompt.end()), 10);
  double diff = test::relative_l2(chunked.row(0), one_shot.row(0));
  INFO("relative L2 " << diff);
  CHECK(diff < 1e-6);
}

TEST_CASE("sequences decoded in one batch match sequences decoded alone", "[e2e][reference]") {
  const std::string path = test::model_path("qwen2", "f32");
  const auto prompt = test::sample_prompt(path);
  const auto other = head(prompt, 7);
  Session batched(path, {.threads = 2, .n_ctx = 128, .n_slots = 2});
  Session alone(path, {.threads = 2, .n_ctx = 128, .n_slots = 1});
  batched.prefill(0, prompt, 0);
  batched.prefill(1, other, 0);
  auto both = batched.decode(std::vector<int32_t>{0, 1}, std::vector<int32_t>{100, 200},
                             std::vector<int32_t>{int32_t(prompt.size()), int32_t(other.size())});
  alone.prefill(0, prompt, 0);
  auto first = alone.decode(std::vector<int32_t>{0}, std::vector<int32_t>{100}, std::vector<int32_t>{int32_t(prompt.size())});
  alone.reset(0);
  alone.prefill(0, other, 0);
  auto second = alone.decode(std::vector<int32_t>{0}, std::vector<int32_t>{200}, std::vector<int32_t>{int32_t(other.size())});
  CHECK(test::relative_l2(both.row(0), first.row(0)) < 1e-6);
  CHECK(test::relative_l2(both.row(1), second.row(0)) < 1e-6);
}

// A step of several sequences: the attention op spreads the small ones over
// the pool, one per worker, and gives a large one (here a whole prompt) the
// pool to itself (attend_sequences, runtime/cpu/op_exec.cpp). Each sequence
// must still get the logits it gets alone.
TEST_CASE("a step of five decode rows and a prompt gives each sequence its logits alone", "[e2e][reference]") {
  const std::string path = test::model_path("qwen2", "f32");
  const auto prompt = test::sample_prompt(path);
  REQUIRE(prompt.size() >= 12);
  const std::vector<size_t> lengths{5, 7, 9, 11, prompt.size()};
  const std::vector<int32_t> next{100, 200, 300, 400, 500};
  std::vector<std::vector<float>> alone_rows;
  Session alone(path, {.threads = 2, .n_ctx = 128, .n_slots = 1});
  for (size_t i = 0; i < lengths.size(); ++i) {
    alone.reset(0);
    alone.prefill(0, head(prompt, lengths[i]), 0);
    alone_rows.push_back(
        alone.decode(std::vector<int32_t>{0}, std::vector<int32_t>{next[i]}, std::vector<int32_t>{int32_t(lengths[i])})
            .row(0));
  }
  alone.reset(0);
  alone_rows.push_back(alone.prefill(0, prompt, 0).row(0));
  Session batched(path, {.threads = 2, .n_ctx = 128, .n_slots = 6});
  std::vector<SeqChunk> chunks;
  for (size_t i = 0; i < lengths.size(); ++i) {
    batched.prefill(int32_t(i), head(prompt, lengths[i]), 0);
    chunks.push_back({int32_t(i), {&next[i], 1}, int32_t(lengths[i]), 1});
  }
  chunks.push_back({5, prompt, 0, 1});
  const HostTensor out = batched.step(chunks);
  REQUIRE(out.shape.at(0) == int64_t(chunks.size()));
  for (size_t i = 0; i < chunks.size(); ++i) {
    INFO("sequence " << i);
    CHECK(test::relative_l2(out.row(int64_t(i)), alone_rows[i]) < 1e-6);
  }
}

// A speculative verify chunk must give each row the bits of its decode
// step (docs/speculative.md, "The guarantee"). Q4_K weights in the x8
// layout are the case where a matmul's order depends on its row count:
// llama.cpp's gemm sums 4 tokens per pair of sub-blocks, its gemv one per
// superblock. Below 64 rows every token takes the gemv's order (internal.h,
// PackedFn); before that, `vtc bench --spec ngram` on the 0.56B Q4_K_M
// model parted from --spec off at token 30.
TEST_CASE("a verify chunk on Q4_K x8 weights has the bits of decode steps", "[e2e][reference][spec]") {
  const std::string path = test::model_path("llama", "q4_k_m");
  const auto prompt = test::sample_prompt(path);
  const std::vector<int32_t> rows{11, 22, 33, 44, 55, 66, 77, 88};
  const int32_t at = int32_t(prompt.size());
  std::vector<std::vector<float>> decoded;
  {
    Session s(path, {.threads = 2, .n_ctx = 128, .n_slots = 1});
    s.prefill(0, prompt, 0);
    for (size_t i = 0; i < rows.size(); ++i)
      decoded.push_back(
          s.decode(std::vector<int32_t>{0}, std::vector<int32_t>{rows[i]}, std::vector<int32_t>{at + int32_t(i)}).row(0));
  }
  Session s(path, {.threads = 2, .n_ctx = 128, .n_slots = 1});
  s.prefill(0, prompt, 0);
  const SeqChunk verify{0, rows, at, int32_t(rows.size())};  // a verify step: logits for every row
  const HostTensor chunk = s.step({&verify, 1});
  REQUIRE(chunk.shape.at(0) == int64_t(rows.size()));
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::vector<float> row = chunk.row(int64_t(i));
    INFO("row " << i << " of the chunk");
    CHECK(std::memcmp(row.data(), decoded[i].data(), row.size() * sizeof(float)) == 0);
  }
}

// After a rejected draft, a recurrent model's accepted tokens run again as
// one chunk that returns only its last row (serve/engine/speculative/
// verify.h). Its states must be those of decoding the tokens one by one,
// so the chunk asks for decode's bits (SeqChunk::rows_as_decode): on Q4_K
// x8 weights its rows would otherwise take the reference's 4-token gemm
// order. The next token's logits, after the chunk, must be decode's.
TEST_CASE("a recurrent model's re-run chunk after a rollback has the states of decode steps", "[e2e][reference][spec]") {
  const std::string path = test::model_path("qwen35", "q4_k_m");
  const auto prompt = test::sample_prompt(path);
  const std::vector<int32_t> rows{11, 22, 33, 44, 55, 66, 77, 88};
  const int32_t at = int32_t(prompt.size()), next = 99, end = at + int32_t(rows.size());
  std::vector<float> decoded;
  {
    Session s(path, {.threads = 2, .n_ctx = 128, .n_slots = 1});
    s.prefill(0, prompt, 0);
    for (size_t i = 0; i < rows.size(); ++i)
      s.decode(std::vector<int32_t>{0}, std::vector<int32_t>{rows[i]}, std::vector<int32_t>{at + int32_t(i)});
    decoded = s.decode(std::vector<int32_t>{0}, std::vector<int32_t>{next}, std::vector<int32_t>{end}).row(0);
  }
  Session s(path, {.threads = 2, .n_ctx = 128, .n_slots = 1});
  s.prefill(0, prompt, 0);
  const SeqChunk rerun{0, rows, at, 1, true};
  s.step({&rerun, 1});
  const std::vector<float> after =
      s.decode(std::vector<int32_t>{0}, std::vector<int32_t>{next}, std::vector<int32_t>{end}).row(0);
  CHECK(std::memcmp(after.data(), decoded.data(), after.size() * sizeof(float)) == 0);
}

TEST_CASE("bad step inputs are clear errors", "[e2e][reference]") {
  Session s(test::model_path("llama", "f32"), {.threads = 1, .n_ctx = 16});
  CHECK_THROWS_WITH(s.prefill(0, std::vector<int32_t>{1, 99999999}, 0), Catch::Contains("outside the vocabulary"));
  CHECK_THROWS_WITH(s.prefill(0, std::vector<int32_t>(17, 1), 0), Catch::Contains("exceed the context of 16"));
  CHECK_THROWS_WITH(s.decode(std::vector<int32_t>{0}, std::vector<int32_t>{1}, std::vector<int32_t>{16}),
                    Catch::Contains("outside the context"));
  CHECK_THROWS_WITH(s.decode(std::vector<int32_t>{3}, std::vector<int32_t>{1}, std::vector<int32_t>{0}),
                    Catch::Contains("slot 3 out of range"));
}

TEST_CASE("the arena plan reuses memory", "[e2e][reference]") {
  Session s(test::model_path("llama", "f32"), {.threads = 2, .n_ctx = 128});
  s.prefill(0, test::sample_prompt(""), 0, true);
  const auto& stats = vtc::test::cpu_interpreter(s).last_stats();
  INFO("arena " << stats.arena_bytes << " bytes, naive " << stats.naive_bytes << " bytes");
  CHECK(stats.arena_bytes > 0);
  CHECK(stats.arena_bytes * 5 < stats.naive_bytes * 4);  // at least 20% saved by reuse
}

namespace {
// A prefill of the sample prompt (all logits) and two decode steps on slot
// 0, as one byte string, with every op's results seen on the way.
struct ObservedRun {
  std::vector<uint8_t> logits;
  std::map<const ir::Op*, std::vector<std::vector<uint8_t>>> values;
};
ObservedRun observed_run(Session& s, bool observe) {
  ObservedRun r;
  if (observe)
    s.backend().set_observer([&](const ir::Op& op, const std::vector<std::optional<HostTensor>>& results) {
      auto& v = r.values[&op];
      for (const auto& t : results) v.push_back(t.value().bytes);
    });
  else
    s.backend().set_observer(nullptr);
  const auto prompt = test::sample_prompt("");
  auto append = [&](const HostTensor& t) { r.logits.insert(r.logits.end(), t.bytes.begin(), t.bytes.end()); };
  append(s.prefill(0, prompt, 0, true));
  for (int32_t i = 0; i < 2; ++i)
    append(s.decode(std::vector<int32_t>{0}, std::vector<int32_t>{100 + i}, std::vector<int32_t>{int32_t(prompt.size()) + i}));
  s.reset(0);
  return r;
}
}  // namespace

// The fused regions run as one kernel each (runtime/cpu/fused_kernels.h);
// their results, and with an observer every body value, carry the bits of
// the body run op by op. llama q4_k_m: x8 weights and normal rope; llama3
// q4_0: rope_freqs; qwen2-yarn: Q/K/V biases (so its ropes stay outside
// the region); llama f16: widened tiles. Every model has matmul_epilogue
// regions (a projection and its residual add).
TEST_CASE("fused regions as one CPU kernel give the bits of op by op", "[e2e][reference][fused]") {
  const std::vector<std::pair<std::string, std::string>> models = {
      {"llama", "q4_k_m"}, {"llama3", "q4_0"}, {"qwen2-yarn", "f32"}, {"llama", "f16"}};
  const std::vector<cpu::Isa> isas = cpu::supported_isas();
  for (const auto& [arch, type] : models) {
    Session s(test::model_path(arch, type), {.threads = 2, .n_ctx = 128});
    for (cpu::Isa isa : isas) {
      const cpu::Isa before = cpu::active_isa();
      cpu::set_active_isa(isa);
      INFO(arch << " " << type << ", " << cpu::isa_name(isa));
      vtc::test::cpu_interpreter(s).set_profiling(true);
      vtc::test::cpu_interpreter(s).set_fused_kernels(true);
      const ObservedRun fused = observed_run(s, false);
      const ObservedRun fused_observed = observed_run(s, true);
      const auto by_op = vtc::test::cpu_interpreter(s).profile().by_op;
      vtc::test::cpu_interpreter(s).set_fused_kernels(false);
      const ObservedRun op_by_op = observed_run(s, true);
      cpu::set_active_isa(before);
      CHECK(by_op.count("fused swiglu") == 1);
      CHECK(by_op.count("fused norm_matmul") == 1);
      CHECK(by_op.count("fused matmul_epilogue") == 1);  // the output and down projections with their residual adds
      const bool same_logits = fused.logits == op_by_op.logits;  // not CHECKed directly: Catch would print megabytes
      const bool same_observed_logits = fused_observed.logits == op_by_op.logits;
      CHECK(same_logits);
      CHECK(same_observed_logits);
      REQUIRE(fused_observed.values.size() == op_by_op.values.size());
      size_t differing = 0;
      for (const auto& [op, values] : op_by_op.values) {
        auto it = fused_observed.values.find(op);
        if (it == fused_observed.values.end() || it->second != values) ++differing;
      }
      CHECK(differing == 0);
    }
  }
}
