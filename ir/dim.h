// A tensor dimension: a constant or an expression over step symbols.
//
// Step symbols (T tokens, S sequences, P KV pages, ...) are unknown until a
// step runs, so shapes carry them symbolically. A Dim is kept as a canonical
// polynomial with int64 coefficients: a sorted list of terms, each a sorted
// product of symbols times a non-zero coefficient. Canonical form makes
// equality structural (T*8 == 8*T, T+P == P+T) and printing deterministic,
// which is what the round trip and the shape checks need. Growth is bounded
// (terms, degree) and every coefficient operation is overflow-checked; a
// violation throws vtc::Error, never UB.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vtc::ir {

class Dim {
 public:
  Dim() = default;                // the constant 0
  Dim(int64_t value);             // NOLINT: constants convert implicitly
  static Dim symbol(std::string_view name);

  bool is_constant() const;
  std::optional<int64_t> constant() const;
  // True when some term has a negative coefficient (e.g. T-1) or the
  // constant itself is negative.
  bool has_negative_coefficient() const;

  friend Dim operator+(const Dim& a, const Dim& b);
  friend Dim operator-(const Dim& a, const Dim& b);
  friend Dim operator*(const Dim& a, const Dim& b);
  friend bool operator==(const Dim& a, const Dim& b);

  std::string str() const;

  // The value with every symbol bound by `lookup`; nullopt if a symbol is
  // unbound or the arithmetic overflows. Runtimes use it to size buffers.
  using SymbolLookup = std::optional<int64_t> (*)(std::string_view symbol, const void* env);
  std::optional<int64_t> evaluate(SymbolLookup lookup, const void* env) const;
  // The symbol if this dim is exactly one symbol with coefficient 1.
  std::optional<std::string> as_symbol() const;

  // Bounds that keep parsing hostile text cheap.
  static constexpr size_t kMaxTerms = 32;
  static constexpr size_t kMaxDegree = 8;

 private:
  struct Term {
    std::vector<std::string> symbols;  // sorted, repeats allowed (T*T)
    int64_t coefficient = 0;
  };
  void normalize();
  std::vector<Term> terms_;
  friend bool term_order(const Term&, const Term&);
};

// Product of all dims (the element count), symbolic.
Dim product(const std::vector<Dim>& dims);

// A symbol name is an uppercase letter followed by letters, digits or '_'.
bool is_symbol_name(std::string_view name);

}  // namespace vtc::ir
