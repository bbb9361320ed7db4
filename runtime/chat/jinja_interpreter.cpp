#include "runtime/chat/jinja_interpreter.h"

#include <cmath>
#include <ctime>

#include "runtime/chat/js_string.h"

namespace spk::rt::jinja {

namespace {

[[noreturn]] void fail(const std::string& msg) { throw JinjaError(msg); }

// utils.ts slice(): Python slicing over `len` items; returns the chosen indices.
std::vector<size_t> slice_indices(size_t len, const Value& start_v, const Value& stop_v,
                                  const Value& step_v) {
  const double n = static_cast<double>(len);
  const double step = step_v.kind == Kind::Undefined ? 1 : step_v.num;
  const bool has_start = start_v.kind != Kind::Undefined, has_stop = stop_v.kind != Kind::Undefined;
  double start, stop;
  if (step >= 0) {
    start = has_start ? start_v.num : 0;
    start = start < 0 ? std::max(n + start, 0.0) : std::min(start, n);
    stop = has_stop ? stop_v.num : n;
    stop = stop < 0 ? std::max(n + stop, 0.0) : std::min(stop, n);
  } else {
    start = has_start ? start_v.num : n - 1;
    start = start < 0 ? std::max(n + start, -1.0) : std::min(start, n - 1);
    stop = has_stop ? stop_v.num : -1;
    stop = stop < -1 ? std::max(n + stop, -1.0) : std::min(stop, n - 1);
  }
  std::vector<size_t> out;
  if (step == 0) return out;  // Math.sign(0) = 0: the reference loops zero times (0 < 0)
  const double dir = step > 0 ? 1 : -1;
  for (double i = start; dir * i < dir * stop; i += step) out.push_back(static_cast<size_t>(i));
  return out;
}

}  // namespace

Value Env::lookup(const std::string& name) const {
  for (const Env* e = this; e; e = e->parent_) {
    auto it = e->vars_.find(name);
    if (it != e->vars_.end()) return it->second;
  }
  return Value::undefined();
}

Value kwargs_value(std::vector<std::pair<std::string, Value>> kw) {
  Object o;
  o.items = std::move(kw);
  return Value::object(std::move(o), Kind::KwArgs);
}

const Value* kwarg(const std::vector<std::pair<std::string, Value>>& kw, const char* name) {
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return nullptr;
}

std::string Interpreter::render(const Node& program, Env& env) {
  std::string out;
  exec_block(program.body, env, out);
  return out;
}

void Interpreter::exec_block(const std::vector<NodePtr>& body, Env& env, std::string& out) {
  for (const auto& sp : body) {
    const Node& n = *sp;
    try {
      switch (n.kind) {
        case NodeKind::Text:
          out += n.lit.str;
          break;
        case NodeKind::Comment:
          break;
        case NodeKind::If:
          exec_block(truthy(eval(*n.a, env)) ? n.body : n.alt, env, out);
          break;
        case NodeKind::For:
          exec_for(n, env, out);
          break;
        case NodeKind::Set:
          exec_set(n, env);
          break;
        case NodeKind::Macro:
          exec_macro(n, env);
          break;
        case NodeKind::CallBlock:
          exec_call_block(n, env, out);
          break;
        case NodeKind::Break:
          throw BreakSignal{};
        case NodeKind::Continue:
          throw ContinueSignal{};
        case NodeKind::FilterBlock: {
          std::string inner;
          exec_block(n.body, env, inner);
          const Value v = apply_filter(Value::string(std::move(inner)), *n.a, env);
          if (!v.is_none()) out += to_output(v);
          break;
        }
        default: {
          const Value v = eval(n, env);
          if (!v.is_none()) out += to_output(v);
        }
      }
    } catch (JinjaError& e) {
      if (!e.line) e.line = n.line;
      throw;
    }
  }
}

Value Interpreter::eval(const Node& n, Env& env) {
  try {
    return eval_inner(n, env);
  } catch (JinjaError& e) {
    if (!e.line) e.line = n.line;
    throw;
  }
}

Value Interpreter::eval_inner(const Node& n, Env& env) {
  switch (n.kind) {
    case NodeKind::Literal:
      return n.lit;
    case NodeKind::Ident:
      return env.lookup(n.name);
    case NodeKind::ArrayLit:
    case NodeKind::TupleLit: {
      Array a;
      a.reserve(n.list.size());
      for (const auto& e : n.list) a.push_back(eval(*e, env));
      return Value::array(std::move(a), n.kind == NodeKind::ArrayLit ? Kind::Array : Kind::Tuple);
    }
    case NodeKind::ObjectLit: {
      Object o;
      for (size_t i = 0; i + 1 < n.list.size(); i += 2) {
        Value k = eval(*n.list[i], env);
        if (k.kind != Kind::String)
          fail(std::string("Object keys must be strings: got ") + kind_name(k.kind));
        o.set(k.str, eval(*n.list[i + 1], env));
      }
      return Value::object(std::move(o));
    }
    case NodeKind::Member:
      return eval_member(n, env);
    case NodeKind::Call:
      return eval_call(n, env);
    case NodeKind::Binary:
      return eval_binary(n, env);
    case NodeKind::Unary: {
      const Value v = eval(*n.a, env);
      if (n.op == Op::Not) return Value::boolean(!truthy(v));
      const double sign = n.op == Op::Neg ? -1 : 1;
      if (v.is_number() || v.kind == Kind::Bool) {
        const double x = v.kind == Kind::Bool ? (v.b ? 1 : 0) : v.num;
        return v.kind == Kind::Float ? Value::floating(sign * x) : Value::integer(sign * x);
      }
      fail("Unknown operator \"" + n.name + "\" for " + kind_name(v.kind));
    }
    case NodeKind::Filter:
      return apply_filter(eval(*n.a, env), *n.b, env);
    case NodeKind::Test: {
      const bool r = run_test(n.name, eval(*n.a, env), nullptr);
      return Value::boolean(n.flag ? !r : r);
    }
    case NodeKind::Select:
      if (!truthy(eval(*n.b, env))) return Value::undefined();
      return eval(*n.a, env);
    case NodeKind::Ternary:
      return truthy(eval(*n.a, env)) ? eval(*n.b, env) : eval(*n.c, env);
    default:
      fail("this statement cannot be used as an expression");
  }
}

Value Interpreter::eval_binary(const Node& n, Env& env) {
  const Op op = n.op;
  Value left = eval(*n.a, env);
  if (op == Op::And) return truthy(left) ? eval(*n.b, env) : left;
  if (op == Op::Or) return truthy(left) ? left : eval(*n.b, env);
  Value right = eval(*n.b, env);
  if (op == Op::Eq) return Value::boolean(loose_equal(left, right));
  if (op == Op::Ne) return Value::boolean(!loose_equal(left, right));
  const bool in_op = op == Op::In || op == Op::NotIn;
  if (left.kind == Kind::Undefined || right.kind == Kind::Undefined) {
    if (right.kind == Kind::Undefined && in_op) return Value::boolean(op == Op::NotIn);
    fail("Cannot perform operation " + n.name + " on undefined values");
  }
  if (left.kind == Kind::Null || right.kind == Kind::Null) fail("Cannot perform operation on null values");
  if (op == Op::Concat) return Value::string(to_raw_string(left) + to_raw_string(right));
  auto numeric_like = [](const Value& v) { return v.is_number() || v.kind == Kind::Bool; };
  auto numval = [](const Value& v) { return v.kind == Kind::Bool ? (v.b ? 1.0 : 0.0) : v.num; };
  if (op == Op::Pow && numeric_like(left) && numeric_like(right)) {
    const double a = numval(left), b = numval(right);
    if (a == 0 && b < 0) fail("0.0 cannot be raised to a negative power");
    const double r = std::pow(a, b);
    if (!std::isfinite(r)) fail("Exponentiation result is not a finite real number");
    const bool is_float = left.kind == Kind::Float || right.kind == Kind::Float || b < 0;
    return is_float ? Value::floating(r) : Value::integer(r);
  }
  if (left.is_number() && right.is_number()) {
    const double a = left.num, b = right.num;
    const bool is_float = left.kind == Kind::Float || right.kind == Kind::Float;
    auto num = [&](double r) { return is_float ? Value::floating(r) : Value::integer(r); };
    switch (op) {
      case Op::Add:
        return num(a + b);
      case Op::Sub:
        return num(a - b);
      case Op::Mul:
        return num(a * b);
      case Op::Div:
        return Value::floating(a / b);
      case Op::FloorDiv:
        return num(std::floor(a / b));
      case Op::Mod:
        return num(std::fmod(a, b));
      case Op::Lt:
        return Value::boolean(a < b);
      case Op::Gt:
        return Value::boolean(a > b);
      case Op::Ge:
        return Value::boolean(a >= b);
      case Op::Le:
        return Value::boolean(a <= b);
      default:
        break;
    }
  } else if (left.is_array() && right.is_array()) {
    if (op == Op::Add) {
      Array a = *left.arr;
      a.insert(a.end(), right.arr->begin(), right.arr->end());
      return Value::array(std::move(a));
    }
  } else if (right.is_array()) {
    if (in_op) {
      bool member = false;
      for (const Value& x : *right.arr) member = member || strict_equal(x, left);
      return Value::boolean(op == Op::In ? member : !member);
    }
  }
  if (left.kind == Kind::String && right.kind == Kind::String && op == Op::Add) {
    left.str += right.str;  // `left` is our own copy: append in place
    return left;
  }
  if ((left.kind == Kind::String || right.kind == Kind::String) && op == Op::Add)
    return Value::string(to_raw_string(left) + to_raw_string(right));
  if (left.kind == Kind::String && right.kind == Kind::String && in_op) {
    const bool has = right.str.find(left.str) != std::string::npos;
    return Value::boolean(op == Op::In ? has : !has);
  }
  if (left.kind == Kind::String && right.is_object() && in_op) {
    const bool has = right.obj->find(left.str) != nullptr;
    return Value::boolean(op == Op::In ? has : !has);
  }
  fail("Unknown operator \"" + n.name + "\" between " + kind_name(left.kind) + " and " +
       kind_name(right.kind));
}

Value Interpreter::eval_member(const Node& n, Env& env) {
  const Value object = eval(*n.a, env);
  Value property;
  if (n.flag) {
    if (n.b->kind == NodeKind::Slice) {
      if (!(object.is_array() || object.kind == Kind::String))
        fail("Slice object must be an array or string");
      const Value start = n.b->a ? eval(*n.b->a, env) : Value();
      const Value stop = n.b->b ? eval(*n.b->b, env) : Value();
      const Value step = n.b->c ? eval(*n.b->c, env) : Value();
      for (const Value* v : {&start, &stop, &step})
        if (!(v->kind == Kind::Int || v->kind == Kind::Undefined))
          fail("Slice start/stop/step must be integers");
      if (object.is_array()) {
        Array out;
        for (size_t i : slice_indices(object.arr->size(), start, stop, step)) out.push_back((*object.arr)[i]);
        return Value::array(std::move(out));
      }
      const auto cps = js_code_points(object.str);
      std::string out;
      for (size_t i : slice_indices(cps.size(), start, stop, step)) out += cps[i];
      return Value::string(std::move(out));
    }
    property = eval(*n.b, env);
  } else if (n.b->kind == NodeKind::Literal) {
    property = n.b->lit;
  } else {
    property = Value::string(n.b->name);
  }
  if (object.is_attr_container()) {
    if (property.kind != Kind::String)
      fail(std::string("Cannot access property with non-string: got ") + kind_name(property.kind));
    if (const Value* v = object.obj->find(property.str)) return *v;
    return object.is_object() ? builtin_member(object, property.str) : Value::undefined();
  }
  if (object.is_array() || object.kind == Kind::String) {
    if (property.kind == Kind::Int) {
      if (object.is_array()) {
        double i = property.num;
        const double len = static_cast<double>(object.arr->size());
        if (i < 0) i += len;
        return i >= 0 && i < len ? (*object.arr)[static_cast<size_t>(i)] : Value::undefined();
      }
      // String#at over UTF-16 units; an index inside a surrogate pair yields U+FFFD here.
      double i = property.num;
      const double len = static_cast<double>(js_length(object.str));
      if (i < 0) i += len;
      if (!(i >= 0 && i < len)) return Value::undefined();
      size_t unit = 0;
      for (size_t p = 0; p < object.str.size();) {
        const size_t a = p;
        const char32_t cp = utf8_next(object.str, p);
        const size_t w = cp >= 0x10000 ? 2 : 1;
        if (static_cast<double>(unit) == i) {
          if (w == 1) return Value::string(object.str.substr(a, p - a));
          return Value::string("\xEF\xBF\xBD");
        }
        if (w == 2 && static_cast<double>(unit + 1) == i) return Value::string("\xEF\xBF\xBD");
        unit += w;
      }
      return Value::undefined();
    }
    if (property.kind == Kind::String) return builtin_member(object, property.str);
    fail(std::string("Cannot access property with non-string/non-number: got ") + kind_name(property.kind));
  }
  if (property.kind != Kind::String)
    fail(std::string("Cannot access property with non-string: got ") + kind_name(property.kind));
  return builtin_member(object, property.str);
}

void Interpreter::eval_args(const std::vector<NodePtr>& args, Env& env, std::vector<Value>& pos,
                            std::vector<std::pair<std::string, Value>>& kw) {
  for (const auto& a : args) {
    if (a->kind == NodeKind::Spread) {
      const Value v = eval(*a->a, env);
      if (!v.is_array()) fail(std::string("Cannot unpack non-iterable type: ") + kind_name(v.kind));
      pos.insert(pos.end(), v.arr->begin(), v.arr->end());
    } else if (a->kind != NodeKind::KwArg && a->kind != NodeKind::KwSpread) {
      pos.push_back(eval(*a, env));
    }
  }
  auto add = [&](const std::string& k, Value v) {
    if (kwarg(kw, k.c_str())) fail("Got multiple values for keyword argument '" + k + "'");
    kw.emplace_back(k, std::move(v));
  };
  for (const auto& a : args) {
    if (a->kind == NodeKind::KwArg) {
      add(a->name, eval(*a->a, env));
    } else if (a->kind == NodeKind::KwSpread) {
      const Value v = eval(*a->a, env);
      if (!v.is_object()) fail(std::string("Argument after ** must be a mapping, not ") + kind_name(v.kind));
      for (const auto& [k, x] : v.obj->items) add(k, x);
    }
  }
}

Value Interpreter::eval_call(const Node& n, Env& env) {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  eval_args(n.list, env, pos, kw);
  if (!kw.empty()) pos.push_back(kwargs_value(std::move(kw)));
  const Value fn = eval(*n.a, env);
  if (fn.kind != Kind::Function) {
    std::string what = n.a->kind == NodeKind::Ident ? "'" + n.a->name + "'" : std::string("this");
    if (n.a->kind == NodeKind::Member && !n.a->flag && n.a->b->kind == NodeKind::Ident)
      what = "'." + n.a->b->name + "'";
    fail("Cannot call something that is not a function: " + what + " is " + kind_name(fn.kind));
  }
  return (*fn.fn)(pos, env);
}

}  // namespace spk::rt::jinja
