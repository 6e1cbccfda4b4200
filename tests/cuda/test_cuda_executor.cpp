// The CUDA executor runs the compiled plan (issue 39): over 64 greedy
// decode steps of the tiny llama whose batch goes 1 -> 3 -> 8 -> 2
// sequences (buckets 1, 4, 8, 2) while the sequences grow across KV pages,
//  - after the first step of each bucket no buffer plan is made, no bucket
//    prepared, no graph captured, and the host never waits on the device
//    (ExecutorStats, counted in the executor);
//  - every sampled token equals the CPU interpreter's greedy token, and
//    every declared state of every slot (padding rows write none of them)
//    equals the CPU's: integers exactly, floats within the diff tests'
//    rel-L2 1e-2 (tests/diff/test_diff_cuda.cpp);
// and a `vtc compile --target cuda` artifact stores the launches codegen
// makes for its IR and serves with no kernel generated at load. A hidden
// case ("[.measure]") prints the host CPU time per decode step
// (docs/cuda.md, "Prepared steps, buckets and the host's time per step").
//
// Own main, like test_cuda_ops: without a usable device (a GPU, or
// VTC_CUDA_DEVICE=sim) or the reference vocabulary it prints
// "SKIPPED: <reason>" and exits 77, never passing.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <cstdlib>
#include <cmath>
#include <filesystem>

#include "frontends/gguf/dequant.h"
#include "ir/step_interface.h"
#include "runtime/compile/artifact.h"
#include "runtime/compile/compile.h"
#include "runtime/cuda/executor.h"
#include "runtime/session.h"
#include "samples/synthetic_model.h"
#include "serve/engine/speculative/ngram_drafter.h"
#include "support/error.h"

namespace {

using vtc::cuda::ExecutorStats;

std::string tiny_llama() {
  const auto path = (std::filesystem::path(VTC_TEST_DATA_DIR) / "cuda-llama-tiny.gguf").string();
  if (!std::filesystem::exists(path)) {
    vtc::synth::Options o;
    o.vocab_path = vtc::synth::find_default_vocab("llama");
    vtc::synth::write_model(o, path + ".partial");
    std::filesystem::rename(path + ".partial", path);
  }
  return path;
}

// gemma2 in llama.cpp's test-llama-archs layout: a 128-id vocabulary and
// small weights, whose greedy output soon falls into a cycle (speculation
// has drafts to accept).
std::string cycling_gemma2() {
  const auto path = (std::filesystem::path(VTC_TEST_DATA_DIR) / "cuda-gemma2-cycling.gguf").string();
  if (!std::filesystem::exists(path)) {
    vtc::synth::Options o;
    o.arch = "gemma2";
    o.llama_archs_layout = true;
    vtc::synth::write_model(o, path + ".partial");
    std::filesystem::rename(path + ".partial", path);
  }
  return path;
}

const ExecutorStats& stats(vtc::Session& s) { return dynamic_cast<vtc::cuda::Executor&>(s.backend()).stats(); }

int32_t argmax_row(const vtc::HostTensor& logits, int64_t row) {
  const int64_t n = logits.shape[1];
  const float* p = logits.f32() + row * n;
  return int32_t(std::max_element(p, p + n) - p);
}

std::vector<float> as_f32(const vtc::HostTensor& t) {
  std::vector<float> out(size_t(t.numel()));
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = t.elem == vtc::ir::ElemType::F32 ? t.f32()[i]
                                               : vtc::fp16_to_fp32(reinterpret_cast<const uint16_t*>(t.bytes.data())[i]);
  return out;
}

// Rel-L2 of two states' values (f32 or f16), or exact bytes for the rest.
std::string state_difference(const vtc::StateSnapshot& want, const vtc::StateSnapshot& got) {
  if (want.value.shape != got.value.shape) return want.name + ": shapes differ";
  const vtc::ir::ElemType e = want.value.elem;
  if (!(e == vtc::ir::ElemType::F32) && !(e == vtc::ir::ElemType::F16))
    return want.value.bytes == got.value.bytes ? "" : want.name + ": bytes differ";
  const std::vector<float> a = as_f32(want.value), b = as_f32(got.value);
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) num += (a[i] - b[i]) * double(a[i] - b[i]), den += double(a[i]) * a[i];
  const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return rel <= 1e-2 ? "" : fmt::format("{}: rel-L2 {:.3g}", want.name, rel);
}

