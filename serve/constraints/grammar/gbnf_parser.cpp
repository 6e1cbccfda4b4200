// GBNF text -> Grammar (grammar.h): a recursive-descent parser over the
// text, then a left-recursion check, then flattening into the element
// table.
//
// Parsing builds rules as alternatives of element sequences. A group
// becomes a generated rule; a repetition copies the item it follows (the
// last literal, class, reference or group) and adds generated rules (see
// grammar.h). Sizes are bounded (repetition counts, group nesting, total
// elements) so that untrusted text cannot make the parser run long or deep.
//
// Left recursion: a rule is nullable when some alternative's elements are
// all nullable rule references (fixpoint). Rule A "starts with" B when B is
// referenced in an alternative of A after only nullable references. A cycle
// in "starts with" is left recursion; it is found with an iterative DFS.
#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "serve/constraints/grammar/grammar.h"

namespace vtc::grammar {
namespace {

constexpr uint64_t kMaxRepetition = 10000;
constexpr size_t kMaxElements = size_t{1} << 21;
constexpr int kMaxNesting = 200;

struct PElem {
  Element::Kind kind;
  uint32_t rule = 0;
  std::vector<CodeRange> set;
};
using Seq = std::vector<PElem>;

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

class Parser {
 public:
  explicit Parser(std::string_view src) : src_(src) {}

  std::shared_ptr<const Grammar> parse(std::string_view root) {
    skip_space(true);
    while (pos_ < src_.size()) parse_rule();
    for (uint32_t id = 0; id < names_.size(); ++id)
      if (!defined_[id]) fail_at(first_ref_[id], fmt::format("undefined rule '{}'", names_[id]));
    auto it = ids_.find(std::string(root));
    if (it == ids_.end() || !defined_[it->second])
      throw GrammarError(fmt::format("grammar: no rule named '{}' (the root rule)", root));
    check_left_recursion();
    return flatten(it->second);
  }

 private:
  std::string_view src_;
  size_t pos_ = 0;
  int nesting_ = 0;
  size_t n_elements_ = 0;
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<bool> defined_;
  std::vector<size_t> first_ref_;
  std::vector<std::vector<Seq>> rules_;
  std::unordered_map<std::string, int> generated_count_;

