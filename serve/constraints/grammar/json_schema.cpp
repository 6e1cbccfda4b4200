// json_schema.h: a visitor from schema nodes to named GBNF rules.
//
// visit(schema, name) returns the name of a rule matching the schema's
// values, adding the rules it needs to the builder's map (sorted by name,
// as the output lists them). The checks run in the reference's order:
// $ref, oneOf/anyOf, type arrays, const, enum, objects, allOf, arrays,
// pattern, formats, string lengths, integer bounds, then plain types.
// add_rule escapes the name to [a-zA-Z0-9-] and, when another rule already
// has that name with a different body, appends the first free number.
// $refs resolve as JSON pointers into the document given to add_schema;
// a ref being resolved is only named (not visited again), so recursive
// schemas give recursive rules.
#include "serve/constraints/grammar/json_schema.h"

#include <cmath>
#include <functional>
#include <optional>
#include <limits>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "serve/constraints/grammar/grammar.h"
#include "serve/constraints/grammar/int_range.h"
#include "serve/constraints/grammar/regex.h"

namespace vtc::grammar {
namespace {

using Json = nlohmann::ordered_json;

const char* const kSpaceRule = R"(| " " | "\n"{1,2} [ \t]{0,20})";

struct Builtin {
  const char* name;
  const char* body;
  std::vector<const char*> deps;
};

const std::vector<Builtin>& builtins() {
  static const std::vector<Builtin> list = {
      {"boolean", R"(("true" | "false"))", {}},
      {"decimal-part", "[0-9]{1,16}", {}},
      {"integral-part", "[0] | [1-9] [0-9]{0,15}", {}},
      {"number", R"(("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?)", {"integral-part", "decimal-part"}},
      {"integer", R"(("-"? integral-part))", {"integral-part"}},
      {"value", "object | array | string | number | boolean | null", {"object", "array", "string", "number", "boolean", "null"}},
      {"object", R"("{" space ( string ":" space value ("," space string ":" space value)* )? space "}")", {"string", "value"}},
      {"array", R"("[" space ( value ("," space value)* )? space "]")", {"value"}},
      {"uuid", R"("\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\"")", {}},
      {"char", R"([^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4}))", {}},
      {"string", R"("\"" char* "\"")", {"char"}},
      {"null", R"("null")", {}},
      {"date", R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] ))", {}},
      {"time", R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))", {}},
      {"date-time", R"(date "T" time)", {"date", "time"}},
      {"date-string", R"("\"" date "\"")", {"date"}},
      {"time-string", R"("\"" time "\"")", {"time"}},
      {"date-time-string", R"("\"" date-time "\"")", {"date-time"}},
  };
  return list;
}

const Builtin* find_builtin(const std::string& name) {
  for (const Builtin& b : builtins())
    if (name == b.name) return &b;
  return nullptr;
}

bool is_reserved(const std::string& name) { return name == "root" || find_builtin(name) != nullptr; }

std::string escape_rule_name(const std::string& name) {
  std::string out;
  bool in_bad = false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    if (ok) {
      out += c;
      in_bad = false;
    } else if (!in_bad) {
      out += '-';
      in_bad = true;
    }
  }
  return out;
}

// A GBNF literal for these bytes (the JSON text of a value).
std::string literal(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '\r': out += "\\r"; break;
      case '\n': out += "\\n"; break;
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      default: out += c;
    }
  }
  return out + "\"";
}

std::string repetition(const std::string& item, int64_t min, std::optional<int64_t> max, const std::string& sep) {
  if (max && *max == 0) return "";
  if (min == 0 && max && *max == 1) return item + "?";
  if (sep.empty()) {
    if (!max) return min == 0 ? item + "*" : min == 1 ? item + "+" : fmt::format("{}{{{},}}", item, min);
    return fmt::format("{}{{{},{}}}", item, min, *max);
  }
  std::string rest = repetition("(" + sep + " " + item + ")", min == 0 ? 0 : min - 1,
                                max ? std::optional<int64_t>(*max - 1) : std::nullopt, "");
  std::string s = item + (rest.empty() ? "" : " " + rest);
  return min == 0 ? "(" + s + ")?" : s;
}

