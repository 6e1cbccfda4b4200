// vtc against llama.cpp on models that llama.cpp itself writes: the files of
// tests/test-llama-archs (vocab-less, 2 layers, every optional tensor the
// reference's loader accepts), rescaled to be sensitive (llama_archs.h).
// Our own generator writes only the tensors vtc's builders take; these files
// are the ones our users hold.
//
// Per architecture (the ARCH-CASES lines at the end: llama dense and
// Mixtral-layout MoE, the qwen family, and the architectures of issue 18),
// five cases, plus a sixth for the sliding-window ones:
// - match: seeds 1, 2, 3; f32 and q8_0 (the rescaled f32 file through the
//   reference's quantizer); a 12-token prompt in one prefill, logits at
//   every position, then 16 greedy steps. f32: identical greedy tokens and
//   relative L2 <= 1e-3 at every position; q8_0: <= 1e-2 against the closer
//   of the reference's repack and --no-repack runs, top-1 agreement >= 99%.
//   One line per (arch, seed, type) gives the figures.
// - sensitivity (reference only): zeroing blk.1's output projection (and,
//   on the hybrids, blk.0's recurrent one: a DeltaNet layer's ssm_out, a
//   short-convolution layer's shortconv.out_proj) moves the
//   reference's logits by more than 10x the f32 tolerance at every position,
//   so a broken layer cannot pass; the reference's logits are finite and O(1).
// - refusal: one tensor renamed to a name no engine knows is refused by vtc
//   (vtc::Error naming it) and by the reference (vtc-ref exits non-zero).
// - chunked: prefill in chunks of 5, 4 and 3 tokens equals one 12-token
//   prefill (rel-L2 <= 1e-5, identical greedy tokens).
// - amplified: the attention-amplified f32 file (q/k x4, v/output x8;
//   llama_archs.h, amplified_path), where attention dominates the logits:
//   an 8-token prompt and 4 greedy decode steps against the reference at
//   every position (rel-L2 <= 1e-3, identical greedy tokens), and silencing
//   attention there moves the reference's logits by more than 1e-2.
// - window (LLAMA_ARCHS_WINDOW_CASE): a 48-token prompt, longer than the
//   generator's 32-token sliding window, matches the reference at the f32
//   tolerance with identical greedy tokens.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <nlohmann/json.hpp>

#include "frontends/gguf/arch/arch.h"
#include "frontends/gguf/dequant.h"
#include "frontends/gguf/gguf.h"
#include "runtime/cpu/kernels/kernels.h"
#include "runtime/session.h"
#include "support/error.h"
#include "tests/e2e/llama_archs.h"
#include "tests/e2e/scale_attention.h"
#include "tests/e2e/logits_run.h"
#include "tests/reference_tolerances.h"
#include "tests/test_process.h"

using namespace vtc;
namespace la = vtc::test::llama_archs;

namespace {

constexpr uint64_t kSeeds[] = {1, 2, 3};
constexpr size_t kPromptTokens = 12;
constexpr double kSensitivity = 10 * test::kLogitsRelL2Tolerance;

using Run = test::LogitsRun;
using test::argmax_of;
using test::kDecode;

Run reference(const std::string& model, const std::vector<int32_t>& prompt, bool repack) {
  return test::reference_run(model, prompt, repack, "--threads 1");
}

Run run_vtc(const std::string& model, const std::vector<int32_t>& prompt) { return test::vtc_run(model, prompt); }

std::vector<double> rel_l2_per_position(const Run& a, const Run& ref) {
  REQUIRE(a.logits.size() == ref.logits.size());
  std::vector<double> out;
  for (size_t p = 0; p < ref.logits.size(); ++p) out.push_back(test::relative_l2(a.logits[p], ref.logits[p]));
  return out;
}

double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }
double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

// The reference's logits must be finite and O(1..10): not washed out, not
// blown up. A head tied to token_embd (command-r) reads the embedding the
// rescaler made N(0, 1), so its logits have rms ~ sqrt(n_embd) / 1 ~ 16-20:
// above an rms of 3 the bound is on the peak-to-rms ratio (33) instead.
void check_magnitude(const std::string& what, const Run& ref) {
  for (size_t p = 0; p < ref.logits.size(); ++p) {
    double ss = 0, peak = 0;
    for (float v : ref.logits[p]) ss += double(v) * v, peak = std::max(peak, double(std::fabs(v)));
    const double rms = std::sqrt(ss / double(ref.logits[p].size()));
    INFO(what << " position " << p << ": logits rms " << rms << ", max |logit| " << peak);
    CHECK(rms > 0.3);
    CHECK(peak < 100.0 * std::max(1.0, rms / 3.0));
  }
}