  [[noreturn]] void fail_at(size_t at, const std::string& problem) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < src_.size(); ++i) {
      if (src_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw GrammarError(fmt::format("grammar:{}:{}: {}", line, col, problem));
  }
  [[noreturn]] void fail(const std::string& problem) const { fail_at(pos_, problem); }

  char peek(size_t ahead = 0) const { return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0'; }
  bool at_end() const { return pos_ >= src_.size(); }

  void skip_space(bool newline_ok) {
    while (!at_end()) {
      char c = peek();
      if (c == ' ' || c == '\t' || (newline_ok && (c == '\r' || c == '\n'))) {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\r' && peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    size_t start = pos_;
    while (!at_end() && is_word_char(peek())) ++pos_;
    if (pos_ == start) fail("expected a rule name");
    return std::string(src_.substr(start, pos_ - start));
  }

  uint32_t symbol(const std::string& name, size_t at) {
    auto [it, inserted] = ids_.emplace(name, static_cast<uint32_t>(names_.size()));
    if (inserted) {
      names_.push_back(name);
      defined_.push_back(false);
      first_ref_.push_back(at);
      rules_.emplace_back();
    }
    return it->second;
  }

  uint32_t generated_rule(const std::string& base) {
    for (;;) {
      std::string name = fmt::format("{}_{}", base, ++generated_count_[base]);
      if (!ids_.count(name)) {
        uint32_t id = symbol(name, pos_);
        defined_[id] = true;
        return id;
      }
    }
  }

  uint32_t parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      char c = peek();
      int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
      if (d < 0) fail(fmt::format("expected {} hex digits", digits));
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    return v;
  }

  // One character of a literal or class: an escape or one UTF-8 character.
  uint32_t parse_char() {
    if (at_end()) fail("unexpected end of input");
    unsigned char c = static_cast<unsigned char>(peek());
    if (c == '\\') {
      ++pos_;
      char e = peek();
      ++pos_;
      switch (e) {
        case 'x': return parse_hex(2);
        case 'u': return parse_hex(4);
        case 'U': return parse_hex(8);
        case 't': return '\t';
        case 'r': return '\r';
        case 'n': return '\n';
        case '\\': case '"': case '[': case ']': case '-': return static_cast<uint32_t>(e);
        default: --pos_; fail(e ? fmt::format("unknown escape '\\{}'", e) : std::string("unexpected end of input"));
      }
    }
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || pos_ + static_cast<size_t>(len) > src_.size()) fail("invalid UTF-8 in grammar text");
    uint32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (int i = 1; i < len; ++i) {
      unsigned char cc = static_cast<unsigned char>(src_[pos_ + static_cast<size_t>(i)]);
      if ((cc >> 6) != 2) fail("invalid UTF-8 in grammar text");
      cp = (cp << 6) | (cc & 0x3F);
    }
    pos_ += static_cast<size_t>(len);
    return cp;
  }

  void parse_rule() {
    size_t at = pos_;
    std::string name = parse_name();
    skip_space(false);
    if (src_.substr(pos_, 3) != "::=") fail("expected '::='");
    pos_ += 3;
    skip_space(true);
    uint32_t id = symbol(name, at);
    if (defined_[id]) fail_at(at, fmt::format("rule '{}' is defined twice", name));
    defined_[id] = true;
    auto alts = parse_alternates(name, false);
    rules_[id] = std::move(alts);
    if (peek() == '\r') {
      pos_ += peek(1) == '\n' ? 2 : 1;
    } else if (peek() == '\n') {
      ++pos_;
    } else if (!at_end()) {
      fail(fmt::format("expected end of line, found '{}'", peek()));
    }
    skip_space(true);
  }

  std::vector<Seq> parse_alternates(const std::string& rule_name, bool nested) {
    std::vector<Seq> alts;
    alts.push_back(parse_sequence(rule_name, nested));
    while (peek() == '|') {
      ++pos_;
      skip_space(true);
      alts.push_back(parse_sequence(rule_name, nested));
    }
    return alts;
  }

  void count(size_t n) {
    n_elements_ += n;
    if (n_elements_ > kMaxElements) fail(fmt::format("the grammar expands beyond {} elements", kMaxElements));
  }

  uint64_t parse_count() {
    size_t start = pos_;
    uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + static_cast<uint64_t>(peek() - '0');
      if (v > kMaxRepetition) fail_at(start, fmt::format("repetition count above {}", kMaxRepetition));
      ++pos_;
    }
    if (pos_ == start) fail("expected a number");
    return v;
  }

  // Rewrites seq[last:] (the item before the operator) as min..max copies.
  void repeat(Seq& seq, size_t last, uint64_t min, uint64_t max, bool unbounded, const std::string& rule_name) {
    if (last >= seq.size()) fail("nothing to repeat before this operator");
    Seq item(seq.begin() + static_cast<std::ptrdiff_t>(last), seq.end());
    uint64_t copies = min + (unbounded ? 1 : max - min);
    count(item.size() * copies + 4 * copies);
    seq.resize(last);
    for (uint64_t i = 0; i < min; ++i) seq.insert(seq.end(), item.begin(), item.end());
    if (unbounded) {
      uint32_t r = generated_rule(rule_name);
      Seq loop = item;
      loop.push_back({Element::kRuleRef, r, {}});
      rules_[r] = {loop, Seq{}};
      seq.push_back({Element::kRuleRef, r, {}});
      return;
    }
    uint32_t prev = 0;
    for (uint64_t k = 0; k < max - min; ++k) {
      uint32_t r = generated_rule(rule_name);
      Seq opt = item;
      if (k > 0) opt.push_back({Element::kRuleRef, prev, {}});
      rules_[r] = {opt, Seq{}};
      prev = r;
    }
    if (max > min) seq.push_back({Element::kRuleRef, prev, {}});
  }

  Seq parse_sequence(const std::string& rule_name, bool nested) {
    Seq seq;
    size_t last = SIZE_MAX;
    while (!at_end()) {
      char c = peek();
      size_t at = pos_;
      if (c == '"') {
        ++pos_;
        last = seq.size();
        while (peek() != '"') {
          if (at_end()) fail_at(at, "unterminated string literal");
          uint32_t cp = parse_char();
          seq.push_back({Element::kChars, 0, {{cp, cp}}});
          count(1);
        }
        ++pos_;
        if (last == seq.size()) last = SIZE_MAX;  // "" is nothing to repeat
      } else if (c == '[') {
        ++pos_;
        PElem e{Element::kChars, 0, {}};
        if (peek() == '^') {
          ++pos_;
          e.kind = Element::kCharsNot;
        }
        while (peek() != ']') {
          if (at_end()) fail_at(at, "unterminated character class");
          uint32_t lo = parse_char(), hi = lo;
          if (peek() == '-' && peek(1) != ']' && pos_ + 1 < src_.size()) {
            ++pos_;
            hi = parse_char();
          }
          e.set.push_back({lo, hi});
        }
        ++pos_;
        last = seq.size();
        seq.push_back(std::move(e));
        count(1);
      } else if (is_word_char(c)) {
        std::string name = parse_name();
        last = seq.size();
        seq.push_back({Element::kRuleRef, symbol(name, at), {}});
        count(1);
      } else if (c == '(') {
        ++pos_;
        if (++nesting_ > kMaxNesting) fail(fmt::format("groups nested deeper than {}", kMaxNesting));
        skip_space(true);
        uint32_t r = generated_rule(rule_name);
        auto alts = parse_alternates(rule_name, true);
        rules_[r] = std::move(alts);
        if (peek() != ')') fail_at(at, "unclosed '(': expected ')'");
        ++pos_;
        --nesting_;
        last = seq.size();
        seq.push_back({Element::kRuleRef, r, {}});
        count(1);
      } else if (c == '.') {
        ++pos_;
        last = seq.size();
        seq.push_back({Element::kChars, 0, {{0, 0xFFFFFFFFu}}});
        count(1);
      } else if (c == '*' || c == '+' || c == '?') {
        ++pos_;
        if (last == SIZE_MAX) fail_at(at, fmt::format("nothing to repeat before '{}'", c));
        repeat(seq, last, c == '+' ? 1 : 0, 1, c != '?', rule_name);
        last = SIZE_MAX;
      } else if (c == '{') {
        ++pos_;
        if (last == SIZE_MAX) fail_at(at, "nothing to repeat before '{'");
        skip_space(nested);
        uint64_t min = parse_count(), max = min;
        bool unbounded = false;
        skip_space(nested);
        if (peek() == ',') {
          ++pos_;
          skip_space(nested);
          if (peek() >= '0' && peek() <= '9') {
            max = parse_count();
            skip_space(nested);
          } else {
            unbounded = true;
          }
        }
        if (peek() != '}') fail("expected '}' to close the repetition");
        ++pos_;
        if (!unbounded && max < min) fail_at(at, fmt::format("repetition {{{},{}}} has max below min", min, max));
        repeat(seq, last, min, max, unbounded, rule_name);
        last = SIZE_MAX;
      } else if (c == '<' || c == '!') {
        fail("token references (<...>, !<...>) are not supported");
      } else {
        break;
      }
      skip_space(nested);
    }
    return seq;
  }

  void check_left_recursion() const {
    const size_t n = rules_.size();
    std::vector<bool> nullable(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (const Seq& alt : rules_[r]) {
          bool all = std::all_of(alt.begin(), alt.end(),
                                 [&](const PElem& e) { return e.kind == Element::kRuleRef && nullable[e.rule]; });
          if (all) {
            nullable[r] = changed = true;
            break;
          }
        }
      }
    }
    std::vector<std::vector<uint32_t>> starts(n);
    for (size_t r = 0; r < n; ++r)
      for (const Seq& alt : rules_[r])
        for (const PElem& e : alt) {
          if (e.kind != Element::kRuleRef) break;
          starts[r].push_back(e.rule);
          if (!nullable[e.rule]) break;
        }
    // 0 = unvisited, 1 = on the DFS path, 2 = done.
    std::vector<uint8_t> color(n, 0);
    for (size_t s = 0; s < n; ++s) {
      if (color[s]) continue;
      std::vector<std::pair<uint32_t, size_t>> path{{static_cast<uint32_t>(s), 0}};
      color[s] = 1;
      while (!path.empty()) {
        auto& [r, next] = path.back();
        if (next == starts[r].size()) {
          color[r] = 2;
          path.pop_back();
          continue;
        }
        uint32_t t = starts[r][next++];
        if (color[t] == 1)
          throw GrammarError(fmt::format("grammar: left recursion: rule '{}' can reach itself before matching a character",
                                         names_[t]));
        if (color[t] == 0) {
          color[t] = 1;
          path.push_back({t, 0});
        }
      }
    }
  }