struct Phase {
  std::vector<int32_t> slots;
  int steps;
};

// Counters that must not move in steady state.
std::vector<uint64_t> steady(const ExecutorStats& s) {
  return {s.plans_built, s.buckets_prepared, s.graphs_captured, s.host_waits};
}

}  // namespace

TEST_CASE("64 decode steps over buckets 1, 4, 8, 2: planned and captured once per bucket, no host wait, the CPU's tokens and states",
          "[sim]") {
  const std::string path = tiny_llama();
  vtc::Session cpu(path, {.target = vtc::Target::Cpu, .threads = 2, .n_ctx = 96, .n_slots = 8});
  vtc::Session gpu(path, {.target = vtc::Target::Cuda, .n_ctx = 96, .n_slots = 8, .cuda_graphs = true});
  const std::vector<Phase> phases = {{{0}, 16}, {{0, 1, 2}, 16}, {{0, 1, 2, 3, 4, 5, 6, 7}, 16}, {{5, 0}, 16}};
  std::vector<int32_t> next_pos(8, -1), next_tok(8, 0);
  const vtc::DeviceSampling greedy = vtc::DeviceSampling::greedy();
  uint64_t captured_before = 0;
  for (size_t ph = 0; ph < phases.size(); ++ph) {
    const Phase& phase = phases[ph];
    uint64_t prefills = 0;  // each a @prefill bucket of its own length (4..11 rows): a graph too
    for (int32_t slot : phase.slots) {
      if (next_pos[size_t(slot)] >= 0) continue;
      ++prefills;
      std::vector<int32_t> prompt = {1, 450, 4996};
      for (int32_t i = 0; i <= slot; ++i) prompt.push_back(1000 + 37 * slot + i);  // lengths 4..11
      const vtc::HostTensor logits = cpu.prefill(slot, prompt, 0);
      gpu.prefill(slot, prompt, 0);
      next_tok[size_t(slot)] = argmax_row(logits, 0);
      gpu.set_last_id(slot, next_tok[size_t(slot)]);
      next_pos[size_t(slot)] = int32_t(prompt.size());
    }
    std::vector<std::vector<int32_t>> want, got;
    std::vector<uint64_t> at_second;
    for (int step = 0; step < phase.steps; ++step) {
      if (step == 1) at_second = steady(stats(gpu));
      std::vector<int32_t> tokens, positions;
      for (int32_t slot : phase.slots) tokens.push_back(next_tok[size_t(slot)]), positions.push_back(next_pos[size_t(slot)]++);
      const vtc::HostTensor logits = cpu.decode(phase.slots, tokens, positions);
      want.emplace_back();
      for (size_t r = 0; r < phase.slots.size(); ++r) {
        want.back().push_back(argmax_row(logits, int64_t(r)));
        next_tok[size_t(phase.slots[r])] = want.back().back();
      }
      std::vector<int32_t> ids = gpu.decode_sampled(phase.slots, positions, {&greedy, 1});
      if (!ids.empty()) got.push_back(ids);
    }
    INFO("phase " << ph << ": " << phase.slots.size() << " sequence(s)");
    CHECK(steady(stats(gpu)) == at_second);  // nothing planned, captured or waited for in steady state
    CHECK(stats(gpu).graphs_captured == captured_before + 1 + prefills);
    captured_before = stats(gpu).graphs_captured;
    got.push_back(gpu.finish_sampled());
    CHECK(got == want);
  }
  CHECK(stats(gpu).graphs_captured == 4 + 8);  // 4 decode buckets, 8 prompt lengths
  CHECK(stats(gpu).kernels_generated_at_load == 0);  // compiled in memory once, by the compile pipeline
  for (int32_t slot = 0; slot < 8; ++slot) {
    const auto want = cpu.snapshot(slot), got = gpu.snapshot(slot);
    REQUIRE(want.size() == got.size());
    for (size_t i = 0; i < want.size(); ++i) {
      INFO("slot " << slot);
      CHECK(state_difference(want[i], got[i]) == "");
    }
  }
}