// The reference's repacked q8_0 run aborts on deepseek2's MLA (a repacked
// attn_k_b/attn_v_b has no backend: ggml-backend.cpp's GGML_ASSERT
// (*cur_backend_id != -1)); those files compare with its --no-repack run only.
bool reference_repack_aborts(const std::string& arch) { return arch == "deepseek2"; }

void match(const std::string& arch) {
  const la::ArchModel& model = la::arch_model(arch);
  for (uint64_t seed : kSeeds) {
    const auto prompt = la::prompt(seed, kPromptTokens);
    for (const std::string type : {"f32", "q8_0"}) {
      const bool quantized = type != "f32";
      const std::string path = la::model_path(model, seed, type);
      std::vector<Run> refs = {reference(path, prompt, false)};
      if (quantized && reference_repack_aborts(arch))
        fmt::print("llama-archs {} seed {} {}: the reference's repacked run aborts on this file; comparing with its "
                   "--no-repack run only\n", arch, seed, type);
      else if (quantized)
        refs.push_back(reference(path, prompt, true));
      check_magnitude(path, refs[0]);
      const double tolerance = quantized ? test::kQuantLogitsRelL2Tolerance : test::kLogitsRelL2Tolerance;
      Run ours;
      try {
        ours = run_vtc(path, prompt);
      } catch (const std::exception& e) {
        fmt::print("llama-archs {} seed {} {}: vtc failed: {}\n", arch, seed, type, e.what());
        FAIL_CHECK(fmt::format("{} seed {} {}: vtc failed: {}", arch, seed, type, e.what()));
        continue;
      }
      double worst = 1e30;
      const Run* best = nullptr;
      for (const Run& ref : refs)
        if (double w = max_of(rel_l2_per_position(ours, ref)); w < worst) worst = w, best = &ref;
      size_t agree = 0;
      for (size_t p = 0; p < prompt.size(); ++p) agree += argmax_of(ours.logits[p]) == argmax_of(best->logits[p]);
      const size_t same = size_t(std::mismatch(ours.greedy.begin(), ours.greedy.end(), best->greedy.begin()).first -
                                 ours.greedy.begin());
      fmt::print("llama-archs {} seed {} {}: rel-L2 max {:.2e} (tolerance {:.0e}), top-1 {}/{}, greedy {}/{} identical\n",
                 arch, seed, type, worst, tolerance, agree, prompt.size(), same, kDecode);
      const auto per_position = rel_l2_per_position(ours, *best);
      INFO(path << ": worst relative L2 " << worst << "; per position "
                << fmt::format("{:.1e}", fmt::join(per_position, " ")) << "; greedy vtc "
                << fmt::format("{}", fmt::join(ours.greedy, ",")) << " reference "
                << fmt::format("{}", fmt::join(best->greedy, ",")));
      CHECK(worst <= tolerance);
      if (quantized) CHECK(double(agree) / double(prompt.size()) >= 0.99);
      else CHECK(ours.greedy == best->greedy);
    }
  }
}

// The output projections whose zeroing must show: blk.1's attention output
// (or its recurrent mixer's: a DeltaNet layer's ssm_out, a short-convolution
// layer's shortconv.out_proj) and, when blk.0 is a recurrent layer, its own
// (a lightning-attention layer's, minimax-01: attn_output beside the
// attn_norm_2 that normalizes its linear-attention output).
std::vector<std::string> projections_to_zero(const std::string& f32_path) {
  const auto file = gguf::GgufFile::open(f32_path);
  auto recurrent_output = [&](int layer) -> std::string {
    for (const char* name : {"ssm_out", "shortconv.out_proj"}) {
      const std::string tensor = fmt::format("blk.{}.{}.weight", layer, name);
      if (file.find_tensor(tensor)) return tensor;
    }
    if (file.find_tensor(fmt::format("blk.{}.attn_norm_2.weight", layer)) &&
        file.find_tensor(fmt::format("blk.{}.attn_gate.weight", layer)))
      return fmt::format("blk.{}.attn_output.weight", layer);
    return "";
  };
  std::vector<std::string> names;
  names.push_back(file.find_tensor("blk.1.attn_output.weight") ? "blk.1.attn_output.weight" : recurrent_output(1));
  if (const std::string first = recurrent_output(0); !first.empty()) names.push_back(first);
  return names;
}

