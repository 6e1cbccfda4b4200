// Architecture builders: a GGUF file in, an IR module out.
//
// Each architecture reads its hparams from GGUF metadata and emits @prefill
// and @decode functions with the builder, in the order of the model's math.
// The runtime never sees the architecture: everything it needs is in the
// module (weights, states, ops). Semantics follow the reference's
// src/models/<arch>.cpp.
//
// Step function contract (every architecture):
//   @prefill(%ids: [T] i32, %pos: [T] i32, %seq: [T] i32, %rows: [R] i32)
//       -> logits [R x n_vocab] f32, for the token rows listed in %rows
//   @decode(%pos: [S] i32, %seq: [S] i32, %sampling: [S x 4] f32,
//           %seed: [S x 2] i32) -> (logits [S x n_vocab] f32, next [S] i32)
//       one token per sequence; the ids come from state @last_ids, which
//       holds the token sampled for each sequence slot at the last step.
//       The step samples the next ids itself (op `sample`, docs/ir.md:
//       per row temperature, top_k, top_p, min_p and a 64-bit seed; the
//       draw counter is the row's position) and writes them to @last_ids.
//       The runtime copies out only what it needs: the logits for host
//       sampling, or only `next` for sampling on the backend.
//   @embed(%ids: [T] i32, %pos: [T] i32, %seq: [T] i32)
//       -> embd [T x n_embd] f32, only with BuildOptions::embeddings: every
//       token's hidden state where the reference takes its embeddings
//       (t_embd: for a decoder, the final norm's output, before the head).
//       Pooling and normalisation are the caller's (serve/api/embeddings/embeddings.h).
// A step runs a list of S sequences, each bound to a state-store slot by
// the runtime. %seq holds each token's index in that list (0..S-1); rows of
// S-indexed states are the list's slots, in order.
#pragma once

#include <string>
#include <vector>

#include "frontends/gguf/gguf.h"
#include "ir/module.h"

namespace vtc::arch {

// The `sample` op's candidate bound in @decode: top_k above it is cut to it.
inline constexpr int64_t kSampleMaxCandidates = 64;

struct BuildOptions {
  int64_t kv_page_tokens = 16;
  // The KV cache's element types (llama.cpp's -ctk / -ctv; one of
  // kv_cache_types()); f16 is its default. Builders declare f16 states and
  // apply_kv_cache_types retypes them.
  GgmlType cache_type_k = GgmlType::F16, cache_type_v = GgmlType::F16;
  // Refuse a file with a tensor the architecture does not take (off only
  // for `vtc inspect`, which reports the accounting instead).
  bool check_tensors = true;
  // Also build @embed (above), for `vtc serve --embeddings`.
  bool embeddings = false;
};

// Builds the module for the file's general.architecture. Throws vtc::Error
// for an unknown architecture (listing the known ones) or missing hparams.
ir::Module build_module(const gguf::GgufFile& file, const BuildOptions& options = {});
std::vector<std::string> known_architectures();

// Which tensors of a file the architecture's builder takes, which it
// accepts without applying them (as llama.cpp loads them and applies none;
// the table is in tensor_accounting.cpp and docs/gguf.md), and which no
// engine knows. Throws vtc::Error when the module cannot be built at all.
struct FileAccounting {
  std::vector<std::string> taken, accepted_unused, unknown;
};
FileAccounting account_file(const gguf::GgufFile& file);

// Gives the KV states of a built module the cache types of `options`, with
// the reference's rotations around a quantized cache (kv_cache_types.cpp).
// build_module calls it. Throws vtc::Error for a combination vtc refuses.
void apply_kv_cache_types(ir::Module& module, const BuildOptions& options);

// The IR element type of a GGUF tensor type (quantized types map to quant).
ir::ElemType elem_type_of(GgmlType type);

}  // namespace vtc::arch
