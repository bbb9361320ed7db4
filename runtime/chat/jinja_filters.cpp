// `value | filter` and `value | filter(args)`, dispatched on the operand's type exactly like the
// reference's applyFilter (including which forms exist: e.g. `default` and `map` only with parentheses).
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "runtime/chat/jinja_interpreter.h"
#include "runtime/chat/jinja_parser.h"
#include "runtime/chat/js_string.h"

namespace spk::rt::jinja {

namespace {
[[noreturn]] void fail(const std::string& msg) { throw JinjaError(msg); }

// parseInt(s, 10) / parseFloat(s): leading JS whitespace, longest numeric prefix, NaN when none.
double parse_int(const std::string& s) {
  const std::string t = js_trim_start(s);
  size_t i = 0;
  bool neg = false;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) neg = t[i++] == '-';
  const size_t d = i;
  double v = 0;
  while (i < t.size() && t[i] >= '0' && t[i] <= '9') v = v * 10 + (t[i++] - '0');
  if (i == d) return NAN;
  return neg ? -v : v;
}
double parse_float(const std::string& s) {
  const std::string t = js_trim_start(s);
  size_t i = 0;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
  if (t.compare(i, 8, "Infinity") == 0) return t[0] == '-' ? -INFINITY : INFINITY;
  const size_t int_start = i;
  while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
  size_t digits = i - int_start;
  if (i < t.size() && t[i] == '.') {
    size_t j = i + 1;
    while (j < t.size() && std::isdigit(static_cast<unsigned char>(t[j]))) ++j;
    digits += j - i - 1;
    i = j;
  }
  if (digits == 0) return NAN;
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    size_t j = i + 1;
    if (j < t.size() && (t[j] == '+' || t[j] == '-')) ++j;
    const size_t e = j;
    while (j < t.size() && std::isdigit(static_cast<unsigned char>(t[j]))) ++j;
    if (j > e) i = j;
  }
  return std::strtod(t.substr(0, i).c_str(), nullptr);
}

std::string indent_lines(const std::string& s, const std::string& pad, bool first, bool blank) {
  std::string out;
  size_t start = 0;
  for (size_t line = 0;; ++line) {
    const size_t nl = s.find('\n', start);
    const std::string x = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if (line) out += '\n';
    if ((!first && line == 0) || (!blank && x.empty())) {
      out += x;
    } else {
      out += pad + x;
    }
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return out;
}

std::string join_values(const Array& a, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < a.size(); ++i) {
    if (i) out += sep;
    out += join_element(a[i]);
  }
  return out;
}

Value sorted(const Array& a, bool reverse, bool case_sensitive, const Value& attribute) {
  Array out = a;
  auto key = [&](const Value& item) {
    if (attribute.kind == Kind::Null) return item;
    return attribute_path(item, attribute.kind == Kind::Int ? js_number(attribute.num) : attribute.str);
  };
  std::stable_sort(out.begin(), out.end(), [&](const Value& x, const Value& y) {
    int r = compare_values(key(x), key(y), case_sensitive);
    if (reverse) r = -r;
    return r < 0;
  });
  return Value::array(std::move(out));
}

