// `vtc gen-model`: write a synthetic model (samples/synthetic_model.h).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <unistd.h>

#include <chrono>

#include "samples/synthetic_model.h"
#include "support/error.h"
#include "tools/vtc/commands.h"

namespace vtc::cli {

Runner add_gen_model(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "gen-model", "Write a random-weight GGUF model with a real tokenizer (for tests and benchmarks)");
  struct Opts {
    synth::Options synth;
    std::string out = "vtc-tiny-llama.gguf";
    std::string type = "f32";
    bool quiet = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--arch", o->synth.arch,
                  "Architecture: dense llama, qwen2, qwen3; gemma2, gemma3 (sliding-window layers of "
                  "n_ctx/4, GELU FFN, sandwich norms, tied head); MoE qwen3moe, gpt-oss (biased experts, "
                  "attention sinks, sliding window n_ctx/4 on every other layer, yarn rope); hybrid "
                  "Gated-DeltaNet qwen35 (dense FFN), qwen35moe, qwen3next (MoE with a shared expert), "
                  "qwen4exp (qwen35moe with hyper-connections, PLE n-gram embeddings and QSA sparse attention); "
                  "phi3 (fused qkv and gate|up, LongRoPE factors), deepseek2 (MLA, a leading dense block, grouped "
                  "sigmoid routing, a shared expert), glm4moe (partial rotary, q/k/v biases, QK-norm, sigmoid-routed "
                  "experts and a shared expert), granite (embedding/residual/attention/logit multipliers; --moe for "
                  "Granite MoE), smollm3 (no rope on every 4th of its 4+ layers), command-r (layer norms, parallel "
                  "block, logit scale), olmoe (QK-norm, 8 experts), qwen2moe (experts plus a gated shared expert), "
                  "mistral3 (yarn rope), llama4 (chunked attention, no-rope layers, top-1 MoE every other layer); "
                  "state space mamba2 (Mamba-2 blocks only, twice the size's layers), lfm2 (gated short "
                  "convolutions, attention on every third layer, tied), jamba (Mamba-1 with attention on one "
                  "layer in 4, experts on every odd layer) and nemotron_h (Mamba-2, attention and relu^2 FFN "
                  "blocks, twice the size's layers)")
      ->check(CLI::IsMember(synth::known_archs()))->capture_default_str();
  cmd->add_option("--size", o->synth.size, "Model size")
      ->check(CLI::IsMember(synth::known_sizes()))->capture_default_str();
  cmd->add_option("--seed", o->synth.seed, "Random seed (same seed, same file)")->capture_default_str();
  cmd->add_option("--type", o->type, "Matrix weight type: f32, f16 or bf16 (vectors, ssm_conv1d and ple_conv1d stay f32)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))->capture_default_str();
  cmd->add_option("--vocab", o->synth.vocab_path,
                  "Vocab GGUF to take the tokenizer from (default: the reference's "
                  "ggml-vocab-llama-spm.gguf for llama, gemma2, gemma3 and jamba; -phi-3, -command-r, -deepseek-llm "
                  "(deepseek2), -gpt-neox (olmoe, mamba2), -refact (granite), -llama-bpe (smollm3, mistral3, llama4, "
                  "nemotron_h); "
                  "ggml-vocab-qwen2.gguf for the qwen archs, glm4moe, gpt-oss and lfm2)");
  cmd->add_flag("--tied", o->synth.tied_embeddings,
                "Tie the output head to token_embd (gemma2, gemma3, granite, smollm3, command-r and lfm2 are always "
                "tied; gpt-oss, olmoe and qwen2moe never)");
  cmd->add_flag("--moe", o->synth.moe, "granite: Granite MoE (8 experts, 2 used, and a shared expert)");
  cmd->add_option("--rope-scaling", o->synth.rope_scaling, "Write rope scaling keys: linear or yarn (gpt-oss and mistral3: yarn by default; not for phi3 and deepseek2)")
      ->check(CLI::IsMember({"linear", "yarn"}));
  cmd->add_option("--rope-factor", o->synth.rope_factor, "Rope scaling factor (with --rope-scaling)")->capture_default_str();
  cmd->add_flag("--rope-freqs", o->synth.rope_freqs, "Add a llama3-style rope_freqs.weight (per-pair frequency divisors; llama, qwen2, qwen3, qwen3moe, granite, mistral3, llama4)");
  cmd->add_option("--zero-attn-output", o->synth.zero_attn_output_layer,
                  "Zero blk.N.attn_output.weight, or the output projection of a recurrent layer (ssm_out, "
                  "shortconv.out_proj; nemotron_h FFN blocks: ffn_down) (sensitivity tests)");
  cmd->add_flag("--split-qkvz", o->synth.split_qkvz,
                "qwen3next: attn_qkv + attn_gate (the current converter's layout) instead of the fused ssm_in");
  cmd->add_flag("--llama-archs-layout", o->synth.llama_archs_layout,
                "gemma2/gemma3: write llama.cpp's test-llama-archs layout instead (no vocab, every optional "
                "tensor, F32 values of std 0.01 for the llama-archs tests' rescaler; fixed 6-layer shape)");
  cmd->add_option("-o,--output", o->out, "Output file")->capture_default_str();
  cmd->add_flag("-q,--quiet", o->quiet, "No progress output");
  return [o] {
    o->synth.weight_type = *ggml_type_from_name(o->type);
    if (o->synth.vocab_path.empty() && !o->synth.llama_archs_layout)
      o->synth.vocab_path = synth::find_default_vocab(o->synth.arch);
    auto start = std::chrono::steady_clock::now();
    // On a terminal, one line rewritten in place; in a log, a line per 10%.
    const bool tty = isatty(STDERR_FILENO);
    const int step = tty ? 1 : 10;
    int last_percent = -1;
    auto progress = [&](const synth::Progress& p) {
      int percent = int(100.0 * double(p.bytes_done) / double(p.bytes_total)) / step * step;
      if (o->quiet || percent == last_percent) return;
      last_percent = percent;
      fmt::print(stderr, "{}gen-model: {:3d}% [{}/{}] {:<32}{}", tty ? "\r" : "", percent, p.index,
                 p.total, p.tensor, tty && p.index < p.total ? "" : "\n");
    };
    auto s = synth::write_model(o->synth, o->out, progress);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print("wrote {}: {} {} ({} layers, n_embd {}, vocab {}), {:.1f}M parameters, {:.1f} MiB, "
               "{:.1f}s\n",
               o->out, o->synth.arch, o->synth.size, s.shape.n_layer, s.shape.n_embd, s.vocab_size,
               s.parameters / 1e6, s.file_bytes / 1048576.0, secs);
    return 0;
  };
}

}  // namespace vtc::cli
