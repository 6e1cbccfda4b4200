// See peg_mapper.h for the tag protocol.
#include "serve/chat/peg_mapper.h"

#include <cctype>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace vtc::chat {
namespace {

std::string_view trim_trailing_space(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// One leading whitespace character off, all trailing ones.
std::string_view trim_arg_name(std::string_view s) {
  if (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  return trim_trailing_space(s);
}

std::string json_quote(std::string_view s) {
  return nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string json_escape_inner(std::string_view s) {
  std::string q = json_quote(s);
  return q.substr(1, q.size() - 2);
}

// Unclosed '{' outside strings.
int open_braces(const std::string& s) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (escaped) {
      escaped = false;
    } else if (c == '\\' && in_string) {
      escaped = true;
    } else if (c == '"') {
      in_string = !in_string;
    } else if (!in_string) {
      if (c == '{') ++depth;
      if (c == '}') --depth;
    }
  }
  return depth;
}

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Python-flavoured argument values (single-quoted strings, True/False/None)
// to JSON; a prefix of a literal maps to the same prefix of its JSON form, so
// streamed partial values only grow.
std::string python_to_json(const std::string& in) {
  std::string out;
  bool in_single = false, in_double = false;
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '\\' && i + 1 < in.size()) {
      const char next = in[i + 1];
      if (in_single) {
        if (next == '\'') out += '\'';
        else if (next == '"') out += "\\\"";
        else out += std::string{c, next};
        ++i;
      } else if (in_double) {
        out += std::string{c, next};
        ++i;
      } else {
        out += c;
      }
      continue;
    }
    if (c == '"') {
      if (in_single) {
        out += "\\\"";
      } else {
        in_double = !in_double;
        out += c;
      }
    } else if (c == '\'') {
      if (in_double) {
        out += c;
      } else {
        in_single = !in_single;
        out += '"';
      }
    } else if (!in_single && !in_double && (c == 'T' || c == 'F' || c == 'N') && (i == 0 || !is_word_char(in[i - 1]))) {
      size_t n = 0;
      while (i + n < in.size() && is_word_char(in[i + n])) ++n;
      const std::string_view token(in.data() + i, n);
      static constexpr std::pair<std::string_view, std::string_view> literals[] = {
          {"True", "true"}, {"False", "false"}, {"None", "null"}};
      bool matched = false;
      for (const auto& [py, js] : literals) {
        if (py.substr(0, n) == token) {
          out += js.substr(0, n);
          i += n - 1;
          matched = true;
          break;
        }
      }
      if (!matched) out += c;
    } else {
      out += c;
    }
  }
  return out;
}

class Mapper {
 public:
  explicit Mapper(const peg::Context& ctx) : ctx_(ctx) {}

  MappedMessage run(const peg::Result& result) {
    for (size_t id : result.nodes) visit(id);
    if (pending_ && !pending_->name.empty()) {
      if (!args_buffer_.empty()) pending_->arguments = args_buffer_;
      if (quote_pending_ && !pending_->arguments.empty()) pending_->arguments += "\"";
      push(*pending_, false);
      pending_.reset();
    }
    auto& reasoning = out_.message.reasoning_content;
    if (reasoning.find_first_not_of(" \n\r\t") == std::string::npos) reasoning.clear();
    return std::move(out_);
  }

 private:
  void visit(size_t id) {
    const peg::AstNode& node = ctx_.node(id);
    map(node);
    for (size_t child : node.children) visit(child);
  }

  void push(const ToolCall& call, bool closed) {
    out_.message.tool_calls.push_back(call);
    out_.call_closed.push_back(closed);
  }

  ToolCall* current() {
    if (pending_) return &*pending_;
    return current_listed_ ? &out_.message.tool_calls.back() : nullptr;
  }

  std::string& args_target() { return current()->name.empty() ? args_buffer_ : current()->arguments; }

  void map(const peg::AstNode& node) {
    const std::string& t = node.tag;
    if (t.empty()) return;
    if (t == "reasoning") out_.message.reasoning_content += node.text;
    else if (t == "content") out_.message.content += node.text;
    else if (t == "tool-open") open_call();
    else if (!current()) return;
    else if (t == "tool-id") set_id(node.text);
    else if (t == "tool-name") set_name(node.text);
    else if (t == "tool-args") set_args(node.text);
    else if (t == "tool-arg-open") quote_pending_ = false;
    else if (t == "tool-arg-name") add_arg_name(node.text);
    else if (t == "tool-arg-value" || t == "tool-arg-string-value") add_arg_value(node.text, t == "tool-arg-string-value");
    else if (t == "tool-arg-close") close_quote(args_target());
    else if (t == "tool-close") close_call(node.partial);
  }

  void open_call() {
    pending_ = ToolCall{};
    current_listed_ = false;
    arg_count_ = 0;
    args_buffer_.clear();
    quote_pending_ = false;
  }

  void set_id(std::string_view text) {
    text = trim_trailing_space(text);
    if (text.size() >= 2 && text.front() == '"' && text.back() == '"') text = text.substr(1, text.size() - 2);
    current()->id = std::string(text);
  }

  void set_name(std::string_view text) {
    ToolCall* call = current();
    call->name = std::string(trim_trailing_space(text));
    if (!args_buffer_.empty()) {
      call->arguments = args_buffer_;
      args_buffer_.clear();
    } else if (call->arguments.empty()) {
      call->arguments = "{";
    }
    if (pending_) {
      push(*pending_, false);
      pending_.reset();
      current_listed_ = true;
    }
  }

  void set_args(std::string_view text) {
    text = trim_trailing_space(text);
    if (!text.empty() && text.front() == '{') args_target() = std::string(text);
  }

  void add_arg_name(std::string_view text) {
    std::string entry = arg_count_ > 0 ? "," : "";
    entry += json_quote(trim_arg_name(text)) + ":";
    ++arg_count_;
    std::string& target = args_target();
    if (target.empty()) target = "{";
    target += entry;
  }

  void add_arg_value(std::string_view text, bool is_string) {
    std::string add;
    if (is_string) {
      if (!quote_pending_) {
        add = "\"";
        quote_pending_ = true;
      }
      if (!text.empty()) add += json_escape_inner(text);
    } else if (!text.empty()) {
      add = python_to_json(std::string(text));
    }
    args_target() += add;
  }

  void close_quote(std::string& target) {
    if (quote_pending_) {
      target += "\"";
      quote_pending_ = false;
    }
  }

  void close_call(bool partial) {
    ToolCall* call = current();
    if (call->name.empty() && !args_buffer_.empty()) {
      call->arguments = args_buffer_;
      args_buffer_.clear();
    }
    close_quote(call->arguments);
    for (int d = open_braces(call->arguments); d > 0; --d) call->arguments += "}";
    if (pending_) {
      if (!pending_->name.empty()) push(*pending_, !partial);
      pending_.reset();
    } else if (current_listed_ && !partial) {
      out_.call_closed.back() = true;
    }
  }

  const peg::Context& ctx_;
  MappedMessage out_;
  std::optional<ToolCall> pending_;
  bool current_listed_ = false;
  int arg_count_ = 0;
  bool quote_pending_ = false;
  std::string args_buffer_;
};

}  // namespace

MappedMessage map_ast(const peg::Context& ctx, const peg::Result& result) { return Mapper(ctx).run(result); }

}  // namespace vtc::chat