void sensitivity(const std::string& arch) {
  const la::ArchModel& model = la::arch_model(arch);
  const uint64_t seed = kSeeds[0];
  const auto prompt = la::prompt(seed, kPromptTokens);
  const std::string base_path = la::model_path(model, seed, "f32");
  const Run base = reference(base_path, prompt, false);
  check_magnitude(base_path, base);
  for (const std::string& tensor : projections_to_zero(base_path)) {
    la::RescaleOptions o;
    o.zero_tensor = tensor;
    const std::string zeroed_path = la::variant_path(model, seed, o, "zero-" + tensor);
    const Run zeroed = reference(zeroed_path, prompt, false);
    std::filesystem::remove(zeroed_path);  // read once: not kept on the disk
    const auto moved = rel_l2_per_position(zeroed, base);
    fmt::print("llama-archs {} seed {}: zeroing {} moves the reference's logits by rel-L2 min {:.2e} max {:.2e} (need > {:.0e})\n",
               arch, seed, tensor, min_of(moved), max_of(moved), kSensitivity);
    INFO(arch << ": zeroing " << tensor << " moves the logits by at least " << min_of(moved));
    CHECK(min_of(moved) > kSensitivity);
  }
}

// blk.0.ffn_up.bias -> .bais where the file has it, else the first blk.0
// `.scale` tensor -> `.sacle`.
std::pair<std::string, std::string> tensor_to_rename(const std::string& f32_path) {
  const auto file = gguf::GgufFile::open(f32_path);
  if (file.find_tensor("blk.0.ffn_up.bias")) return {"blk.0.ffn_up.bias", "blk.0.ffn_up.bais"};
  for (const gguf::TensorInfo& t : file.tensors()) {
    const std::string& n = t.name;
    if (n.rfind("blk.0.", 0) == 0 && n.size() > 6 && n.compare(n.size() - 6, 6, ".scale") == 0 &&
        n.find(".input_scale") == std::string::npos)
      return {n, n.substr(0, n.size() - 6) + ".sacle"};
  }
  FAIL("no tensor to rename in " << f32_path);
  return {};
}

void refusal(const std::string& arch) {
  const la::ArchModel& model = la::arch_model(arch);
  const uint64_t seed = kSeeds[0];
  const auto [from, to] = tensor_to_rename(la::model_path(model, seed, "f32"));
  la::RescaleOptions o;
  o.rename_from = from, o.rename_to = to;
  const std::string path = la::variant_path(model, seed, o, "renamed");
  const auto prompt = la::prompt(seed, kPromptTokens);

  bool reference_refused = false;
  std::string reference_message = "accepted it";
  try {
    reference(path, prompt, false);
  } catch (const std::runtime_error& e) {
    reference_refused = true;
    reference_message = e.what();
    if (auto at = reference_message.find("stderr:"); at != std::string::npos) reference_message = reference_message.substr(at + 8);
  }
  std::string vtc_message = "accepted it";
  bool vtc_refused = false, vtc_named = false;
  try {
    Session s(path, {.threads = 2, .n_ctx = 256});
  } catch (const vtc::Error& e) {
    vtc_refused = true;
    vtc_message = e.what();
    vtc_named = vtc_message.find(to) != std::string::npos;
  }
  fmt::print("llama-archs {}: {} renamed to {}: vtc {} ({}); reference {}\n", arch, from, to,
             vtc_refused ? (vtc_named ? "refuses, naming it" : "refuses without naming it") : "accepts it", vtc_message,
             reference_refused ? "refuses" : "ACCEPTS it");
  INFO("vtc: " << vtc_message);
  CHECK(vtc_refused);
  CHECK(vtc_named);
  INFO("reference: " << reference_message);
  CHECK(reference_refused);

  // What `vtc inspect` reports: the renamed tensor alone is unknown; in the
  // original file nothing is, and every .input_scale is accepted unapplied.
  const arch::FileAccounting renamed = arch::account_file(gguf::GgufFile::open(path));
  std::filesystem::remove(path);  // read once: not kept on the disk
  CHECK(renamed.unknown == std::vector<std::string>{to});
  const auto original_file = gguf::GgufFile::open(la::model_path(model, seed, "f32"));
  const arch::FileAccounting original = arch::account_file(original_file);
  CHECK(original.unknown.empty());
  size_t input_scales = 0;
  for (const auto& t : original_file.tensors())
    if (t.name.find(".input_scale") != std::string::npos) {
      ++input_scales;
      CHECK(std::count(original.accepted_unused.begin(), original.accepted_unused.end(), t.name) == 1);
    }
  CHECK(input_scales > 0);
}

// Prefill in chunks of 5, 4 and 3 tokens (each chunk attends to the KV the
// earlier ones wrote) gives the logits and greedy tokens of one 12-token
// prefill: rel-L2 <= 1e-5 at every position, identical greedy tokens.
void chunked(const std::string& arch) {
  const la::ArchModel& model = la::arch_model(arch);
  const uint64_t seed = kSeeds[1];
  const auto prompt = la::prompt(seed, kPromptTokens);
  const std::string path = la::model_path(model, seed, "f32");
  const Run whole = run_vtc(path, prompt);
  const Run pieces = test::vtc_run(path, prompt, {5, 4, 3});
  const auto per_position = rel_l2_per_position(pieces, whole);
  fmt::print("llama-archs {} seed {}: prefill in chunks 5+4+3 vs one shot: rel-L2 max {:.2e}\n", arch, seed,
             max_of(per_position));
  INFO(path << ": per position " << fmt::format("{:.1e}", fmt::join(per_position, " ")));
  CHECK(max_of(per_position) <= 1e-5);
  CHECK(pieces.greedy == whole.greedy);
}

