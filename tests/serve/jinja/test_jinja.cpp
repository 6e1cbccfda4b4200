// Unit tests of the Jinja engine's language features. Each case is a
// template, a context and the output Jinja2 gives under HF's settings
// (trim_blocks, lstrip_blocks), written from the Jinja2 and Python
// documentation rather than produced by this engine; cases marked
// "(llama.cpp)" are where the engine follows llama.cpp's engine instead
// (template.h lists them), written from its source (common/jinja).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <chrono>
#include <functional>
#include <thread>

#include "serve/jinja/template.h"

using nlohmann::json;
using vtc::jinja::RenderOptions;
using vtc::jinja::RenderStats;
using vtc::jinja::Template;
using vtc::jinja::TemplateError;

namespace {

std::string render(const std::string& text, const json& ctx = json::object(), RenderOptions opts = {}) {
  return Template::parse(text).render(ctx, opts);
}

struct Case {
  const char* name;
  const char* text;
  const char* context;  // JSON; object key order is kept
  const char* expected;
};

void run_cases(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    INFO("case: " << c.name << "\ntemplate: " << c.text);
    std::string out;
    try {
      out = Template::parse(c.text).render(nlohmann::ordered_json::parse(c.context));
    } catch (const TemplateError& e) {
      FAIL("TemplateError: " << e.what());
    }
    CHECK(out == c.expected);
  }
}

}  // namespace

TEST_CASE("text, output and comments", "[jinja]") {
  run_cases({
      {"plain text", "hello", "{}", "hello"},
      {"one trailing newline dropped", "a\n", "{}", "a"},
      {"only one trailing newline dropped", "a\n\n", "{}", "a\n"},
      {"crlf normalized", "a\r\nb", "{}", "a\nb"},
      {"variable", "{{ x }}", R"({"x": "hi"})", "hi"},
      {"undefined prints empty", "[{{ nope }}]", "{}", "[]"},
      {"none prints nothing (llama.cpp)", "[{{ x }}]", R"({"x": null})", "[]"},
      {"a list prints its items, a dict nothing (llama.cpp)", "{{ [1, ['a', none, true], {'k': 2}] }}|{{ {'k': 1} }}|",
       "{}", "1aTrue||"},
      {"str() is still Python's", "{{ [1, 'a', none] | string }} {{ none | string }} {{ 1 ~ none }}", "{}",
       "[1, 'a', None] None 1None"},
      {"booleans print Python-style", "{{ true }} {{ false }}", "{}", "True False"},
      {"floats print as %f less trailing zeros (llama.cpp)", "{{ 1.0 }} {{ 0.5 }} {{ 2.50 }} {{ small }} {{ 1 / 3 }}",
       R"({"small": 1e-5, "big": 1e20, "tiny": 2.5e-7})", "1.0 0.5 2.5 0.00001 0.333333"},
      {"floats in str() too", "{{ [1.0, small, 1 / 3] | string }} {{ 'x' ~ tiny }}",
       R"({"small": 1e-5, "big": 1e20, "tiny": 2.5e-7})", "[1.0, 0.00001, 0.333333] x0.0"},
      {"|string of a float is its tojson (llama.cpp)", "{{ 2.0 | string }} {{ big | string }} {{ 0.5 | safe }}",
       R"({"small": 1e-5, "big": 1e20, "tiny": 2.5e-7})", "2 1e+20 0.5"},
      {"list repr", "{{ [1, 'a', none, true] | string }}", "{}", "[1, 'a', None, True]"},
      {"dict repr", R"({{ {'a': 1, "b": [2]} | string }})", "{}", "{'a': 1, 'b': [2]}"},
      {"string repr with quote", R"({{ ["it's"] | string }})", "{}", R"(["it's"])"},
      {"comment", "a{# hidden #}b", "{}", "ab"},
      {"string escapes", R"({{ 'a\nb\t"c"' }})", "{}", "a\nb\t\"c\""},
      {"adjacent strings concatenate", "{{ 'a' 'b' }}", "{}", "ab"},
  });
}

TEST_CASE("whitespace control", "[jinja]") {
  run_cases({
      {"dash strips both sides", "a  {{- 'x' -}}  b", "{}", "axb"},
      {"dash strips newlines too", "a\n\n{%- if true -%}\n\nb{% endif %}", "{}", "ab"},
      {"trim_blocks eats one newline after a block", "{% if true %}\nyes\n{% endif %}\nend", "{}", "yes\nend"},
      {"trim_blocks not after variables", "{{ 'v' }}\nx", "{}", "v\nx"},
      {"lstrip_blocks strips indentation before a block", "a\n    {% if true %}\n    b\n    {% endif %}\nc", "{}",
       "a\n    b\nc"},
      {"lstrip_blocks keeps text before the tag on the line", "x  {% if true %}y{% endif %}", "{}", "x  y"},
      {"lstrip_blocks not before variables", "  {{ 'v' }}", "{}", "  v"},
      {"plus disables lstrip", "  {%+ if true %}y{% endif %}", "{}", "  y"},
      {"comment trimmed like a block", "a\n  {# c #}\nb", "{}", "a\nb"},
      {"raw block", "{% raw %}{{ x }}{% endraw %}", "{}", "{{ x }}"},
  });
}

