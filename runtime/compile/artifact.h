// The .vtc artifact written by `vtc compile` and read by `vtc run`/`serve`.
//
// Layout (little-endian):
//   bytes 0..7    magic "VTCARTF\0"
//   bytes 8..11   u32 format version (kArtifactFormat)
//   bytes 12..15  u32 zero
//   bytes 16..23  u64 manifest length L
//   bytes 24..    the manifest: JSON, L bytes
//   then, with --pack, the GGUF file itself at the next multiple of 4096
//   (its tensor alignment is preserved), mmapped at load like a GGUF.
// The manifest holds the format and vtc versions, the target, pipeline and
// step bounds, the model's hparams, tokenizer summary and chat template,
// the lowered IR (the whole module, and each step's function for review),
// the memory plan of each step, op counts before and after the passes, the
// placement/bind-state reports, and the GGUF reference: its path (relative
// to the artifact's directory unless it was given absolute), size, a
// checksum (FNV-1a 64) of its header and tensor table and, optionally, an
// XXH64 of all its bytes (`weights_checksum`; on by default with --pack);
// or, packed, its offset in the artifact.
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
// Format 2 (this one) resolves a relative GGUF path against the artifact's
// directory; format 1 resolved it against the working directory.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "runtime/compile/compile.h"

namespace vtc {

inline constexpr uint32_t kArtifactFormat = 2;

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
  bool pack = false;  // embed the GGUF
  // Record gguf_content_checksum() and verify it at load; default: on with
  // pack, off for a referenced GGUF.
  std::optional<bool> checksum_weights = std::nullopt;
};
struct SaveInfo {
  std::optional<uint64_t> weights_checksum;  // when recorded
  double checksum_seconds = 0;                // time it took
};
SaveInfo save_artifact(const CompiledModel& model, const std::string& path, const SaveOptions& options);

// Throws vtc::Error naming the problem (not an artifact, version, missing
// or changed GGUF, IR that does not parse or verify).
CompiledModel load_artifact(const std::string& path);

}  // namespace vtc
