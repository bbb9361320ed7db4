// Runtime values of the Jinja interpreter, mirroring @huggingface/jinja's value classes (IntegerValue,
// FloatValue, StringValue, ArrayValue, TupleValue, ObjectValue, KeywordArgumentsValue, NamespaceValue,
// FunctionValue, NullValue, UndefinedValue). Numbers are doubles like JS; containers are shared
// (reference semantics, so `set ns.x = ...` mutates the one namespace every scope sees).
// Objects keep insertion order.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace spk::rt::jinja {

enum class Kind : uint8_t {
  Undefined,
  Null,
  Bool,
  Int,
  Float,
  String,
  Array,
  Tuple,
  Object,
  KwArgs,
  Namespace,
  Function
};
const char* kind_name(Kind k);  // "StringValue", ... (the reference's type names, used in errors)

struct Value;
using Array = std::vector<Value>;
// Insertion-ordered map; chat objects have a handful of keys, so linear search beats hashing.
struct Object {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  void set(const std::string& key, Value v);
};
class Env;
using Function = std::function<Value(std::vector<Value>& args, Env& caller)>;

struct Value {
  Kind kind = Kind::Undefined;
  bool b = false;
  double num = 0;  // Int and Float
  std::string str;
  std::shared_ptr<Array> arr;    // Array, Tuple
  std::shared_ptr<Object> obj;   // Object, KwArgs, Namespace
  std::shared_ptr<Function> fn;  // Function

  static Value undefined() { return {}; }
  static Value null() { return make(Kind::Null); }
  static Value boolean(bool v) {
    Value r = make(Kind::Bool);
    r.b = v;
    return r;
  }
  static Value integer(double v) {
    Value r = make(Kind::Int);
    r.num = v;
    return r;
  }
  static Value floating(double v) {
    Value r = make(Kind::Float);
    r.num = v;
    return r;
  }
  static Value string(std::string v) {
    Value r = make(Kind::String);
    r.str = std::move(v);
    return r;
  }
  static Value array(Array v = {}, Kind k = Kind::Array) {
    Value r = make(k);
    r.arr = std::make_shared<Array>(std::move(v));
    return r;
  }
  static Value object(Object v = {}, Kind k = Kind::Object) {
    Value r = make(k);
    r.obj = std::make_shared<Object>(std::move(v));
    return r;
  }
  static Value function(Function f) {
    Value r = make(Kind::Function);
    r.fn = std::make_shared<Function>(std::move(f));
    return r;
  }
  static Value make(Kind k) {
    Value r;
    r.kind = k;
    return r;
  }

  [[nodiscard]] bool is_array() const { return kind == Kind::Array || kind == Kind::Tuple; }
  [[nodiscard]] bool is_object() const {
    return kind == Kind::Object || kind == Kind::KwArgs;
  }  // instanceof ObjectValue
  [[nodiscard]] bool is_attr_container() const { return is_object() || kind == Kind::Namespace; }
  [[nodiscard]] bool is_number() const { return kind == Kind::Int || kind == Kind::Float; }
  [[nodiscard]] bool is_none() const { return kind == Kind::Null || kind == Kind::Undefined; }
};

// An error raised while rendering (the reference throws); the interpreter adds the template line.
// `line` 0 means "not known yet"; the innermost evaluating node fills it in.
struct JinjaError : std::runtime_error {
  explicit JinjaError(const std::string& msg, int line_no = 0) : std::runtime_error(msg), line(line_no) {}
  int line;
};

bool truthy(const Value& v);                        // __bool__
std::string to_output(const Value& v);              // RuntimeValue#toString (what {{ }} prints)
std::string to_raw_string(const Value& v);          // String(value.value) (what `+` / `~` concatenate)
std::string join_element(const Value& v);           // Array#join's view of value.value
bool loose_equal(const Value& a, const Value& b);   // `a.value == b.value` (JS ==)
bool strict_equal(const Value& a, const Value& b);  // `a.value === b.value` (JS ===)

struct JsonOptions {
  int indent = 0;  // 0: none
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool has_separators = false;
  std::string item_sep, key_sep;
};
// toJSON(); `undefined_as_null` false prints "undefined" (what string conversion of containers does).
std::string to_json(const Value& v, const JsonOptions& opt, int depth = 0, bool undefined_as_null = true);

// convertToRuntimeValues(JSON.parse(...)): integral numbers become Int, objects keep the JS key order
// (array-index keys first, ascending; then insertion order).
Value from_json(const nlohmann::json& j);
Value from_json(const nlohmann::ordered_json& j);

}  // namespace spk::rt::jinja
