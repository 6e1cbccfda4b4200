// Parser: malformed text gives "LINE:COL: error: MESSAGE" and never crashes.
#include <catch2/catch.hpp>

#include <string>

#include "ir/parser.h"
#include "ir/printer.h"
#include "support/error.h"

using namespace vtc::ir;

namespace {

std::string parse_error(const std::string& text) {
  try {
    parse(text);
  } catch (const vtc::Error& e) {
    return e.what();
  }
  return "<parsed>";
}

const std::string kHead = "func @decode(%x: tensor<T x 4 x f32, device>) {\n";

}  // namespace

TEST_CASE("parse errors name line, column and problem", "[ir][parser]") {
  struct Case {
    std::string text, error;
  };
  const Case cases[] = {
      {"blah", "1:1: error: expected 'weight', 'state' or 'func', got 'blah'"},
      {"weight @w : tensor<4 x f32, device> = file(\"w\")", "1:39: error: expected 'gguf', got 'file'"},
      {"weight @w : tensor<4 x f99, device> = gguf(\"w\")", "1:24: error: unknown element type 'f99'"},
      {"weight @w : tensor<4 x f32, gpu> = gguf(\"w\")", "1:29: error: expected 'host' or 'device', got 'gpu'"},
      {"weight @w : tensor<4 y f32, device> = gguf(\"w\")", "1:22: error: expected 'x' between dimensions, got 'y'"},
      {"weight @w : tensor<-4 x f32, device> = gguf(\"w\")", "1:20: error: dimension must not be negative"},
      {"state @s : queue<S x f32, device>", "1:12: error: unknown state kind 'queue' (expected ring, paged or plain)"},
      {"weight @w : tensor<4 x f32, device> = gguf(\"w)", "1:44: error: unterminated string"},
      {"weight @w : tensor<4 x f32, device> = gguf(\"\\q\")", "1:44: error: unknown escape '\\q' in string"},
      {"weight @w : tensor<99999999999999999999 x f32, device>", "1:20: error: integer literal out of range"},
      {"weight @w : tensor<9223372036854775807 * 2 x f32, device>", "1:20: error: dimension arithmetic overflows int64"},
      {kHead + "  %y = frob(%x) : tensor<T x 4 x f32, device>\n}", "2:8: error: unknown op 'frob'"},
      {kHead + "  %y = neg(%z) : tensor<T x 4 x f32, device>\n}", "2:12: error: use of undefined value %z"},
      {kHead + "  %x = neg(%x) : tensor<T x 4 x f32, device>\n}", "2:3: error: redefinition of value %x"},
      {kHead + "  %y = neg(%x)\n}", "2:3: error: op 'neg' names 1 results but gives 0 types"},
      {kHead + "  %y = scale(%x) {factor = 1.0, factor = 2.0} : tensor<T x 4 x f32, device>\n}",
       "2:33: error: duplicate attribute 'factor'"},
      {kHead + "  %y = scale(%x) {factor = 1e999} : tensor<T x 4 x f32, device>\n}", "2:28: error: float literal out of range"},
      {kHead + "  %y = neg(%x) : tensor<T x 4 x f32, device>\n", "3:1: error: expected '}' to close func @decode"},
      {kHead + "  %y = view(%x) {shape = [T, 1.5]} : tensor<T x 4 x f32, device>\n}",
       "2:26: error: a list cannot mix floats and symbolic dimensions"},
      {"func @decode() { $ }", "1:18: error: unexpected character '$'"},
      {"func @decode() { \x01 }", "1:18: error: unexpected character '\\x01'"},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    CHECK(parse_error(c.text) == c.error);
  }
}

TEST_CASE("parser bounds recursion and survives hostile input", "[ir][parser]") {
  std::string deep = "weight @w : tensor<" + std::string(100000, '(') + "1" + std::string(100000, ')') + " x f32, device>";
  CHECK(parse_error(deep).find("dimension expression nests too deeply") != std::string::npos);
  std::string minus = "weight @w : tensor<" + std::string(100000, '-') + "1 x f32, device>";
  CHECK(parse_error(minus).find("nests too deeply") != std::string::npos);
  std::string blowup = "weight @w : tensor<(T+S+P+A+B+C)*(T+S+P+A+B+C)*(T+S+P+A+B+C)*(T+S+P+A+B+C) x f32, device>";
  CHECK(parse_error(blowup).find("too many terms") != std::string::npos);
  for (std::string s : {"", "func", "func @", "func @f(", "weight @w : tensor<", "%", "@", "\"", "1.", "1e", "-", "[", "{"}) {
    INFO(s);
    CHECK_NOTHROW(parse_error(s));
  }
}

TEST_CASE("parse reports lines relative to the requested first line", "[ir][parser]") {
  try {
    parse("\n  bogus", {.first_line = 40});
    FAIL("parsed");
  } catch (const vtc::Error& e) {
    CHECK(std::string(e.what()) == "41:3: error: expected 'weight', 'state' or 'func', got 'bogus'");
  }
}

TEST_CASE("comments and spacing are free-form", "[ir][parser]") {
  Module m = parse("// leading\nfunc @decode(%x:tensor<T*2x4 x f32,device>){%y=neg(%x):tensor<T*2 x 4 x f32,device> // c\n"
                   "return(%y)}");
  CHECK(print(m) ==
        "func @decode(%x: tensor<T*2 x 4 x f32, device>) {\n  %y = neg(%x) : tensor<T*2 x 4 x f32, device>\n"
        "  return(%y)\n}\n");
}
