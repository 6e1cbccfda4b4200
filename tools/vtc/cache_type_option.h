// `--cache-type-k` / `-ctk` and `--cache-type-v` / `-ctv` (llama.cpp's
// names): the KV cache's element types. CLI11 takes one-letter short names
// only, so main() spells -ctk and -ctv out before parsing
// (expand_llama_short_options). CLI11 keeps the names; the check
// runs parse_kv_cache_type (support/kv_cache_type.h), so a bad name fails at
// parse time naming the accepted types. The command converts the names when
// it runs. An artifact keeps the types it was compiled with: a command given
// an artifact and other types refuses (artifact_cache_types_check).
#pragma once

#include <CLI/CLI.hpp>

#include <fmt/format.h>

#include <string>

#include "ir/module.h"
#include "support/error.h"
#include "support/kv_cache_type.h"

namespace vtc::cli {

struct CacheTypeFlags {
  std::string k = "f16", v = "f16";
  GgmlType k_type() const { return parse_kv_cache_type(k, "--cache-type-k"); }
  GgmlType v_type() const { return parse_kv_cache_type(v, "--cache-type-v"); }
};

inline CLI::Validator cache_type_check(const char* flag) {
  return CLI::Validator(
      [flag](std::string& name) {
        try {
          parse_kv_cache_type(name, flag);
          return std::string();
        } catch (const Error& e) {
          return std::string(e.what());
        }
      },
      "TYPE", "cache type");
}

inline void add_cache_type_options(CLI::App* cmd, CacheTypeFlags& f) {
  const std::string types = kv_cache_type_list();
  cmd->add_option("--cache-type-k", f.k, "KV cache type for K, or -ctk (" + types + ")")
      ->check(cache_type_check("--cache-type-k"))
      ->capture_default_str();
  cmd->add_option("--cache-type-v", f.v, "KV cache type for V, or -ctv (" + types + ")")
      ->check(cache_type_check("--cache-type-v"))
      ->capture_default_str();
}

// llama.cpp's multi-letter short options, spelled out for CLI11.
inline void expand_llama_short_options(int argc, char** argv) {
  static char ctk[] = "--cache-type-k", ctv[] = "--cache-type-v";
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "-ctk") argv[i] = ctk;
    else if (std::string(argv[i]) == "-ctv") argv[i] = ctv;
    else if (std::string(argv[i]) == "--") break;
  }
}

}  // namespace vtc::cli
