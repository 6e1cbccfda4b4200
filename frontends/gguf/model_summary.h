// Human-readable and JSON summaries of a GGUF file (`vtc inspect`).
#pragma once

#include <cstddef>
#include <string>

#include "frontends/gguf/gguf.h"

namespace vtc::gguf {

struct SummaryOptions {
  size_t max_tensors = 64;  // 0 = every tensor
  size_t max_array_items = 8;
};

std::string summary_text(const GgufFile& file, const SummaryOptions& options = {});
// Machine-readable summary: metadata (large arrays abbreviated to their
// length and first items), every tensor, and totals.
std::string summary_json(const GgufFile& file, const SummaryOptions& options = {});

}  // namespace vtc::gguf