  std::shared_ptr<const Grammar> flatten(uint32_t root) const {
    auto g = std::make_shared<Grammar>();
    g->root = root;
    g->rule_names = names_;
    g->alternatives.resize(rules_.size());
    for (size_t r = 0; r < rules_.size(); ++r) {
      for (const Seq& alt : rules_[r]) {
        g->alternatives[r].push_back(static_cast<uint32_t>(g->elements.size()));
        for (const PElem& e : alt) {
          Element out{e.kind, e.rule, 0};
          if (e.kind != Element::kRuleRef) {
            out.a = static_cast<uint32_t>(g->ranges.size());
            out.b = static_cast<uint32_t>(e.set.size());
            g->ranges.insert(g->ranges.end(), e.set.begin(), e.set.end());
          }
          g->elements.push_back(out);
        }
        g->elements.push_back({Element::kEnd, 0, 0});
      }
    }
    return g;
  }
};

}  // namespace

std::shared_ptr<const Grammar> parse_gbnf(std::string_view text, std::string_view root) {
  return Parser(text).parse(root);
}

bool Grammar::chars_overlap(uint32_t pos, uint32_t lo, uint32_t hi) const {
  // As llama.cpp's partial-character check: any overlap decides, so a
  // negated class refuses a partial character that one of its ranges might
  // complete to.
  const Element& e = elements[pos];
  const bool negated = e.kind == Element::kCharsNot;
  for (uint32_t i = e.a; i < e.a + e.b; ++i)
    if (ranges[i].lo <= hi && lo <= ranges[i].hi) return !negated;
  return negated;
}

}  // namespace vtc::grammar