TEST_CASE("if and expressions", "[jinja]") {
  run_cases({
      {"if elif else",
       "{% for x in [1,2,3] %}{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %},{% endfor %}", "{}",
       "one,two,many,"},
      {"arithmetic", "{{ 7 + 3 }} {{ 7 - 3 }} {{ 7 * 3 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ 7 % 3 }} {{ 2 ** 10 }}", "{}",
       "10 4 21 3.5 3 1 1024"},
      {"floor division and modulo follow Python", "{{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }}", "{}", "-4 2 -2"},
      {"true division of ints is float", "{{ 4 / 2 }}", "{}", "2.0"},
      {"precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ -2 ** 2 }}", "{}", "7 9 4"},
      {"bool is an int", "{{ true + 1 }}", "{}", "2"},
      {"concat", "{{ 'a' ~ 1 ~ true }}", "{}", "a1True"},
      {"None beside a string concatenates as empty (llama.cpp)", "{{ 'a' ~ none ~ 'b' }} {{ none ~ 'c' }}", "{}",
       "ab c"},
      {"string plus", "{{ 'a' + 'b' }}", "{}", "ab"},
      {"string plus anything concatenates (llama.cpp), None and undefined as empty",
       "{{ 'a' + 1 }} {{ 'a' + {'k': 'v'} }} {{ [1] + 'b' }} {{ 'a' + none }}{{ nope + 'c' }}", "{}",
       "a1 a{'k': 'v'} [1]b ac"},
      {"string repeat", "{{ 'ab' * 3 }}", "{}", "ababab"},
      {"comparisons", "{{ 1 < 2 }} {{ 2 <= 1 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ 1 != 2 }}", "{}",
       "True False True True True"},
      {"and/or return operands", "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ '' and 'b' }}|", "{}", "x b |"},
      {"not", "{{ not true }} {{ not 0 }}", "{}", "False True"},
      {"in", "{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }}", "{}",
       "True True True True"},
      {"conditional expression", "{{ 'y' if x else 'n' }}{{ 'y' if not x }}", R"({"x": false})", "ny"},
      {"filter binds tighter than +", "{{ 1 + [1, 2] | length }}", "{}", "3"},
      {"test then and", "{{ x is defined and x > 1 }}", R"({"x": 2})", "True"},
      {"attribute and subscript", "{{ m.role }} {{ m['content'] }} {{ l[0] }} {{ l[-1] }}",
       R"({"m": {"role": "user", "content": "hi"}, "l": [1, 2, 3]})", "user hi 1 3"},
      {"missing key is undefined", "{{ m.nope is defined }} {{ l[9] is defined }}", R"({"m": {}, "l": []})",
       "False False"},
      {"map and selectattr of none are empty", "{{ n | selectattr('a') | list | string }}{{ n | map(attribute='a') | list | string }}",
       R"({"n": null})", "[][]"},
      {"slices", "{{ s[1:3] }} {{ s[::-1] }} {{ l[1:] | string }} {{ l[:-1] | string }} {{ s[-2:] }}",
       R"({"s": "hello", "l": [1, 2, 3]})", "el olleh [2, 3] [1, 2] lo"},
      {"unicode slicing by code point", "{{ s[1:] }} {{ s | length }}", R"({"s": "héllo"})", "éllo 5"},
      {"tuple and list literals", "{{ (1, 2) | length }} {{ [] | length }}", "{}", "2 0"},
      {"dict literal", "{% set d = {'a': 1, 'b': 2} %}{{ d.b }}", "{}", "2"},
      {"printf formatting", "{{ '%s-%d' % ('a', 3) }} {{ '%05.2f' % 3.14159 }}", "{}", "a-3 03.14"},
  });
}

