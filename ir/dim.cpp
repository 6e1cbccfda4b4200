// Dim arithmetic on canonical polynomials.
//
// Algorithm: terms live sorted by (degree descending, symbols ascending), so
// the constant term is last. add = concatenate then normalize (merge equal
// symbol lists, drop zeros); mul = pairwise products then normalize. All
// coefficient arithmetic goes through checked helpers.
#include "ir/dim.h"

#include <algorithm>

#include "support/error.h"

namespace vtc::ir {
namespace {

int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) throw Error("dimension arithmetic overflows int64");
  return r;
}

int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) throw Error("dimension arithmetic overflows int64");
  return r;
}

}  // namespace

bool term_order(const Dim::Term& a, const Dim::Term& b) {
  if (a.symbols.size() != b.symbols.size()) return a.symbols.size() > b.symbols.size();
  return a.symbols < b.symbols;
}

Dim::Dim(int64_t value) {
  if (value != 0) terms_.push_back({{}, value});
}

Dim Dim::symbol(std::string_view name) {
  Dim d;
  d.terms_.push_back({{std::string(name)}, 1});
  return d;
}

bool Dim::is_constant() const { return constant().has_value(); }

std::optional<int64_t> Dim::constant() const {
  if (terms_.empty()) return 0;
  if (terms_.size() == 1 && terms_[0].symbols.empty()) return terms_[0].coefficient;
  return std::nullopt;
}

bool Dim::has_negative_coefficient() const {
  return std::any_of(terms_.begin(), terms_.end(), [](const Term& t) { return t.coefficient < 0; });
}

void Dim::normalize() {
  std::sort(terms_.begin(), terms_.end(), term_order);
  std::vector<Term> merged;
  for (auto& t : terms_) {
    if (!merged.empty() && merged.back().symbols == t.symbols)
      merged.back().coefficient = checked_add(merged.back().coefficient, t.coefficient);
    else
      merged.push_back(std::move(t));
  }
  merged.erase(std::remove_if(merged.begin(), merged.end(), [](const Term& t) { return t.coefficient == 0; }),
               merged.end());
  if (merged.size() > kMaxTerms) throw Error("dimension expression has too many terms");
  terms_ = std::move(merged);
}

Dim operator+(const Dim& a, const Dim& b) {
  Dim r = a;
  r.terms_.insert(r.terms_.end(), b.terms_.begin(), b.terms_.end());
  r.normalize();
  return r;
}

Dim operator-(const Dim& a, const Dim& b) { return a + b * Dim(-1); }

Dim operator*(const Dim& a, const Dim& b) {
  if (a.terms_.size() * b.terms_.size() > Dim::kMaxTerms * Dim::kMaxTerms)
    throw Error("dimension expression has too many terms");
  Dim r;
  for (const auto& x : a.terms_) {
    for (const auto& y : b.terms_) {
      Dim::Term t;
      t.symbols = x.symbols;
      t.symbols.insert(t.symbols.end(), y.symbols.begin(), y.symbols.end());
      if (t.symbols.size() > Dim::kMaxDegree) throw Error("dimension expression degree is too high");
      std::sort(t.symbols.begin(), t.symbols.end());
      t.coefficient = checked_mul(x.coefficient, y.coefficient);
      r.terms_.push_back(std::move(t));
    }
  }
  r.normalize();
  return r;
}

bool operator==(const Dim& a, const Dim& b) {
  if (a.terms_.size() != b.terms_.size()) return false;
  for (size_t i = 0; i < a.terms_.size(); ++i)
    if (a.terms_[i].symbols != b.terms_[i].symbols || a.terms_[i].coefficient != b.terms_[i].coefficient)
      return false;
  return true;
}

// Prints symbols first and the coefficient last ("T*8", "P+T", "T-1"), which
// the parser reads back to the same canonical form.
std::string Dim::str() const {
  if (terms_.empty()) return "0";
  std::string out;
  for (size_t i = 0; i < terms_.size(); ++i) {
    const Term& t = terms_[i];
    // Negate in unsigned arithmetic: INT64_MIN has no positive int64.
    bool negative = t.coefficient < 0;
    uint64_t magnitude = negative ? 0 - static_cast<uint64_t>(t.coefficient) : static_cast<uint64_t>(t.coefficient);
    if (negative) out += "-";
    else if (i > 0) out += "+";
    std::string body;
    for (const auto& s : t.symbols) body += (body.empty() ? "" : "*") + s;
    if (magnitude != 1 || body.empty()) body += (body.empty() ? "" : "*") + std::to_string(magnitude);
    out += body;
  }
  return out;
}

std::optional<int64_t> Dim::evaluate(SymbolLookup lookup, const void* env) const {
  int64_t total = 0;
  for (const Term& t : terms_) {
    int64_t value = t.coefficient;
    for (const auto& s : t.symbols) {
      auto bound = lookup(s, env);
      if (!bound || __builtin_mul_overflow(value, *bound, &value)) return std::nullopt;
    }
    if (__builtin_add_overflow(total, value, &total)) return std::nullopt;
  }
  return total;
}

std::optional<std::string> Dim::as_symbol() const {
  if (terms_.size() == 1 && terms_[0].coefficient == 1 && terms_[0].symbols.size() == 1) return terms_[0].symbols[0];
  return std::nullopt;
}

Dim product(const std::vector<Dim>& dims) {
  Dim r(1);
  for (const auto& d : dims) r = r * d;
  return r;
}

bool is_symbol_name(std::string_view name) {
  if (name.empty() || !(name[0] >= 'A' && name[0] <= 'Z')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace vtc::ir
