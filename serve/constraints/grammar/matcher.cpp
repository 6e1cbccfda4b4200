// GrammarMatcher (matcher.h): the stack-set engine, its transition cache,
// and the trie walk that masks the vocabulary.
//
// UTF-8 follows llama.cpp's decode_utf8 exactly, because it decides which
// tokens are allowed: a character left unfinished by one token must go on
// with continuation bytes in the next (else the token is refused); within a
// token, a lead byte takes the next bytes as its continuation without
// checking them; a stray continuation byte as a lead refuses the token. A
// token that ends inside a character is allowed when some stack's top
// character set overlaps the code points it could complete to.
#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "serve/constraints/grammar/matcher.h"

namespace vtc::grammar {
namespace {

constexpr int32_t kDead = -1;
constexpr int32_t kUnknown = -2;
constexpr int32_t kMixed = -3;  // stack tops tell non-ASCII code points apart
constexpr size_t kMaxCachedSets = 1 << 15;
constexpr size_t kMaxExpansion = 1 << 16;

struct VecHash {
  size_t operator()(const std::vector<uint32_t>& v) const {
    uint64_t h = 1469598103934665603ull;
    for (uint32_t x : v) h = (h ^ x) * 1099511628211ull;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

struct Utf8 {
  uint32_t value = 0;
  int32_t n_remain = 0;
  bool checked = true;  // continuing a character from an earlier token
};

struct State {
  int32_t set = kDead;
  Utf8 utf8;
};

}  // namespace

struct GrammarMatcher::Engine {
  std::shared_ptr<const Grammar> grammar;
  std::shared_ptr<const TokenTable> tokens;
  const Grammar& g;

  std::vector<std::vector<uint32_t>> stacks;
  std::unordered_map<std::vector<uint32_t>, int32_t, VecHash> stack_ids;
  std::vector<std::vector<uint32_t>> sets;  // sorted stack ids
  std::unordered_map<std::vector<uint32_t>, int32_t, VecHash> set_ids;
  std::vector<std::array<int32_t, 128>> ascii_next;
  std::unordered_map<uint64_t, int32_t> wide_next;
  std::vector<uint8_t> set_can_end;
  // Per set: where every code point >= 0x80 leads (kMixed: it depends).
  std::vector<int32_t> wide_next_uniform;
  // Per set, once asked: the ASCII bytes that lead from it back to it.
  std::unordered_map<int32_t, std::array<uint64_t, 2>> self_loops;

  State current;
  bool done = false;
  std::vector<State> walk;
  std::vector<uint8_t> allowed;

  Engine(std::shared_ptr<const Grammar> gr, std::shared_ptr<const TokenTable> tt)
      : grammar(std::move(gr)), tokens(std::move(tt)), g(*grammar) {
    std::vector<uint32_t> out;
    for (uint32_t alt : g.alternatives[g.root]) {
      std::vector<uint32_t> s;
      if (g.elements[alt].kind != Element::kEnd) s.push_back(alt);
      advance(std::move(s), out);
    }
    current.set = intern_set(std::move(out));
  }

  int32_t intern_stack(const std::vector<uint32_t>& s) {
    auto [it, inserted] = stack_ids.emplace(s, static_cast<int32_t>(stacks.size()));
    if (inserted) stacks.push_back(s);
    return it->second;
  }

  int32_t intern_set(std::vector<uint32_t> ids) {
    if (ids.empty()) return kDead;
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    auto [it, inserted] = set_ids.emplace(ids, static_cast<int32_t>(sets.size()));
    if (inserted) {
      bool end = std::any_of(ids.begin(), ids.end(), [&](uint32_t s) { return stacks[s].empty(); });
      sets.push_back(std::move(ids));
      ascii_next.emplace_back();
      ascii_next.back().fill(kUnknown);
      set_can_end.push_back(end ? 1 : 0);
      wide_next_uniform.push_back(kUnknown);
    }
    return it->second;
  }

