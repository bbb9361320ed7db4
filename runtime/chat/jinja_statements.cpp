// Block statements: for (one scope shared by all iterations, loop.* object, inline `if` filter, else),
// set (names, tuples, namespace attributes, block capture), macros and call blocks (argument binding,
// kwargs/varargs, caller()).
#include <string>
#include <vector>

#include "runtime/chat/jinja_interpreter.h"

namespace spk::rt::jinja {

namespace {
[[noreturn]] void fail(const std::string& msg) { throw JinjaError(msg); }

void collect_specials(const Node* n, bool& kwargs, bool& varargs) {
  if (!n) return;
  if (n->kind == NodeKind::Ident) {
    kwargs = kwargs || n->name == "kwargs";
    varargs = varargs || n->name == "varargs";
  }
  collect_specials(n->a.get(), kwargs, varargs);
  collect_specials(n->b.get(), kwargs, varargs);
  collect_specials(n->c.get(), kwargs, varargs);
  for (const auto* v : {&n->list, &n->body, &n->alt})
    for (const auto& k : *v) collect_specials(k.get(), kwargs, varargs);
}

}  // namespace

void Interpreter::exec_for(const Node& n, Env& env, std::string& out) {
  Env scope(&env);
  const Node* test = nullptr;
  Value iterable;
  if (n.b->kind == NodeKind::Select) {
    iterable = eval(*n.b->a, scope);
    test = n.b->b.get();
  } else {
    iterable = eval(*n.b, scope);
  }
  if (!(iterable.is_array() || iterable.is_object()))
    fail(std::string("Expected iterable or object type in for loop: got ") + kind_name(iterable.kind));
  Array source;
  if (iterable.is_object()) {
    for (const auto& kv : iterable.obj->items) source.push_back(Value::string(kv.first));
  }
  const Array& all = iterable.is_object() ? source : *iterable.arr;
  const Node& var = *n.a;
  auto bind = [&](Env& e, const Value& cur) {
    if (var.kind == NodeKind::Ident) {
      e.set(var.name, cur);
      return;
    }
    if (cur.kind != Kind::Array) fail(std::string("Cannot unpack non-iterable type: ") + kind_name(cur.kind));
    if (var.list.size() != cur.arr->size())
      fail(std::string("Too ") + (var.list.size() > cur.arr->size() ? "few" : "many") + " items to unpack");
    for (size_t j = 0; j < var.list.size(); ++j) {
      if (var.list[j]->kind != NodeKind::Ident) fail("Cannot unpack non-identifier type");
      e.set(var.list[j]->name, (*cur.arr)[j]);
    }
  };
  std::vector<const Value*> items;
  items.reserve(all.size());
  for (const Value& cur : all) {
    if (test) {
      Env loop_scope(&scope);
      bind(loop_scope, cur);
      if (!truthy(eval(*test, loop_scope))) continue;
    }
    items.push_back(&cur);
  }
  bool no_iteration = true;
  const size_t len = items.size();
  for (size_t i = 0; i < len; ++i) {
    Object loop;
    loop.items.reserve(9);
    loop.items.emplace_back("index", Value::integer(double(i + 1)));
    loop.items.emplace_back("index0", Value::integer(double(i)));
    loop.items.emplace_back("revindex", Value::integer(double(len - i)));
    loop.items.emplace_back("revindex0", Value::integer(double(len - i - 1)));
    loop.items.emplace_back("first", Value::boolean(i == 0));
    loop.items.emplace_back("last", Value::boolean(i == len - 1));
    loop.items.emplace_back("length", Value::integer(double(len)));
    loop.items.emplace_back("previtem", i > 0 ? *items[i - 1] : Value());
    loop.items.emplace_back("nextitem", i + 1 < len ? *items[i + 1] : Value());
    scope.set("loop", Value::object(std::move(loop)));
    bind(scope, *items[i]);
    const size_t mark = out.size();
    try {
      exec_block(n.body, scope, out);
    } catch (const ContinueSignal&) {
      out.resize(mark);  // the reference drops the partial output of an interrupted iteration
      continue;
    } catch (const BreakSignal&) {
      out.resize(mark);
      break;
    }
    no_iteration = false;
  }
  if (no_iteration) exec_block(n.alt, scope, out);
}

void Interpreter::exec_set(const Node& n, Env& env) {
  Value rhs;
  if (n.b) {
    rhs = eval(*n.b, env);
  } else {
    std::string s;
    exec_block(n.body, env, s);
    rhs = Value::string(std::move(s));
  }
  const Node& lhs = *n.a;
  if (lhs.kind == NodeKind::Ident) {
    env.set(lhs.name, std::move(rhs));
  } else if (lhs.kind == NodeKind::TupleLit) {
    if (!rhs.is_array()) fail(std::string("Cannot unpack non-iterable type in set: ") + kind_name(rhs.kind));
    if (rhs.arr->size() != lhs.list.size())
      fail(std::string("Too ") + (lhs.list.size() > rhs.arr->size() ? "few" : "many") +
           " items to unpack in set");
    for (size_t i = 0; i < lhs.list.size(); ++i) {
      if (lhs.list[i]->kind != NodeKind::Ident) fail("Cannot unpack to non-identifier in set");
      env.set(lhs.list[i]->name, (*rhs.arr)[i]);
    }
  } else if (lhs.kind == NodeKind::Member) {
    const Value object = eval(*lhs.a, env);
    if (object.kind != Kind::Namespace)
      fail("cannot assign attribute on non-namespace object (use namespace())");
    if (lhs.flag || lhs.b->kind != NodeKind::Ident)
      fail("Cannot assign to member with non-identifier property");
    object.obj->set(lhs.b->name, std::move(rhs));
  } else {
    fail("Invalid left-hand side in set");
  }
}

void Interpreter::bind_macro_args(const std::string& display, const Node& def,
                                  const std::vector<NodePtr>& params, std::vector<Value>& args, Env& scope) {
  std::vector<Value> pos = args;
  std::vector<std::pair<std::string, Value>> kw;
  if (!pos.empty() && pos.back().kind == Kind::KwArgs) {
    kw = pos.back().obj->items;
    pos.pop_back();
  }
  std::vector<const Node*> pending;
  for (size_t i = 0; i < params.size(); ++i) {
    const Node& p = *params[i];
    const std::string& name = p.name;
    Value v;
    bool have = i < pos.size();
    if (have) v = pos[i];
    if (!have) {
      for (auto it = kw.begin(); it != kw.end(); ++it) {
        if (it->first == name) {
          v = it->second;
          kw.erase(it);
          have = true;
          break;
        }
      }
    }
    if (!have && p.kind == NodeKind::KwArg) pending.push_back(&p);
    scope.set(name, have ? v : Value());
  }
  bool uses_kwargs = false, uses_varargs = false;
  for (const auto& b : def.body) collect_specials(b.get(), uses_kwargs, uses_varargs);
  for (const auto& p : params) {
    if (p->name == "kwargs") uses_kwargs = false;
    if (p->name == "varargs") uses_varargs = false;
  }
  if (uses_kwargs) {
    Object o;
    o.items = std::move(kw);
    scope.set("kwargs", Value::object(std::move(o)));
  } else if (!kw.empty()) {
    fail("macro " + display + " takes no keyword argument '" + kw.front().first + "'");
  }
  if (uses_varargs) {
    Array rest(pos.size() > params.size() ? pos.begin() + static_cast<long>(params.size()) : pos.end(),
               pos.end());
    scope.set("varargs", Value::array(std::move(rest)));
  } else if (pos.size() > params.size()) {
    fail("macro " + display + " takes not more than " + std::to_string(params.size()) + " argument(s)");
  }
  for (const Node* p : pending) scope.set(p->name, eval(*p->a, scope));
}

void Interpreter::exec_macro(const Node& n, Env& env) {
  const Node* def = &n;
  env.set(n.name, Value::function([this, def](std::vector<Value>& args, Env& caller) {
            struct Depth {
              int& d;
              explicit Depth(int& x) : d(++x) {}
              ~Depth() { --d; }
            } depth(macro_depth_);
            if (macro_depth_ > 100)
              fail("macro '" + def->name + "' nested deeper than 100 calls (runaway recursion?)");
            Env scope(&caller);
            bind_macro_args("'" + def->name + "'", *def, def->list, args, scope);
            std::string out;
            exec_block(def->body, scope, out);
            return Value::string(std::move(out));
          }));
}

void Interpreter::exec_call_block(const Node& n, Env& env, std::string& out) {
  const Node* def = &n;
  Env* defining = &env;
  Value caller = Value::function([this, def, defining](std::vector<Value>& args, Env&) {
    Env scope(defining);
    bind_macro_args("None", *def, def->list, args, scope);
    std::string s;
    exec_block(def->body, scope, s);
    return Value::string(std::move(s));
  });
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  eval_args(n.a->list, env, pos, kw);
  pos.push_back(kwargs_value(std::move(kw)));
  const Value fn = eval(*n.a->a, env);
  if (fn.kind != Kind::Function) fail("call block: '" + n.a->a->name + "' is not a macro");
  Env call_env(&env);
  call_env.set("caller", std::move(caller));
  const Value v = (*fn.fn)(pos, call_env);
  if (!v.is_none()) out += to_output(v);
}

}  // namespace spk::rt::jinja
