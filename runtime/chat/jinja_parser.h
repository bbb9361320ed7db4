// Tokens -> AST with @huggingface/jinja's grammar and precedence (lowest first): ternary/select,
// or, and, not, comparison/in/not in, + - ~, * / // %, **, is-test, |filter, unary +/-, call/member,
// primary. Parse errors throw JinjaError with the line and the construct ("unclosed 'for' block").
// Unknown filters and tests are rejected here (the reference only notices at render time).
#pragma once

#include <vector>

#include "runtime/chat/jinja_ast.h"
#include "runtime/chat/jinja_lexer.h"

namespace spk::rt::jinja {

NodePtr parse_program(const std::vector<Token>& tokens);

// Names the interpreter implements (used for the parse-time check and by tests).
bool is_known_filter(const std::string& name);
bool is_known_test(const std::string& name);

}  // namespace spk::rt::jinja