// Sliding-window architectures: a prompt longer than the file's window (the
// generator writes sliding_window = 32) in one prefill, then 16 greedy
// steps, against the reference at the f32 tolerance; keys that leave the
// window must stop being attended to on both sides.
void beyond_window(const std::string& arch, size_t prompt_tokens) {
  const la::ArchModel& model = la::arch_model(arch);
  const uint64_t seed = kSeeds[2];
  const auto prompt = la::prompt(seed, prompt_tokens);
  const std::string path = la::model_path(model, seed, "f32");
  const Run ref = reference(path, prompt, false);
  const Run ours = run_vtc(path, prompt);
  const auto per_position = rel_l2_per_position(ours, ref);
  const size_t same = size_t(std::mismatch(ours.greedy.begin(), ours.greedy.end(), ref.greedy.begin()).first -
                             ours.greedy.begin());
  fmt::print("llama-archs {} seed {}: {}-token prompt (window 32): rel-L2 max {:.2e}, greedy {}/{} identical\n", arch,
             seed, prompt_tokens, max_of(per_position), same, kDecode);
  INFO(path << ": per position " << fmt::format("{:.1e}", fmt::join(per_position, " ")));
  CHECK(max_of(per_position) <= test::kLogitsRelL2Tolerance);
  CHECK(ours.greedy == ref.greedy);
}

// Attention-amplified files (llama_archs.h, amplified_path: q/k x4,
// v/output x8), f32: the run of amplified_seed (a prompt in one prefill,
// then greedy decode steps) against the reference at every position
// (rel-L2 <= 1e-3, identical greedy tokens), so the decode kernels are
// compared too.
// And the file is sensitive to attention: with v and the output projection
// scaled by 0 instead (attention contributes nothing), the reference's
// logits move by more than 10x the tolerance.
void amplified(const std::string& arch) {
  const la::ArchModel& model = la::arch_model(arch);
  const uint64_t seed = la::amplified_seed(model);
  const auto prompt = la::prompt(seed, la::kAmplifiedPromptTokens);
  const std::string path = la::amplified_path(model, seed);
  const la::PositionsMatch m = la::match_positions(path, prompt, la::kAmplifiedDecodes, "cpu", 2);
  fmt::print("llama-archs {} seed {} f32 attention-amplified: {}\n", arch, seed, m.summary());
  INFO(path << ": per position " << fmt::format("{:.1e}", fmt::join(m.rel_l2, " ")) << "; greedy vtc "
            << fmt::format("{}", fmt::join(m.ours, ",")) << " reference " << fmt::format("{}", fmt::join(m.theirs, ",")));
  CHECK(m.worst() <= test::kLogitsRelL2Tolerance);
  CHECK(m.ours == m.theirs);

  const std::string silent = test::unique_temp_path("attention_silent.gguf");
  test::scale_attention(la::model_path(model, seed, "f32"), silent, {.qk = 4.0f, .vo = 0.0f});  // no attention output
  const Run with = reference(path, prompt, false), without = reference(silent, prompt, false);
  std::filesystem::remove(silent);
  // Position 0 sees only its own key; with q/k amplified the later ones are
  // where attention mixes positions.
  const auto moved = rel_l2_per_position(without, with);
  fmt::print("llama-archs {} seed {}: silencing attention moves the amplified file's reference logits by rel-L2 "
             "min {:.2e} max {:.2e} (need > {:.0e})\n", arch, seed, min_of(moved), max_of(moved), kSensitivity);
  CHECK(min_of(moved) > kSensitivity);
}

}  // namespace