Value filter_plain(const Value& v, const std::string& f, Env& env) {
  if (f == "safe") return v;
  if (f == "tojson") return Value::string(to_json(v, {}));
  if (v.is_array()) {
    const Array& a = *v.arr;
    if (f == "list") return v;
    if (f == "first") return a.empty() ? Value() : a.front();
    if (f == "last") return a.empty() ? Value() : a.back();
    if (f == "length") return Value::integer(double(a.size()));
    if (f == "reverse") return Value::array(Array(a.rbegin(), a.rend()));
    if (f == "sort") return sorted(a, false, false, Value::null());
    if (f == "join") return Value::string(join_values(a, ""));
    if (f == "string") return Value::string(to_json(v, {}, 0, false));
    if (f == "unique") {
      Array out;
      for (const Value& x : a) {
        const bool seen =
            std::any_of(out.begin(), out.end(), [&](const Value& y) { return strict_equal(x, y); });
        if (!seen) out.push_back(x);
      }
      return Value::array(std::move(out));
    }
    fail("Unknown ArrayValue filter: " + f);
  }
  if (v.kind == Kind::String) {
    if (f == "length" || f == "upper" || f == "lower" || f == "title" || f == "capitalize") {
      Value m = Interpreter::builtin_member(v, f);
      if (m.kind != Kind::Function) return m;
      std::vector<Value> none;
      return (*m.fn)(none, env);
    }
    if (f == "trim") return Value::string(js_trim(v.str));
    if (f == "indent") return Value::string(indent_lines(v.str, "    ", false, false));
    if (f == "join" || f == "string") return v;
    if (f == "int") {
      const double x = parse_int(v.str);
      return Value::integer(std::isnan(x) ? 0 : x);
    }
    if (f == "float") {
      const double x = parse_float(v.str);
      return Value::floating(std::isnan(x) ? 0 : x);
    }
    fail("Unknown StringValue filter: " + f);
  }
  if (v.is_number()) {
    if (f == "abs")
      return v.kind == Kind::Int ? Value::integer(std::fabs(v.num)) : Value::floating(std::fabs(v.num));
    if (f == "int") return Value::integer(std::floor(v.num));
    if (f == "float") return Value::floating(v.num);
    if (f == "string") return Value::string(to_output(v));
    fail("Unknown NumericValue filter: " + f);
  }
  if (v.is_object()) {
    if (f == "items") {
      std::vector<Value> none;
      return (*Interpreter::builtin_member(v, "items").fn)(none, env);
    }
    if (f == "length") return Value::integer(double(v.obj->items.size()));
    Value m = Interpreter::builtin_member(v, f);
    if (m.kind == Kind::Function) {
      std::vector<Value> none;
      return (*m.fn)(none, env);
    }
    if (m.kind != Kind::Undefined) return m;
    fail("Unknown ObjectValue filter: " + f);
  }
  if (v.kind == Kind::Bool) {
    if (f == "bool") return v;
    if (f == "int") return Value::integer(v.b ? 1 : 0);
    if (f == "float") return Value::floating(v.b ? 1 : 0);
    if (f == "string") return Value::string(v.b ? "true" : "false");
    fail("Unknown BooleanValue filter: " + f);
  }
  fail("Cannot apply filter \"" + f + "\" to type: " + kind_name(v.kind));
}
}  // namespace

