// One run of `vtc-ref logits` (the llama.cpp reference) for the tests that
// compare logits with it: the prompt's logits come back through a binary
// file (--logits-file, raw float32 rows), the rest as JSON. Printing and
// parsing the rows as JSON text cost seconds a run (130 MB for a 75-token
// prompt over a 151k vocab).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/test_process.h"

namespace vtc::test {

struct ReferenceLogits {
  std::vector<std::vector<float>> logits;  // one row of n_vocab per prompt position
  std::vector<int32_t> greedy;             // the --n-predict greedy tokens
  bool all_finite = false;                 // over the prompt rows and every greedy step
};

// Runs `<ref_tool> logits <args> --logits-file <temp>`; `args` holds the
// model and every other option (--tokens, --n-predict, --ubatch, ...).
inline ReferenceLogits reference_logits(const std::string& ref_tool, const std::string& args) {
  static int counter = 0;
  const std::string rows_path = unique_temp_path(fmt::format("ref_logits_{}.f32", counter++));
  const auto j = nlohmann::json::parse(run_capture(fmt::format("{} logits {} --logits-file {}", ref_tool, args, rows_path)));
  ReferenceLogits r;
  r.greedy = j.at("greedy").get<std::vector<int32_t>>();
  r.all_finite = j.at("all_finite").get<bool>();
  const size_t n_vocab = j.at("n_vocab").get<size_t>(), n_rows = j.at("n_tokens").get<size_t>();
  std::ifstream in(rows_path, std::ios::binary);
  r.logits.assign(n_rows, std::vector<float>(n_vocab));
  for (auto& row : r.logits) in.read(reinterpret_cast<char*>(row.data()), std::streamsize(n_vocab * sizeof(float)));
  const bool complete = bool(in) && in.peek() == std::char_traits<char>::eof();
  in.close();
  std::filesystem::remove(rows_path);
  if (!complete)
    throw std::runtime_error(fmt::format("{}: expected {} x {} float32 logits from `{} logits {}`", rows_path, n_rows,
                                         n_vocab, ref_tool, args));
  return r;
}

}  // namespace vtc::test
