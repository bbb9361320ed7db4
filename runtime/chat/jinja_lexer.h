// Template source -> tokens, following @huggingface/jinja's lexer: the Template constructor preprocesses
// with lstrip_blocks + trim_blocks (and drops one trailing newline), then splits text from {% %} / {{ }}
// / {# #} and applies the `-` whitespace controls. Every token remembers its line in the ORIGINAL source.
#pragma once

#include <string>
#include <vector>

namespace spk::rt::jinja {

enum class Tok : uint8_t {
  Text,
  Number,
  String,
  Ident,
  Equals,
  OpenParen,
  CloseParen,
  OpenStatement,
  CloseStatement,
  OpenExpression,
  CloseExpression,
  OpenSquare,
  CloseSquare,
  OpenCurly,
  CloseCurly,
  Comma,
  Dot,
  Colon,
  Pipe,
  Additive,        // + - ~
  Multiplicative,  // * / // %
  Power,           // **
  Comparison,      // < > <= >= == !=
  Unary,           // lone + - before an operand
  Comment,
};
const char* tok_name(Tok t);

struct Token {
  Tok type;
  std::string value;
  int line;
};

// Throws JinjaError("line N: ...") on a lexical error.
std::vector<Token> tokenize(const std::string& source);

}  // namespace spk::rt::jinja
