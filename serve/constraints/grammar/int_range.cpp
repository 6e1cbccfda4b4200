// int_range.h. Non-negative ranges are split by digit count; within one
// digit count, numeric order is string order, and [lo, hi] is built from
// its first digit down:
//   same first digit d:  "d" range(lo[1:], hi[1:])
//   else:                "a" range(lo[1:], 99..) | [a+1 - b-1] [0-9]{n-1} | "b" range(00.., hi[1:])
// with the first (last) part folded into the middle one when lo's tail is
// all zeros (hi's tail all nines). Negative parts are "-" and the range of
// magnitudes. Unbounded sides are [1-9] [0-9]{n,15} tails (16 digits at
// most, as the reference's integer rules).
#include "serve/constraints/grammar/int_range.h"

#include <vector>

namespace vtc::grammar::detail {
namespace {

std::string join_alts(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string s = "(";
  for (size_t i = 0; i < alts.size(); ++i) s += (i ? " | " : "") + alts[i];
  return s + ")";
}

std::string digit_class(char a, char b) {
  return a == b ? std::string("[") + a + "]" : std::string("[") + a + "-" + b + "]";
}

std::string any_digits(size_t n) {
  if (n == 0) return "";
  return n == 1 ? "[0-9]" : "[0-9]{" + std::to_string(n) + "}";
}

bool all_of(const std::string& s, size_t from, char c) {
  for (size_t i = from; i < s.size(); ++i)
    if (s[i] != c) return false;
  return true;
}

// Numbers of exactly lo.size() digits in [lo, hi] (same length, lo <= hi).
std::string same_length(const std::string& lo, const std::string& hi) {
  const size_t n = lo.size();
  if (lo == hi) return "\"" + lo + "\"";
  if (n == 1) return digit_class(lo[0], hi[0]);
  if (lo[0] == hi[0]) return "\"" + std::string(1, lo[0]) + "\" " + same_length(lo.substr(1), hi.substr(1));
  const bool lo_zeros = all_of(lo, 1, '0'), hi_nines = all_of(hi, 1, '9');
  std::vector<std::string> alts;
  if (!lo_zeros) alts.push_back("\"" + std::string(1, lo[0]) + "\" " + same_length(lo.substr(1), std::string(n - 1, '9')));
  char from = lo_zeros ? lo[0] : static_cast<char>(lo[0] + 1);
  char to = hi_nines ? hi[0] : static_cast<char>(hi[0] - 1);
  if (from <= to) alts.push_back(digit_class(from, to) + " " + any_digits(n - 1));
  if (!hi_nines) alts.push_back("\"" + std::string(1, hi[0]) + "\" " + same_length(std::string(n - 1, '0'), hi.substr(1)));
  return join_alts(alts);
}

std::string range(uint64_t lo, uint64_t hi) {
  const std::string ls = std::to_string(lo), hs = std::to_string(hi);
  std::vector<std::string> alts;
  for (size_t d = ls.size(); d <= hs.size(); ++d) {
    std::string a = d == ls.size() ? ls : "1" + std::string(d - 1, '0');
    std::string b = d == hs.size() ? hs : std::string(d, '9');
    alts.push_back(same_length(a, b));
  }
  return join_alts(alts);
}

// Unbounded sides stop at 16 digits, as the reference's integer rules do.
constexpr size_t kMaxDigits = 16;

std::string at_least(uint64_t lo) {
  const std::string ls = std::to_string(lo);
  std::vector<std::string> alts{same_length(ls, std::string(ls.size(), '9'))};
  if (ls.size() < kMaxDigits) alts.push_back("[1-9] [0-9]{" + std::to_string(ls.size()) + "," + std::to_string(kMaxDigits - 1) + "}");
  return join_alts(alts);
}

uint64_t magnitude(int64_t v) { return v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v); }

}  // namespace

std::string integer_range_gbnf(std::optional<int64_t> min, std::optional<int64_t> max) {
  const std::string any_negative = "\"-\" [1-9] [0-9]{0,15}";
  // A range across zero lets "-0" in, as the reference's does.
  if (min && max) {
    if (*max < 0) return "\"-\" " + range(magnitude(*max), magnitude(*min));
    if (*min < 0) return join_alts({"\"-\" " + range(0, magnitude(*min)), range(0, static_cast<uint64_t>(*max))});
    return range(static_cast<uint64_t>(*min), static_cast<uint64_t>(*max));
  }
  if (min) {
    if (*min < 0) return join_alts({"\"-\" " + range(0, magnitude(*min)), at_least(0)});
    return at_least(static_cast<uint64_t>(*min));
  }
  if (*max < 0) return "\"-\" " + at_least(magnitude(*max));
  return join_alts({any_negative, range(0, static_cast<uint64_t>(*max))});
}

}  // namespace vtc::grammar::detail