// llama.cpp's engine (common/jinja/runtime.cpp, member_expression) makes an
// attribute or item of undefined undefined, where Jinja2 raises; Command-R+'s
// tool_use template reads json_spec.type of an absent additionalProperties.
// What it still refuses stays an error ("errors are TemplateErrors").
TEST_CASE("an attribute or item of undefined is undefined (llama.cpp)", "[jinja]") {
  run_cases({
      {"attribute chain", "[{{ nope.a }}{{ x.y.z }}{{ nope.a.b.c }}]", R"({"x": {}})", "[]"},
      {"in an if", "{% if p.json_spec %}a{% else %}b{% endif %}", "{}", "b"},
      {"item", "[{{ nope['k'] }}{{ nope[0] }}{{ x.y['k'][1] }}]", R"({"x": {}})", "[]"},
      {"tests see undefined", "{{ nope.a is defined }} {{ nope['a'] is undefined }} {{ nope.a is none }}", "{}",
       "False True False"},
      {"filters see undefined", "{{ nope.a | default('d') }}|{{ nope.a | length }}|[{{ nope.a | string }}]", "{}",
       "d|0|[]"},
      {"comparisons", "{{ nope.type == 'array' }} {{ nope.type != 'array' }} {{ 'a' in nope.l }}", "{}",
       "False True False"},
      {"a dict subscripted by it", "{{ {'string': 'str'}[nope.type] is defined }}", "{}", "False"},
      {"concatenated with a string", "{{ nope.a ~ 'x' }}{{ 'y' + nope.a }}", "{}", "xy"},
      {"the macro pattern of Command-R+",
       "{% macro t(spec) %}{% if {'string': 'str'}[spec.type] is defined %}S{% elif spec.type == 'object' %}"
       "D[{{ t(spec.additionalProperties) }}]{% else %}Any{% endif %}{% endmacro %}{{ t(x) }}",
       R"({"x": {"type": "object"}})", "D[Any]"},
      {"the builtins bound on undefined", "{{ nope.items() | length }}|{{ nope.a.join(',') }}|{{ nope.default(5) }}",
       "{}", "0||5"},
      {"the builtins bound on None", "{{ x.items() | length }}|{{ x.string() }}|{{ x.a is defined }}",
       R"({"x": null})", "0|None|False"},
  });
  // Still errors there: calling what is not a function, arithmetic on
  // undefined, an attribute of a function, None[0] (Devstral's template
  // reads message['content'][0]['text'] of a null content: both raise).
  for (const char* bad : {"{{ nope.f() }}", "{{ nope.a() }}", "{{ nope.a + 1 }}", "{{ nope.a < 1 }}",
                          "{{ x.items.type }}", "{{ nope.a[1:2] }}", "{{ n[0] }}", "{{ n[0]['text'] }}", "{{ [1][1.5] }}"}) {
    INFO("template: " << bad);
    CHECK_THROWS_AS(render(bad, json{{"x", json::object()}, {"n", nullptr}}), TemplateError);
  }
}

TEST_CASE("for loops", "[jinja]") {
  run_cases({
      {"loop variables",
       "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
       "{{ loop.first }}{{ loop.last }}{{ loop.length }} {% endfor %}",
       "{}", "1032TrueFalse3 2121FalseFalse3 3210FalseTrue3 "},
      {"previtem nextitem", "{% for x in [1,2,3] %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }};{% endfor %}", "{}",
       "<1>2;1<2>3;2<3>;"},
      {"filter clause counts kept items",
       "{% for x in [1,2,3,4] if x is even %}{{ x }}/{{ loop.length }}{{ ',' if not loop.last }}{% endfor %}", "{}",
       "2/2,4/2"},
      {"else runs on empty", "{% for x in [] %}x{% else %}empty{% endfor %}", "{}", "empty"},
      {"unpacking items", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", R"({"d": {"b": 1, "a": 2}})",
       "b=1;a=2;"},
      {"dict iterates keys", "{% for k in d %}{{ k }}{% endfor %}", R"({"d": {"x": 1, "y": 2}})", "xy"},
      {"undefined iterates as empty", "{% for x in nope %}x{% endfor %}.", "{}", "."},
      {"break and continue",
       "{% for x in range(10) %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% "
       "endfor %}",
       "{}", "023"},
      {"loop scope does not leak", "{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}", "{}", "1"},
      {"namespace carries state out",
       "{% set ns = namespace(n=0) %}{% for i in [1,2,3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", "{}", "6"},
      {"nested loops", "{% for a in [1,2] %}{% for b in 'xy' %}{{ a }}{{ b }}{% endfor %}{% endfor %}", "{}",
       "1x1y2x2y"},
      {"range forms", "{{ range(3) | list | string }} {{ range(1, 4) | list | string }} {{ range(5, 0, -2) | list | string }}", "{}",
       "[0, 1, 2] [1, 2, 3] [5, 3, 1]"},
      {"loop.cycle", "{% for x in [1,2,3] %}{{ loop.cycle('a', 'b') }}{% endfor %}", "{}", "aba"},
  });
}

