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
// placement/bind-state reports, and the GGUF reference: path, size and a
// checksum (FNV-1a 64) of its header and tensor table, or the packed
// offset. Loading checks the format version and, for a referenced GGUF, its
// size and checksum; a mismatch is an error naming both values.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/compile/compile.h"

namespace vtc {

inline constexpr uint32_t kArtifactFormat = 1;

// True if the file starts with the artifact magic.
bool is_artifact(const std::string& path);

// FNV-1a 64 of the GGUF's bytes before its tensor data (header, metadata,
// tensor table): cheap, and it changes with any tensor's name, type, shape
// or offset.
uint64_t gguf_header_checksum(const gguf::GgufFile& file);

struct SaveOptions {
  bool pack = false;  // embed the GGUF
};
void save_artifact(const CompiledModel& model, const std::string& path, const SaveOptions& options);

// Throws vtc::Error naming the problem (not an artifact, version, missing
// or changed GGUF, IR that does not parse or verify).
CompiledModel load_artifact(const std::string& path);

}  // namespace vtc