  // Expands rule references on top of `stack` until every resulting stack
  // has a character set on top (or is empty); appends their ids to `out`.
  void advance(std::vector<uint32_t> stack, std::vector<uint32_t>& out) {
    std::vector<std::vector<uint32_t>> todo;
    todo.push_back(std::move(stack));
    std::unordered_set<std::vector<uint32_t>, VecHash> seen;
    while (!todo.empty()) {
      std::vector<uint32_t> s = std::move(todo.back());
      todo.pop_back();
      if (!seen.insert(s).second) continue;
      if (seen.size() > kMaxExpansion)
        throw GrammarError(fmt::format("grammar: one step expands to more than {} parser stacks", kMaxExpansion));
      if (s.empty() || g.elements[s.back()].kind != Element::kRuleRef) {
        out.push_back(static_cast<uint32_t>(intern_stack(s)));
        continue;
      }
      const uint32_t top = s.back();
      const uint32_t rule = g.elements[top].a;
      for (uint32_t alt : g.alternatives[rule]) {
        std::vector<uint32_t> next(s.begin(), s.end() - 1);
        if (g.elements[top + 1].kind != Element::kEnd) next.push_back(top + 1);
        if (g.elements[alt].kind != Element::kEnd) next.push_back(alt);
        todo.push_back(std::move(next));
      }
    }
  }

  int32_t compute_step(int32_t set, uint32_t cp) {
    std::vector<uint32_t> out;
    const std::vector<uint32_t> members = sets[static_cast<size_t>(set)];
    for (uint32_t sid : members) {
      if (stacks[sid].empty()) continue;
      const uint32_t top = stacks[sid].back();
      if (!g.chars_match(top, cp)) continue;
      std::vector<uint32_t> next(stacks[sid].begin(), stacks[sid].end() - 1);
      if (g.elements[top + 1].kind != Element::kEnd) next.push_back(top + 1);
      advance(std::move(next), out);
    }
    return intern_set(std::move(out));
  }

  // How the character set at `pos` treats code points >= 0x80 (up to the
  // decoder's 0x1FFFFF): 1 all in, 0 all out, -1 some of each.
  int wide_class(uint32_t pos) const {
    const Element& e = g.elements[pos];
    bool any = false, all = false;
    for (uint32_t i = e.a; i < e.a + e.b; ++i) {
      const CodeRange& r = g.ranges[i];
      if (r.hi >= 0x80) any = true;
      if (r.lo <= 0x80 && r.hi >= 0x1FFFFF) all = true;
    }
    if (any && !all) return -1;
    return (all == (e.kind == Element::kChars)) ? 1 : 0;
  }

  int32_t wide_step(int32_t set) {
    int32_t cached = wide_next_uniform[static_cast<size_t>(set)];
    if (cached != kUnknown) return cached;
    int32_t result = kMixed;
    bool mixed = false;
    for (uint32_t sid : sets[static_cast<size_t>(set)])
      if (!stacks[sid].empty() && wide_class(stacks[sid].back()) < 0) mixed = true;
    if (!mixed) result = compute_step(set, 0x80);  // any code point >= 0x80 stands for all
    wide_next_uniform[static_cast<size_t>(set)] = result;
    return result;
  }

  int32_t step(int32_t set, uint32_t cp) {
    if (cp < 128) {
      int32_t& cached = ascii_next[static_cast<size_t>(set)][cp];
      if (cached != kUnknown) return cached;
      int32_t next = compute_step(set, cp);
      ascii_next[static_cast<size_t>(set)][cp] = next;  // the vector may have grown
      return next;
    }
    if (int32_t uniform = wide_step(set); uniform != kMixed) return uniform;
    const uint64_t key = (static_cast<uint64_t>(set) << 32) | cp;
    auto it = wide_next.find(key);
    if (it != wide_next.end()) return it->second;
    int32_t next = compute_step(set, cp);
    wide_next.emplace(key, next);
    return next;
  }

