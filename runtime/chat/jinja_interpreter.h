// Tree-walking evaluator with @huggingface/jinja's semantics: scopes (a `for` body runs in one child
// scope for all iterations; `if` opens none; a macro body's scope hangs off the CALLER's scope), JS-like
// truthiness/equality, the reference's filter/test/method set and its error cases. Errors are thrown as
// JinjaError internally and carry the line of the innermost node that failed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/chat/jinja_ast.h"
#include "runtime/chat/jinja_value.h"

namespace spk::rt::jinja {

// {% break %} / {% continue %} unwind to the enclosing for loop as exceptions, like the reference.
struct BreakSignal {};
struct ContinueSignal {};

class Env {
 public:
  explicit Env(Env* parent = nullptr) : parent_(parent) {}
  [[nodiscard]] Value lookup(const std::string& name) const;
  void set(const std::string& name, Value v) { vars_[name] = std::move(v); }
  [[nodiscard]] bool has_own(const std::string& name) const { return vars_.count(name) > 0; }

 private:
  Env* parent_;
  std::unordered_map<std::string, Value> vars_;
};

struct RenderOptions {
  // Seconds since the epoch for strftime_now(), read as UTC; unset: the real clock in local time (what
  // the reference's `new Date()` does).
  std::optional<int64_t> now_unix_s;
};

class Interpreter {
 public:
  explicit Interpreter(const RenderOptions& opt) : opt_(opt) {}

  // jinja_globals.cpp: namespace, raise_exception, range, strftime_now, true/false/none (+ True/False/None).
  void setup_globals(Env& env) const;
  std::string render(const Node& program, Env& env);

  Value eval(const Node& n, Env& env);
  void exec_block(const std::vector<NodePtr>& body, Env& env, std::string& out);
  // Positional values and keyword values (in source order) of a call's argument list.
  void eval_args(const std::vector<NodePtr>& args, Env& env, std::vector<Value>& pos,
                 std::vector<std::pair<std::string, Value>>& kw);

  // jinja_statements.cpp: for / set / macro / call blocks
  void exec_for(const Node& n, Env& env, std::string& out);
  void exec_set(const Node& n, Env& env);
  void exec_macro(const Node& n, Env& env);
  void exec_call_block(const Node& n, Env& env, std::string& out);

  // jinja_filters.cpp
  Value apply_filter(const Value& operand, const Node& filter, Env& env);
  // jinja_builtins.cpp: `value.name` for non-container properties (string/object/array methods)
  static Value builtin_member(const Value& object, const std::string& name);
  static bool run_test(const std::string& name, const Value& operand, const Value* arg);

 private:
  Value eval_inner(const Node& n, Env& env);
  Value eval_binary(const Node& n, Env& env);
  Value eval_member(const Node& n, Env& env);
  Value eval_call(const Node& n, Env& env);
  void bind_macro_args(const std::string& display, const Node& macro_or_block,
                       const std::vector<NodePtr>& params, std::vector<Value>& args, Env& scope);

  RenderOptions opt_;
  int macro_depth_ = 0;  // runaway recursion guard, 100 deep (the reference dies with a JS RangeError)
};

// Helpers shared by the filter / builtin files.
Value kwargs_value(std::vector<std::pair<std::string, Value>> kw);
const Value* kwarg(const std::vector<std::pair<std::string, Value>>& kw, const char* name);
Value attribute_path(const Value& item, const std::string& path);         // "a.b.0" lookups of sort/map
int compare_values(const Value& a, const Value& b, bool case_sensitive);  // sort / dictsort order
std::string js_replace(const std::string& s, const std::string& from, const std::string& to, double count);

}  // namespace spk::rt::jinja
