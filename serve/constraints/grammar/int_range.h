// Integer bounds -> GBNF: an expression matching exactly the canonical
// decimal integers (no leading zeros, "-" for negatives) in a range.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace vtc::grammar::detail {

// At least one bound must be given.
std::string integer_range_gbnf(std::optional<int64_t> min, std::optional<int64_t> max);

}  // namespace vtc::grammar::detail