  // One byte; false when the text can no longer match.
  bool step_byte(State& s, uint8_t b) {
    static constexpr int8_t kLength[16] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4};
    if (s.utf8.n_remain > 0) {
      if (s.utf8.checked && (b >> 6) != 2) return false;
      s.utf8.value = (s.utf8.value << 6) | (b & 0x3Fu);
      if (--s.utf8.n_remain > 0) return true;
      s.set = step(s.set, s.utf8.value);
      s.utf8 = Utf8{};
      return s.set != kDead;
    }
    const int n = kLength[b >> 4] - 1;
    if (n < 0) return false;
    if (n == 0) {
      s.set = step(s.set, b);
      return s.set != kDead;
    }
    s.utf8 = Utf8{b & ((1u << (7 - n)) - 1), n, false};
    // Whatever follows, this character is >= 0x80 (the lead byte's bits
    // say so), so a set that refuses all of those refuses it now.
    if (s.utf8.value >= (n == 1 ? 2u : 1u) && wide_step(s.set) == kDead) return false;
    return true;
  }

  // Whether a token may end in state `s` (an unfinished character must be
  // completable into something a stack accepts).
  bool token_end_ok(const State& s) const {
    if (s.set == kDead) return false;
    const int n = s.utf8.n_remain;
    if (n == 0) return true;
    if (n < 0 || (n == 1 && s.utf8.value < 2)) return false;
    uint32_t lo = s.utf8.value << (6 * n);
    uint32_t hi = lo | ((1u << (6 * n)) - 1);
    if (lo == 0) lo = n == 2 ? 1u << 11 : n == 3 ? 1u << 16 : lo;
    for (uint32_t sid : sets[static_cast<size_t>(s.set)])
      if (!stacks[sid].empty() && g.chars_overlap(stacks[sid].back(), lo, hi)) return true;
    return false;
  }

  // Bounds the caches: past kMaxCachedSets sets, start over from the
  // current set alone.
  void trim_cache() {
    if (sets.size() < kMaxCachedSets || current.set == kDead) return;
    std::vector<std::vector<uint32_t>> keep;
    for (uint32_t sid : sets[static_cast<size_t>(current.set)]) keep.push_back(stacks[sid]);
    stacks.clear();
    stack_ids.clear();
    sets.clear();
    set_ids.clear();
    ascii_next.clear();
    wide_next.clear();
    set_can_end.clear();
    wide_next_uniform.clear();
    self_loops.clear();
    std::vector<uint32_t> ids;
    for (auto& s : keep) ids.push_back(static_cast<uint32_t>(intern_stack(s)));
    current.set = intern_set(std::move(ids));
  }

  bool can_end() const { return !done && current.set != kDead && set_can_end[static_cast<size_t>(current.set)]; }

  const std::array<uint64_t, 2>& self_loop_bytes(int32_t set) {
    auto it = self_loops.find(set);
    if (it != self_loops.end()) return it->second;
    std::array<uint64_t, 2> loops{0, 0};
    for (uint32_t b = 0; b < 128; ++b)
      if (step(set, b) == set) loops[b >> 6] |= uint64_t{1} << (b & 63);
    return self_loops[set] = loops;
  }

  void compute_allowed() {
    trim_cache();
    const TokenTable& t = *tokens;
    allowed.assign(t.size(), 0);
    if (done || current.set == kDead) return;
    const bool end_ok = can_end();
    for (int32_t id : t.eog_ids()) allowed[static_cast<size_t>(id)] = end_ok;
    const auto& nodes = t.nodes();
    const auto& ids = t.token_ids();
    walk.resize(t.max_depth() + 1);
    walk[0] = current;
    const int32_t home = current.set;
    const std::array<uint64_t, 2> loops = current.utf8.n_remain == 0 ? self_loop_bytes(home) : std::array<uint64_t, 2>{0, 0};
    const bool has_loops = (loops[0] | loops[1]) != 0;
    for (size_t i = 0; i < nodes.size();) {
      const TokenTable::Node& node = nodes[i];
      State s = walk[node.depth - 1u];
      if (has_loops && s.set == home && s.utf8.n_remain == 0 && node.subtree_well_formed &&
          (node.subtree_bytes[0] & ~loops[0]) == 0 && (node.subtree_bytes[1] & ~loops[1]) == 0 &&
          (!node.subtree_wide || wide_step(home) == home)) {
        // Every token below ends back in `home`: all allowed.
        for (uint32_t k = node.tokens_begin; k < node.subtree_tokens_end; ++k) allowed[static_cast<size_t>(ids[k])] = 1;
        i = node.subtree_end;
        continue;
      }
      if (!step_byte(s, node.byte)) {
        i = node.subtree_end;
        continue;
      }
      walk[node.depth] = s;
      if (node.tokens_begin != node.tokens_end && token_end_ok(s))
        for (uint32_t k = node.tokens_begin; k < node.tokens_end; ++k) allowed[static_cast<size_t>(ids[k])] = 1;
      ++i;
    }
  }