const std::set<std::string>& unsupported_keywords() {
  static const std::set<std::string> k = {"not", "if", "then", "else", "patternProperties", "dependentSchemas",
                                          "dependentRequired", "dependencies", "contains", "unevaluatedProperties",
                                          "unevaluatedItems", "propertyNames", "minProperties", "maxProperties",
                                          "$dynamicRef", "multipleOf", "minContains", "maxContains"};
  return k;
}

class Converter {
 public:
  Converter(std::map<std::string, std::string>& rules, const Json& document) : rules_(rules), doc_(document) {
    rules_["space"] = kSpaceRule;
  }

  std::string add_rule(const std::string& name, const std::string& body) {
    std::string esc = escape_rule_name(name);
    auto it = rules_.find(esc);
    if (it == rules_.end() || it->second == body) {
      rules_[esc] = body;
      return esc;
    }
    for (int i = 0;; ++i) {
      std::string key = esc + std::to_string(i);
      auto jt = rules_.find(key);
      if (jt == rules_.end() || jt->second == body) {
        rules_[key] = body;
        return key;
      }
    }
  }

  std::string visit(const Json& schema, const std::string& name, int depth = 0) {
    if (depth > 128) throw GrammarError("json schema: nested deeper than 128 levels");
    const std::string rule_name = is_reserved(name) ? name + "-" : name.empty() ? "root" : name;
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) throw GrammarError("json schema: the schema 'false' accepts no value");
      return add_rule(rule_name, primitive("value"));
    }
    if (!schema.is_object()) throw GrammarError(fmt::format("json schema: a schema must be an object, got {}", schema.dump()));
    for (const auto& [key, value] : schema.items()) {
      if (unsupported_keywords().count(key)) throw GrammarError(fmt::format("json schema: keyword '{}' is not supported", key));
      if (key == "uniqueItems" && value == true) throw GrammarError("json schema: keyword 'uniqueItems' is not supported");
    }
    const Json type = schema.contains("type") ? schema["type"] : Json();
    if (!type.is_null() && !type.is_string() && !type.is_array())
      throw GrammarError("json schema: 'type' must be a string or an array of strings");
    std::string format;
    if (schema.contains("format")) {
      if (!schema["format"].is_string()) throw GrammarError("json schema: 'format' must be a string");
      format = schema["format"].get<std::string>();
    }
    auto is_type = [&](const char* t) { return type.is_null() || type == t; };

    if (schema.contains("$ref")) return add_rule(rule_name, resolve_ref(schema["$ref"], depth));
    if (schema.contains("oneOf") || schema.contains("anyOf")) {
      const char* key = schema.contains("oneOf") ? "oneOf" : "anyOf";
      const Json& alts = schema[key];
      if (!alts.is_array() || alts.empty()) throw GrammarError(fmt::format("json schema: '{}' must be a non-empty array", key));
      return add_rule(rule_name, union_rule(name, std::vector<Json>(alts.begin(), alts.end()), depth));
    }
    if (type.is_array()) {
      if (type.empty()) throw GrammarError("json schema: 'type' is an empty array");
      std::vector<Json> alts;
      for (const Json& t : type) {
        Json copy = schema;
        copy["type"] = t;
        alts.push_back(copy);
      }
      return add_rule(rule_name, union_rule(name, alts, depth));
    }
    if (schema.contains("const")) return add_rule(rule_name, literal(schema["const"].dump()));
    if (schema.contains("enum")) {
      const Json& values = schema["enum"];
      if (!values.is_array() || values.empty()) throw GrammarError("json schema: 'enum' must be a non-empty array");
      std::string body = "(";
      for (size_t i = 0; i < values.size(); ++i) body += (i ? " | " : "") + literal(values[i].dump());
      return add_rule(rule_name, body + ")");
    }
    if (is_type("object") && (schema.contains("properties") ||
                              (schema.contains("additionalProperties") && schema["additionalProperties"] != true)))
      return add_rule(rule_name, object_rule(schema, name, depth));
    if ((is_type("object") || type == "string") && schema.contains("allOf")) return add_rule(rule_name, all_of(schema, name, depth));
    if (is_type("array") && (schema.contains("items") || schema.contains("prefixItems")))
      return add_rule(rule_name, array_rule(schema, name, depth));
    if (is_type("string") && schema.contains("pattern")) {
      if (!schema["pattern"].is_string()) throw GrammarError("json schema: 'pattern' must be a string");
      try {
        return add_rule(rule_name, "\"\\\"\" " + detail::regex_to_gbnf_expression(schema["pattern"].get<std::string>(), true) + " \"\\\"\"");
      } catch (const GrammarError& e) {
        throw GrammarError(fmt::format("json schema: 'pattern': {}", e.what()));
      }
    }
    if (is_type("string") && (format == "uuid" || (format.size() == 5 && format.rfind("uuid", 0) == 0 && format[4] >= '1' && format[4] <= '5')))
      return add_builtin(rule_name == "root" ? "root" : format, "uuid");
    if (is_type("string") && (format == "date" || format == "time" || format == "date-time"))
      return add_rule(rule_name, add_builtin(format + "-string", format + "-string"));
    if (type == "string" && (schema.contains("minLength") || schema.contains("maxLength"))) {
      int64_t min = count_keyword(schema, "minLength").value_or(0);
      auto max = count_keyword(schema, "maxLength");
      if (max && *max < min) throw GrammarError("json schema: 'maxLength' is below 'minLength'");
      std::string c = add_builtin("char", "char");
      return add_rule(rule_name, "\"\\\"\" " + repetition(c, min, max, "") + " \"\\\"\"");
    }
    if (type == "integer" && (schema.contains("minimum") || schema.contains("exclusiveMinimum") ||
                              schema.contains("maximum") || schema.contains("exclusiveMaximum")))
      return add_rule(rule_name, integer_bounds(schema));
    if (schema.empty() || type == "object") return add_rule(rule_name, add_builtin("object", "object"));
    if (type.is_null()) return add_rule(rule_name, add_builtin("value", "value"));
    const std::string t = type.get<std::string>();
    if (t != "string" && t != "number" && t != "integer" && t != "boolean" && t != "null" && t != "array")
      throw GrammarError(fmt::format("json schema: 'type': unknown type '{}'", t));
    return add_builtin(rule_name == "root" ? "root" : t, t);
  }

 private:
  std::map<std::string, std::string>& rules_;
  const Json& doc_;
  std::set<std::string> resolving_;

  std::string primitive(const std::string& name) { return add_builtin(name, name); }

  // Adds a builtin rule (under `name`) and, under their own names, the
  // builtins it uses.
  std::string add_builtin(const std::string& name, const std::string& builtin) {
    const Builtin* b = find_builtin(builtin);
    std::string n = add_rule(name, b->body);
    for (const char* dep : b->deps)
      if (!rules_.count(dep)) add_builtin(dep, dep);
    if (std::string(b->body).find("space") != std::string::npos) rules_["space"] = kSpaceRule;
    return n;
  }

  std::optional<int64_t> count_keyword(const Json& schema, const char* key) {
    if (!schema.contains(key)) return std::nullopt;
    const Json& v = schema[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 100000)
      throw GrammarError(fmt::format("json schema: '{}' must be an integer in [0, 100000]", key));
    return v.get<int64_t>();
  }

  std::optional<int64_t> bound(const Json& schema, const char* key, bool lower) {
    if (!schema.contains(key)) return std::nullopt;
    const Json& v = schema[key];
    if (!v.is_number()) throw GrammarError(fmt::format("json schema: '{}' must be a number", key));
    double d = v.get<double>();
    if (!(std::abs(d) < 9.0e18)) throw GrammarError(fmt::format("json schema: '{}' is out of range", key));
    if (v.is_number_integer()) return v.get<int64_t>();
    return static_cast<int64_t>(lower ? std::ceil(d) : std::floor(d));
  }

  std::string integer_bounds(const Json& schema) {
    std::optional<int64_t> min = bound(schema, "minimum", true), max = bound(schema, "maximum", false);
    if (!min)
      if (auto x = bound(schema, "exclusiveMinimum", false)) min = *x + 1;
    if (!max)
      if (auto x = bound(schema, "exclusiveMaximum", true)) max = *x - 1;
    if (min && max && *max < *min) throw GrammarError("json schema: 'maximum' is below 'minimum'");
    return "(" + detail::integer_range_gbnf(min, max) + ")";
  }

  std::string union_rule(const std::string& name, const std::vector<Json>& alts, int depth) {
    std::string body;
    for (size_t i = 0; i < alts.size(); ++i)
      body += (i ? " | " : "") + visit(alts[i], name + (name.empty() ? "alternative-" : "-") + std::to_string(i), depth + 1);
    return body;
  }

  const Json& resolve_pointer(const std::string& ref) {
    if (ref.rfind("#", 0) != 0 || (ref.size() > 1 && ref[1] != '/'))
      throw GrammarError(fmt::format("json schema: '$ref' '{}': only local references (#/$defs/..., #/definitions/...) are supported", ref));
    const Json* node = &doc_;
    size_t pos = 2;
    while (pos <= ref.size() && ref.size() > 1) {
      size_t end = ref.find('/', pos);
      if (end == std::string::npos) end = ref.size();
      std::string token = ref.substr(pos, end - pos);
      for (size_t k; (k = token.find("~1")) != std::string::npos;) token.replace(k, 2, "/");
      for (size_t k; (k = token.find("~0")) != std::string::npos;) token.replace(k, 2, "~");
      if (node->is_object() && node->contains(token)) {
        node = &(*node)[token];
      } else if (node->is_array() && !token.empty() && token.find_first_not_of("0123456789") == std::string::npos &&
                 token.size() < 9 && std::stoul(token) < node->size()) {
        node = &(*node)[std::stoul(token)];
      } else {
        throw GrammarError(fmt::format("json schema: '$ref' '{}' does not resolve ('{}' not found)", ref, token));
      }
      pos = end + 1;
    }
    return *node;
  }

  std::string resolve_ref(const Json& ref_json, int depth) {
    if (!ref_json.is_string()) throw GrammarError("json schema: '$ref' must be a string");
    const std::string ref = ref_json.get<std::string>();
    const Json& target = resolve_pointer(ref);
    std::string ref_name = "ref" + escape_rule_name(ref.substr(1));
    if (!rules_.count(ref_name) && !resolving_.count(ref)) {
      resolving_.insert(ref);
      ref_name = visit(target, ref_name, depth + 1);
      resolving_.erase(ref);
    }
    return ref_name;
  }

  // A rule for a JSON string that is none of `strings` (keys of
  // additionalProperties besides the named ones): a trie over the names,
  // where every branch either continues a name or leaves it.
  std::string not_strings(const std::vector<std::string>& strings) {
    struct Node {
      std::map<char, Node> children;
      bool end = false;
    };
    Node trie;
    for (const std::string& s : strings) {
      Node* n = &trie;
      for (char c : s) n = &n->children[c];
      n->end = true;
    }
    const std::string c = add_builtin("char", "char");
    auto class_char = [](char ch) {
      if (ch == '"' || ch == '\\' || ch == ']' || ch == '-' || ch == '^' || static_cast<unsigned char>(ch) < 0x20)
        return fmt::format("\\x{:02X}", static_cast<unsigned char>(ch));
      return std::string(1, ch);
    };
    std::function<std::string(const Node&)> walk = [&](const Node& node) {
      std::string out, rejects;
      for (const auto& [ch, child] : node.children) {
        rejects += class_char(ch);
        out += (out.empty() ? "" : " | ") + ("[" + class_char(ch) + "]");
        if (!child.children.empty())
          out += " (" + walk(child) + ")";
        else if (child.end)
          out += " " + c + "+";
      }
      if (!node.children.empty()) out += " | [^\"" + rejects + "] " + c + "*";
      return out;
    };
    return "[\"] ( " + walk(trie) + " )" + (trie.end ? "" : "?") + " [\"]";
  }

  std::string object_rule(const Json& schema, const std::string& name, int depth) {
    std::set<std::string> required;
    if (schema.contains("required")) {
      if (!schema["required"].is_array()) throw GrammarError("json schema: 'required' must be an array");
      for (const Json& r : schema["required"]) {
        if (!r.is_string()) throw GrammarError("json schema: 'required' must list strings");
        required.insert(r.get<std::string>());
      }
    }
    std::vector<std::pair<std::string, Json>> props;
    if (schema.contains("properties")) {
      if (!schema["properties"].is_object()) throw GrammarError("json schema: 'properties' must be an object");
      for (const auto& [k, v] : schema["properties"].items()) props.emplace_back(k, v);
    }
    return build_object(props, required, name, schema.contains("additionalProperties") ? schema["additionalProperties"] : Json(), depth);
  }

  std::string build_object(const std::vector<std::pair<std::string, Json>>& props, const std::set<std::string>& required,
                           const std::string& name, const Json& additional, int depth) {
    const std::string prefix = name.empty() ? "" : name + "-";
    std::map<std::string, std::string> kv_rule;
    std::vector<std::string> req, opt, names;
    for (const auto& [prop, sub] : props) {
      std::string value = visit(sub, prefix + prop, depth + 1);
      kv_rule[prop] = add_rule(prefix + prop + "-kv", literal(Json(prop).dump()) + " space \":\" space " + value);
      (required.count(prop) ? req : opt).push_back(prop);
      names.push_back(prop);
    }
    if (!additional.is_null() && !additional.is_boolean() && !additional.is_object())
      throw GrammarError("json schema: 'additionalProperties' must be a boolean or a schema");
    if (additional == true || additional.is_object()) {
      std::string sub = prefix + "additional";
      std::string value = additional.is_object() ? visit(additional, sub + "-value", depth + 1) : primitive("value");
      std::string key = names.empty() ? primitive("string") : add_rule(sub + "-k", not_strings(names));
      kv_rule["*"] = add_rule(sub + "-kv", key + " \":\" space " + value);
      opt.push_back("*");
    }
    if (req.empty() && opt.empty()) return "\"{\" space \"}\"";
    std::string rule = "\"{\" space ";
    for (size_t i = 0; i < req.size(); ++i) rule += (i ? " \",\" space " : "") + kv_rule[req[i]];
    if (!opt.empty()) {
      rule += " (";
      if (!req.empty()) rule += " \",\" space ( ";
      // Optional properties keep their order: the alternatives are "start
      // at the i-th optional one", each followed by the rest, each of
      // which may be skipped.
      std::function<std::string(size_t, bool)> rest_from = [&](size_t i, bool first_optional) {
        const std::string& k = opt[i];
        const std::string comma = "( \",\" space " + kv_rule[k] + " )";
        std::string s = first_optional ? comma + (k == "*" ? "*" : "?") : kv_rule[k] + (k == "*" ? " " + comma + "*" : "");
        if (i + 1 < opt.size()) s += " " + add_rule(prefix + k + "-rest", rest_from(i + 1, true));
        return s;
      };
      for (size_t i = 0; i < opt.size(); ++i) rule += (i ? " | " : "") + rest_from(i, false);
      if (!req.empty()) rule += " )";
      rule += " )?";
    }
    return rule + " space \"}\"";
  }

  std::string all_of(const Json& schema, const std::string& name, int depth) {
    const Json& parts = schema["allOf"];
    if (!parts.is_array()) throw GrammarError("json schema: 'allOf' must be an array");
    std::set<std::string> required;
    std::vector<std::pair<std::string, Json>> props;
    std::map<std::string, size_t> enum_count;
    std::function<void(const Json&, bool, int)> add = [&](const Json& part, bool is_required, int level) {
      if (level > 32) throw GrammarError("json schema: 'allOf' references nest too deep");
      if (!part.is_object()) throw GrammarError("json schema: 'allOf' items must be schemas");
      if (part.contains("$ref")) {
        if (!part["$ref"].is_string()) throw GrammarError("json schema: '$ref' must be a string");
        add(resolve_pointer(part["$ref"].get<std::string>()), is_required, level + 1);
      } else if (part.contains("properties")) {
        if (!part["properties"].is_object()) throw GrammarError("json schema: 'properties' must be an object");
        for (const auto& [k, v] : part["properties"].items()) {
          props.emplace_back(k, v);
          if (is_required) required.insert(k);
        }
      } else if (part.contains("enum")) {
        if (!part["enum"].is_array()) throw GrammarError("json schema: 'enum' must be an array");
        for (const Json& v : part["enum"]) ++enum_count[literal(v.dump())];
      } else {
        throw GrammarError("json schema: 'allOf' supports only parts with properties, enum or $ref");
      }
    };
    for (const Json& part : parts) {
      if (part.is_object() && part.contains("anyOf") && part["anyOf"].is_array())
        for (const Json& alt : part["anyOf"]) add(alt, false, 0);
      else
        add(part, true, 0);
    }
    if (!enum_count.empty()) {
      std::string body;
      for (const auto& [lit, n] : enum_count)
        if (n == parts.size()) body += (body.empty() ? "" : " | ") + lit;
      if (!body.empty()) return "(" + body + ")";
    }
    return build_object(props, required, name, Json(), depth);
  }

  std::string array_rule(const Json& schema, const std::string& name, int depth) {
    const std::string prefix = name.empty() ? "" : name + "-";
    const Json& items = schema.contains("items") ? schema["items"] : schema["prefixItems"];
    if (items.is_array()) {
      std::string rule = "\"[\" space ";
      for (size_t i = 0; i < items.size(); ++i)
        rule += (i ? " \",\" space " : "") + visit(items[i], prefix + "tuple-" + std::to_string(i), depth + 1);
      return rule + " space \"]\"";
    }
    std::string item = visit(items, prefix + "item", depth + 1);
    int64_t min = count_keyword(schema, "minItems").value_or(0);
    auto max = count_keyword(schema, "maxItems");
    if (max && *max < min) throw GrammarError("json schema: 'maxItems' is below 'minItems'");
    return "\"[\" space " + repetition(item, min, max, "\",\" space") + " space \"]\"";
  }
};