// The rescaler's table, on a hand-built file: no reference needed.
TEST_CASE("llama-archs rescaler: each tensor role gets its scale, and zero and rename options", "[e2e][llama-archs-rescale]") {
  using la::Role;
  CHECK(la::role_of("blk.0.attn_q.input_scale") == Role::kKeep);
  CHECK(la::role_of("blk.0.ffn_up_exps.scale") == Role::kScale);
  CHECK(la::role_of("blk.0.ssm_dt.bias") == Role::kBias);
  CHECK(la::role_of("blk.0.attn_norm.weight") == Role::kGain);
  CHECK(la::role_of("blk.0.hc_attn_norm.weight") == Role::kGain);
  CHECK(la::role_of("output_hc_norm.weight") == Role::kGain);
  CHECK(la::role_of("per_layer_token_embd.weight") == Role::kEmbedding);
  CHECK(la::role_of("blk.0.ssm_a") == Role::kSsmA);
  CHECK(la::role_of("blk.0.ffn_gate_inp_shexp.weight") == Role::kMatrix);
  CHECK(la::role_of("blk.0.ssm_conv1d.weight") == Role::kMatrix);

  const std::string in = test::unique_temp_path("rescale_in.gguf"), out = test::unique_temp_path("rescale_out.gguf");
  gguf::GgufWriter w;
  w.set("general.architecture", "llama");
  w.set("llama.block_count", uint32_t(1));
  auto f32 = [](std::vector<float> v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  w.add_tensor("blk.0.attn_q.weight", GgmlType::F32, {4, 2}, f32({0.01f, -0.02f, 0, 0, 0, 0, 0, 0.04f}));
  w.add_tensor("blk.0.attn_q.scale", GgmlType::F32, {1}, f32({0.01f}));
  w.add_tensor("blk.0.attn_q.input_scale", GgmlType::F32, {1}, f32({0.01f}));
  w.add_tensor("blk.0.ffn_up.bias", GgmlType::F32, {2}, f32({0.01f, -0.01f}));
  w.add_tensor("blk.0.attn_norm.weight", GgmlType::F32, {2}, f32({0.01f, -0.01f}));
  w.add_tensor("token_embd.weight", GgmlType::F32, {2}, f32({0.01f, -0.02f}));
  w.add_tensor("blk.0.ssm_a", GgmlType::F32, {2}, f32({0.01f, -0.02f}));
  w.write(in);
  auto values = [](const gguf::GgufFile& f, const std::string& name) {
    const gguf::TensorInfo* t = f.find_tensor(name);
    REQUIRE(t);
    std::vector<float> v(t->n_elements);
    std::memcpy(v.data(), t->data, v.size() * 4);
    return v;
  };
  {
    la::rescale(in, out);
    const auto f = gguf::GgufFile::open(out);
    REQUIRE(f.metadata().size() == 2);
    CHECK(f.metadata()[0].key == "general.architecture");
    CHECK(f.metadata()[1].key == "llama.block_count");
    REQUIRE(f.tensors().size() == 7);
    CHECK(f.tensors()[0].name == "blk.0.attn_q.weight");
    const auto q = values(f, "blk.0.attn_q.weight");  // fan_in 4: w / 0.02
    CHECK(q[0] == Approx(0.5f));
    CHECK(q[1] == Approx(-1.0f));
    CHECK(q[7] == Approx(2.0f));
    CHECK(values(f, "blk.0.attn_q.scale")[0] == Approx(1.3f));
    CHECK(values(f, "blk.0.attn_q.input_scale")[0] == 0.01f);
    CHECK(values(f, "blk.0.ffn_up.bias")[1] == Approx(-0.1f));
    CHECK(values(f, "blk.0.attn_norm.weight")[1] == Approx(0.9f));
    CHECK(values(f, "token_embd.weight")[1] == Approx(-2.0f));
    const auto a = values(f, "blk.0.ssm_a");  // -(0.5 + 50 |w|)
    CHECK(a[0] == Approx(-1.0f));
    CHECK(a[1] == Approx(-1.5f));
  }
  {
    la::RescaleOptions o;
    o.zero_tensor = "blk.0.attn_q.weight";
    o.rename_from = "blk.0.ffn_up.bias", o.rename_to = "blk.0.ffn_up.bais";
    la::rescale(in, out, o);
    const auto f = gguf::GgufFile::open(out);
    CHECK(values(f, "blk.0.attn_q.weight") == std::vector<float>(8, 0.0f));
    CHECK(f.find_tensor("blk.0.ffn_up.bias") == nullptr);
    CHECK(values(f, "blk.0.ffn_up.bais")[0] == Approx(0.1f));
    o.zero_tensor = "blk.0.nothing";
    CHECK_THROWS_WITH(la::rescale(in, out, o), Catch::Contains("blk.0.nothing"));
  }
  std::filesystem::remove(in);
  std::filesystem::remove(out);
}

// The attention scaler (vtc-scale-attn) on a hand-built file of every kind
// of tensor it treats: no reference needed. Dequantized values must be
// exactly the gain times the originals.
TEST_CASE("attention scaler: q/k x4, v/output x8, exact on float and block types, fused qkv split",
          "[e2e][llama-archs-rescale]") {
  using test::AttentionPart;
  CHECK(test::attention_part("blk.0.attn_q.weight") == AttentionPart::kQK);
  CHECK(test::attention_part("blk.3.attn_k_norm.weight") == AttentionPart::kQK);
  CHECK(test::attention_part("blk.0.attn_k_b.weight") == AttentionPart::kQK);
  CHECK(test::attention_part("blk.0.attn_q.bias") == AttentionPart::kNone);
  CHECK(test::attention_part("blk.0.attn_kv_a_mqa.weight") == AttentionPart::kQK);
  CHECK(test::attention_part("blk.1.attn_output.weight") == AttentionPart::kVO);
  CHECK(test::attention_part("blk.1.attn_v_b.weight") == AttentionPart::kVO);
  CHECK(test::attention_part("blk.0.attn_qkv.weight") == AttentionPart::kQKV);
  CHECK(test::attention_part("blk.0.attn_q_a.weight") == AttentionPart::kNone);  // before MLA's q_a norm
  CHECK(test::attention_part("blk.0.attn_q.scale") == AttentionPart::kNone);
  CHECK(test::attention_part("blk.0.attn_output.input_scale") == AttentionPart::kNone);
  CHECK(test::attention_part("output.weight") == AttentionPart::kNone);

  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto floats = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    return v;
  };
  auto bytes_of = [](const auto& v) {
    std::vector<uint8_t> b(v.size() * sizeof(v[0]));
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  // Random blocks of `type` whose f16 scales are sane (the scaler's own
  // offsets are what is under test, so they are found by dequantizing).
  auto blocks = [&](GgmlType type, size_t n) {
    const GgmlTypeTraits& t = ggml_traits(type);
    std::vector<uint8_t> b(n / t.block_size * t.block_bytes);
    for (uint8_t& x : b) x = uint8_t(rng());
    if (type == GgmlType::MXFP4)
      for (size_t i = 0; i < b.size(); i += t.block_bytes) b[i] = uint8_t(120 + rng() % 10);
    return b;
  };
  auto sane = [&](GgmlType type, std::vector<uint8_t> b, size_t n) {
    // Redraw until every dequantized value is finite and well inside f16.
    std::vector<float> v(n);
    for (int tries = 0; tries < 1000; ++tries) {
      dequantize_row(type, b.data(), v.data(), int64_t(n));
      bool ok = true;
      for (float x : v) ok &= std::isfinite(x) && std::fabs(x) < 1e3f;
      if (ok) return b;
      b = blocks(type, n);
    }
    FAIL("no sane random blocks of " << ggml_type_name(type));
    return b;
  };
  std::vector<uint16_t> halves(64);
  for (uint16_t& h : halves) h = fp32_to_fp16(u(rng));

  const std::string in = test::unique_temp_path("scale_attn_in.gguf"), out = test::unique_temp_path("scale_attn_out.gguf");
  gguf::GgufWriter w;
  w.set("general.architecture", "llama");
  w.set("llama.embedding_length", uint32_t(64));
  w.set("llama.attention.head_count", uint32_t(2));
  w.set("llama.attention.head_count_kv", uint32_t(1));
  const std::vector<std::pair<std::string, GgmlType>> quantized = {
      {"blk.0.attn_v.weight", GgmlType::Q8_0},      {"blk.0.attn_output.weight", GgmlType::Q4_K},
      {"blk.0.attn_k_b.weight", GgmlType::Q6_K},    {"blk.0.attn_v_b.weight", GgmlType::Q2_K},
      {"blk.0.attn_q_b.weight", GgmlType::Q3_K},    {"blk.0.attn_q.weight", GgmlType::Q5_K},
      {"blk.1.attn_q.weight", GgmlType::Q4_1},      {"blk.1.attn_k.weight", GgmlType::Q5_1},
      {"blk.1.attn_v.weight", GgmlType::Q5_0},      {"blk.1.attn_output.weight", GgmlType::Q4_0},
      {"blk.2.attn_q.weight", GgmlType::IQ4_NL},    {"blk.2.attn_k.weight", GgmlType::IQ4_XS},
      {"blk.2.attn_v.weight", GgmlType::MXFP4}};
  for (const auto& [name, type] : quantized) w.add_tensor(name, type, {256, 1}, sane(type, blocks(type, 256), 256));
  w.add_tensor("blk.0.attn_k.weight", GgmlType::F16, {64}, bytes_of(halves));
  w.add_tensor("blk.0.attn_q_norm.weight", GgmlType::F32, {32}, bytes_of(floats(32)));
  w.add_tensor("blk.0.ffn_up.weight", GgmlType::F32, {32}, bytes_of(floats(32)));
  w.add_tensor("blk.3.attn_qkv.weight", GgmlType::F32, {4, 128}, bytes_of(floats(4 * 128)));  // q 64, k 32, v 32 rows
  w.add_tensor("blk.3.attn_qkv.bias", GgmlType::F32, {128}, bytes_of(floats(128)));
  w.add_tensor("blk.4.attn_qkv.weight", GgmlType::F32, {4, 128}, bytes_of(floats(4 * 128)));  // a DeltaNet block's
  w.add_tensor("blk.4.ssm_a", GgmlType::F32, {2}, bytes_of(floats(2)));
  w.write(in);

  const auto scaled = test::scale_attention(in, out);
  CHECK(scaled.size() == quantized.size() + 3);
  const auto a = gguf::GgufFile::open(in), b = gguf::GgufFile::open(out);
  REQUIRE(a.tensors().size() == b.tensors().size());
  CHECK(b.metadata().size() == a.metadata().size());
  auto values = [](const gguf::TensorInfo& t) {
    std::vector<float> v(t.n_elements);
    dequantize_row(t.type, t.data, v.data(), int64_t(v.size()));
    return v;
  };
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    const gguf::TensorInfo &ta = a.tensors()[i], &tb = b.tensors()[i];
    REQUIRE(ta.name == tb.name);
    const auto va = values(ta), vb = values(tb);
    for (size_t e = 0; e < va.size(); ++e) {
      float gain = 1.0f;
      switch (test::attention_part(ta.name)) {
        case AttentionPart::kQK: gain = 4.0f; break;
        case AttentionPart::kVO: gain = 8.0f; break;
        case AttentionPart::kQKV:  // rows of 4; q and k are the first 96 rows
          if (ta.name.rfind("blk.3.", 0) == 0) gain = e / 4 < 96 ? 4.0f : 8.0f;
          break;
        case AttentionPart::kNone: break;
      }
      INFO(ta.name << " (" << ggml_type_name(ta.type) << ") value " << e);
      REQUIRE(vb[e] == va[e] * gain);
    }
  }
  std::vector<uint8_t> q8 = blocks(GgmlType::Q8_0, 32);
  CHECK_THROWS_WITH(test::scale_values(GgmlType::Q8_0, q8.data(), 32, 3.0f, "t"), Catch::Contains("power of two"));
  std::vector<uint8_t> iq3(ggml_traits(GgmlType::IQ3_S).block_bytes);
  CHECK_THROWS_WITH(test::scale_values(GgmlType::IQ3_S, iq3.data(), 256, 4.0f, "t"), Catch::Contains("not supported"));
  std::filesystem::remove(in);
  std::filesystem::remove(out);
}