TEST_CASE("set, macros, filter and generation blocks", "[jinja]") {
  run_cases({
      {"set", "{% set x = 'v' %}{{ x }}", "{}", "v"},
      {"set tuple", "{% set a, b = 1, 2 %}{{ b }}{{ a }}", "{}", "21"},
      {"block set", "{% set x %}in{{ 1 }}{% endset %}[{{ x }}]", "{}", "[in1]"},
      {"block set with filter", "{% set x | upper %}abc{% endset %}{{ x }}", "{}", "ABC"},
      {"set in if leaks", "{% if true %}{% set x = 3 %}{% endif %}{{ x }}", "{}", "3"},
      {"macro with defaults and kwargs",
       "{% macro m(a, b='B') %}{{ a }}-{{ b }}{% endmacro %}{{ m(1) }} {{ m(1, 2) }} {{ m(b=3, a=4) }}", "{}",
       "1-B 1-2 4-3"},
      {"macro sees globals", "{% macro m() %}{{ g }}{% endmacro %}{{ m() }}", R"({"g": "G"})", "G"},
      {"recursive macro", "{% macro f(n) %}{{ n }}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}",
       "{}", "3210"},
      {"call block", "{% macro box() %}[{{ caller() }}]{% endmacro %}{% call box() %}in{% endcall %}", "{}", "[in]"},
      {"call block with arguments",
       "{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(v) each([1, 2]) %}<{{ v "
       "}}>{% endcall %}",
       "{}", "<1><2>"},
      {"filter block", "{% filter upper %}abc{% endfilter %}", "{}", "ABC"},
      {"filter block trim", "{%- filter trim -%}\n  x  \n{%- endfilter -%}", "{}", "x"},
      {"generation block renders its body", "a{% generation %}b{% endgeneration %}c", "{}", "abc"},
  });
}

TEST_CASE("is-tests", "[jinja]") {
  run_cases({
      {"defined/undefined", "{{ x is defined }}{{ y is undefined }}{{ x.a.b is defined }}", R"({"x": {}})",
       "TrueTrueFalse"},
      {"none", "{{ x is none }}{{ x is not none }}", R"({"x": null})", "TrueFalse"},
      {"types",
       "{{ 's' is string }}{{ {} is mapping }}{{ [] is iterable }}{{ 's' is iterable }}{{ [] is sequence }}"
       "{{ 1 is number }}{{ 1.5 is number }}{{ 1 is integer }}{{ 1.5 is float }}{{ true is boolean }}{{ 1 is boolean "
       "}}",
       "{}", "TrueTrueTrueTrueTrueTrueTrueTrueTrueTrueFalse"},
      {"true false", "{{ true is true }}{{ 1 is true }}{{ false is false }}", "{}", "TrueFalseTrue"},
      {"comparison tests", "{{ 1 is equalto 1 }}{{ 1 is eq(2) }}{{ 3 is gt 2 }}{{ 3 is divisibleby 3 }}{{ 3 is odd }}",
       "{}", "TrueFalseTrueTrueTrue"},
      {"is not", "{{ 's' is not string }}", "{}", "False"},
      {"string case tests", "{{ 'ab' is lower }}{{ 'AB' is upper }}", "{}", "TrueTrue"},
  });
}

