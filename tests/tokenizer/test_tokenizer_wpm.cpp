// WordPiece (tokenizer.ggml.model = "bert"): unit cases on a synthetic
// vocabulary, and cases the reference vectors do not cover checked against
// llama.cpp itself (vtc-ref tokenize / detokenize on ggml-vocab-bert-bge).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "frontends/gguf/gguf.h"
#include "frontends/gguf/tokenizer/tokenizer.h"
#include "frontends/gguf/tokenizer/wpm.h"
#include "support/error.h"
#include "tests/tokenizer/held_tokenizer.h"
#include "tests/tokenizer/wpm_reference.h"

using namespace vtc;
using gguf::Value;
using gguf::ValueType;
using V = std::vector<int32_t>;

namespace {

const std::string S = "\xE2\x96\x81";  // ▁, the mark of a word-initial piece

// [PAD] [UNK] [CLS] [SEP] [MASK], then pieces: "▁x" starts a word, "x"
// continues one (BERT's "##x").
const std::vector<std::string> kPieces = {
    S + "hello", S + "world", S + "cafe", S + "café", S + ",", S + "!", S + "'", "s", S + "$", S + "東",
    S + "京", S + "x", "y", S + "y", "€", S + "un", S + "una", "aff", "ff", "able", S + "i", "m", S + "hello" + "ab"};

gguf::GgufWriter wpm_writer(bool with_unk = true) {
  std::vector<std::string> tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  std::vector<Value> types = {3, 2, 3, 3, 3};
  for (const auto& p : kPieces) {
    tokens.push_back(p);
    types.emplace_back(1);
  }
  gguf::GgufWriter w;
  w.set("tokenizer.ggml.model", "bert");
  w.set("tokenizer.ggml.tokens", Value::string_array(tokens));
  w.set("tokenizer.ggml.token_type", Value::array(ValueType::I32, types));
  // The reference's defaults (101, 100, 102) do not fit this small vocab.
  w.set("tokenizer.ggml.bos_token_id", uint32_t{2});
  w.set("tokenizer.ggml.seperator_token_id", uint32_t{3});
  if (with_unk) w.set("tokenizer.ggml.unknown_token_id", uint32_t{1});
  w.set("tokenizer.ggml.token_type_count", uint32_t{2});
  return w;
}

struct MemTokenizer : test::HeldTokenizer {
  using HeldTokenizer::HeldTokenizer;
  int32_t id(const std::string& piece) const {
    const int32_t i = tok.find_token(piece);
    REQUIRE(i >= 0);
    return i;
  }
  V encode(std::string_view text) const { return tok.encode(text, false, false); }
};

std::string load_error(const gguf::GgufWriter& w) {
  try {
    MemTokenizer m(w);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

TEST_CASE("WordPiece: metadata, special tokens and flags", "[tokenizer][wpm]") {
  MemTokenizer m(wpm_writer());
  const Tokenizer& tok = m.tok;
  CHECK(tok.kind() == Tokenizer::Kind::kWpm);
  CHECK(tok.model_name() == "bert");
  CHECK(tok.bos() == 2);
  CHECK(tok.sep() == 3);
  CHECK(tok.eos() == -1);
  CHECK(tok.add_bos());
  CHECK_FALSE(tok.add_eos());
  CHECK(tok.token_type_count() == 2);
  const auto models = Tokenizer::supported_models();
  CHECK(std::find(models.begin(), models.end(), "bert") != models.end());
  // add_special: [CLS] ... [SEP]; parse_special cuts "[MASK]" out.
  const int32_t hello = m.id(S + "hello");
  CHECK(tok.encode("Hello", true, false) == V{2, hello, 3});
  CHECK(tok.encode("", true, false) == V{2, 3});
  CHECK(tok.encode("[MASK]hello", false, true) == V{4, hello});
}

TEST_CASE("WordPiece: lowercase, accents, CJK, punctuation, control characters", "[tokenizer][wpm]") {
  MemTokenizer m(wpm_writer());
  SECTION("lowercase and accents stripped by default") {
    CHECK(m.encode("HELLO  World") == V{m.id(S + "hello"), m.id(S + "world")});
    CHECK(m.encode("Café") == V{m.id(S + "cafe")});
    CHECK(m.encode("CAFE\xCC\x81") == V{m.id(S + "cafe")});  // E + combining acute: the mark is dropped
  }
  SECTION("each CJK ideograph is a word") {
    CHECK(m.encode("東京") == V{m.id(S + "東"), m.id(S + "京")});
    CHECK(m.encode("x東y") == V{m.id(S + "x"), m.id(S + "東"), m.id(S + "y")});
  }
  SECTION("punctuation and ASCII symbols are words, other symbols are not") {
    CHECK(m.encode("hello,world!") == V{m.id(S + "hello"), m.id(S + ","), m.id(S + "world"), m.id(S + "!")});
    CHECK(m.encode("x$y") == V{m.id(S + "x"), m.id(S + "$"), m.id(S + "y")});
    CHECK(m.encode("x€y") == V{m.id(S + "x"), m.id("€"), m.id("y")});
  }
  SECTION("control and format characters vanish, whitespace splits") {
    const V xy = {m.id(S + "x"), m.id("y")};
    CHECK(m.encode("x\x01y") == xy);
    CHECK(m.encode(std::string_view("x\0y", 3)) == xy);
    CHECK(m.encode("x\xE2\x80\x8By") == xy);  // U+200B ZERO WIDTH SPACE is Cf, not whitespace
    CHECK(m.encode("x\xFFy") == xy);          // an invalid byte is U+FFFD, dropped
    CHECK(m.encode("x\ty") == V{m.id(S + "x"), m.id(S + "y")});
    CHECK(m.encode("x\xC2\xA0y") == V{m.id(S + "x"), m.id(S + "y")});  // NO-BREAK SPACE
  }
  SECTION("normalizer keys") {
    auto w = wpm_writer();
    w.set("tokenizer.ggml.normalizer.lowercase", true);
    w.set("tokenizer.ggml.normalizer.strip_accents", false);
    MemTokenizer keep_accents(w);
    CHECK(keep_accents.encode("Café") == V{m.id(S + "café")});
    w.set("tokenizer.ggml.normalizer.lowercase", false);
    MemTokenizer cased(w);
    CHECK(cased.encode("Hello hello") == V{1, m.id(S + "hello")});
  }
}

TEST_CASE("WordPiece: longest pieces first, the unknown token for a word without pieces", "[tokenizer][wpm]") {
  MemTokenizer m(wpm_writer());
  // Greedy: "▁una" is longer than "▁un", then "ff" (not "aff"), then "able".
  CHECK(m.encode("unaffable") == V{m.id(S + "una"), m.id("ff"), m.id("able")});
  CHECK(m.encode("helloab") == V{m.id(S + "helloab")});
  // A word with any position that no piece matches is one [UNK], whole.
  CHECK(m.encode("qqq") == V{1});
  CHECK(m.encode("unaffablez hello") == V{1, m.id(S + "hello")});
  // Without an unknown token that is an error naming the key, not a -1 id.
  MemTokenizer no_unk(wpm_writer(/*with_unk=*/false));
  CHECK(no_unk.encode("hello") == V{m.id(S + "hello")});
  CHECK_THROWS_WITH(no_unk.encode("qqq"), Catch::Contains("'qqq'") && Catch::Contains("unknown_token_id"));
}

TEST_CASE("WordPiece: decoding joins pieces and cleans up spaces", "[tokenizer][wpm]") {
  MemTokenizer m(wpm_writer());
  const Tokenizer& tok = m.tok;
  const V ids = tok.encode("Hello, world!", true, false);
  CHECK(tok.decode(ids) == "[CLS] hello, world![SEP]");
  CHECK(tok.decode(ids, /*skip_special=*/true) == " hello, world!");
  CHECK(tok.decode(V{m.id(S + "i"), m.id(S + "'"), m.id("m")}) == " i'm");
  CHECK(tok.decode(V{m.id(S + "una"), m.id("ff"), m.id("able")}) == " unaffable");
  using tok::detail::wpm_clean_up_spaces;
  CHECK(wpm_clean_up_spaces(" a , b . c ? d !") == " a, b. c? d!");
  CHECK(wpm_clean_up_spaces("y ' all") == "y'all");
  CHECK(wpm_clean_up_spaces("a ' ' b") == "a'' b");  // the space taken by the first is gone for the second
  CHECK(wpm_clean_up_spaces("it 's we 're they 've i 'm") == "it's we're they've i'm");
  CHECK(wpm_clean_up_spaces("don 't i 'd we 'll 's") == "don 't i 'd we 'll's");
}

TEST_CASE("WordPiece: bad metadata is an error naming the key", "[tokenizer][wpm]") {
  {
    auto w = wpm_writer();
    w.set("tokenizer.ggml.normalizer.lowercase", "yes");
    CHECK_THAT(load_error(w), Catch::Contains("tokenizer.ggml.normalizer.lowercase must be a bool"));
  }
  {
    auto w = wpm_writer();
    w.set("tokenizer.ggml.seperator_token_id", uint32_t{5000});
    CHECK_THAT(load_error(w), Catch::Contains("seperator_token_id = 5000"));
  }
  {
    auto w = wpm_writer();
    w.set("tokenizer.ggml.token_type_count", "two");
    CHECK_THAT(load_error(w), Catch::Contains("token_type_count"));
  }
  {
    // No [SEP]: loading works, adding special tokens says what is missing.
    auto w = wpm_writer();
    w.set("tokenizer.ggml.seperator_token_id", uint32_t{4294967295u});
    MemTokenizer m(w);
    CHECK(m.encode("hello") == V{m.id(S + "hello")});
    CHECK_THROWS_WITH(m.tok.encode("hello", true, false), Catch::Contains("seperator_token_id"));
  }
}

// Inputs beyond the reference's .inp file: accents and NFD (including the
// reference's first-code-point rule on Hangul and the Angstrom sign), CJK and
// the CJK block edges, punctuation, symbols, control and format characters,
// unknown words, special-token texts and the decoder's space clean-up.
TEST_CASE("WordPiece matches the reference on more inputs", "[tokenizer][reference][wpm]") {
  const std::string vocab = fmt::format("{}/ggml-vocab-bert-bge.gguf", VTC_REFERENCE_MODELS_DIR);
  const auto file = gguf::GgufFile::open(vocab);
  const Tokenizer tok = Tokenizer::from_gguf(file);
  const std::vector<std::string> inputs = {
      "Café naïve résumé CRÈME BRÛLÉE",
      "Ångström \xE2\x84\xAB \xC7\x85 \xEF\xAC\x81 İstanbul Йошкар-Ола Ελληνικά ΆΈΉ",
      "Cửa Việt tiếng Việt",
      "한국어 텍스트 日本語のテキスト 中文文本，标点！",
      "\xF0\xA0\x80\x80 \xF0\xAB\xA0\xA0 \xF0\xAB\xA4\xA0 \xEF\xA4\x80",  // U+20000, U+2B820, U+2B920, U+F900
      "Hello, y'all! How're you? I'm fine: it's (really) \"great\" -- isn't it?",
      "a ' ' b",
      "$5 + 3 = 8; 50% off & more ~ `code` | x^2 <tag> @user #hash",
      "€100 ∑x ©2024 ☃ 🦙🚀 smile😀face",
      "x\x01y\x7Fz\xE2\x80\x8Bw\xEF\xBB\xBFv\xEE\x80\x80u \xCD\xB8 \xEF\xBF\xBD",
      "tab\there\nnew\r\nline\xC2\xA0nbsp\xE3\x80\x80ideographic\xC2\x85nel",
      "antidisestablishmentarianism supercalifragilisticexpialidocious qzxjvkw",
      "\xE2\x96\x81 ##ing [CLS] hello [MASK] world [SEP] [UNK]",
      "3.14159 1,000,000 2024-12-03",
  };
  for (const auto& text : inputs) {
    INFO("input '" << text << "'");
    for (bool special : {false, true}) {
      INFO("add_special = parse_special = " << special);
      const V ids = tok.encode(text, special, special);
      CHECK(fmt::format("{}", fmt::join(ids, " ")) ==
            fmt::format("{}", fmt::join(test::reference_tokenize(vocab, text, special, special), " ")));
      CHECK(tok.decode(ids) == test::reference_detokenize(vocab, ids, /*special=*/true));
      CHECK(tok.decode(ids, /*skip_special=*/true) == test::reference_detokenize(vocab, ids, /*special=*/false));
    }
  }
}
