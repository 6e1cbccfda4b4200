// The .vtc artifact written by `vtc compile` and read by `vtc run`/`serve`.
//
// Layout (little-endian):
//   bytes 0..7    magic "VTCARTF\0"
//   bytes 8..11   u32 format version (kArtifactFormat)
//   bytes 12..15  u32 zero
//   bytes 16..23  u64 manifest length L
//   bytes 24..    the manifest: JSON, L bytes
//   then, with --pack, the GGUF file itself at the next multiple of 4096
//   (its tensor alignment is preserved), mmapped at load like a GGUF;
//   except that the bytes of every tensor whose weight the lowered IR
//   declares in a layout other than rows (q4_k_x8: the weight-layout pass)
//   are stored rearranged into that layout (cpu::repack_weight: same size,
//   same header and tensor table), and the manifest lists them in
//   gguf.stored_layouts ({"blk.0.attn_q.weight": "x8", ...}). Loading sets
//   TensorInfo::stored_layout from that map and still only maps the file:
//   the CPU interpreter reads those tensors in place, with nothing to
//   repack. A referenced GGUF (no --pack) is never rewritten: the
//   interpreter repacks the x8 weights into memory at load.
// The manifest holds the format and vtc versions, the target, pipeline and
// step bounds, the model's hparams, tokenizer summary and chat template,
// the lowered IR (the whole module, and each step's function for review),
// the memory plan of each step, for the cuda target each step's kernels
// (the distinct sources) and launches (what the executor runs, so it
// generates nothing at load: kernel arguments, grids and aliases by value
// position, dims as text), op counts before and after the passes, the
// placement/bind-state reports, and the GGUF reference: its path (relative
// to the artifact's directory unless it was given absolute), size, a
// checksum (FNV-1a 64) of its header and tensor table and, optionally, an
// XXH64 of all its bytes (`weights_checksum`; on by default with --pack;
// for a packed GGUF, of the bytes as written, rearranged tensors included);
// or, packed, its offset in the artifact and its stored layouts.
//
// Loading trusts nothing in the file: it checks the format version, the
// GGUF's size and checksums (a mismatch is an error naming both values),
// parses and verifies the IR, re-binds its states, bounds every state's
// size, and validates each stored memory plan against the IR it carries:
// the planner's own plan for that IR at the stored bounds must have the
// same buffers (key, placement, size, liveness), every offset is aligned
// and inside its arena, no two buffers live at the same time overlap, and
// an arena is at most the sum of its buffers and this machine's memory. A
// bad value is a vtc::Error naming the manifest field (e.g.
// `steps.decode.memory_plan.buffers[3].offset`).
//
// Format 3 (this one) stores a packed GGUF's x8 weights rearranged, listed
// in gguf.stored_layouts (a format-2 reader would read them as rows, so the
// version changed); format 2 resolved a relative GGUF path against the
// artifact's directory, format 1 against the working directory. Another
// version is refused with the advice to recompile. The stored layouts are
// validated like any field: a tensor the GGUF lacks, an unknown layout, a
// layout the tensor's type or rows cannot take, or one that differs from
// the layout the IR declares for its weight is an error naming
// gguf.stored_layouts["<tensor>"].
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>

#include "runtime/compile/compile.h"

namespace vtc {

inline constexpr uint32_t kArtifactFormat = 3;

// True if the file starts with the artifact magic.
bool is_artifact(const std::string& path);

// FNV-1a 64 of the GGUF's bytes before its tensor data (header, metadata,
// tensor table): cheap, and it changes with any tensor's name, type, shape
// or offset.
uint64_t gguf_header_checksum(const gguf::GgufFile& file);

// XXH64 of all the GGUF's bytes (header and tensor data): what
// `weights_checksum` records.
uint64_t gguf_content_checksum(const gguf::GgufFile& file);
uint64_t xxh64(std::span<const uint8_t> bytes, uint64_t seed = 0);

struct SaveOptions {
  bool pack = false;  // embed the GGUF, its non-rows weights rearranged
  // Record gguf_content_checksum() and verify it at load; default: on with
  // pack, off for a referenced GGUF.
  std::optional<bool> checksum_weights = std::nullopt;
};
struct SaveInfo {
  std::optional<uint64_t> weights_checksum;  // when recorded
  double checksum_seconds = 0;                // time it took
  size_t packed_weights = 0;                  // pack: tensors stored rearranged
  uint64_t packed_bytes = 0;                  // their bytes
  double pack_seconds = 0;                    // writing the packed GGUF, repacking included
};
SaveInfo save_artifact(const CompiledModel& model, const std::string& path, const SaveOptions& options);

// The tensors `--pack` stores rearranged: GGUF tensor name -> the layout the
// lowered IR declares for its weight (rows ones omitted). Throws vtc::Error
// if two weights read one tensor in two layouts or a tensor cannot take its
// layout.
std::map<std::string, WeightLayout> packed_layouts(const CompiledModel& model);

// Throws vtc::Error naming the problem (not an artifact, version, missing
// or changed GGUF, IR that does not parse or verify).
CompiledModel load_artifact(const std::string& path);

}  // namespace vtc