TEST_CASE("filters", "[jinja]") {
  run_cases({
      {"trim", "[{{ '  a b \n' | trim }}]", "{}", "[a b]"},
      {"length", "{{ 'abc' | length }}{{ [1] | length }}{{ {'a': 1} | length }}{{ x | count }}", R"({"x": [1, 2]})",
       "3112"},
      {"default replaces undefined and None (llama.cpp)",
       "{{ x | default('d') }} {{ n | default('d') }} {{ e | default('d') }}|{{ e | default('d', true) }}",
       R"({"n": null, "e": ""})", "d d |d"},
      {"join", "{{ [1, 'a'] | join(', ') }} {{ [{'n': 'x'}, {'n': 'y'}] | join('', attribute='n') }}", "{}", "1, a xy"},
      {"first last", "{{ [1, 2, 3] | first }}{{ [1, 2, 3] | last }}{{ 'xy' | first }}", "{}", "13x"},
      {"upper lower capitalize title",
       "{{ 'aB' | upper }} {{ 'aB' | lower }} {{ 'hELLO world' | capitalize }} {{ 'hello big-world' | title }}", "{}",
       "AB ab Hello world Hello Big-World"},
      {"replace", "{{ 'aaa' | replace('a', 'b') }} {{ 'aaa' | replace('a', 'b', 2) }}", "{}", "bbb bba"},
      {"list", "{{ 'ab' | list | string }}", "{}", "['a', 'b']"},
      {"string int float",
       "{{ 3 | string ~ 'x' }} {{ '42' | int + 1 }} {{ '2.5' | float }} {{ 'x' | int }} {{ 3.9 | int }}", "{}",
       "3x 43 2.5 0 3"},
      {"map attribute", "{{ msgs | map(attribute='role') | join(',') }}", R"({"msgs": [{"role": "a"}, {"role": "b"}]})",
       "a,b"},
      {"map filter", "{{ ['a', 'b'] | map('upper') | list | string }}", "{}", "['A', 'B']"},
      {"selectattr rejectattr",
       "{{ msgs | selectattr('role', 'equalto', 'user') | list | length }} {{ msgs | rejectattr('role', 'equalto', "
       "'user') | map(attribute='c') | first }}",
       R"({"msgs": [{"role": "user", "c": 1}, {"role": "sys", "c": 2}, {"role": "user", "c": 3}]})", "2 2"},
      {"selectattr truthiness", "{{ xs | selectattr('t') | list | length }}",
       R"({"xs": [{"t": true}, {"t": false}, {}]})", "1"},
      {"select reject", "{{ [1, 2, 3, 4] | select('odd') | list | string }} {{ [1, 2, 3, 4] | reject('odd') | list | string }}", "{}",
       "[1, 3] [2, 4]"},
      {"unique", "{{ ['a', 'A', 'b', 'a'] | unique | list | string }}", "{}", "['a', 'b']"},
      {"items", "{{ {'a': 1} | items | list | string }}", "{}", "[['a', 1]]"},
      {"dictsort", "{% for k, v in {'b': 1, 'A': 2, 'c': 0} | dictsort %}{{ k }}{% endfor %}", "{}", "Abc"},
      {"sort", "{{ [3, 1, 2] | sort | string }} {{ ['b', 'A', 'c'] | sort(reverse=true) | string }}", "{}", "[1, 2, 3] ['c', 'b', 'A']"},
      {"abs round", "{{ -3 | abs }} {{ 2.567 | round(2) }} {{ 2.5 | round }} {{ 2.1 | round(method='ceil') }}", "{}",
       "3 2.57 2.0 3.0"},
      {"wordcount", "{{ 'one two  three' | wordcount }}", "{}", "3"},
      {"indent", "{{ 'a\nb\n\nc' | indent(2) }}|{{ 'a\nb' | indent(2, true) }}", "{}", "a\n  b\n\n  c|  a\n  b"},
      {"safe", "{{ '<b>' | safe }}", "{}", "<b>"},
      {"safe strings add without escaping (llama.cpp has no Markup)",
       "{{ '<a>' | safe + '<b>' }}|{{ '<c>' + '<d>' | safe }}|{{ '<e>' | safe ~ '<f>' }}", "{}", "<a><b>|<c><d>|<e><f>"},
      {"escape returns a plain string", "{{ '&' | escape | escape }}", "{}", "&amp;amp;"},
      {"escape", "{{ '<a href=\"x\">&' | escape }}", "{}", "&lt;a href=&#34;x&#34;&gt;&amp;"},
      {"min max sum", "{{ [3, 1, 2] | min }}{{ [3, 1, 2] | max }}{{ [3, 1, 2] | sum }}", "{}", "136"},
      {"reverse", "{{ [1, 2] | reverse | list | string }} {{ 'ab' | reverse }}", "{}", "[2, 1] ba"},
      {"from_json", "{{ ('{\"a\": [1, 2]}' | from_json).a[1] }}", "{}", "2"},
      {"format filter", "{{ '%s=%s' | format('a', 1) }}", "{}", "a=1"},
  });
}

