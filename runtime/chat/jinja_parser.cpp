#include "runtime/chat/jinja_parser.h"

#include <algorithm>
#include <initializer_list>
#include <set>
#include <string>

namespace spk::rt::jinja {

bool is_known_filter(const std::string& name) {
  static const std::set<std::string> k{
      "safe",     "tojson", "list",    "first",      "last",       "length", "reverse",    "sort",
      "join",     "string", "unique",  "upper",      "lower",      "title",  "capitalize", "trim",
      "indent",   "int",    "float",   "abs",        "items",      "get",    "keys",       "values",
      "dictsort", "bool",   "default", "selectattr", "rejectattr", "map",    "replace"};
  return k.count(name) > 0;
}

bool is_known_test(const std::string& name) {
  static const std::set<std::string> k{"boolean",  "callable",  "odd",      "even",   "false",
                                       "true",     "none",      "string",   "number", "integer",
                                       "iterable", "mapping",   "sequence", "lower",  "upper",
                                       "defined",  "undefined", "equalto",  "eq"};
  return k.count(name) > 0;
}

namespace {

class Parser {
 public:
  explicit Parser(const std::vector<Token>& t) : t_(t) {}

  NodePtr program() {
    auto p = node(NodeKind::Program, 1);
    while (cur_ < t_.size()) p->body.push_back(any());
    return p;
  }

 private:
  const std::vector<Token>& t_;
  size_t cur_ = 0;

  static NodePtr node(NodeKind k, int line) { return std::make_unique<Node>(k, line); }
  int line() const { return cur_ < t_.size() ? t_[cur_].line : (t_.empty() ? 1 : t_.back().line); }
  [[noreturn]] void fail(const std::string& msg) const { throw JinjaError(msg, line()); }
  std::string describe() const {
    if (cur_ >= t_.size()) return "end of template";
    const Token& k = t_[cur_];
    if (k.type == Tok::Text) return "text";
    return std::string("'") + k.value + "'";
  }
  bool is(Tok a) const { return cur_ < t_.size() && t_[cur_].type == a; }
  bool is(Tok a, Tok b) const { return cur_ + 1 < t_.size() && t_[cur_].type == a && t_[cur_ + 1].type == b; }
  bool is_ident(const char* name, size_t off = 0) const {
    return cur_ + off < t_.size() && t_[cur_ + off].type == Tok::Ident && t_[cur_ + off].value == name;
  }
  bool is_statement(std::initializer_list<const char*> names) const {
    if (!(cur_ + 1 < t_.size() && t_[cur_].type == Tok::OpenStatement && t_[cur_ + 1].type == Tok::Ident))
      return false;
    return std::any_of(names.begin(), names.end(), [&](const char* n) { return t_[cur_ + 1].value == n; });
  }
  const Token& expect(Tok type, const char* what) {
    if (!is(type)) fail(std::string("expected ") + what + ", got " + describe());
    return t_[cur_++];
  }
  // Parse statements until one of `ends`; running out of tokens means the block is unclosed.
  void block_until(std::vector<NodePtr>& out, std::initializer_list<const char*> ends, const char* opener,
                   int opener_line) {
    while (!is_statement(ends)) {
      if (cur_ >= t_.size()) {
        throw JinjaError(std::string("unclosed '") + opener + "' block opened on line " +
                             std::to_string(opener_line) + " (add {% " + *ends.begin() + " %})",
                         opener_line);
      }
      out.push_back(any());
    }
  }
  void end_tag(const char* name) {
    expect(Tok::OpenStatement, "'{%'");
    if (!is_ident(name)) fail(std::string("expected '") + name + "', got " + describe());
    ++cur_;
    expect(Tok::CloseStatement, "'%}'");
  }

  NodePtr any() {
    const Token& k = t_[cur_];
    switch (k.type) {
      case Tok::Comment:
        ++cur_;
        return node(NodeKind::Comment, k.line);
      case Tok::Text: {
        auto n = node(NodeKind::Text, k.line);
        n->lit = Value::string(k.value);
        ++cur_;
        return n;
      }
      case Tok::OpenStatement:
        return statement();
      case Tok::OpenExpression: {
        ++cur_;
        auto e = expression();
        expect(Tok::CloseExpression, "'}}' to close the expression");
        return e;
      }
      default:
        fail(std::string("unexpected ") + describe() + " outside of {{ }} / {% %}");
    }
  }

