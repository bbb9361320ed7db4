// Methods reachable as `value.name(...)` (StringValue / ObjectValue / ArrayValue builtins of the
// reference), the `is` tests, and the comparison/attribute helpers shared with the filters.
#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/chat/jinja_interpreter.h"
#include "runtime/chat/js_string.h"

namespace spk::rt::jinja {

namespace {
[[noreturn]] void fail(const std::string& msg) { throw JinjaError(msg); }

bool is_word_byte(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

std::string title_case(const std::string& s) {
  std::string r = s;
  bool prev_word = false;
  for (char& c : r) {
    const bool w = is_word_byte(c);
    if (w && !prev_word && c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
    prev_word = w;
  }
  return r;
}

bool prefix_match(const std::string& s, const Value& pattern, bool start, const char* fn) {
  auto one = [&](const std::string& p) {
    if (p.size() > s.size()) return false;
    return start ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0;
  };
  if (pattern.kind == Kind::String) return one(pattern.str);
  if (pattern.is_array()) {
    for (const Value& item : *pattern.arr) {
      if (item.kind != Kind::String) fail(std::string(fn) + "() tuple elements must be strings");
      if (one(item.str)) return true;
    }
    return false;
  }
  fail(std::string(fn) + "() argument must be a string or tuple of strings");
}

Value split(const std::string& s, std::vector<Value>& args) {
  const Value sep = args.size() > 0 ? args[0] : Value::null();
  if (!(sep.kind == Kind::String || sep.kind == Kind::Null)) fail("sep argument must be a string or null");
  const Value maxsplit = args.size() > 1 ? args[1] : Value::integer(-1);
  if (maxsplit.kind != Kind::Int) fail("maxsplit argument must be a number");
  const double max = maxsplit.num;
  Array out;
  if (sep.kind == Kind::Null) {
    const std::string text = js_trim_start(s);
    size_t i = 0;
    while (i < text.size()) {
      i += js_space_run_forward(text, i);
      if (i >= text.size()) break;
      size_t j = i;
      while (j < text.size()) {
        size_t k = j;
        if (js_is_space(utf8_next(text, k))) break;
        j = k;
      }
      if (max != -1 && static_cast<double>(out.size()) >= max) {
        out.push_back(Value::string(text.substr(i)));
        break;
      }
      out.push_back(Value::string(text.substr(i, j - i)));
      i = j;
    }
  } else {
    if (sep.str.empty()) fail("empty separator");
    std::vector<std::string> parts;
    size_t start = 0;
    for (size_t p; (p = s.find(sep.str, start)) != std::string::npos; start = p + sep.str.size())
      parts.push_back(s.substr(start, p - start));
    parts.push_back(s.substr(start));
    if (max != -1 && static_cast<double>(parts.size()) > max) {
      const size_t keep = static_cast<size_t>(std::max(0.0, max));
      std::string rest;
      for (size_t i = keep; i < parts.size(); ++i) rest += (i > keep ? sep.str : "") + parts[i];
      parts.resize(keep);
      parts.push_back(rest);
    }
    for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  }
  return Value::array(std::move(out));
}

Value object_items(const Value& o) {
  Array out;
  for (const auto& [k, v] : o.obj->items) out.push_back(Value::array({Value::string(k), v}));
  return Value::array(std::move(out));
}

Value dictsort(const Value& o, std::vector<Value>& args) {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  for (const Value& a : args) {
    if (a.kind == Kind::KwArgs) {
      kw = a.obj->items;
    } else {
      pos.push_back(a);
    }
  }
  auto pick = [&](size_t i, const char* name, Value def) {
    if (i < pos.size()) return pos[i];
    if (const Value* v = kwarg(kw, name)) return *v;
    return def;
  };
  const Value cs = pick(0, "case_sensitive", Value::boolean(false));
  if (cs.kind != Kind::Bool) fail("case_sensitive must be a boolean");
  const Value by = pick(1, "by", Value::string("key"));
  if (by.kind != Kind::String) fail("by must be a string");
  if (by.str != "key" && by.str != "value") fail("by must be either 'key' or 'value'");
  const Value rev = pick(2, "reverse", Value::boolean(false));
  if (rev.kind != Kind::Bool) fail("reverse must be a boolean");
  Array items = *object_items(o).arr;
  const size_t idx = by.str == "key" ? 0 : 1;
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    int r = compare_values((*a.arr)[idx], (*b.arr)[idx], cs.b);
    if (rev.b) r = -r;
    return r < 0;
  });
  return Value::array(std::move(items));
}
}  // namespace

std::string js_replace(const std::string& s, const std::string& from, const std::string& to, double count) {
  if (count == 0) return s;
  double remaining = count < 0 ? std::numeric_limits<double>::infinity() : count;
  std::string out;
  if (from.empty()) {  // /(?=)/gu matches before every code point and at the end
    for (size_t i = 0; i < s.size();) {
      if (remaining > 0) {
        out += to;
        --remaining;
      }
      const size_t a = i;
      utf8_next(s, i);
      out.append(s, a, i - a);
    }
    if (remaining > 0) out += to;
    return out;
  }
  size_t start = 0;
  for (size_t p; remaining > 0 && (p = s.find(from, start)) != std::string::npos; start = p + from.size()) {
    out.append(s, start, p - start);
    out += to;
    --remaining;
  }
  out.append(s, start, std::string::npos);
  return out;
}

Value attribute_path(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (v.is_attr_container()) {
      const Value* f = v.obj->find(part);
      v = f ? *f : Value();
    } else if (v.is_array()) {
      char* end = nullptr;
      const long idx = std::strtol(part.c_str(), &end, 10);
      if (end == part.c_str() || idx < 0 || static_cast<size_t>(idx) >= v.arr->size()) return Value();
      v = (*v.arr)[static_cast<size_t>(idx)];
    } else {
      return Value();
    }
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

int compare_values(const Value& a, const Value& b, bool case_sensitive) {
  if (a.kind == Kind::Null && b.kind == Kind::Null) return 0;
  if (a.kind == Kind::Null || b.kind == Kind::Null)
    fail(std::string("Cannot compare ") + kind_name(a.kind) + " with " + kind_name(b.kind));
  if (a.kind == Kind::Undefined && b.kind == Kind::Undefined) return 0;
  if (a.kind == Kind::Undefined || b.kind == Kind::Undefined)
    fail(std::string("Cannot compare ") + kind_name(a.kind) + " with " + kind_name(b.kind));
  auto numeric = [](const Value& v) { return v.is_number() || v.kind == Kind::Bool; };
  if (numeric(a) && numeric(b)) {
    const double x = a.kind == Kind::Bool ? a.b : a.num, y = b.kind == Kind::Bool ? b.b : b.num;
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.kind != b.kind)
    fail(std::string("Cannot compare different types: ") + kind_name(a.kind) + " and " + kind_name(b.kind));
  if (a.kind == Kind::String) {
    const std::string x = case_sensitive ? a.str : js_lower(a.str);
    const std::string y = case_sensitive ? b.str : js_lower(b.str);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  fail(std::string("Cannot compare type: ") + kind_name(a.kind));
}

bool Interpreter::run_test(const std::string& name, const Value& v, const Value* arg) {
  const Kind k = v.kind;
  if (name == "boolean") return k == Kind::Bool;
  if (name == "callable") return k == Kind::Function;
  if (name == "odd" || name == "even") {
    if (k != Kind::Int) fail("cannot " + name + " on " + kind_name(k));
    const bool odd = std::fmod(v.num, 2.0) != 0;
    return name == "odd" ? odd : !odd;
  }
  if (name == "false") return k == Kind::Bool && !v.b;
  if (name == "true") return k == Kind::Bool && v.b;
  if (name == "none") return k == Kind::Null;
  if (name == "string") return k == Kind::String;
  if (name == "number") return v.is_number();
  if (name == "integer") return k == Kind::Int;
  if (name == "iterable") return k == Kind::Array || k == Kind::String;
  if (name == "mapping") return v.is_object();
  if (name == "sequence") return v.is_array() || v.is_object() || k == Kind::String;
  if (name == "lower") return k == Kind::String && v.str == js_lower(v.str);
  if (name == "upper") return k == Kind::String && v.str == js_upper(v.str);
  if (name == "defined") return k != Kind::Undefined;
  if (name == "undefined") return k == Kind::Undefined;
  if (name == "equalto" || name == "eq") return strict_equal(v, arg ? *arg : Value());
  fail("Unknown test: " + name);
}

Value Interpreter::builtin_member(const Value& o, const std::string& name) {
  auto method = [&](auto body) {
    Value self = o;
    return Value::function([self, body](std::vector<Value>& args, Env&) { return body(self, args); });
  };
  using Args = std::vector<Value>;
  if (o.kind == Kind::String) {
    if (name == "length") return Value::integer(double(js_length(o.str)));
    if (name == "upper") return method([](const Value& s, Args&) { return Value::string(js_upper(s.str)); });
    if (name == "lower") return method([](const Value& s, Args&) { return Value::string(js_lower(s.str)); });
    // The reference's strip/lstrip/rstrip ignore their argument and trim JS whitespace.
    if (name == "strip") return method([](const Value& s, Args&) { return Value::string(js_trim(s.str)); });
    if (name == "lstrip")
      return method([](const Value& s, Args&) { return Value::string(js_trim_start(s.str)); });
    if (name == "rstrip")
      return method([](const Value& s, Args&) { return Value::string(js_trim_end(s.str)); });
    if (name == "title")
      return method([](const Value& s, Args&) { return Value::string(title_case(s.str)); });
    if (name == "capitalize")
      return method([](const Value& s, Args&) { return Value::string(js_upper_first(s.str)); });
    if (name == "startswith" || name == "endswith") {
      const bool start = name == "startswith";
      return method([start](const Value& s, Args& a) {
        const char* fn = start ? "startswith" : "endswith";
        if (a.empty()) fail(std::string(fn) + "() requires at least one argument");
        return Value::boolean(prefix_match(s.str, a[0], start, fn));
      });
    }
    if (name == "split") return method([](const Value& s, Args& a) { return split(s.str, a); });
    if (name == "replace")
      return method([](const Value& s, Args& a) {
        if (a.size() < 2) fail("replace() requires at least two arguments");
        if (a[0].kind != Kind::String || a[1].kind != Kind::String)
          fail("replace() arguments must be strings");
        Value count = Value::null();
        if (a.size() > 2) {
          if (a[2].kind == Kind::KwArgs) {
            const Value* c = a[2].obj->find("count");
            count = c ? *c : Value::null();
          } else {
            count = a[2];
          }
        }
        if (!(count.kind == Kind::Int || count.kind == Kind::Null))
          fail("replace() count argument must be a number or null");
        return Value::string(
            js_replace(s.str, a[0].str, a[1].str, count.kind == Kind::Null ? -1 : count.num));
      });
    return Value();
  }
  if (o.is_object()) {
    if (name == "get")
      return method([](const Value& self, Args& a) {
        if (a.empty() || a[0].kind != Kind::String)
          fail(std::string("Object key must be a string: got ") +
               kind_name(a.empty() ? Kind::Undefined : a[0].kind));
        if (const Value* v = self.obj->find(a[0].str)) return *v;
        return a.size() > 1 ? a[1] : Value::null();
      });
    if (name == "items") return method([](const Value& self, Args&) { return object_items(self); });
    if (name == "keys")
      return method([](const Value& self, Args&) {
        Array out;
        for (const auto& kv : self.obj->items) out.push_back(Value::string(kv.first));
        return Value::array(std::move(out));
      });
    if (name == "values")
      return method([](const Value& self, Args&) {
        Array out;
        for (const auto& kv : self.obj->items) out.push_back(kv.second);
        return Value::array(std::move(out));
      });
    if (name == "dictsort") return method([](const Value& self, Args& a) { return dictsort(self, a); });
    return Value();
  }
  if (o.is_array() && name == "length") return Value::integer(double(o.arr->size()));
  return Value();
}

}  // namespace spk::rt::jinja