// Every architecture's cases but the attention-amplified one; alone, for
// the architectures without attention (mamba, mamba2), which have nothing
// to amplify (its check that silencing attention moves the logits could
// not pass).
#define LLAMA_ARCHS_RECURRENT_CASES(ARCH)                                                                            \
  TEST_CASE("llama-archs " ARCH ": f32 and q8_0 match llama.cpp (3 seeds, 12-token prompt, 16 greedy steps)",       \
            "[e2e][reference][llama-archs]") {                                                                       \
    match(ARCH);                                                                                                     \
  }                                                                                                                  \
  TEST_CASE("llama-archs " ARCH ": zeroing a layer's output projection moves the reference's logits",               \
            "[e2e][reference][llama-archs]") {                                                                       \
    sensitivity(ARCH);                                                                                               \
  }                                                                                                                  \
  TEST_CASE("llama-archs " ARCH ": a renamed tensor is refused, by name", "[e2e][reference][llama-archs]") {        \
    refusal(ARCH);                                                                                                   \
  }                                                                                                                  \
  TEST_CASE("llama-archs " ARCH ": prefill in chunks equals prefill in one shot", "[e2e][reference][llama-archs]") { \
    chunked(ARCH);                                                                                                   \
  }

#define LLAMA_ARCHS_CASES(ARCH)                                                                                      \
  LLAMA_ARCHS_RECURRENT_CASES(ARCH)                                                                                  \
  TEST_CASE("llama-archs " ARCH ": attention-amplified f32 matches llama.cpp at prefill and decode positions",      \
            "[e2e][reference][llama-archs]") {                                                                       \
    amplified(ARCH);                                                                                                 \
  }

