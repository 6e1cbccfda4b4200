// The syntax tree of a parsed template: one node type, its kind saying how
// to read the fields. Expressions and statements share it.
//
//   Literal   value                      Name      name
//   List      kids = items               Tuple     kids = items
//   Dict      kids = k0, v0, k1, v1...   Attr      kids[0].name
//   Item      kids[0][kids[1]]           Slice     kids[0][kids[1]:kids[2]:kids[3]] (null = absent)
//   Call      kids[0](kids[1..]); arg_names[i] names kids[i+1] ("" = positional)
//   Filter    kids[0] | name(kids[1..]) with arg_names
//   Test      kids[0] is [not] name(kids[1..]); negated
//   Unary     name = "-", "+", "not"; kids[0]
//   Binary    name = operator; kids[0], kids[1]
//   Cond      kids[1] if kids[0] else kids[2] (null else = undefined)
//
//   Body      kids = statements          Text      value (a string)
//   Output    {{ kids[0] }}
//   If        kids = cond, body, cond, body, ..., [null, else-body]
//   For       names = targets; kids = iter, cond|null, body, else|null
//   Set       names = targets, or {object, attribute} when is_attr;
//             kids = value|null, body|null (block set), filter|null
//   Macro     name; names = params; kids[0] = body, kids[1..] = defaults|null
//   FilterBlock kids = filter chain over the Name " input", body
//   CallBlock {% call(names) kids[0] %}kids[1]{% endcall %}: kids[0] is a
//             Call whose macro sees the body as caller(names...)
//   Break, Continue
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "serve/jinja/value.h"

namespace vtc::jinja {

struct Node {
  enum class Kind {
    Literal,
    Name,
    List,
    Tuple,
    Dict,
    Attr,
    Item,
    Slice,
    Call,
    Filter,
    Test,
    Unary,
    Binary,
    Cond,
    Body,
    Text,
    Output,
    If,
    For,
    Set,
    Macro,
    FilterBlock,
    CallBlock,
    Break,
    Continue,
  };
  Kind kind;
  int line = 0;
  std::string name;
  Value value;
  std::vector<std::shared_ptr<Node>> kids;
  std::vector<std::string> names;
  std::vector<std::string> arg_names;
  bool negated = false;
  bool is_attr = false;

  Node(Kind k, int l) : kind(k), line(l) {}
};

using NodePtr = std::shared_ptr<Node>;

// The variable a {% filter %} block's chain reads its body's output from.
inline constexpr std::string_view kFilterInput = " input";

// Lexes and parses a template (trim_blocks and lstrip_blocks on, one trailing
// newline dropped, newlines normalized) into a Body. Throws TemplateError.
NodePtr parse_template(std::string_view text);

}  // namespace vtc::jinja