  NodePtr statement() {
    const int l = line();
    ++cur_;  // {%
    if (!is(Tok::Ident)) fail("expected a statement name after '{%', got " + describe());
    const std::string name = t_[cur_++].value;
    if (name == "set") return set_statement(l);
    if (name == "if") {
      auto n = if_statement(l);
      end_tag("endif");
      return n;
    }
    if (name == "for") {
      auto n = for_statement(l);
      end_tag("endfor");
      return n;
    }
    if (name == "macro") {
      auto n = node(NodeKind::Macro, l);
      if (!is(Tok::Ident)) fail("expected a macro name, got " + describe());
      n->name = t_[cur_++].value;
      n->list = args(true);
      expect(Tok::CloseStatement, "'%}'");
      block_until(n->body, {"endmacro"}, "macro", l);
      end_tag("endmacro");
      return n;
    }
    if (name == "call") {
      auto n = node(NodeKind::CallBlock, l);
      if (is(Tok::OpenParen)) n->list = args(true);
      if (!is(Tok::Ident)) fail("expected a macro name after 'call', got " + describe());
      auto call = node(NodeKind::Call, l);
      call->a = node(NodeKind::Ident, l);
      call->a->name = t_[cur_++].value;
      call->list = args(false);
      n->a = std::move(call);
      expect(Tok::CloseStatement, "'%}'");
      block_until(n->body, {"endcall"}, "call", l);
      end_tag("endcall");
      return n;
    }
    if (name == "filter") {
      auto n = node(NodeKind::FilterBlock, l);
      n->a = filter_ref();
      expect(Tok::CloseStatement, "'%}'");
      block_until(n->body, {"endfilter"}, "filter", l);
      end_tag("endfilter");
      return n;
    }
    if (name == "break" || name == "continue") {
      expect(Tok::CloseStatement, "'%}'");
      return node(name == "break" ? NodeKind::Break : NodeKind::Continue, l);
    }
    cur_--;
    fail("unknown statement '" + name + "'");
  }

  NodePtr set_statement(int l) {
    auto n = node(NodeKind::Set, l);
    n->a = sequence(false);
    if (is(Tok::Equals)) {
      ++cur_;
      n->b = sequence(false);
    } else {
      expect(Tok::CloseStatement, "'=' or '%}' in set");
      block_until(n->body, {"endset"}, "set", l);
      expect(Tok::OpenStatement, "'{%'");
      ++cur_;  // endset
    }
    expect(Tok::CloseStatement, "'%}' to close set");
    return n;
  }

  NodePtr if_statement(int l) {
    auto n = node(NodeKind::If, l);
    n->a = expression();
    expect(Tok::CloseStatement, "'%}' to close if");
    block_until(n->body, {"elif", "else", "endif"}, "if", l);
    if (is_statement({"elif"})) {
      const int el = line();
      cur_ += 2;
      n->alt.push_back(if_statement(el));
    } else if (is_statement({"else"})) {
      cur_ += 2;
      expect(Tok::CloseStatement, "'%}' after else");
      block_until(n->alt, {"endif"}, "if", l);
    }
    return n;
  }

  NodePtr for_statement(int l) {
    auto n = node(NodeKind::For, l);
    n->a = sequence(true);
    if (n->a->kind != NodeKind::Ident && n->a->kind != NodeKind::TupleLit)
      fail("expected a loop variable name in for");
    if (!is_ident("in")) fail("expected 'in' after the loop variable, got " + describe());
    ++cur_;
    n->b = expression();
    expect(Tok::CloseStatement, "'%}' to close for");
    block_until(n->body, {"endfor", "else"}, "for", l);
    if (is_statement({"else"})) {
      cur_ += 2;
      expect(Tok::CloseStatement, "'%}' after else");
      block_until(n->alt, {"endfor"}, "for", l);
    }
    return n;
  }

  NodePtr sequence(bool primary_only) {
    const int l = line();
    NodePtr first = primary_only ? primary() : expression();
    if (!is(Tok::Comma)) return first;
    auto t = node(NodeKind::TupleLit, l);
    t->list.push_back(std::move(first));
    while (is(Tok::Comma)) {
      ++cur_;
      t->list.push_back(primary_only ? primary() : expression());
    }
    return t;
  }

  NodePtr expression() { return if_expression(); }

  NodePtr if_expression() {
    auto a = binary_chain(0);
    if (is_ident("if")) {
      const int l = line();
      ++cur_;
      auto test = binary_chain(0);
      if (is_ident("else")) {
        ++cur_;
        auto t = node(NodeKind::Ternary, l);
        t->a = std::move(test);
        t->b = std::move(a);
        t->c = if_expression();
        return t;
      }
      auto s = node(NodeKind::Select, l);
      s->a = std::move(a);
      s->b = std::move(test);
      return s;
    }
    return a;
  }

  static NodePtr binary(std::string op, NodePtr l, NodePtr r, int line) {
    auto n = node(NodeKind::Binary, line);
    n->op = op_code(op);
    n->name = std::move(op);
    n->a = std::move(l);
    n->b = std::move(r);
    return n;
  }

