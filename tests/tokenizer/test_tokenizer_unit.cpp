// Tokenizer unit tests on synthetic GGUF vocabularies (no reference needed),
// plus special-token / flag / streaming checks on the reference vocabs.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "frontends/gguf/gguf.h"
#include "frontends/gguf/tokenizer/pretokenizer.h"
#include "frontends/gguf/tokenizer/tokenizer.h"
#include "frontends/gguf/tokenizer/unicode_util.h"
#include "support/error.h"

using namespace vtc;
using gguf::Value;
using gguf::ValueType;

namespace {

std::vector<std::string> split(std::string_view pre, std::string_view text) {
  auto p = tok::detail::PreTokenizer::create(pre);
  REQUIRE(p);
  std::vector<std::string> out;
  for (auto [b, e] : p->split(text)) out.emplace_back(text.substr(b, e - b));
  return out;
}

// A GGUF held in memory together with its bytes.
struct MemGguf {
  std::vector<uint8_t> bytes;
  gguf::GgufFile file;
  explicit MemGguf(const gguf::GgufWriter& w)
      : bytes(w.to_bytes()), file(gguf::GgufFile::parse(bytes)) {}
};

Value int_array(const std::vector<int32_t>& v) {
  std::vector<Value> items(v.begin(), v.end());
  return Value::array(ValueType::I32, std::move(items));
}
Value float_array(const std::vector<float>& v) {
  std::vector<Value> items(v.begin(), v.end());
  return Value::array(ValueType::F32, std::move(items));
}

// Byte-level BPE: the 256 byte stand-ins (ids 0..255), then merged tokens,
// then "<|end|>" (control) and "<tool>" (user-defined).
struct BpeVocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges;
  int32_t add(const std::string& t, int32_t type = 1) {
    tokens.push_back(t);
    types.push_back(type);
    return static_cast<int32_t>(tokens.size() - 1);
  }
};

BpeVocab make_bpe_vocab() {
  BpeVocab v;
  for (int b = 0; b < 256; ++b) v.add(tok::detail::byte_to_unicode(static_cast<uint8_t>(b)));
  const std::string G = tok::detail::byte_to_unicode(' ');  // "Ġ"
  for (auto [a, b] : std::vector<std::pair<std::string, std::string>>{
           {"h", "e"}, {"l", "l"}, {"ll", "o"}, {"he", "llo"}, {G, "w"}, {"o", "r"}, {G + "w", "or"}, {"l", "d"},
           {G + "wor", "ld"}}) {
    v.merges.push_back(a + " " + b);
    v.add(a + b);
  }
  v.add("<|end|>", 3);
  v.add("<tool>", 4);
  return v;
}

gguf::GgufWriter bpe_writer(const BpeVocab& v, const std::string& pre = "gpt-2") {
  gguf::GgufWriter w;
  w.set("tokenizer.ggml.model", "gpt2");
  w.set("tokenizer.ggml.pre", pre);
  w.set("tokenizer.ggml.tokens", Value::string_array(v.tokens));
  w.set("tokenizer.ggml.token_type", int_array(v.types));
  w.set("tokenizer.ggml.merges", Value::string_array(v.merges));
  w.set("tokenizer.ggml.bos_token_id", uint32_t{256 + 9});  // "<|end|>" doubles as BOS/EOS here
  w.set("tokenizer.ggml.eos_token_id", uint32_t{256 + 9});
  return w;
}

