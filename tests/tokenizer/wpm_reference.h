// The reference's answers for WordPiece checks, from vtc-ref (llama.cpp's
// llama_tokenize / llama_detokenize on the same vocabulary file).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_process.h"

namespace vtc::test {

inline std::vector<int32_t> reference_tokenize(const std::string& vocab_path, const std::string& text,
                                               bool add_special, bool parse_special) {
  static int counter = 0;
  const std::string in = unique_temp_path(fmt::format("wpm_text_{}.txt", counter++));
  std::ofstream(in, std::ios::binary) << text;
  const std::string out = run_capture(fmt::format("{} tokenize {} {} {} < {}", VTC_REF_TOOL, vocab_path,
                                                  parse_special ? "" : "--no-special",
                                                  add_special ? "" : "--no-add-special", in));
  std::remove(in.c_str());
  std::vector<int32_t> ids;
  std::istringstream ss(out);
  for (int32_t id; ss >> id;) ids.push_back(id);
  return ids;
}

// special: control tokens are written as their text (unparse_special).
inline std::string reference_detokenize(const std::string& vocab_path, const std::vector<int32_t>& ids,
                                        bool special) {
  return run_capture(fmt::format("echo '{}' | {} detokenize {} {}", fmt::join(ids, " "), VTC_REF_TOOL, vocab_path,
                                 special ? "" : "--no-special"));
}

}  // namespace vtc::test