Value Interpreter::apply_filter(const Value& v, const Node& filter, Env& env) {
  if (filter.kind == NodeKind::Ident) return filter_plain(v, filter.name, env);
  const std::string& f = filter.a->name;
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // selectattr/rejectattr evaluate their (string literal) arguments themselves.
  if (f != "selectattr" && f != "rejectattr") eval_args(filter.list, env, pos, kw);
  auto arg = [&](size_t i, const char* name, Value def) {
    if (i < pos.size()) return pos[i];
    if (name)
      if (const Value* x = kwarg(kw, name)) return *x;
    return def;
  };
  if (f == "tojson") {
    JsonOptions o;
    const Value indent = arg(SIZE_MAX, "indent", Value::null());
    if (!(indent.kind == Kind::Int || indent.kind == Kind::Null)) fail("If set, indent must be a number");
    o.indent = indent.kind == Kind::Int ? static_cast<int>(indent.num) : 0;
    const Value ascii = arg(SIZE_MAX, "ensure_ascii", Value::boolean(false));
    if (ascii.kind != Kind::Bool) fail("If set, ensure_ascii must be a boolean");
    o.ensure_ascii = ascii.b;
    const Value sort = arg(SIZE_MAX, "sort_keys", Value::boolean(false));
    if (sort.kind != Kind::Bool) fail("If set, sort_keys must be a boolean");
    o.sort_keys = sort.b;
    const Value seps = arg(SIZE_MAX, "separators", Value::null());
    if (seps.is_array()) {
      if (seps.arr->size() != 2 || (*seps.arr)[0].kind != Kind::String || (*seps.arr)[1].kind != Kind::String)
        fail("separators must be a tuple of two strings");
      o.has_separators = true;
      o.item_sep = (*seps.arr)[0].str;
      o.key_sep = (*seps.arr)[1].str;
    } else if (seps.kind != Kind::Null) {
      fail("If set, separators must be a tuple of two strings");
    }
    return Value::string(to_json(v, o));
  }
  if (f == "join") {
    if (!(v.kind == Kind::String || v.is_array()))
      fail("Cannot apply filter \"join\" to type: " + std::string(kind_name(v.kind)));
    const Value sep = arg(0, "separator", Value::string(""));
    if (sep.kind != Kind::String) fail("separator must be a string");
    if (v.is_array()) return Value::string(join_values(*v.arr, sep.str));
    const auto cps = js_code_points(v.str);
    std::string out;
    for (size_t i = 0; i < cps.size(); ++i) out += (i ? sep.str : "") + cps[i];
    return Value::string(std::move(out));
  }
  if (f == "int" || f == "float") {
    const bool is_int = f == "int";
    const Value def = arg(0, "default", is_int ? Value::integer(0) : Value::floating(0));
    if (v.kind == Kind::String) {
      const double x = is_int ? parse_int(v.str) : parse_float(v.str);
      return std::isnan(x) ? def : is_int ? Value::integer(x) : Value::floating(x);
    }
    if (v.is_number()) return v;
    if (v.kind == Kind::Bool) return is_int ? Value::integer(v.b ? 1 : 0) : Value::floating(v.b ? 1 : 0);
    fail("Cannot apply filter \"" + f + "\" to type: " + kind_name(v.kind));
  }
  if (f == "default") {
    const Value def = pos.size() > 0 ? pos[0] : Value::string("");
    const Value boolean = arg(1, "boolean", Value::boolean(false));
    if (boolean.kind != Kind::Bool) fail("`default` filter flag must be a boolean");
    if (v.kind == Kind::Undefined || (boolean.b && !truthy(v))) return def;
    return v;
  }
  if (v.is_array()) {
    const Array& a = *v.arr;
    if (f == "sort") {
      const Value rev = arg(0, "reverse", Value::boolean(false));
      if (rev.kind != Kind::Bool) fail("reverse must be a boolean");
      const Value cs = arg(1, "case_sensitive", Value::boolean(false));
      if (cs.kind != Kind::Bool) fail("case_sensitive must be a boolean");
      const Value attr = arg(2, "attribute", Value::null());
      if (!(attr.kind == Kind::String || attr.kind == Kind::Int || attr.kind == Kind::Null))
        fail("attribute must be a string, integer, or null");
      return sorted(a, rev.b, cs.b, attr);
    }
    if (f == "selectattr" || f == "rejectattr") {
      const bool select = f == "selectattr";
      for (const Value& item : a)
        if (!item.is_attr_container()) fail("`" + f + "` can only be applied to array of objects");
      for (const auto& x : filter.list)
        if (!(x->kind == NodeKind::Literal && x->lit.kind == Kind::String))
          fail("arguments of `" + f + "` must be strings");
      std::vector<Value> args;
      for (const auto& x : filter.list) args.push_back(eval(*x, env));
      if (args.empty()) fail("`" + f + "` needs an attribute name");
      const bool has_test = args.size() > 1;
      if (has_test && !is_known_test(args[1].str)) fail("Unknown test: " + args[1].str);
      Array out;
      for (const Value& item : a) {
        const Value* attr = item.obj->find(args[0].str);
        bool r = false;
        if (attr)
          r = has_test ? run_test(args[1].str, *attr, args.size() > 2 ? &args[2] : nullptr) : truthy(*attr);
        if (r == select) out.push_back(item);
      }
      return Value::array(std::move(out));
    }
    if (f == "map") {
      const Value* attr = kwarg(kw, "attribute");
      if (!attr) fail("`map` expressions without `attribute` set are not currently supported.");
      if (attr->kind != Kind::String) fail("attribute must be a string");
      const Value* def = kwarg(kw, "default");
      Array out;
      for (const Value& item : a) {
        if (!item.is_attr_container()) fail("items in map must be an object");
        Value x = attribute_path(item, attr->str);
        out.push_back(x.kind == Kind::Undefined && def ? *def : x);
      }
      return Value::array(std::move(out));
    }
    fail("Unknown ArrayValue filter: " + f);
  }
  if (v.kind == Kind::String) {
    if (f == "indent") {
      const Value width = arg(0, "width", Value::integer(4));
      if (width.kind != Kind::Int) fail("width must be a number");
      const Value first = arg(1, "first", Value::boolean(false));
      const Value blank = arg(2, "blank", Value::boolean(false));
      return Value::string(indent_lines(v.str,
                                        std::string(static_cast<size_t>(std::max(0.0, width.num)), ' '),
                                        truthy(first), truthy(blank)));
    }
    if (f == "replace") {
      std::vector<Value> args = pos;
      args.push_back(kwargs_value(kw));
      return (*builtin_member(v, "replace").fn)(args, env);
    }
    fail("Unknown StringValue filter: " + f);
  }
  if (v.is_object()) {
    Value m = builtin_member(v, f);
    if (m.kind == Kind::Function) {
      if (!kw.empty()) pos.push_back(kwargs_value(kw));
      return (*m.fn)(pos, env);
    }
    fail("Unknown ObjectValue filter: " + f);
  }
  fail("Cannot apply filter \"" + f + "\" to type: " + kind_name(v.kind));
}

}  // namespace spk::rt::jinja