  // The state after `bytes`, if they may come next.
  std::optional<State> after(std::string_view bytes) {
    trim_cache();
    if (done || current.set == kDead) return std::nullopt;
    State s = current;
    for (char c : bytes)
      if (!step_byte(s, static_cast<uint8_t>(c))) return std::nullopt;
    if (!token_end_ok(s)) return std::nullopt;
    s.utf8.checked = true;
    return s;
  }

  bool accept_bytes(std::string_view bytes) {
    std::optional<State> s = after(bytes);
    if (s) current = *s;
    return s.has_value();
  }

  // The bytes a token stands for in the grammar; nullopt for an
  // end-of-generation or out-of-range token.
  std::optional<std::string_view> token_bytes(int32_t token) const {
    if (token < 0 || static_cast<size_t>(token) >= tokens->size() || tokens->is_eog(token)) return std::nullopt;
    std::string_view piece = tokens->piece(token);
    return piece.substr(0, piece.find('\0'));
  }
};

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTable> tokens)
    : engine_(std::make_unique<Engine>(std::move(grammar), std::move(tokens))) {}
GrammarMatcher::~GrammarMatcher() = default;
GrammarMatcher::GrammarMatcher(GrammarMatcher&&) noexcept = default;
GrammarMatcher& GrammarMatcher::operator=(GrammarMatcher&&) noexcept = default;

std::vector<uint8_t> GrammarMatcher::allowed_tokens() const {
  engine_->compute_allowed();
  return engine_->allowed;
}

void GrammarMatcher::mask_logits(float* logits, size_t n_vocab) const {
  engine_->compute_allowed();
  const auto& allowed = engine_->allowed;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n_vocab; ++i)
    if (i >= allowed.size() || !allowed[i]) logits[i] = neg_inf;
}

bool GrammarMatcher::allows(int32_t token) const {
  Engine& e = *engine_;
  if (token < 0 || static_cast<size_t>(token) >= e.tokens->size()) return false;
  if (e.tokens->is_eog(token)) return e.can_end();
  auto bytes = e.token_bytes(token);
  return !bytes->empty() && e.after(*bytes).has_value();
}

bool GrammarMatcher::accept(int32_t token) {
  Engine& e = *engine_;
  if (token < 0 || static_cast<size_t>(token) >= e.tokens->size()) return false;
  if (e.tokens->is_eog(token)) {
    if (!e.can_end()) return false;
    e.done = true;
    return true;
  }
  auto bytes = e.token_bytes(token);
  return !bytes->empty() && e.accept_bytes(*bytes);
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) { return engine_->accept_bytes(bytes); }
bool GrammarMatcher::can_end() const { return engine_->can_end(); }

bool GrammarMatcher::finished() const {
  const Engine& e = *engine_;
  if (e.done || e.current.set == kDead) return true;
  for (uint32_t sid : e.sets[static_cast<size_t>(e.current.set)])
    if (!e.stacks[sid].empty()) return false;
  return e.current.utf8.n_remain == 0;
}

bool Grammar::matches(std::string_view text) const {
  // A non-owning shared_ptr: the matcher lives only in this call.
  std::shared_ptr<const Grammar> self(std::shared_ptr<const Grammar>{}, this);
  GrammarMatcher m(self, std::make_shared<const TokenTable>(std::vector<std::string>{}, std::span<const int32_t>{}));
  return m.accept_bytes(text) && m.can_end();
}

}  // namespace vtc::grammar
