// The reference's tokenizer test vectors: models/ggml-vocab-<name>.gguf with
// .inp (inputs separated by "\n__ggml_vocab_test__\n") and .out (one line of
// ids per input). The reference produced them with add_special = false and
// parse_special = false (tests/test-tokenizer-0.cpp); every input must match.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "frontends/gguf/gguf.h"
#include "frontends/gguf/tokenizer/tokenizer.h"
#include "frontends/gguf/tokenizer/unicode_util.h"
#include "tests/tokenizer/wpm_reference.h"

using namespace vtc;

namespace {

struct Vector {
  std::string input;
  std::vector<int32_t> ids;
};

std::string models_dir() { return VTC_REFERENCE_MODELS_DIR; }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<Vector> read_vectors(const std::string& vocab) {
  const std::string base = fmt::format("{}/ggml-vocab-{}.gguf", models_dir(), vocab);
  const std::string raw = read_file(base + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  for (size_t pos = 0; pos < raw.size();) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      inputs.push_back(raw.substr(pos));
      break;
    }
    inputs.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::istringstream out(read_file(base + ".out"));
  std::vector<Vector> vectors;
  std::string line;
  for (size_t i = 0; std::getline(out, line); ++i) {
    REQUIRE(i < inputs.size());
    Vector v{inputs[i], {}};
    std::istringstream ls(line);
    for (int32_t id; ls >> id;) v.ids.push_back(id);
    vectors.push_back(std::move(v));
  }
  REQUIRE(vectors.size() == inputs.size());
  return vectors;
}

std::string show(const std::vector<int32_t>& ids) {
  return fmt::format("[{}]", fmt::join(ids, " "));
}

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const int n = tok::detail::utf8_sequence_length(s, i);
    if (n <= 0) return false;
    i += static_cast<size_t>(n);
  }
  return true;
}

// Runs every vector of one vocab; all must match. Also checks that decoding
// gives the input back and that streaming decode equals decode. WordPiece
// normalizes (lowercase, accents, whitespace) and so cannot round-trip:
// round_trip = false checks decoding against the reference's instead
// (vtc-ref detokenize).
void check_vocab(const std::string& vocab, const std::string& expected_pre, bool round_trip = true) {
  const std::string path = fmt::format("{}/ggml-vocab-{}.gguf", models_dir(), vocab);
  const auto file = gguf::GgufFile::open(path);
  const Tokenizer tok = Tokenizer::from_gguf(file);
  CHECK(tok.pre_name() == expected_pre);
  const auto vectors = read_vectors(vocab);
  size_t matched = 0, round_trips = 0;
  for (const auto& v : vectors) {
    INFO(vocab << " input '" << v.input << "'");
    const auto ids = tok.encode(v.input, /*add_special=*/false, /*parse_special=*/false);
    CHECK(show(ids) == show(v.ids));
    if (ids == v.ids) ++matched;
    if (!round_trip) {
      CHECK(tok.decode(ids) == test::reference_detokenize(path, ids, /*special=*/true));
      continue;
    }

    const std::string text = tok.decode(ids);
    CHECK(text == v.input);
    if (text == v.input) ++round_trips;

    StreamingDecoder stream(tok);
    std::string streamed;
    for (int32_t id : ids) {
      const std::string part = stream.push(id);
      CHECK(valid_utf8(part));
      streamed += part;
    }
    streamed += stream.flush();
    CHECK(streamed == text);
  }
  WARN(fmt::format("{}: {}/{} inputs match, {}/{} round-trip{}", vocab, matched, vectors.size(), round_trips,
                   vectors.size(), round_trip ? "" : " (decoding compared with the reference's instead)"));
  CHECK(matched == vectors.size());
}

}  // namespace

TEST_CASE("reference vectors: llama-bpe", "[tokenizer][reference]") { check_vocab("llama-bpe", "llama-bpe"); }
TEST_CASE("reference vectors: qwen2", "[tokenizer][reference]") { check_vocab("qwen2", "qwen2"); }
TEST_CASE("reference vectors: qwen35", "[tokenizer][reference]") { check_vocab("qwen35", "qwen35"); }
TEST_CASE("reference vectors: gpt-2", "[tokenizer][reference]") { check_vocab("gpt-2", "gpt-2"); }
TEST_CASE("reference vectors: deepseek-llm", "[tokenizer][reference]") {
  check_vocab("deepseek-llm", "deepseek-llm");
}
TEST_CASE("reference vectors: deepseek-coder", "[tokenizer][reference]") {
  check_vocab("deepseek-coder", "deepseek-coder");
}
TEST_CASE("reference vectors: llama-spm", "[tokenizer][reference]") { check_vocab("llama-spm", "default"); }
TEST_CASE("reference vectors: starcoder", "[tokenizer][reference]") { check_vocab("starcoder", "starcoder"); }
TEST_CASE("reference vectors: refact", "[tokenizer][reference]") { check_vocab("refact", "refact"); }
TEST_CASE("reference vectors: command-r", "[tokenizer][reference]") { check_vocab("command-r", "command-r"); }
TEST_CASE("reference vectors: falcon", "[tokenizer][reference]") { check_vocab("falcon", "falcon"); }
TEST_CASE("reference vectors: mpt", "[tokenizer][reference]") { check_vocab("mpt", "mpt"); }
TEST_CASE("reference vectors: phi-3", "[tokenizer][reference]") { check_vocab("phi-3", "default"); }
TEST_CASE("reference vectors: bert-bge", "[tokenizer][reference][wpm]") {
  check_vocab("bert-bge", "bert-bge", /*round_trip=*/false);
}