// SentencePiece: <unk> <s> </s>, 256 byte tokens, then pieces with scores.
gguf::GgufWriter spm_writer() {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  std::vector<float> scores = {0, 0, 0};
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(fmt::format("<0x{:02X}>", b));
    types.push_back(6);
    scores.push_back(0);
  }
  const std::string S = "\xE2\x96\x81";  // ▁
  for (auto [t, s] : std::vector<std::pair<std::string, float>>{
           {S, -1}, {"h", -2}, {"i", -2}, {S + "h", -3}, {S + "hi", -4}, {"é", -5}}) {
    tokens.push_back(t);
    types.push_back(1);
    scores.push_back(s);
  }
  gguf::GgufWriter w;
  w.set("tokenizer.ggml.model", "llama");
  w.set("tokenizer.ggml.tokens", Value::string_array(tokens));
  w.set("tokenizer.ggml.scores", float_array(scores));
  w.set("tokenizer.ggml.token_type", int_array(types));
  w.set("tokenizer.ggml.bos_token_id", uint32_t{1});
  w.set("tokenizer.ggml.eos_token_id", uint32_t{2});
  return w;
}

std::string error_of(const gguf::GgufWriter& w) {
  MemGguf g(w);
  try {
    (void)Tokenizer::from_gguf(g.file);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

std::string models(const std::string& name) {
  return fmt::format("{}/ggml-vocab-{}.gguf", VTC_REFERENCE_MODELS_DIR, name);
}

}  // namespace

TEST_CASE("pre-tokenizers split like their regexes", "[tokenizer]") {
  using V = std::vector<std::string>;
  CHECK(split("gpt-2", "Hello world") == V{"Hello", " world"});
  CHECK(split("gpt-2", "  Hello   world ") == V{" ", " Hello", "  ", " world", " "});
  CHECK(split("gpt-2", "it's 12345!!") == V{"it", "'s", " 12345", "!!"});
  CHECK(split("llama-bpe", "it'S 12345!!\n\n  x") == V{"it", "'S", " ", "123", "45", "!!\n\n", " ", " x"});
  CHECK(split("llama-bpe", "a \n\n b") == V{"a", " \n\n", " b"});
  CHECK(split("llama-bpe", "\tHello") == V{"\tHello"});
  CHECK(split("qwen2", "x 123") == V{"x", " ", "1", "2", "3"});
  CHECK(split("deepseek-llm", "Hi, 世界 42\n") == V{"Hi", ",", " ", "世界", " ", "42", "\n"});
  CHECK(split("deepseek-llm", "ab   ") == V{"ab", "   "});
  CHECK(split("falcon", "12345") == V{"123", "45"});
  // Invalid UTF-8 keeps its bytes.
  CHECK(split("gpt-2", "a\xFF" "b") == V{"a", "\xFF", "b"});
  CHECK(tok::detail::PreTokenizer::create("no-such-pre") == nullptr);
}

TEST_CASE("byte-level BPE on a synthetic vocab", "[tokenizer]") {
  const BpeVocab v = make_bpe_vocab();
  MemGguf g(bpe_writer(v));
  const Tokenizer tok = Tokenizer::from_gguf(g.file);
  REQUIRE(tok.vocab_size() == v.tokens.size());
  const int32_t hello = tok.find_token("hello");
  const int32_t world = tok.find_token(tok::detail::byte_to_unicode(' ') + "world");
  const int32_t end = tok.find_token("<|end|>");
  const int32_t tool = tok.find_token("<tool>");
  REQUIRE(hello >= 256);
  REQUIRE(world >= 256);
  using V = std::vector<int32_t>;
  CHECK(tok.encode("hello world", false, false) == V{hello, world});
  CHECK(tok.decode(V{hello, world}) == "hello world");
  CHECK(tok.encode("", true, false).empty());  // gpt-2 does not add BOS

  SECTION("special tokens are parsed only on request; user-defined always") {
    const auto plain = tok.encode("hello<|end|>", false, false);
    CHECK(std::find(plain.begin(), plain.end(), end) == plain.end());
    CHECK(tok.decode(plain) == "hello<|end|>");
    CHECK(tok.encode("hello<|end|>", false, true) == V{hello, end});
    CHECK(tok.encode("<tool>hello", false, false) == V{tool, hello});
    CHECK(tok.decode(V{hello, end}) == "hello<|end|>");
    CHECK(tok.decode(V{hello, end}, /*skip_special=*/true) == "hello");
    CHECK(tok.is_eog(end));
    CHECK(tok.is_control(end));
    CHECK_FALSE(tok.is_eog(hello));
  }
  SECTION("unmerged bytes fall back to byte tokens") {
    const auto ids = tok.encode("\xC3\xA9", false, false);  // é: no merge for its two bytes
    CHECK(ids == V{0xC3, 0xA9});
    CHECK(tok.decode(ids) == "\xC3\xA9");
  }
  SECTION("streaming holds a split UTF-8 character") {
    StreamingDecoder s(tok);
    CHECK(s.push(hello) == "hello");
    CHECK(s.push(0xE4) == "");  // 世 = E4 B8 96
    CHECK(s.pending_bytes() == 1);
    CHECK(s.push(0xB8) == "");
    CHECK(s.push(0x96) == "\xE4\xB8\x96");
    CHECK(s.pending_bytes() == 0);
    CHECK(s.push(0xF0) == "");           // start of a 4-byte character ...
    CHECK(s.flush() == "\xEF\xBF\xBD");  // ... cut off: U+FFFD
    CHECK(s.push(0xFF) == "\xEF\xBF\xBD");  // a byte that is never valid
    CHECK(s.push(0x80) == "\xEF\xBF\xBD");  // a stray continuation byte
    CHECK(s.push(0xC3) == "");
    CHECK(s.push('A') == "\xEF\xBF\xBD" "A");  // broken sequence, then A
  }
  SECTION("out-of-range ids are errors") {
    CHECK_THROWS_AS(tok.decode(V{static_cast<int32_t>(v.tokens.size())}), Error);
    CHECK_THROWS_AS(tok.decode(V{-1}), Error);
    StreamingDecoder s(tok);
    CHECK_THROWS_AS(s.push(1 << 30), Error);
  }
}

TEST_CASE("SentencePiece on a synthetic vocab", "[tokenizer]") {
  MemGguf g(spm_writer());
  const Tokenizer tok = Tokenizer::from_gguf(g.file);
  CHECK(tok.kind() == Tokenizer::Kind::kSpm);
  const int32_t hi = tok.find_token("\xE2\x96\x81hi");
  const int32_t e_acute = tok.find_token("é");
  REQUIRE(hi >= 0);
  using V = std::vector<int32_t>;
  CHECK(tok.add_bos());
  CHECK(tok.encode("hi", false, false) == V{hi});
  CHECK(tok.encode("hi", true, false) == V{1, hi});
  CHECK(tok.encode("hié", false, false) == V{hi, e_acute});
  CHECK(tok.decode(V{hi}) == "hi");
  CHECK(tok.decode(V{1, hi}) == "<s> hi");
  CHECK(tok.decode(V{1, hi}, true) == "hi");
  // Byte fallback: 🦙 (F0 9F A6 99) is not in the vocab.
  const auto ids = tok.encode("hi🦙", false, false);
  CHECK(ids == V{hi, 3 + 0xF0, 3 + 0x9F, 3 + 0xA6, 3 + 0x99});
  CHECK(tok.decode(ids) == "hi🦙");
  StreamingDecoder s(tok);
  CHECK(s.push(ids[0]) == "hi");  // leading space stripped at the start
  CHECK(s.push(ids[1]) == "");
  CHECK(s.push(ids[2]) == "");
  CHECK(s.push(ids[3]) == "");
  CHECK(s.push(ids[4]) == "🦙");
  CHECK(s.push(ids[0]) == " hi");  // not at the start any more
  CHECK(s.flush() == "");
}

TEST_CASE("bad tokenizer metadata is an error naming the problem", "[tokenizer]") {
  const BpeVocab v = make_bpe_vocab();
  {
    gguf::GgufWriter w;
    w.set("general.architecture", "llama");
    CHECK_THAT(error_of(w), Catch::Contains("tokenizer.ggml.model"));
  }
  {
    auto w = bpe_writer(v);
    w.set("tokenizer.ggml.model", "wordpiece-xyz");
    const std::string e = error_of(w);
    CHECK_THAT(e, Catch::Contains("wordpiece-xyz"));
    CHECK_THAT(e, Catch::Contains("gpt2") && Catch::Contains("llama"));
  }
  {
    const std::string e = error_of(bpe_writer(v, "my-new-pre"));
    CHECK_THAT(e, Catch::Contains("'my-new-pre'"));
    CHECK_THAT(e, Catch::Contains("llama-bpe") && Catch::Contains("qwen2") && Catch::Contains("deepseek-llm"));
  }
  {
    auto w = bpe_writer(v);
    w.set("tokenizer.ggml.merges", Value::string_array({"nospace"}));
    CHECK_THAT(error_of(w), Catch::Contains("tokenizer.ggml.merges[0]"));
  }
  {
    auto w = bpe_writer(v);
    w.set("tokenizer.ggml.tokens", int_array({1, 2, 3}));
    CHECK_THAT(error_of(w), Catch::Contains("tokenizer.ggml.tokens"));
  }
  {
    auto w = bpe_writer(v);
    w.set("tokenizer.ggml.token_type", int_array({1}));
    CHECK_THAT(error_of(w), Catch::Contains("token_type has 1 entries"));
  }
  {
    auto w = bpe_writer(v);
    w.set("tokenizer.ggml.eos_token_id", uint32_t{999999});
    CHECK_THAT(error_of(w), Catch::Contains("eos_token_id = 999999"));
  }
  {
    auto w = bpe_writer(v);
    w.set("tokenizer.ggml.add_bos_token", "yes");
    CHECK_THAT(error_of(w), Catch::Contains("add_bos_token must be a bool"));
  }
  {
    gguf::GgufWriter w = spm_writer();
    w.set("tokenizer.ggml.add_bos_token", true);
    w.set("tokenizer.ggml.bos_token_id", uint32_t{1u << 20});
    CHECK_THAT(error_of(w), Catch::Contains("bos_token_id"));
  }
}

TEST_CASE("reference vocabs: special tokens, BOS/EOS flags, streaming", "[tokenizer][reference]") {
  SECTION("qwen2 chat markup") {
    const auto f = gguf::GgufFile::open(models("qwen2"));
    const Tokenizer tok = Tokenizer::from_gguf(f);
    const int32_t im_start = tok.find_token("<|im_start|>");
    const int32_t im_end = tok.find_token("<|im_end|>");
    REQUIRE(im_start >= 0);
    REQUIRE(im_end >= 0);
    const std::string text = "<|im_start|>user\nHello 世界<|im_end|>";
    const auto parsed = tok.encode(text, false, true);
    REQUIRE(parsed.size() > 2);
    CHECK(parsed.front() == im_start);
    CHECK(parsed.back() == im_end);
    CHECK(tok.decode(parsed) == text);
    CHECK(tok.decode(parsed, true) == "user\nHello 世界");
    const auto plain = tok.encode(text, false, false);
    CHECK(std::count(plain.begin(), plain.end(), im_start) == 0);
    CHECK(tok.decode(plain) == text);
    CHECK(tok.is_eog(im_end));
    CHECK_FALSE(tok.is_eog(im_start));
    CHECK(tok.encode("Hello", true, false) == tok.encode("Hello", false, false));  // qwen2 adds no BOS
  }
  SECTION("llama-bpe adds BOS") {
    const auto f = gguf::GgufFile::open(models("llama-bpe"));
    const Tokenizer tok = Tokenizer::from_gguf(f);
    CHECK(tok.bos() == 128000);
    const auto ids = tok.encode("Hello world", true, false);
    REQUIRE(ids.size() == 3);
    CHECK(ids[0] == 128000);
    CHECK(tok.decode(ids, true) == "Hello world");
    CHECK(tok.encode("<|begin_of_text|>Hi", false, true)[0] == 128000);
    CHECK(tok.is_eog(tok.find_token("<|eot_id|>")));
  }
  SECTION("llama-spm BOS, byte fallback and streaming") {
    const auto f = gguf::GgufFile::open(models("llama-spm"));
    const Tokenizer tok = Tokenizer::from_gguf(f);
    CHECK(tok.bos() == 1);
    CHECK(tok.eos() == 2);
    const std::string text = "a 🦙 b";
    const auto ids = tok.encode(text, true, false);
    REQUIRE(ids.front() == 1);
    CHECK(tok.decode(ids, true) == text);
    CHECK(tok.encode("</s>", false, true) == std::vector<int32_t>{2});
    // The llama is byte fallback: four byte tokens, held until complete.
    StreamingDecoder s(tok, /*skip_special=*/true);
    std::string out;
    size_t held_max = 0;
    for (int32_t id : ids) {
      out += s.push(id);
      held_max = std::max(held_max, s.pending_bytes());
    }
    out += s.flush();
    CHECK(out == text);
    CHECK(held_max == 3);
  }
}

namespace {

// A vocabulary-less file as llama.cpp's tests/test-llama-archs writes it.
gguf::GgufWriter no_vocab_writer(const std::string& model = "no_vocab") {
  gguf::GgufWriter w;
  w.set("general.architecture", "llama");
  w.set("llama.vocab_size", uint32_t{128});
  w.set("tokenizer.ggml.model", model);
  w.set("tokenizer.ggml.bos_token_id", uint32_t{UINT32_MAX});
  w.set("tokenizer.ggml.eos_token_id", uint32_t{UINT32_MAX});
  return w;
}

}  // namespace

TEST_CASE("a file without a vocabulary takes and gives token ids only", "[tokenizer][no_vocab]") {
  using V = std::vector<int32_t>;
  SECTION("no_vocab with <arch>.vocab_size") {
    MemGguf g(no_vocab_writer());
    const Tokenizer tok = Tokenizer::from_gguf(g.file);
    CHECK_FALSE(tok.has_vocab());
    CHECK(tok.kind() == Tokenizer::Kind::kNone);
    CHECK(tok.model_name() == "no_vocab");
    CHECK(tok.vocab_size() == 128);
    CHECK(tok.bos() == -1);
    CHECK(tok.eos() == -1);
    CHECK_FALSE(tok.add_bos());
    CHECK_FALSE(tok.add_eos());
    for (int32_t id = 0; id < 128; ++id) {
      CHECK_FALSE(tok.is_eog(id));
      CHECK_FALSE(tok.is_control(id));
    }
    CHECK(tok.find_token("") == -1);
    try {
      (void)tok.encode("hello", true, false);
      FAIL("encode() on a model without a vocabulary must throw");
    } catch (const Error& e) {
      CHECK_THAT(e.what(), Catch::Contains("no vocabulary") && Catch::Contains("'no_vocab'") &&
                               Catch::Contains("--tokens"));
    }
    CHECK_THROWS_AS(tok.encode("", false, false), Error);
    // In-range ids have no text; out-of-range ids stay errors.
    CHECK(tok.decode(V{0, 5, 127}) == "");
    CHECK(tok.decode(V{0, 5, 127}, /*skip_special=*/true) == "");
    CHECK(tok.token_piece(5) == "");
    CHECK(tok.token_text(5) == "");
    CHECK_THROWS_AS(tok.decode(V{128}), Error);
    CHECK_THROWS_AS(tok.token_piece(-1), Error);
    StreamingDecoder s(tok, /*skip_special=*/true);
    CHECK(s.push(3) == "");
    CHECK(s.push(127) == "");
    CHECK(s.flush() == "");
    CHECK_THROWS_AS(s.push(128), Error);
  }
  SECTION("none, sized by token_embd.weight without <arch>.vocab_size") {
    gguf::GgufWriter w = no_vocab_writer("none");
    w.set("llama.vocab_size", "not a number");
    CHECK_THAT(error_of(w), Catch::Contains("llama.vocab_size"));
    gguf::GgufWriter w2;
    w2.set("general.architecture", "llama");
    w2.set("tokenizer.ggml.model", "none");
    w2.add_tensor("token_embd.weight", GgmlType::F32, {4, 64}, std::vector<uint8_t>(4 * 64 * sizeof(float)));
    MemGguf g(w2);
    const Tokenizer tok = Tokenizer::from_gguf(g.file);
    CHECK_FALSE(tok.has_vocab());
    CHECK(tok.vocab_size() == 64);
    CHECK(tok.decode(V{63}) == "");
  }
  SECTION("no size anywhere: an empty vocabulary") {
    gguf::GgufWriter w;
    w.set("tokenizer.ggml.model", "no_vocab");
    MemGguf g(w);
    const Tokenizer tok = Tokenizer::from_gguf(g.file);
    CHECK(tok.vocab_size() == 0);
    CHECK_THROWS_AS(tok.decode(V{0}), Error);
  }
  SECTION("ordinary tokenizers still have a vocabulary") {
    MemGguf g(spm_writer());
    CHECK(Tokenizer::from_gguf(g.file).has_vocab());
  }
}

TEST_CASE("a special-token id of -1 or 4294967295 means the model has none", "[tokenizer][no_vocab]") {
  using V = std::vector<int32_t>;
  const BpeVocab v = make_bpe_vocab();
  SECTION("BPE: u32 4294967295 and i32 -1") {
    gguf::GgufWriter w = bpe_writer(v);
    w.set("tokenizer.ggml.bos_token_id", uint32_t{4294967295u});
    w.set("tokenizer.ggml.eos_token_id", int32_t{-1});
    w.set("tokenizer.ggml.unknown_token_id", uint32_t{4294967295u});
    MemGguf g(w);
    const Tokenizer tok = Tokenizer::from_gguf(g.file);
    CHECK(tok.has_vocab());
    CHECK(tok.bos() == -1);
    CHECK(tok.eos() == -1);
    CHECK_FALSE(tok.is_eog(-1));
    const int32_t hello = tok.find_token("hello");
    CHECK(tok.encode("hello", /*add_special=*/true, false) == V{hello});
  }
  SECTION("SPM: the default add-BOS gives way to a model without BOS") {
    gguf::GgufWriter w = spm_writer();
    w.set("tokenizer.ggml.bos_token_id", uint32_t{4294967295u});
    MemGguf g(w);
    const Tokenizer tok = Tokenizer::from_gguf(g.file);
    CHECK(tok.bos() == -1);
    CHECK(tok.eos() == 2);
    CHECK_FALSE(tok.add_bos());
    const int32_t hi = tok.find_token("\xE2\x96\x81hi");
    CHECK(tok.encode("hi", /*add_special=*/true, false) == V{hi});
  }
  SECTION("an add_bos_token the file sets still needs a BOS") {
    gguf::GgufWriter w = spm_writer();
    w.set("tokenizer.ggml.bos_token_id", uint32_t{4294967295u});
    w.set("tokenizer.ggml.add_bos_token", true);
    CHECK_THAT(error_of(w), Catch::Contains("add_bos_token"));
  }
  SECTION("other ids outside the vocabulary are still errors") {
    gguf::GgufWriter w = bpe_writer(v);
    w.set("tokenizer.ggml.bos_token_id", uint32_t{4294967294u});
    CHECK_THAT(error_of(w), Catch::Contains("bos_token_id = 4294967294"));
    w.set("tokenizer.ggml.bos_token_id", int32_t{-2});
    CHECK_THAT(error_of(w), Catch::Contains("bos_token_id = -2"));
  }
}
