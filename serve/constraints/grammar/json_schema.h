// JSON schema -> GBNF, with the rule shapes and whitespace of llama.cpp's
// common/json-schema-to-grammar.cpp (read there for the semantics; this is
// vtc's own implementation):
//   space ::= | " " | "\n"{1,2} [ \t]{0,20}      between tokens of JSON
//   objects: properties in schema order, required ones first, then the
//   optional ones in order (each may be left out); values have no
//   trailing space.
//
// Supported: type (object, array, string, number, integer, boolean, null,
// and arrays of types), properties, required, additionalProperties (bool or
// schema), items, prefixItems, minItems/maxItems, enum, const, anyOf/oneOf,
// allOf (merging object properties, intersecting enums), $ref to local
// pointers (#/$defs/..., #/definitions/..., recursion allowed),
// minLength/maxLength, pattern (regex.h), formats date, time, date-time and
// uuid, and minimum/maximum/exclusiveMinimum/exclusiveMaximum for integers.
// Annotations (description, title, examples, default, ...) are ignored, as
// are number bounds (the reference ignores them too). Keywords that would
// constrain the value in ways the grammar cannot (not, if/then/else,
// patternProperties, uniqueItems, multipleOf, ...), malformed keyword values
// and unresolvable $refs throw GrammarError naming the keyword.
//
// Property order matters to the grammar. nlohmann::ordered_json keeps the
// schema's order (as the reference does); nlohmann::json sorts keys.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace vtc::grammar {

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);
std::string json_schema_to_gbnf(const nlohmann::json& schema);
// Any JSON object (response_format {"type": "json_object"}).
std::string json_object_gbnf();

// Several schemas and hand-written rules in one grammar (tool calls):
// add_schema returns the rule name the schema's value is reachable by.
// The schema named "root" becomes the root rule.
class SchemaGrammarBuilder {
 public:
  SchemaGrammarBuilder();
  std::string add_schema(const std::string& name, const nlohmann::ordered_json& schema);
  std::string add_schema(const std::string& name, const nlohmann::json& schema);
  // A rule with this exact name (replacing any rule of that name).
  void add_rule(const std::string& name, const std::string& body);
  std::string gbnf() const;

 private:
  std::map<std::string, std::string> rules_;
};

}  // namespace vtc::grammar