// A verify step (a @prefill chunk of a few rows, every row's logits kept)
// runs its bucket as a CUDA graph: the eager run's bits, and a replay of
// the captured graph gives them again with nothing captured anew.
TEST_CASE("a few-row @prefill bucket runs as a graph with the eager run's bits, and replays", "[sim]") {
  const std::string path = tiny_llama();
  vtc::Session eager(path, {.target = vtc::Target::Cuda, .n_ctx = 96, .n_slots = 2, .cuda_graphs = false});
  vtc::Session graphs(path, {.target = vtc::Target::Cuda, .n_ctx = 96, .n_slots = 2, .cuda_graphs = true});
  std::vector<int32_t> prompt, rows;
  for (int32_t i = 0; i < 20; ++i) prompt.push_back(1000 + 37 * i);  // 20 rows: the tiled form, eager
  for (int32_t i = 0; i < 6; ++i) rows.push_back(2000 + 11 * i);
  auto verify = [&](vtc::Session& s) {
    s.reset(0);
    s.prefill(0, prompt, 0);
    return s.prefill(0, rows, int32_t(prompt.size()), true);
  };
  const vtc::HostTensor want = verify(eager);
  CHECK(stats(eager).graphs_captured == 0);
  const vtc::HostTensor first = verify(graphs);
  CHECK(stats(graphs).graphs_captured == 1);
  const vtc::HostTensor again = verify(graphs);
  CHECK(stats(graphs).graphs_captured == 1);
  REQUIRE(want.shape == first.shape);
  CHECK(first.bytes == want.bytes);
  CHECK(again.bytes == want.bytes);
}

// A serving step that batches several sequences' verify chunks can hold
// more rows than the decode form's usual bucket (kDecodeFormRows): it
// still asks for decode's bits (StepRequest::rows_as_decode), so it runs
// the decode form too, and each of its 21 rows equals that token's own
// decode step bit for bit. The same rows as a prompt (no verify) take the
// tiles.
TEST_CASE("a verify step of 21 rows across 3 sequences keeps each row's decode bits", "[sim]") {
  const std::string path = tiny_llama();
  const vtc::SessionOptions so{.target = vtc::Target::Cuda, .n_ctx = 64, .n_slots = 3};
  std::vector<std::vector<int32_t>> prompts(3), drafts(3);
  for (int32_t s = 0; s < 3; ++s)
    for (int32_t i = 0; i < 7; ++i) {
      prompts[size_t(s)].push_back(1000 + 37 * i + 101 * s);
      drafts[size_t(s)].push_back(2000 + 11 * i + 7 * s);
    }
  const int32_t at = 7;
  std::vector<std::vector<std::vector<float>>> decoded(3);
  {
    vtc::Session one(path, so);
    for (int32_t s = 0; s < 3; ++s) {
      one.prefill(s, prompts[size_t(s)], 0);
      for (int32_t i = 0; i < 7; ++i)
        decoded[size_t(s)].push_back(one.decode(std::vector<int32_t>{s}, std::vector<int32_t>{drafts[size_t(s)][size_t(i)]},
                                                std::vector<int32_t>{at + i})
                                         .row(0));
    }
  }
  vtc::Session batched(path, so);
  std::vector<vtc::SeqChunk> chunks;
  for (int32_t s = 0; s < 3; ++s) {
    batched.prefill(s, prompts[size_t(s)], 0);
    chunks.push_back({s, drafts[size_t(s)], at, 7});
  }
  const vtc::HostTensor verify = batched.step(chunks);
  REQUIRE(verify.shape.at(0) == 21);
  int differing = 0;
  for (int32_t s = 0; s < 3; ++s)
    for (int32_t i = 0; i < 7; ++i) {
      const std::vector<float> row = verify.row(7 * s + i);
      differing += std::memcmp(row.data(), decoded[size_t(s)][size_t(i)].data(), row.size() * sizeof(float)) != 0;
    }
  CHECK(differing == 0);
}

