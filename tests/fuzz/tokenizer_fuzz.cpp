// libFuzzer harness for the tokenizer: arbitrary bytes through every
// pre-tokenizer and both model kinds, with and without special parsing.
// Checks: byte-level BPE decodes back to the exact input (invalid UTF-8
// included), and the streaming decoder only ever returns valid UTF-8.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "frontends/gguf/gguf.h"
#include "frontends/gguf/tokenizer/tokenizer.h"
#include "frontends/gguf/tokenizer/unicode_util.h"
#include "tests/tokenizer/held_tokenizer.h"

using namespace vtc;

namespace {

using Held = test::HeldTokenizer;

std::unique_ptr<Held> make_bpe(const char* pre) {
  std::vector<std::string> tokens, merges;
  std::vector<gguf::Value> types;
  for (int b = 0; b < 256; ++b) tokens.push_back(tok::detail::byte_to_unicode(static_cast<uint8_t>(b)));
  const std::string G = tok::detail::byte_to_unicode(' ');
  for (auto [a, b] : std::vector<std::pair<std::string, std::string>>{
           {"h", "e"}, {"l", "l"}, {G, "t"}, {"e", "r"}, {G + "t", "h"}, {"1", "2"}, {"12", "3"}}) {
    merges.push_back(a + " " + b);
    tokens.push_back(a + b);
  }
  tokens.push_back("<|end|>");
  tokens.push_back("<tool>");
  for (size_t i = 0; i < tokens.size(); ++i)
    types.emplace_back(int32_t{i + 2 == tokens.size() ? 3 : i + 1 == tokens.size() ? 4 : 1});
  gguf::GgufWriter w;
  w.set("tokenizer.ggml.model", "gpt2");
  w.set("tokenizer.ggml.pre", pre);
  w.set("tokenizer.ggml.tokens", gguf::Value::string_array(tokens));
  w.set("tokenizer.ggml.token_type", gguf::Value::array(gguf::ValueType::I32, types));
  w.set("tokenizer.ggml.merges", gguf::Value::string_array(merges));
  w.set("tokenizer.ggml.add_bos_token", false);  // so decode(encode(x)) == x
  return std::make_unique<Held>(w);
}

std::unique_ptr<Held> make_spm() {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<gguf::Value> types = {int32_t{2}, int32_t{3}, int32_t{3}};
  std::vector<gguf::Value> scores = {0.0f, 0.0f, 0.0f};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    tokens.push_back(buf);
    types.emplace_back(int32_t{6});
    scores.emplace_back(0.0f);
  }
  for (const char* t : {"\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a", "ab", "\xE2\x96\x81" "ab"}) {
    tokens.push_back(t);
    types.emplace_back(int32_t{1});
    scores.emplace_back(-static_cast<float>(tokens.size()));
  }
  gguf::GgufWriter w;
  w.set("tokenizer.ggml.model", "llama");
  w.set("tokenizer.ggml.tokens", gguf::Value::string_array(tokens));
  w.set("tokenizer.ggml.token_type", gguf::Value::array(gguf::ValueType::I32, types));
  w.set("tokenizer.ggml.scores", gguf::Value::array(gguf::ValueType::F32, scores));
  return std::make_unique<Held>(w);
}

// WordPiece: [PAD] [UNK] [CLS] [SEP], then a few pieces (see wpm.h).
std::unique_ptr<Held> make_wpm() {
  std::vector<std::string> tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]"};
  std::vector<gguf::Value> types = {int32_t{3}, int32_t{2}, int32_t{3}, int32_t{3}};
  for (const char* t : {"\xE2\x96\x81" "a", "\xE2\x96\x81" "ab", "b", "\xE2\x96\x81" ",", "\xE2\x96\x81" "\xE4\xB8\xAD"}) {
    tokens.push_back(t);
    types.emplace_back(int32_t{1});
  }
  gguf::GgufWriter w;
  w.set("tokenizer.ggml.model", "bert");
  w.set("tokenizer.ggml.tokens", gguf::Value::string_array(tokens));
  w.set("tokenizer.ggml.token_type", gguf::Value::array(gguf::ValueType::I32, types));
  w.set("tokenizer.ggml.unknown_token_id", uint32_t{1});
  w.set("tokenizer.ggml.bos_token_id", uint32_t{2});
  w.set("tokenizer.ggml.seperator_token_id", uint32_t{3});
  return std::make_unique<Held>(w);
}

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const int n = tok::detail::utf8_sequence_length(s, i);
    if (n <= 0) return false;
    i += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::vector<std::unique_ptr<Held>> bpe = [] {
    std::vector<std::unique_ptr<Held>> v;
    for (const auto& pre : Tokenizer::supported_pre_tokenizers()) v.push_back(make_bpe(pre.c_str()));
    return v;
  }();
  static std::unique_ptr<Held> spm = make_spm();
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (const auto& h : bpe) {
    for (bool special : {false, true}) {
      const auto ids = h->tok.encode(text, special, special);
      if (h->tok.decode(ids) != text) std::abort();
      StreamingDecoder s(h->tok);
      for (int32_t id : ids)
        if (!valid_utf8(s.push(id))) std::abort();
      if (!valid_utf8(s.flush())) std::abort();
    }
  }
  for (bool special : {false, true}) {
    const auto ids = spm->tok.encode(text, special, special);
    StreamingDecoder s(spm->tok, special);
    for (int32_t id : ids)
      if (!valid_utf8(s.push(id))) std::abort();
    (void)spm->tok.decode(ids, special);
  }
  static std::unique_ptr<Held> wpm = make_wpm();
  for (bool special : {false, true}) {  // pieces are valid UTF-8, and so is what joins them
    const auto ids = wpm->tok.encode(text, special, special);
    if (!valid_utf8(wpm->tok.decode(ids, special))) std::abort();
  }
  return 0;
}