TEST_CASE("tojson follows json.dumps as HF calls it", "[jinja]") {
  run_cases({
      {"default separators", "{{ {'a': [1, 2.5, 'x'], 'b': none, 'c': true} | tojson }}", "{}",
       R"({"a": [1, 2.5, "x"], "b": null, "c": true})"},
      {"insertion order kept", "{{ d | tojson }}", R"({"d": {"z": 1, "a": 2}})", R"({"z": 1, "a": 2})"},
      {"sort_keys", "{{ d | tojson(sort_keys=true) }}", R"({"d": {"z": 1, "a": 2}})", R"({"a": 2, "z": 1})"},
      {"indent", "{{ {'a': [1, {}], 'b': []} | tojson(indent=2) }}", "{}",
       "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": []\n}"},
      {"separators", "{{ {'a': [1, 2]} | tojson(separators=(',', ':')) }}", "{}", R"({"a":[1,2]})"},
      {"no ascii escaping, no html escaping", R"({{ 'é<>&\'' | tojson }})", "{}", R"("é<>&'")"},
      {"ensure_ascii", "{{ 'é😀' | tojson(ensure_ascii=true) }}", "{}", R"("\u00e9\ud83d\ude00")"},
      {"control characters", R"({{ '\x01\n"\\' | tojson }})", "{}", R"("\u0001\n\"\\")"},
      {"floats as %g (llama.cpp)", "{{ [1.0, 0.1, big, 3.14159265, 1 / 3] | tojson }}", R"({"small": 1e-5, "big": 1e20, "tiny": 2.5e-7})",
       "[1, 0.1, 1e+20, 3.14159, 0.333333]"},
  });
}

// Template text is bytes: a byte that is not valid UTF-8 is one character
// of its own, and tojson(ensure_ascii) passes it through unescaped.
TEST_CASE("invalid UTF-8 stays byte for byte", "[jinja]") {
  CHECK(render("{{ 'a\xff\xc3\xa9' | tojson(ensure_ascii=true) }}") == "\"a\xff\\u00e9\"");
  CHECK(render("{{ 'a\xff\xc3\xa9' | list | length }}") == "3");
  CHECK(render("{{ 'a\xff\xc3\xa9'[1:] | tojson }}") == "\"\xff\xc3\xa9\"");
  CHECK(render("{{ '\xe2\x82' | list | length }}") == "2");  // a truncated sequence: two bytes alone
  CHECK(render("{{ 'x\U0001F600' | tojson(ensure_ascii=true) }}") == "\"x\\ud83d\\ude00\"");
}

TEST_CASE("Python methods", "[jinja]") {
  run_cases({
      {"strip family", "[{{ ' a '.strip() }}|{{ ' a '.lstrip() }}|{{ ' a '.rstrip() }}|{{ 'xxaxx'.strip('x') }}]", "{}",
       "[a|a | a|a]"},
      {"split", "{{ 'a,b,,c'.split(',') | string }} {{ ' a  b '.split() | string }} {{ 'a,b,c'.split(',', 1) | string }}", "{}",
       "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b,c']"},
      {"rsplit", "{{ 'a,b,c'.rsplit(',', 1) | string }}", "{}", "['a,b', 'c']"},
      {"starts ends", "{{ 'hello'.startswith('he') }}{{ 'hello'.endswith(('x', 'lo')) }}", "{}", "TrueTrue"},
      {"replace upper lower title",
       "{{ 'a-b'.replace('-', '+') }} {{ 'ab'.upper() }} {{ 'AB'.lower() }} {{ 'hi there'.title() }}", "{}",
       "a+b AB ab Hi There"},
      {"format", "{{ '{}-{}'.format(1, 'a') }} {{ '{x}!'.format(x=2) }} {{ '{{}}'.format() }}", "{}", "1-a 2! {}"},
      {"find count join", "{{ 'abcb'.find('b') }} {{ 'abcb'.count('b') }} {{ '-'.join(['a', 'b']) }}", "{}", "1 2 a-b"},
      {"dict methods",
       "{{ d.get('a') }} {{ d.get('x') | string }} {{ d.get('x', 0) }} {{ d.keys() | list | string }} {{ d.values() | list | string }}",
       R"({"d": {"a": 1}})", "1 None 0 ['a'] [1]"},
      {"method beats key of the same name", "{{ d.items() | list | string }}", R"({"d": {"items": 5}})", "[['items', 5]]"},
      {"d.items is the method, d['items'] the key", "{{ d['items'] }} {{ d.items is callable }} {{ d.pop }}",
       R"({"d": {"items": 5, "pop": 6}})", "5 True 6"},
      {"list methods", "{% set l = [1] %}{% set _ = l.append(2) %}{{ l | string }} {{ l.pop(0) }} {{ l | string }}", "{}",
       "[1, 2] 1 [2]"},
      {"list shared by reference", "{% set a = [] %}{% set b = a %}{% set _ = b.append(1) %}{{ a | string }}", "{}", "[1]"},
  });
}

TEST_CASE("globals", "[jinja]") {
  RenderOptions opts;
  opts.now_epoch_s = 1700000000;  // 2023-11-14 22:13:20 UTC
  CHECK(render("{{ strftime_now('%Y-%m-%d %d %b %Y') }}", json::object(), opts) == "2023-11-14 14 Nov 2023");
  CHECK(render("{% set ns = namespace(a=1, b='x') %}{{ ns.a }}{{ ns.b }}") == "1x");
  CHECK(render("{{ dict(a=1) | string }}") == "{'a': 1}");
  try {
    render("line one\n{{ raise_exception('bad role: ' ~ r) }}", json{{"r", "tool"}});
    FAIL("expected a TemplateError");
  } catch (const TemplateError& e) {
    CHECK(e.raised());
    CHECK(e.line() == 2);
    CHECK(e.bare_message() == "bad role: tool");
  }
}

TEST_CASE("errors are TemplateErrors with a line", "[jinja]") {
  struct Bad {
    const char* text;
    int line;
    const char* message_part;
  };
  const std::vector<Bad> bad = {
      {"{% if x %}", 1, "endif"},
      {"a\n{{ x + }}", 2, "unexpected"},
      {"{% for x in %}{% endfor %}", 1, "unexpected"},
      {"{% foo %}", 1, "unknown statement"},
      {"\n\n{{ 'abc }}", 3, "unterminated string"},
      {"{{ x.y.z() }}", 1, "undefined"},
      {"{{ x.items.type }}", 1, "is a function"},
      {"{{ 1 - 'a' }}", 1, "unsupported operand"},
      {"{{ 1 / 0 }}", 1, "division by zero"},
      {"{{ x | nofilter }}", 1, "unknown filter"},
      {"{{ x is notatest }}", 1, "unknown test"},
      {"{{ nope() }}", 1, "not callable"},
      {"{{ 'a'.nomethod() }}", 1, "no method"},
      {"{% endif %}", 1, "endif"},
      {"{{ 9223372036854775807 + 1 }}", 1, "overflow"},
      {"{{ (1, 2) | join(', ') | from_json }}", 1, "invalid JSON"},
      {"{% for a, b in [1] %}{% endfor %}", 1, "not iterable"},
      {"{{ {'a': 1}", 1, "unterminated"},
      {"{% set l = [] %}{% for i in range(2000) %}{% set l = [l] %}{% if loop.last %}\n{{ l }}{% endif %}{% endfor %}",
       2, "nested deeper"},
  };
  for (const Bad& b : bad) {
    INFO("template: " << b.text);
    try {
      render(b.text, json{{"x", json::object()}});
      FAIL("expected a TemplateError");
    } catch (const TemplateError& e) {
      CHECK(e.line() == b.line);
      CHECK_THAT(e.what(), Catch::Contains(b.message_part));
    }
  }
}

TEST_CASE("hostile templates are bounded", "[jinja]") {
  RenderOptions opts;
  opts.max_output_bytes = 1 << 20;
  opts.max_steps = 1'000'000;
  RenderOptions roomy;  // the deep-list cases are about freeing and printing, not about work
  roomy.max_steps = 100'000'000;
  // Infinite-ish work without output, huge output, deep recursion, deep nesting.
  CHECK_THROWS_AS(render("{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}",
                         json::object(), opts),
                  TemplateError);
  CHECK_THROWS_AS(render("{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}", json::object(), opts),
                  TemplateError);
  CHECK_THROWS_AS(
      render("{% set s = 'xx' %}{% for i in range(64) %}{% set s = s ~ s %}{% endfor %}", json::object(), opts),
      TemplateError);
  CHECK_THROWS_AS(render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", json::object(), opts), TemplateError);
  CHECK_THROWS_AS(render("{{ 'x' * 100000000000 }}", json::object(), opts), TemplateError);
  // A list prints its items: a few references to one big string are bounded too.
  CHECK_THROWS_AS(render("{% set s = 'x' * 400000 %}{{ [s, [s, [s]]] }}", json::object(), opts), TemplateError);
  CHECK_THROWS_AS(render("{{ range(100000000000) | length }}", json::object(), opts), TemplateError);
  CHECK_THROWS_AS(render("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}"), TemplateError);
  CHECK_THROWS_AS(render("{{ " + std::string(100000, '[') + " }}"), TemplateError);
  // Reference cycles are refused; very deep values are freed without
  // recursion and printing them is an error, not a stack overflow.
  CHECK_THROWS_AS(render("{% set l = [] %}{% set _ = l.append(l) %}{{ l }}"), TemplateError);
  CHECK_THROWS_AS(render("{% set ns = namespace() %}{% set ns.self = [ns] %}"), TemplateError);
  CHECK_THROWS_AS(
      render("{% set ns = namespace(l=[]) %}{% for i in range(200000) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}",
             json::object(), roomy),
      TemplateError);
  CHECK(render("{% set l = [] %}{% for i in range(200000) %}{% set l = [l] %}{% endfor %}ok", json::object(), roomy) ==
        "ok");
  CHECK_THROWS_AS(render("{% set l = [] %}{% for i in range(2000) %}{% set l = [l] %}{% if loop.last %}{{ l }}{% endif "
                         "%}{% endfor %}"),
                  TemplateError);
  std::string deep_ifs;
  for (int i = 0; i < 10000; ++i) deep_ifs += "{% if true %}";
  CHECK_THROWS_AS(render(deep_ifs), TemplateError);
}

namespace {

double seconds_of(const std::function<void()>& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A legitimate render to time hostile ones against: chatml over 100 turns.
double baseline_seconds(int renders) {
  const Template t = Template::parse(
      "{% for m in messages %}{{ '<|im_start|>' + m.role + '\n' + m.content | trim + '<|im_end|>\n' }}{% endfor %}"
      "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}");
  json ctx = {{"messages", json::array()}, {"add_generation_prompt", true}};
  for (int i = 0; i < 100; ++i)
    ctx["messages"].push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", std::string(200, 'a' + i % 26)}});
  return seconds_of([&] {
    for (int i = 0; i < renders; ++i) (void)t.render(ctx);
  });
}

}  // namespace

// Issue 41: the work budget (template.h) stops a hostile render in a
// fraction of a second. The doubling loop used to run ~2 s (18 s loaded)
// until the 64 MiB value cap stopped it.
TEST_CASE("a hostile render stops at the work limit, quickly", "[jinja]") {
  const double baseline = baseline_seconds(100);  // ~100 big-ish chat renders
  const std::vector<std::string> hostile = {
      "{% set s = namespace(v='x') %}{% for i in range(30) %}{% set s.v = s.v ~ s.v %}{% endfor %}{{ s.v | length }}",
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
      "{% set l = range(100000)|list %}{% for i in range(100000) %}{% set _ = l|sort %}{% endfor %}",
      "{% set l = range(1000)|list %}{% set b = [l] * 1000 %}{% for i in range(100000) %}{{ b|tojson }}{% endfor %}",
      "{% set s = 'x' * 1000000 %}{% set l = [s] * 1000 %}{% for i in range(100000) %}{{ 'y' in l }}{% endfor %}",
  };
  for (const std::string& text : hostile) {
    INFO("template: " << text);
    RenderStats stats;
    RenderOptions opts;
    opts.stats = &stats;
    std::string error;
    const double t = seconds_of([&] {
      try {
        (void)render(text, json::object(), opts);
      } catch (const TemplateError& e) {
        error = e.what();
      }
    });
    CHECK_THAT(error, Catch::Contains("work limit"));
    CHECK(stats.work <= opts.max_steps + 8 * (uint64_t{64} << 20) / vtc::jinja::kBytesPerStep);
    // The budget is about 0.25 s here; 100 ordinary renders take ~0.05 s.
    WARN("hostile " << t << " s, 100 chat renders " << baseline << " s");
    CHECK(t < 20 * baseline + 0.05);
  }
}

// Issue 41: building a string by appends copies each byte O(1) times (it
// copied the whole string on each append: 16 MiB took seconds).
TEST_CASE("string concatenation is linear", "[jinja]") {
  auto build = [](int kib, const char* op, RenderStats& stats) {
    const std::string chunk(1024, 'a');
    RenderOptions opts;
    opts.max_steps = 1'000'000'000;  // the budget is not what this measures
    opts.stats = &stats;
    std::string text = "{% set ns = namespace(v='') %}{% for i in range(" + std::to_string(kib) +
                       ") %}{% set ns.v = ns.v " + op + " '" + chunk + "' %}{% endfor %}{{ ns.v | length }}";
    std::string out;
    const double t = seconds_of([&] { out = render(text, json::object(), opts); });
    CHECK(out == std::to_string(kib * 1024));
    return t;
  };
  for (const char* op : {"~", "+"}) {
    INFO("operator " << op);
    RenderStats small, big;
    double t2 = 1e9, t16 = 1e9;
    for (int k = 0; k < 3; ++k) {
      t2 = std::min(t2, build(2 * 1024, op, small));
      t16 = std::min(t16, build(16 * 1024, op, big));
    }
    // Bytes written: the appended chunks and the output; quadratic would be
    // ~8 GiB for 16 MiB. This count is the gate: it is what the render
    // copied, whatever else runs on the machine.
    CHECK(big.bytes < 3 * (uint64_t{16} << 20) + (uint64_t{1} << 20));
    CHECK(big.bytes < 8.8 * small.bytes);
    // The times are printed, not asserted: 8x the text takes 8-13x the time
    // here and quadratic 64x, but a loaded CI machine measured 45x once
    // (2.3 ms for the small text), so a bound between the two is a flake.
    WARN("2 MiB " << t2 << " s, 16 MiB " << t16 << " s");
  }
  // Chains and locals too; an alias keeps its value.
  CHECK(render("{% set s = 'a' %}{% set t = s %}{% set s = s ~ 0 ~ '-' %}{% set s = s + '1' %}{{ s }}|{{ t }}") ==
        "a0-1|a");
  CHECK(render("{% set s = 'a' %}{% for i in range(2) %}{% set s = s ~ i %}{{ s }},{% endfor %}{{ s }}") ==
        "a0,a01,a");  // a loop's set is local to the loop (as before; the reference agrees)
  CHECK(render("{% set ns = namespace(l=[1]) %}{% set m = ns.l %}{% set ns.l = ns.l + [2] + [3] %}{{ ns.l }}|{{ m }}") ==
        "123|1");
  CHECK(render("{% set s = 'x' %}{% set s = s ~ s ~ s %}{{ s }}") == "xxx");
}

TEST_CASE("one parsed template renders on many threads", "[jinja]") {
  const Template t = Template::parse(
      "{% macro m(x) %}<{{ x | upper }}>{% endmacro %}{% for msg in messages %}{{ m(msg.content) }}{% endfor %}"
      "{{ messages | tojson }}");
  json ctx = {{"messages", json::array()}};
  for (int i = 0; i < 50; ++i) ctx["messages"].push_back({{"role", "user"}, {"content", "m" + std::to_string(i)}});
  const std::string expected = t.render(ctx);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (int i = 0; i < 200; ++i) ok[static_cast<size_t>(k)] += t.render(ctx) == expected;
    });
  for (auto& th : threads) th.join();
  for (int n : ok) CHECK(n == 200);
}