// For the sliding-window architectures: a 48-token prompt, past the window.
#define LLAMA_ARCHS_WINDOW_CASE(ARCH)                                                                                \
  TEST_CASE("llama-archs " ARCH ": a prompt longer than the sliding window matches llama.cpp",                       \
            "[e2e][reference][llama-archs]") {                                                                       \
    beyond_window(ARCH, 48);                                                                                         \
  }

LLAMA_ARCHS_CASES("llama")
LLAMA_ARCHS_CASES("llama-moe")
LLAMA_ARCHS_CASES("qwen2")
LLAMA_ARCHS_CASES("qwen3")
LLAMA_ARCHS_CASES("qwen3moe")
LLAMA_ARCHS_CASES("qwen35")
LLAMA_ARCHS_CASES("qwen35moe")
LLAMA_ARCHS_CASES("qwen3next")
LLAMA_ARCHS_CASES("qwen4exp")
LLAMA_ARCHS_CASES("gpt-oss")
LLAMA_ARCHS_WINDOW_CASE("gpt-oss")
LLAMA_ARCHS_CASES("gemma2")
LLAMA_ARCHS_WINDOW_CASE("gemma2")
LLAMA_ARCHS_CASES("phi3")
LLAMA_ARCHS_CASES("qwen2moe")
LLAMA_ARCHS_CASES("olmoe")
LLAMA_ARCHS_CASES("granite")
LLAMA_ARCHS_CASES("granite-moe")
LLAMA_ARCHS_CASES("smollm3")
LLAMA_ARCHS_CASES("mistral3")
LLAMA_ARCHS_CASES("mistral3-moe")
LLAMA_ARCHS_CASES("deepseek2")
LLAMA_ARCHS_CASES("glm4moe")
LLAMA_ARCHS_CASES("gemma3")
LLAMA_ARCHS_WINDOW_CASE("gemma3")
LLAMA_ARCHS_CASES("gemma2-softcap")
LLAMA_ARCHS_CASES("command-r")
LLAMA_ARCHS_CASES("llama4")
// ARCH-CASES (one line per architecture below)
LLAMA_ARCHS_CASES("phimoe")
LLAMA_ARCHS_CASES("deepseek")
LLAMA_ARCHS_CASES("dots1")
LLAMA_ARCHS_CASES("ernie4_5-moe")
LLAMA_ARCHS_CASES("hunyuan-moe")
LLAMA_ARCHS_CASES("arctic")
LLAMA_ARCHS_CASES("dbrx")
LLAMA_ARCHS_CASES("bailingmoe")
LLAMA_ARCHS_CASES("bailingmoe2")
LLAMA_ARCHS_CASES("minimax-m2")
LLAMA_ARCHS_CASES("hy_v3")
LLAMA_ARCHS_CASES("qwen3vlmoe")
LLAMA_ARCHS_CASES("gpt2")
LLAMA_ARCHS_CASES("starcoder")
LLAMA_ARCHS_CASES("gptneox")
LLAMA_ARCHS_CASES("phi2")
LLAMA_ARCHS_CASES("stablelm")
LLAMA_ARCHS_CASES("starcoder2")
LLAMA_ARCHS_CASES("codeshell")
LLAMA_ARCHS_CASES("olmo")
LLAMA_ARCHS_CASES("nemotron")
LLAMA_ARCHS_CASES("qwen2vl")
LLAMA_ARCHS_CASES("qwen3vl")
LLAMA_ARCHS_CASES("glm4")
LLAMA_ARCHS_CASES("chatglm")
LLAMA_ARCHS_CASES("qwen")
LLAMA_ARCHS_CASES("exaone4")
LLAMA_ARCHS_WINDOW_CASE("exaone4")
LLAMA_ARCHS_CASES("plamo")
LLAMA_ARCHS_CASES("openelm")
LLAMA_ARCHS_CASES("deci")
LLAMA_ARCHS_CASES("minicpm3")
LLAMA_ARCHS_CASES("gemma")
LLAMA_ARCHS_CASES("granitemoe")
LLAMA_ARCHS_CASES("granitemoe-moe")
LLAMA_ARCHS_CASES("xverse")
LLAMA_ARCHS_CASES("orion")
LLAMA_ARCHS_CASES("baichuan")
LLAMA_ARCHS_CASES("internlm2")
LLAMA_ARCHS_CASES("exaone")
LLAMA_ARCHS_CASES("arcee")
LLAMA_ARCHS_CASES("ernie4_5")
LLAMA_ARCHS_CASES("hunyuan-dense")
LLAMA_ARCHS_CASES("nanbeige")
LLAMA_ARCHS_CASES("maincoder")
LLAMA_ARCHS_CASES("pangu-embedded")
LLAMA_ARCHS_CASES("seed_oss")
LLAMA_ARCHS_CASES("jais2")
LLAMA_ARCHS_CASES("lfm2")
LLAMA_ARCHS_WINDOW_CASE("lfm2")
LLAMA_ARCHS_CASES("lfm2moe")
LLAMA_ARCHS_CASES("mistral4")
LLAMA_ARCHS_CASES("talkie")
LLAMA_ARCHS_RECURRENT_CASES("mamba2")
LLAMA_ARCHS_RECURRENT_CASES("mamba")
LLAMA_ARCHS_CASES("granitehybrid")
LLAMA_ARCHS_CASES("nemotron_h")
LLAMA_ARCHS_CASES("nemotron_h_moe")
LLAMA_ARCHS_CASES("falcon-h1")
LLAMA_ARCHS_CASES("jamba")
LLAMA_ARCHS_CASES("plamo2")
LLAMA_ARCHS_CASES("minimax-01")
LLAMA_ARCHS_CASES("bloom")
LLAMA_ARCHS_CASES("mpt")
LLAMA_ARCHS_CASES("jais")
LLAMA_ARCHS_CASES("refact")
LLAMA_ARCHS_CASES("kimi-linear")
