#include "runtime/chat/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "runtime/chat/js_string.h"

namespace spk::rt::jinja {

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Undefined:
      return "UndefinedValue";
    case Kind::Null:
      return "NullValue";
    case Kind::Bool:
      return "BooleanValue";
    case Kind::Int:
      return "IntegerValue";
    case Kind::Float:
      return "FloatValue";
    case Kind::String:
      return "StringValue";
    case Kind::Array:
      return "ArrayValue";
    case Kind::Tuple:
      return "TupleValue";
    case Kind::Object:
      return "ObjectValue";
    case Kind::KwArgs:
      return "KeywordArgumentsValue";
    case Kind::Namespace:
      return "NamespaceValue";
    case Kind::Function:
      return "FunctionValue";
  }
  return "?";
}

const Value* Object::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}
Value* Object::find(std::string_view key) {
  for (auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}
void Object::set(const std::string& key, Value v) {
  if (Value* p = find(key)) {
    *p = std::move(v);
  } else {
    items.emplace_back(key, std::move(v));
  }
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
    case Kind::Null:
      return false;
    case Kind::Bool:
      return v.b;
    case Kind::Int:
    case Kind::Float:
      return v.num != 0 && !std::isnan(v.num);
    case Kind::String:
      return !v.str.empty();
    case Kind::Array:
    case Kind::Tuple:
      return !v.arr->empty();
    case Kind::Object:
    case Kind::KwArgs:
      return !v.obj->items.empty();
    case Kind::Namespace:
    case Kind::Function:
      return true;
  }
  return false;
}

static std::string float_string(double x) {
  if (x == 0 && std::signbit(x)) return "-0.0";
  if (std::isfinite(x) && std::fmod(x, 1.0) == 0) {
    return std::fabs(x) < 1e21 ? js_number(x) + ".0" : js_number(x);
  }
  return js_number(x);
}

std::string to_output(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
      return "undefined";
    case Kind::Null:
      return "null";
    case Kind::Bool:
      return v.b ? "true" : "false";
    case Kind::Int:
      return js_number(v.num);
    case Kind::Float:
      return float_string(v.num);
    case Kind::String:
      return v.str;
    case Kind::Function:
      return "[function]";
    default:
      return to_json(v, {}, 0, false);
  }
}

std::string to_raw_string(const Value& v) {
  switch (v.kind) {
    case Kind::Int:
    case Kind::Float:
      return js_number(v.num);
    case Kind::Array:
    case Kind::Tuple: {
      std::string out;
      for (size_t i = 0; i < v.arr->size(); ++i) {
        if (i) out += ',';
        out += to_output((*v.arr)[i]);
      }
      return out;
    }
    case Kind::Object:
    case Kind::KwArgs:
    case Kind::Namespace:
      return "[object Map]";
    default:
      return to_output(v);
  }
}

std::string join_element(const Value& v) { return v.is_none() ? std::string() : to_raw_string(v); }

// ToNumber(string) of ECMA-262: whitespace-trimmed decimal (or empty -> 0), otherwise NaN.
static double js_to_number(const std::string& s) {
  const std::string t = js_trim(s);
  if (t.empty()) return 0;
  if (t == "Infinity" || t == "+Infinity") return INFINITY;
  if (t == "-Infinity") return -INFINITY;
  const bool ok_chars = std::all_of(t.begin(), t.end(), [](char c) {
    return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-';
  });
  if (!ok_chars) return NAN;
  char* end = nullptr;
  const double d = std::strtod(t.c_str(), &end);
  return end == t.c_str() + t.size() ? d : NAN;
}

static bool is_primitive(const Value& v) {
  return v.kind == Kind::Bool || v.is_number() || v.kind == Kind::String;
}

bool loose_equal(const Value& a, const Value& b) {
  if (a.is_none() || b.is_none()) return a.is_none() && b.is_none();
  if (!is_primitive(a) && !is_primitive(b)) {
    if (a.is_array() && b.is_array()) return a.arr == b.arr;
    if (a.obj && b.obj) return a.obj == b.obj;
    if (a.fn && b.fn) return a.fn == b.fn;
    return false;
  }
  if (!is_primitive(a)) return loose_equal(Value::string(to_raw_string(a)), b);
  if (!is_primitive(b)) return loose_equal(a, Value::string(to_raw_string(b)));
  if (a.kind == Kind::String && b.kind == Kind::String) return a.str == b.str;
  auto num = [](const Value& v) {
    return v.kind == Kind::Bool ? (v.b ? 1.0 : 0.0) : v.kind == Kind::String ? js_to_number(v.str) : v.num;
  };
  return num(a) == num(b);
}