// N-gram speculation drafted on the device (Backend::drafts_on_device,
// codegen/cuda/device_drafts.h), on a prompt of a
// 12-token passage said three times, 7 drafts a step (the first drafts
// copy the passage and are rejected; then the output cycles and drafts
// are accepted):
//  - the tokens are plain decoding's (the same session's sampled decode
//    steps on another slot);
//  - every step's drafts are the host drafter's: a step has matched drafts
//    exactly when NgramDrafter over the same history has a draft, and then
//    accepts as many as that draft shares with plain decoding's tokens;
//  - the host never waits for the device after the first step (the
//    outcome of each step is read behind the next one), and nothing is
//    prepared or captured again.
struct DeviceDraftRun {
  std::vector<int32_t> tokens;  // plain decoding's, which the drafted run gave
  size_t accepted = 0, rejections = 0;
};

DeviceDraftRun check_device_drafting(const vtc::DeviceSampling& sampling) {
  const std::string path = cycling_gemma2();
  vtc::Session gpu(path, {.target = vtc::Target::Cuda, .n_ctx = 192, .n_slots = 2, .cuda_graphs = true});
  REQUIRE(gpu.backend().drafts_on_device());
  std::vector<int32_t> prompt = {1};
  for (int rep = 0; rep < 3; ++rep)
    for (int32_t i = 0; i < 12; ++i) prompt.push_back(3 + 7 * i);
  constexpr size_t kTokens = 48;
  constexpr int32_t kDrafts = 7;
  const int32_t first = argmax_row(gpu.prefill(1, prompt, 0), 0);
  std::vector<int32_t> want{first};
  gpu.set_last_id(1, first);
  for (int32_t pos = int32_t(prompt.size()); pos < int32_t(prompt.size() + kTokens + 3 * kDrafts); ++pos) {
    const std::vector<int32_t> ids = gpu.decode_sampled(std::vector<int32_t>{1}, std::vector<int32_t>{pos}, {&sampling, 1});
    want.insert(want.end(), ids.begin(), ids.end());
  }
  want.push_back(gpu.finish_sampled().at(0));

  gpu.prefill(0, prompt, 0);
  std::vector<int32_t> history = prompt;
  history.push_back(first);
  gpu.start_device_drafts(0, history, sampling);
  vtc::serve::NgramDrafter host;
  host.append(history);
  std::vector<int32_t> got{first};
  DeviceDraftRun run;
  auto take = [&](const vtc::DeviceVerifyOutcome& out) {
    const std::vector<int32_t> draft = host.draft(kDrafts);
    size_t shared = 0;
    while (shared < draft.size() && got.size() + shared < want.size() && draft[shared] == want[got.size() + shared]) ++shared;
    INFO("after " << got.size() << " tokens");
    REQUIRE(!out.tokens.empty());
    CHECK(out.drafted == (draft.empty() ? 0 : kDrafts));
    if (!draft.empty()) CHECK(out.tokens.size() - 1 == shared);
    run.accepted += out.tokens.size() - 1;
    run.rejections += out.tokens.size() - 1 < size_t(kDrafts);
    for (int32_t id : out.tokens) got.push_back(id), host.append(id);
  };
  int64_t known = int64_t(history.size());
  int32_t rows_in_flight = 0;
  std::vector<uint64_t> after_first;
  for (int step = 0; got.size() < kTokens; ++step) {
    if (step == 1) after_first = steady(stats(gpu));
    const vtc::Session::DeviceVerifyRows rows{0, kDrafts, known + rows_in_flight + kDrafts};
    const auto previous = gpu.verify_on_device({&rows, 1});
    rows_in_flight = kDrafts + 1;
    if (!previous.empty()) known += int64_t(previous.at(0).tokens.size()), take(previous.at(0));
  }
  CHECK(steady(stats(gpu)) == after_first);  // no host wait, nothing planned or captured again
  take(gpu.finish_device_verify().at(0));
  REQUIRE(got.size() >= kTokens);
  run.tokens.assign(want.begin(), want.begin() + kTokens);
  CHECK(std::vector<int32_t>(got.begin(), got.begin() + kTokens) == run.tokens);
  return run;
}

TEST_CASE("n-gram drafts on the device: plain decoding's tokens, the host drafter's drafts, no host wait per step",
          "[sim]") {
  const DeviceDraftRun run = check_device_drafting(vtc::DeviceSampling::greedy());
  CHECK(run.accepted > run.tokens.size() / 2);  // the continuation cycles, so drafts are accepted
  CHECK(run.rejections > 0);                    // the prompt's passage drafts what the model does not say
}