  // Levels: 0 or, 1 and, 2 not, 3 comparison.
  NodePtr binary_chain(int level) {
    if (level == 0 || level == 1) {
      const char* word = level == 0 ? "or" : "and";
      auto left = binary_chain(level + 1);
      while (is_ident(word)) {
        const int l = line();
        ++cur_;
        left = binary(word, std::move(left), binary_chain(level + 1), l);
      }
      return left;
    }
    if (level == 2) {
      if (is_ident("not")) {
        const int l = line();
        ++cur_;
        auto u = node(NodeKind::Unary, l);
        u->name = "not";
        u->op = Op::Not;
        u->a = binary_chain(2);
        return u;
      }
      return binary_chain(3);
    }
    auto left = additive();
    while (true) {
      const int l = line();
      std::string op;
      if (is_ident("not") && is_ident("in", 1)) {
        op = "not in";
        cur_ += 2;
      } else if (is_ident("in")) {
        op = "in";
        ++cur_;
      } else if (is(Tok::Comparison)) {
        op = t_[cur_++].value;
      } else {
        break;
      }
      left = binary(op, std::move(left), additive(), l);
    }
    return left;
  }

  NodePtr additive() {
    auto left = multiplicative();
    while (is(Tok::Additive)) {
      const int l = line();
      std::string op = t_[cur_++].value;
      left = binary(op, std::move(left), multiplicative(), l);
    }
    return left;
  }
  NodePtr multiplicative() {
    auto left = power();
    while (is(Tok::Multiplicative)) {
      const int l = line();
      std::string op = t_[cur_++].value;
      left = binary(op, std::move(left), power(), l);
    }
    return left;
  }
  NodePtr power() {
    auto left = test_expression();
    while (is(Tok::Power)) {
      const int l = line();
      ++cur_;
      left = binary("**", std::move(left), test_expression(), l);
    }
    return left;
  }
  NodePtr test_expression() {
    auto operand = filter_expression();
    while (is_ident("is")) {
      const int l = line();
      ++cur_;
      auto t = node(NodeKind::Test, l);
      if (is_ident("not")) {
        t->flag = true;
        ++cur_;
      }
      if (!is(Tok::Ident)) fail("expected a test name after 'is', got " + describe());
      t->name = t_[cur_].value;
      if (!is_known_test(t->name)) fail("unknown test '" + t->name + "'");
      ++cur_;
      t->a = std::move(operand);
      operand = std::move(t);
    }
    return operand;
  }
  // A filter reference: `name` or `name(args)`.
  NodePtr filter_ref() {
    if (!is(Tok::Ident)) fail("expected a filter name, got " + describe());
    const int l = line();
    auto id = node(NodeKind::Ident, l);
    id->name = t_[cur_].value;
    if (!is_known_filter(id->name)) fail("unknown filter '" + id->name + "'");
    ++cur_;
    if (is(Tok::OpenParen)) return call_expression(std::move(id));
    return id;
  }
  NodePtr filter_expression() {
    auto operand = unary_sign();
    while (is(Tok::Pipe)) {
      const int l = line();
      ++cur_;
      auto f = node(NodeKind::Filter, l);
      f->a = std::move(operand);
      f->b = filter_ref();
      operand = std::move(f);
    }
    return operand;
  }
  NodePtr unary_sign() {
    if ((is(Tok::Unary) || is(Tok::Additive)) && (t_[cur_].value == "-" || t_[cur_].value == "+")) {
      auto u = node(NodeKind::Unary, line());
      u->name = t_[cur_++].value;
      u->op = op_code(u->name, true);
      u->a = unary_sign();
      return u;
    }
    auto member = member_expression(primary());
    if (is(Tok::OpenParen)) return call_expression(std::move(member));
    return member;
  }
  NodePtr call_expression(NodePtr callee) {
    auto c = node(NodeKind::Call, callee->line);
    c->a = std::move(callee);
    c->list = args(false);
    NodePtr e = member_expression(std::move(c));
    if (is(Tok::OpenParen)) e = call_expression(std::move(e));
    return e;
  }
  std::vector<NodePtr> args(bool parameters) {
    expect(Tok::OpenParen, "'(' to open the argument list");
    std::vector<NodePtr> out;
    bool saw_keyword = false;
    while (!is(Tok::CloseParen)) {
      if (cur_ >= t_.size()) fail("unclosed '(' in argument list");
      const int l = line();
      const bool kw_spread = is(Tok::Power);
      const bool spread = is(Tok::Multiplicative) && t_[cur_].value == "*";
      if (parameters && (kw_spread || spread)) fail("argument unpacking is not allowed in a parameter list");
      NodePtr arg;
      if (kw_spread || spread) {
        ++cur_;
        arg = node(kw_spread ? NodeKind::KwSpread : NodeKind::Spread, l);
        arg->a = expression();
      } else {
        arg = expression();
        if (is(Tok::Equals)) {
          ++cur_;
          if (arg->kind != NodeKind::Ident) fail("expected an identifier before '=' in argument list");
          auto kw = node(NodeKind::KwArg, l);
          kw->name = arg->name;
          kw->a = expression();
          arg = std::move(kw);
        }
        if (parameters && arg->kind != NodeKind::Ident && arg->kind != NodeKind::KwArg)
          fail("expected a parameter name in macro parameters");
        if (arg->kind == NodeKind::KwArg) {
          saw_keyword = true;
        } else if (saw_keyword) {
          fail(parameters ? "non-default parameter follows a default parameter"
                          : "positional argument follows a keyword argument");
        }
      }
      out.push_back(std::move(arg));
      if (is(Tok::Comma)) ++cur_;
    }
    ++cur_;  // )
    return out;
  }
  NodePtr member_expression(NodePtr object) {
    while (is(Tok::Dot) || is(Tok::OpenSquare)) {
      const int l = line();
      const bool computed = t_[cur_++].type == Tok::OpenSquare;
      auto m = node(NodeKind::Member, l);
      m->flag = computed;
      m->a = std::move(object);
      if (computed) {
        m->b = subscript();
        expect(Tok::CloseSquare, "']'");
      } else {
        m->b = primary();
        if (m->b->kind != NodeKind::Ident &&
            !(m->b->kind == NodeKind::Literal && m->b->lit.kind == Kind::Int))
          fail("expected an attribute name after '.'");
      }
      object = std::move(m);
    }
    return object;
  }
  NodePtr subscript() {
    const int l = line();
    std::vector<NodePtr> parts;
    bool is_slice = false;
    while (!is(Tok::CloseSquare)) {
      if (cur_ >= t_.size()) fail("unclosed '[' in subscript");
      if (is(Tok::Colon)) {
        parts.push_back(nullptr);
        ++cur_;
        is_slice = true;
      } else {
        parts.push_back(expression());
        if (is(Tok::Colon)) {
          ++cur_;
          is_slice = true;
        }
      }
    }
    if (parts.empty()) fail("expected an index or slice inside '[]'");
    if (!is_slice) return std::move(parts[0]);
    if (parts.size() > 3) fail("a slice takes at most 3 parts (start:stop:step)");
    auto s = node(NodeKind::Slice, l);
    parts.resize(3);
    s->a = std::move(parts[0]);
    s->b = std::move(parts[1]);
    s->c = std::move(parts[2]);
    return s;
  }
  NodePtr primary() {
    if (cur_ >= t_.size()) fail("unexpected end of template in expression");
    const Token& k = t_[cur_++];
    switch (k.type) {
      case Tok::Number: {
        auto n = node(NodeKind::Literal, k.line);
        const double v = std::stod(k.value);
        n->lit = k.value.find('.') != std::string::npos ? Value::floating(v) : Value::integer(v);
        return n;
      }
      case Tok::String: {
        std::string v = k.value;
        while (is(Tok::String)) v += t_[cur_++].value;
        auto n = node(NodeKind::Literal, k.line);
        n->lit = Value::string(std::move(v));
        return n;
      }
      case Tok::Ident: {
        auto n = node(NodeKind::Ident, k.line);
        n->name = k.value;
        return n;
      }
      case Tok::OpenParen: {
        auto e = sequence(false);
        expect(Tok::CloseParen, "')'");
        return e;
      }
      case Tok::OpenSquare: {
        auto n = node(NodeKind::ArrayLit, k.line);
        while (!is(Tok::CloseSquare)) {
          if (cur_ >= t_.size()) fail("unclosed '[' in list literal");
          n->list.push_back(expression());
          if (is(Tok::Comma)) ++cur_;
        }
        ++cur_;
        return n;
      }
      case Tok::OpenCurly: {
        auto n = node(NodeKind::ObjectLit, k.line);
        while (!is(Tok::CloseCurly)) {
          if (cur_ >= t_.size()) fail("unclosed '{' in dict literal");
          n->list.push_back(expression());
          expect(Tok::Colon, "':' between key and value in dict literal");
          n->list.push_back(expression());
          if (is(Tok::Comma)) ++cur_;
        }
        ++cur_;
        return n;
      }
      default:
        --cur_;
        fail("unexpected " + describe() + " in expression");
    }
  }
};

}  // namespace

NodePtr parse_program(const std::vector<Token>& tokens) { return Parser(tokens).program(); }

}  // namespace spk::rt::jinja