bool strict_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.num == b.num;
  if (a.kind != b.kind) {
    // Array/Tuple and Object/KwArgs still compare by identity.
    if (a.is_array() && b.is_array()) return a.arr == b.arr;
    if (a.obj && b.obj) return a.obj == b.obj;
    return false;
  }
  switch (a.kind) {
    case Kind::Undefined:
    case Kind::Null:
      return true;
    case Kind::Bool:
      return a.b == b.b;
    case Kind::String:
      return a.str == b.str;
    case Kind::Array:
    case Kind::Tuple:
      return a.arr == b.arr;
    case Kind::Function:
      return a.fn == b.fn;
    default:
      return a.obj == b.obj;
  }
}

// String#localeCompare approximated for sort_keys: case-insensitive first, then lower before upper.
static bool locale_less(const std::string& a, const std::string& b) {
  const std::string la = ascii_lower(a), lb = ascii_lower(b);
  if (la != lb) return la < lb;
  return a > b;
}

std::string to_json(const Value& v, const JsonOptions& opt, int depth, bool undefined_as_null) {
  std::string item_sep = ", ", key_sep = ": ";
  if (opt.has_separators) {
    item_sep = opt.item_sep;
    key_sep = opt.key_sep;
  } else if (opt.indent) {
    item_sep = ",";
  }
  switch (v.kind) {
    case Kind::Null:
      return "null";
    case Kind::Undefined:
      return undefined_as_null ? "null" : "undefined";
    case Kind::Int:
    case Kind::Float:
      return std::isfinite(v.num) ? js_number(v.num) : "null";
    case Kind::Bool:
      return v.b ? "true" : "false";
    case Kind::String:
      return js_json_quote(v.str, opt.ensure_ascii);
    case Kind::Array:
    case Kind::Object:
    case Kind::Namespace: {
      const std::string unit(opt.indent > 0 ? opt.indent : 0, ' ');
      std::string base = "\n";
      for (int i = 0; i < depth; ++i) base += unit;
      const std::string child = base + unit;
      std::string out;
      if (v.kind == Kind::Array) {
        const Array& a = *v.arr;
        if (opt.indent && !a.empty()) {
          out = "[" + child;
          for (size_t i = 0; i < a.size(); ++i) {
            if (i) out += item_sep + child;
            out += to_json(a[i], opt, depth + 1, undefined_as_null);
          }
          return out + base + "]";
        }
        out = "[";
        for (size_t i = 0; i < a.size(); ++i) {
          if (i) out += item_sep;
          out += to_json(a[i], opt, depth + 1, undefined_as_null);
        }
        return out + "]";
      }
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& kv : v.obj->items) entries.push_back(&kv);
      if (opt.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](auto* x, auto* y) { return locale_less(x->first, y->first); });
      }
      out = "{";
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += item_sep;
        if (opt.indent) out += child;
        out += js_json_quote(entries[i]->first, opt.ensure_ascii) + key_sep +
               to_json(entries[i]->second, opt, depth + 1, undefined_as_null);
      }
      if (opt.indent && !entries.empty()) out += base;
      return out + "}";
    }
    default:
      throw JinjaError(std::string("Cannot convert to JSON: ") + kind_name(v.kind));
  }
}

// JS own-property order: canonical array-index keys ascending, then the rest in insertion order.
static bool is_array_index(const std::string& k) {
  if (k.empty() || k.size() > 10 || (k.size() > 1 && k[0] == '0')) return false;
  if (!std::all_of(k.begin(), k.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  return std::stoull(k) < 4294967295ULL;
}

template <class J>
static Value convert(const J& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return Value::null();
    case nlohmann::json::value_t::boolean:
      return Value::boolean(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value::integer(double(j.template get<int64_t>()));
    case nlohmann::json::value_t::number_unsigned:
      return Value::integer(double(j.template get<uint64_t>()));
    case nlohmann::json::value_t::number_float: {
      const double d = j.template get<double>();
      return std::isfinite(d) && std::fmod(d, 1.0) == 0 ? Value::integer(d) : Value::floating(d);
    }
    case nlohmann::json::value_t::string:
      return Value::string(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      Array a;
      a.reserve(j.size());
      for (const auto& e : j) a.push_back(convert(e));
      return Value::array(std::move(a));
    }
    case nlohmann::json::value_t::object: {
      Object o;
      std::vector<std::pair<unsigned long long, std::string>> index_keys;
      for (auto it = j.begin(); it != j.end(); ++it)
        if (is_array_index(it.key())) index_keys.emplace_back(std::stoull(it.key()), it.key());
      std::sort(index_keys.begin(), index_keys.end());
      for (const auto& [n, k] : index_keys) o.items.emplace_back(k, convert(j.at(k)));
      for (auto it = j.begin(); it != j.end(); ++it)
        if (!is_array_index(it.key())) o.items.emplace_back(it.key(), convert(it.value()));
      return Value::object(std::move(o));
    }
    default:
      return Value::undefined();  // binary / discarded: not produced by JSON.parse
  }
}

Value from_json(const nlohmann::json& j) { return convert(j); }
Value from_json(const nlohmann::ordered_json& j) { return convert(j); }

}  // namespace spk::rt::jinja