std::string format_rules(const std::map<std::string, std::string>& rules) {
  std::string out;
  for (const auto& [name, body] : rules) out += name + " ::= " + body + "\n";
  return out;
}

}  // namespace

SchemaGrammarBuilder::SchemaGrammarBuilder() { rules_["space"] = kSpaceRule; }

std::string SchemaGrammarBuilder::add_schema(const std::string& name, const nlohmann::ordered_json& schema) {
  Converter c(rules_, schema);
  return c.visit(schema, name == "root" ? "" : name);
}

std::string SchemaGrammarBuilder::add_schema(const std::string& name, const nlohmann::json& schema) {
  return add_schema(name, nlohmann::ordered_json::parse(schema.dump()));
}

void SchemaGrammarBuilder::add_rule(const std::string& name, const std::string& body) { rules_[name] = body; }

std::string SchemaGrammarBuilder::gbnf() const { return format_rules(rules_); }

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema) {
  SchemaGrammarBuilder b;
  b.add_schema("root", schema);
  return b.gbnf();
}

std::string json_schema_to_gbnf(const nlohmann::json& schema) {
  return json_schema_to_gbnf(nlohmann::ordered_json::parse(schema.dump()));
}

std::string json_object_gbnf() { return json_schema_to_gbnf(nlohmann::ordered_json{{"type", "object"}}); }

}  // namespace vtc::grammar
