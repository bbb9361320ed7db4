// AST of a parsed template. One node type with a kind tag keeps the interpreter a single switch; the
// fields each kind uses are listed next to it. Every node carries the source line of its first token.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/chat/jinja_value.h"

namespace spk::rt::jinja {

enum class NodeKind : uint8_t {
  // statements
  Program,      // body
  Text,         // lit (string)
  Comment,      //
  If,           // a = test, body, alt
  For,          // a = loop var (Ident|Tuple), b = iterable (maybe Select), body, alt = else block
  Set,          // a = assignee, b = value (null: block set, body)
  Macro,        // name, list = params (Ident|KwArg), body
  CallBlock,    // a = Call, list = caller params, body
  FilterBlock,  // a = filter (Ident|Call), body
  Break,
  Continue,
  // expressions
  Literal,    // lit (Int/Float/String)
  ArrayLit,   // list
  TupleLit,   // list
  ObjectLit,  // list = key0, val0, key1, val1, ...
  Ident,      // name
  Member,     // a = object, b = property, flag = computed
  Call,       // a = callee, list = args
  Binary,     // name = operator, a, b
  Unary,      // name = operator, a
  Filter,     // a = operand, b = filter (Ident|Call)
  Test,       // a = operand, name = test, flag = negate
  Select,     // a = value, b = condition   (`x if cond` without else)
  Ternary,    // a = condition, b = true branch, c = false branch
  Slice,      // a, b, c = start, stop, step (each may be null)
  KwArg,      // name = key, a = value
  Spread,     // a
  KwSpread,   // a
};

// Binary/unary operators, resolved once at parse time (the interpreter switches on these).
enum class Op : uint8_t {
  None,
  And,
  Or,
  Eq,
  Ne,
  In,
  NotIn,
  Concat,
  Pow,
  Add,
  Sub,
  Mul,
  Div,
  FloorDiv,
  Mod,
  Lt,
  Gt,
  Le,
  Ge,
  Not,
  Neg,
  Pos
};
inline Op op_code(const std::string& s, bool unary = false) {
  if (unary) return s == "not" ? Op::Not : s == "-" ? Op::Neg : Op::Pos;
  static const std::pair<const char*, Op> k[] = {
      {"and", Op::And},      {"or", Op::Or},    {"==", Op::Eq},       {"!=", Op::Ne}, {"in", Op::In},
      {"not in", Op::NotIn}, {"~", Op::Concat}, {"**", Op::Pow},      {"+", Op::Add}, {"-", Op::Sub},
      {"*", Op::Mul},        {"/", Op::Div},    {"//", Op::FloorDiv}, {"%", Op::Mod}, {"<", Op::Lt},
      {">", Op::Gt},         {"<=", Op::Le},    {">=", Op::Ge}};
  for (const auto& [name, op] : k)
    if (s == name) return op;
  return Op::None;
}

struct Node;
using NodePtr = std::unique_ptr<Node>;

struct Node {
  NodeKind kind;
  int line = 0;
  std::string name;
  bool flag = false;
  Op op = Op::None;
  Value lit;
  NodePtr a, b, c;
  std::vector<NodePtr> list, body, alt;

  Node(NodeKind k, int l) : kind(k), line(l) {}
};

}  // namespace spk::rt::jinja
