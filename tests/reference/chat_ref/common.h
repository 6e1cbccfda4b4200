// What the vtc-chat-ref subcommands share.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace chat_ref {

// The whole file at `path` into `out`; false when it cannot be read.
inline bool read_file(const char* path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

}  // namespace chat_ref
