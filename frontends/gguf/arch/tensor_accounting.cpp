// Tensor accounting: every tensor of a GGUF file is either taken by the
// architecture's builder (declared as a weight of the module) or listed in
// the one table below of tensors the reference loads and never applies;
// anything else refuses the file, naming each tensor, as the reference's
// loader does (done_getting_tensors: "wrong number of tensors").
//
// The table is read from the reference (src/llama-model.cpp, the generic
// ".scale"/".input_scale" pass, create_tensor_qkv, and each architecture's
// load_arch_tensors against its graph in src/models/<arch>.cpp). Each entry
// says why; docs/gguf.md reproduces it and `vtc inspect` reports the
// entries a file matches.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "frontends/gguf/arch/step_graph.h"
#include "support/error.h"

namespace vtc::arch {

const std::vector<AcceptedUnused>& accepted_unused_tensors() {
  static const std::vector<AcceptedUnused> table = {
      {"*", "*.input_scale",
       "activation scales of NVFP4-style checkpoints: the generic scale pass loads them and no graph applies them"},
      {"llama", "blk.*.ffn_*_shexp.weight",
       "shared experts, loaded when expert_shared_feed_forward_length > 0 (for Granite MoE); the llama graph does not "
       "apply them"},
      {"llama", "blk.*.ffn_*_shexp.scale", "the scales of those shared experts"},
      {"qwen2", "blk.*.ffn_*.scale",
       "the generic scale pass loads them; qwen2's build_ffn passes no scales"},
      {"qwen3", "cls.output.*",
       "the reranker's classification head (n_cls_out): applied only when pooling for ranking, never to the logits"},
      {"qwen35,qwen35moe,qwen3next,qwen4exp", "blk.*.attn_[qkv].bias",
       "create_tensor_qkv loads optional q/k/v biases; the gated-attention graphs never add them"},
      {"qwen3next", "blk.*.attn_qkv.scale",
       "the generic scale pass loads it; qwen3next's graph passes no scale to this projection"},
      {"qwen3next", "blk.*.attn_gate.scale", "as attn_qkv.scale"},
      {"qwen3next", "blk.*.ssm_in.scale", "as attn_qkv.scale"},
      {"qwen3next", "blk.*.ssm_out.scale", "as attn_qkv.scale"},
      {"qwen3next", "blk.*.ssm_in.weight",
       "the fused qkvz projection of older files: when attn_qkv and attn_gate are present too, the graph uses those"},
      {"gpt-oss", "blk.*.ffn_*_exps.scale",
       "the generic scale pass loads them; openai-moe's build_moe_ffn call passes no per-expert scales"},
      {"gemma2,gemma3", "blk.*.ffn_*.scale",
       "the generic scale pass loads them; the gemma graphs' build_ffn (GELU, parallel gate) passes no scales"},
      {"phi3,qwen2moe,granite,smollm3,command-r", "blk.*.ffn_*.scale",
       "the generic scale pass loads them; these graphs' build_ffn and build_moe_ffn calls pass no scales"},
      {"phi3", "rope_factors_long.weight",
       "LongRoPE: the reference loads both factor sets and applies the one the context length picks "
       "(get_rope_factors); the other is unused"},
      {"phi3", "rope_factors_short.weight", "as rope_factors_long"},
      {"olmoe", "blk.*.attn_[qkv].scale",
       "the generic scale pass loads them; olmoe's graph projects q, k and v with no scale"},
      {"olmoe", "blk.*.attn_[qkv].bias", "create_tensor_qkv loads optional q/k/v biases; olmoe's graph adds none"},
      {"olmoe", "blk.*.ffn_*_exps.scale",
       "the generic scale pass loads them; olmoe's build_moe_ffn call passes no per-expert scales"},
      {"deepseek2,glm4moe", "blk.*.ffn_*.scale",
       "the generic scale pass loads them; the dense, shared-expert and routed FFNs of these graphs take no scales"},
      {"deepseek2", "blk.*.attn_q.scale",
       "the generic scale pass loads it for the lite variants' attn_q; deepseek2's graph projects q with no scale"},
      {"deepseek2", "output.scale",
       "loaded for an NVFP4 output matrix; deepseek2's graph multiplies by the output matrix with no scale"},
      {"deepseek2,glm4moe", "blk.*.nextn.*",
       "the NextN/MTP block's own tensors: the reference loads them for speculative decoding (graph_mtp) only"},
      {"llama4", "blk.*.ffn_*.scale",
       "the generic scale pass loads them; llama4's build_ffn (dense and shared expert) and build_moe_ffn calls pass no scales"},
      {"bert", "cls.*",
       "the reranker's classification head (cls, cls.output): applied only when pooling for ranking, which vtc "
       "refuses"},
      {"bert", "blk.*.ffn_*.scale",
       "the generic scale pass loads them; bert's build_ffn (GELU, sequential) passes no scales"},
      {"phimoe", "rope_factors_long.weight",
       "LongRoPE, as phi3: both factor sets are loaded and the context length picks one (get_rope_factors)"},
      {"phimoe", "rope_factors_short.weight", "as rope_factors_long"},
      {"phimoe", "blk.*.ffn_*_exps.scale",
       "the generic scale pass loads them; these graphs' build_moe_ffn call passes no per-expert scales"},
      {"dbrx,minimax-m2,qwen3vlmoe", "blk.*.ffn_*_exps.scale",
       "the generic scale pass loads them; these graphs' build_moe_ffn call passes no per-expert scales"},
      {"deepseek,dots1,ernie4_5-moe,hunyuan-moe,arctic,bailingmoe,bailingmoe2", "blk.*.ffn_*.scale",
       "the generic scale pass loads them; the dense, shared-expert and routed FFNs of these graphs take no scales"},
      {"ernie4_5-moe", "blk.*.attn_output.bias",
       "loaded as optional; ernie4_5-moe's build_attn call passes no output bias"},
      {"minimax-m2", "blk.*.attn_[qkv].bias",
       "create_tensor_qkv loads optional q/k/v biases; minimax-m2's graph projects q, k and v with neither bias nor scale"},
      {"minimax-m2", "blk.*.attn_[qkv].scale", "as the q/k/v biases"},
      {"hy_v3", "blk.*.ffn_gate.*",
       "the loader creates the dense FFN in every layer (not required); a layer with ffn_gate_inp applies the experts only"},
      {"hy_v3", "blk.*.ffn_up.*", "as ffn_gate"},
      {"hy_v3", "blk.*.ffn_down.*", "as ffn_gate"},
      {"gpt2,starcoder,gptneox,phi2,stablelm,starcoder2,codeshell,olmo,nemotron,jais2", "blk.*.ffn_*.scale",
       "the generic scale pass loads them; the layer-norm decoders' build_ffn calls pass no scales"},
      {"qwen,qwen2vl,qwen3vl,chatglm,glm4,exaone4,plamo,openelm,deci,minicpm3", "blk.*.ffn_*.scale",
       "the generic scale pass loads them; these graphs' build_ffn and build_moe_ffn calls pass no scales"},
      {"openelm", "blk.*.attn_qkv.scale",
       "the generic scale pass loads it; openelm's graph projects qkv with no scale"},
      {"minicpm3", "rope_factors_long.weight",
       "LongRoPE: the reference loads both factor sets and applies the one the context length picks "
       "(get_rope_factors); the other is unused"},
      {"minicpm3", "rope_factors_short.weight", "as rope_factors_long"},
      {"qwen2vl", "output.bias", "qwen2vl's loader takes an optional output.bias; its graph never adds it"},
      {"qwen3vl", "cls.output.*",
       "the reranker's classification head (n_cls_out): applied only when pooling for ranking, never to the logits"},
      {"gemma", "blk.*.ffn_*.scale",
       "the generic scale pass loads them; gemma's build_ffn (GELU, parallel gate) passes no scales"},
      {"granitemoe", "blk.*.ffn_*.scale",
       "the generic scale pass loads them; granite's graph passes no scales to build_ffn or build_moe_ffn"},
      {"xverse,internlm2,baichuan,orion,exaone,arcee,ernie4_5,hunyuan-dense,maincoder,pangu-embedded,seed_oss",
       "blk.*.ffn_*.scale", "the generic scale pass loads them; these graphs' build_ffn calls pass no scales"},
      {"ernie4_5", "blk.*.attn_output.bias",
       "ernie4_5's loader takes an optional attn_output.bias; its graph's build_attn passes no output bias"},
      {"pangu-embedded", "rope_freqs.weight",
       "pangu-embed's loader takes an optional rope_freqs; its graph ropes without frequency factors"},
      {"lfm2,lfm2moe", "blk.*.ffn_*.scale",
       "the generic scale pass loads them; the lfm2 graphs' build_ffn and build_moe_ffn calls pass no scales"},
      {"mistral4", "blk.*.ffn_*.scale", "as deepseek2 (mistral4 is deepseek2's loader and graph)"},
      {"mistral4", "blk.*.attn_q.scale", "as deepseek2"},
      {"mistral4", "output.scale", "as deepseek2"},
      {"mistral4", "blk.*.nextn.*", "as deepseek2"},
      {"talkie", "blk.*.ffn_[gu]*.scale",
       "the generic scale pass loads them; talkie's build_ffn call passes only ffn_down's scale"},
      {"granitehybrid", "blk.*.ffn_*.scale",
       "the generic scale pass loads them; granite-hybrid's build_ffn and build_moe_ffn calls pass no scales"},
      {"falcon-h1", "blk.*.attn_output.bias",
       "falcon-h1's loader takes an optional attn_output.bias; its graph's build_attn passes no output bias"},
      {"falcon-h1", "blk.*.ffn_*.scale", "the generic scale pass loads them; falcon-h1's build_ffn passes no scales"},
      {"falcon-h1", "rope_freqs.weight", "falcon-h1's loader takes an optional rope_freqs; its graph ropes without frequency factors"},
      {"jamba", "blk.*.ffn_*.scale",
       "the generic scale pass loads them; jamba's build_ffn and build_moe_ffn calls pass no scales"},
      {"plamo2", "blk.*.ffn_*.scale",
       "the generic scale pass loads them; plamo2's build_ffn passes no scales"},
      {"plamo2", "blk.*.attn_qkv.scale", "the generic scale pass loads it; plamo2 projects qkv with no scale"},
      {"plamo2", "blk.*.ssm_in.scale", "the generic scale pass loads it; plamo2's Mamba layer projects with no scale"},
      {"plamo2", "blk.*.ssm_out.scale", "as ssm_in.scale"},
      {"minimax-01", "blk.*.ffn_*_exps.scale",
       "the generic scale pass loads them; minimax-01's build_moe_ffn call passes no per-expert scales"},
      {"minimax-01", "blk.*.attn_qkv.scale",
       "the generic scale pass loads it; the lightning-attention layers project qkv, the gate and the output with "
       "no scale (the softmax layers apply attn_output.scale, and attn_qkv.scale when their qkv is fused)"},
      {"minimax-01", "blk.*.attn_gate.scale", "as attn_qkv.scale"},
      {"minimax-01", "blk.*.attn_output.scale", "as attn_qkv.scale"},
      {"bloom,mpt,jais,refact", "blk.*.ffn_*.scale",
       "the generic scale pass loads them; these graphs' build_ffn calls pass no scales"},
      {"mpt", "blk.*.attn_k_norm.*",
       "loaded when present; mpt's graph applies the QK layer norm only with attn_q_norm, which vtc refuses and "
       "the generator never writes"},
      {"refact", "blk.*.attn_output.bias", "loaded (optional); refact's build_attn passes no output bias"},
      {"refact", "blk.*.ffn_*.bias", "the optional MLP biases the loader takes; refact's build_ffn passes none"},
      {"kimi-linear", "blk.*.attn_[qkv].bias",
       "create_tensor_qkv loads optional q/k/v biases; the KDA graph projects q, k, v with the bare matrices"},
      {"kimi-linear", "blk.*.attn_[qkv].scale",
       "the generic scale pass loads them; kimi-linear projects the KDA q/k/v and the MLA q with no scale"},
      {"kimi-linear", "blk.*.attn_output.scale",
       "the generic scale pass loads it; on KDA layers the graph projects the output with no scale (the MLA "
       "layers' build_attn applies theirs)"},
      {"kimi-linear", "blk.*.ssm_beta.scale", "the generic scale pass loads it; the graph projects beta with no scale"},
      {"kimi-linear", "blk.*.ffn_*.scale",
       "the generic scale pass loads them; kimi-linear's dense, shared-expert and routed FFNs take no scales"},
      {"kimi-linear", "output.scale", "loaded for an NVFP4 output matrix; the graph multiplies by it with no scale"},
      {"refact", "rope_freqs.weight", "the llama-style loader takes it (optional); refact's graph has no rope"},
  };
  return table;
}

namespace {

// '*' matches any run of characters; "[abc]" one of the listed characters.
bool glob_match(std::string_view pattern, std::string_view text) {
  if (pattern.empty()) return text.empty();
  if (pattern[0] == '*') {
    for (size_t skip = 0; skip <= text.size(); ++skip)
      if (glob_match(pattern.substr(1), text.substr(skip))) return true;
    return false;
  }
  if (text.empty()) return false;
  if (pattern[0] == '[') {
    const size_t close = pattern.find(']');
    if (close != std::string_view::npos) {
      if (pattern.substr(1, close - 1).find(text[0]) == std::string_view::npos) return false;
      return glob_match(pattern.substr(close + 1), text.substr(1));
    }
  }
  return pattern[0] == text[0] && glob_match(pattern.substr(1), text.substr(1));
}

bool applies_to(const AcceptedUnused& entry, const std::string& arch) {
  if (entry.architectures == "*") return true;
  std::string_view list = entry.architectures;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    if (list.substr(0, comma) == arch) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

TensorAccounting account_tensors(const gguf::GgufFile& f, const ir::Module& m) {
  std::set<std::string> taken;
  for (const auto& w : m.weights) taken.insert(w.source);
  const std::string arch = f.architecture();
  TensorAccounting a;
  for (const auto& t : f.tensors()) {
    if (taken.count(t.name)) {
      a.taken.push_back(t.name);
      continue;
    }
    const auto& table = accepted_unused_tensors();
    const bool accepted = std::any_of(table.begin(), table.end(), [&](const AcceptedUnused& e) {
      return applies_to(e, arch) && glob_match(e.pattern, t.name);
    });
    (accepted ? a.accepted_unused : a.unknown).push_back(t.name);
  }
  return a;
}

FileAccounting account_file(const gguf::GgufFile& f) {
  BuildOptions o;
  o.check_tensors = false;
  return account_tensors(f, build_module(f, o));
}

void require_full_accounting(const gguf::GgufFile& f, const TensorAccounting& a) {
  if (a.unknown.empty()) return;
  constexpr size_t kListed = 12;
  std::vector<std::string> shown(a.unknown.begin(), a.unknown.begin() + std::min(a.unknown.size(), kListed));
  const std::string more = a.unknown.size() > kListed ? fmt::format(" and {} more", a.unknown.size() - kListed) : "";
  throw Error(fmt::format("{}: {} tensor(s) that architecture '{}' does not use and llama.cpp would not load: {}{} "
                          "(an unknown tensor would change the model; docs/gguf.md lists what each architecture reads)",
                          f.path(), a.unknown.size(), f.architecture(), fmt::join(shown, ", "), more));
}

}  // namespace vtc::arch
