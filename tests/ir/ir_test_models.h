// Modules built in code, shared by the IR tests: a small llama/qwen3-like
// decode step, a prefill step, and a qwen4exp-like n-gram hash block.
#pragma once

#include "ir/builder.h"
#include "ir/module.h"

namespace vtc::ir::testing {

inline TensorType tensor(Shape shape, ElemType elem, Placement place = Placement::Device) {
  return TensorType{elem, std::move(shape), place};
}

inline const Dim T = Dim::symbol("T");
inline const Dim S = Dim::symbol("S");
inline const Dim P = Dim::symbol("P");

// Declarations for `layers` llama/qwen3 blocks: D=64, 4 q heads, 2 kv heads
// (GQA), head dim 16, FFN 128, vocab 256.
void declare_llama(Module& m, int layers, ElemType weight_type);
// One step: ids come from the @last_ids state (decode) or an argument
// (prefill); the sampled token goes back to @last_ids.
void build_llama_step(Module& m, const std::string& step, int layers);
// A module with both steps and a qwen4exp-style n-gram hash on the device.
Module make_llama_module(int layers = 2);
// Decode step that feeds ids through ngram_hash placed as the caller says.
Module make_ngram_decode(Placement hash_place, bool insert_to_host);

}  // namespace vtc::ir::testing