// The same with sampled rows (temperature 0.5 over the 2 best, whose
// logits this model keeps close): the device draws each row as
// decode_sampled would at its position, so the tokens are plain sampled
// decoding's, which are not the greedy ones, and drafts are accepted only
// where the draws follow the cycle.
TEST_CASE("sampled n-gram drafts on the device: plain sampled decoding's tokens, no host wait per step", "[sim]") {
  const vtc::DeviceSampling sampled{.temperature = 0.5f, .top_k = 2, .top_p = 0.95f, .min_p = 0.0f, .seed = 7};
  const DeviceDraftRun run = check_device_drafting(sampled);
  CHECK(run.accepted >= 8);  // 13 of 48 tokens
  CHECK(run.rejections > 0);
  CHECK(run.tokens != check_device_drafting(vtc::DeviceSampling::greedy()).tokens);
}

TEST_CASE("a cuda artifact serves with no kernel generated at load", "[sim]") {
  const std::string gguf = tiny_llama();
  const std::string out = (std::filesystem::temp_directory_path() / fmt::format("vtc-cuda-exec-{}.vtc", ::getpid())).string();
  vtc::CompileOptions o;
  o.target = vtc::Target::Cuda;
  o.max_sequences = 2;
  vtc::save_artifact(vtc::compile_model(vtc::gguf::GgufFile::open(gguf), o), out, {});
  // The stored launches are what codegen makes for the stored IR (their
  // `what` was written for the IR before printing, whose value names differ).
  const vtc::CompiledModel m = vtc::load_artifact(out);
  REQUIRE(m.cuda_steps.size() == m.module.functions.size());
  for (const auto& stored : m.cuda_steps) {
    INFO("@" << stored.function);
    const vtc::cuda::StepKernels made = vtc::cuda::generate_step(m.module, *m.module.find_function(stored.function));
    REQUIRE(stored.kernels.size() == made.kernels.size());
    for (size_t i = 0; i < made.kernels.size(); ++i) {
      const auto &a = stored.kernels[i], &b = made.kernels[i];
      INFO("kernel " << i << " " << b.what);
      CHECK(a.entry == b.entry);  // the same code (the entry hashes it); one source per entry is stored
      CHECK(a.op == b.op);
      CHECK((a.threads_x == b.threads_x && a.rows_y == b.rows_y &&
             a.scratch_bytes == b.scratch_bytes && a.block == b.block && a.rows_per_block_y == b.rows_per_block_y &&
             a.args.size() == b.args.size()));
      for (size_t k = 0; k < a.args.size() && k < b.args.size(); ++k)
        CHECK((a.args[k].kind == b.args[k].kind && a.args[k].value == b.args[k].value && a.args[k].name == b.args[k].name &&
               a.args[k].state == b.args[k].state && a.args[k].half == b.args[k].half));
    }
    CHECK(stored.aliases.size() == made.aliases.size());
    CHECK(stored.weights.size() == made.weights.size());
    CHECK(stored.returns == made.returns);
  }
  vtc::Session s(out, {.target = vtc::Target::Cuda, .n_ctx = 64, .n_slots = 2});
  std::filesystem::remove(out);
  CHECK(stats(s).kernels_generated_at_load == 0);
  vtc::Session cpu(gguf, {.target = vtc::Target::Cpu, .threads = 2, .n_ctx = 64, .n_slots = 2});
  const std::vector<int32_t> prompt = {1, 450, 4996, 17354};
  const vtc::HostTensor a = cpu.prefill(0, prompt, 0), b = s.prefill(0, prompt, 0);
  REQUIRE(a.shape == b.shape);
  CHECK(argmax_row(a, 0) == argmax_row(b, 0));
}

// Acceptance 4 of issue 39, run by hand (hidden tag): the executor's own
// host CPU time per steady decode step (ExecutorStats::host_ns, the calling
// thread's CPU time, so not the simulated kernels), batch 1, for the
// synthetic model VTC_MEASURE_ARCH / VTC_MEASURE_SIZE (f16 matrices).
// A speculative sequence checkpoints its slot before every verify step
// with a draft (serve/engine/speculative/verify.cpp). Saved into the
// previous checkpoint, the device buffer is allocated once, and a restore
// gives the rows of the latest save, not the first.
TEST_CASE("a checkpoint saved again into itself allocates once and restores the latest rows", "[sim]") {
  vtc::Session gpu(tiny_llama(), {.target = vtc::Target::Cuda, .n_ctx = 32, .n_slots = 2});
  vtc::StateStore& states = gpu.states();
  const auto& last_ids = states.layout(vtc::ir::step::kLastIds);
  const auto last_id = [&](int32_t slot) {
    const std::vector<uint8_t> row = gpu.backend().read_slot_row(last_ids, slot);
    int32_t id = 0;
    std::memcpy(&id, row.data(), sizeof id);
    return id;
  };
  gpu.set_last_id(0, 11);
  auto checkpoint = states.save_checkpoint(0);
  const uint64_t allocated = stats(gpu).checkpoints_allocated;
  CHECK(allocated >= 1);
  for (int32_t id : {22, 33, 44}) {
    gpu.set_last_id(0, id);
    const vtc::SlotCheckpoint* before = checkpoint.get();
    checkpoint = states.save_checkpoint(0, std::move(checkpoint));
    CHECK(checkpoint.get() == before);
  }
  CHECK(stats(gpu).checkpoints_allocated == allocated);
  gpu.set_last_id(0, 55);
  states.restore_checkpoint(1, *checkpoint);
  CHECK(last_id(1) == 44);
  CHECK(last_id(0) == 55);
}

TEST_CASE("host time per decode step", "[.measure]") {
  const char* arch = std::getenv("VTC_MEASURE_ARCH");
  const char* size = std::getenv("VTC_MEASURE_SIZE");
  const std::string name = fmt::format("measure-{}-{}.gguf", arch ? arch : "llama", size ? size : "tiny");
  const auto path = (std::filesystem::path(VTC_TEST_DATA_DIR) / name).string();
  if (!std::filesystem::exists(path)) {
    vtc::synth::Options o;
    o.arch = arch ? arch : "llama";
    o.size = size ? size : "tiny";
    o.weight_type = vtc::GgmlType::F16;
    o.vocab_path = vtc::synth::find_default_vocab(o.arch);
    vtc::synth::write_model(o, path + ".partial");
    std::filesystem::rename(path + ".partial", path);
  }
  vtc::Session gpu(path, {.target = vtc::Target::Cuda, .n_ctx = 256, .n_slots = 1});
  const std::vector<int32_t> prompt = {1, 450, 4996, 17354};
  gpu.prefill(0, prompt, 0);
  gpu.set_last_id(0, 450);
  const vtc::DeviceSampling greedy = vtc::DeviceSampling::greedy();
  const int steps = 12;
  uint64_t ns0 = 0, n0 = 0;
  for (int i = 0; i < steps; ++i) {
    if (i == 2) ns0 = stats(gpu).host_ns, n0 = stats(gpu).steps;  // after the bucket's first steps
    gpu.decode_sampled(std::vector<int32_t>{0}, std::vector<int32_t>{int32_t(prompt.size()) + i}, {&greedy, 1});
    if (std::string(std::getenv("VTC_MEASURE_DRAIN") ? std::getenv("VTC_MEASURE_DRAIN") : "") == "1") gpu.finish_sampled();  // each step launched on an idle device
  }
  gpu.finish_sampled();
  const ExecutorStats& s = stats(gpu);
  fmt::print("{}: host CPU time per steady decode step: {:.1f} us over {} steps (host waits {}, collect waits {})\n", name,
             double(s.host_ns - ns0) / 1e3 / double(s.steps - n0), s.steps - n0, s.host_waits, s.collect_waits);
}

int main(int argc, char** argv) {
  if (std::string why = vtc::cuda::cuda_unavailable_reason(); !why.empty()) {
    fmt::print("SKIPPED: no usable CUDA device: {}\n", why);
    return 77;
  }
  try {
    vtc::synth::find_default_vocab("llama");
  } catch (const vtc::Error& e) {
    fmt::print("SKIPPED: {}\n", e.what());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
