// Template globals of the reference (setupGlobals + Environment's namespace()).
#include <cmath>
#include <ctime>
#include <string>
#include <vector>

#include "runtime/chat/jinja_interpreter.h"

namespace spk::rt::jinja {

namespace {
[[noreturn]] void fail(const std::string& msg) { throw JinjaError(msg); }

// utils.ts strftime(): only %Y %m %d %b %B %H %M %% (English month names); other tokens stay literal.
void strftime_js(std::string& out, const std::string& fmt, const std::tm& t) {
  static const char* kLong[] = {"January", "February", "March",     "April",   "May",      "June",
                                "July",    "August",   "September", "October", "November", "December"};
  static const char* kShort[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                 "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  auto pad2 = [](int v) { return (v < 10 ? "0" : "") + std::to_string(v); };
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%' || i + 1 >= fmt.size()) {
      out += fmt[i];
      continue;
    }
    const char c = fmt[i + 1];
    switch (c) {
      case 'Y':
        out += std::to_string(t.tm_year + 1900);
        break;
      case 'm':
        out += pad2(t.tm_mon + 1);
        break;
      case 'd':
        out += pad2(t.tm_mday);
        break;
      case 'b':
        out += kShort[t.tm_mon];
        break;
      case 'B':
        out += kLong[t.tm_mon];
        break;
      case 'H':
        out += pad2(t.tm_hour);
        break;
      case 'M':
        out += pad2(t.tm_min);
        break;
      case '%':
        out += '%';
        break;
      default:
        out += '%';
        continue;  // not a token: keep '%' and let the next char print itself
    }
    ++i;
  }
}
}  // namespace

void Interpreter::setup_globals(Env& env) const {
  env.set("namespace", Value::function([](std::vector<Value>& args, Env&) {
            std::vector<Value> pos = args;
            Value kw;
            if (!pos.empty() && pos.back().kind == Kind::KwArgs) {
              kw = pos.back();
              pos.pop_back();
            }
            if (pos.size() > 1)
              fail("namespace expected at most 1 argument, got " + std::to_string(pos.size()));
            Object entries;
            if (pos.size() == 1) {
              const Value& src = pos[0];
              if (src.is_object()) {
                for (const auto& [k, v] : src.obj->items) entries.set(k, v);
              } else if (src.is_array()) {
                for (const Value& pair : *src.arr) {
                  if (!pair.is_array() || pair.arr->size() != 2 || (*pair.arr)[0].kind != Kind::String)
                    fail("namespace expected an object or an iterable of [key, value] pairs");
                  entries.set((*pair.arr)[0].str, (*pair.arr)[1]);
                }
              } else {
                fail(std::string("'") + kind_name(src.kind) + "' object is not iterable");
              }
            }
            if (kw.obj)
              for (const auto& [k, v] : kw.obj->items) entries.set(k, v);
            return Value::object(std::move(entries), Kind::Namespace);
          }));
  for (const char* t : {"true", "True"}) env.set(t, Value::boolean(true));
  for (const char* f : {"false", "False"}) env.set(f, Value::boolean(false));
  for (const char* z : {"none", "None"}) env.set(z, Value::null());
  env.set("raise_exception", Value::function([](std::vector<Value>& args, Env&) -> Value {
            const std::string msg = args.empty() || args[0].is_none() ? "" : to_raw_string(args[0]);
            throw JinjaError("raise_exception: " + msg);
          }));
  env.set("range", Value::function([](std::vector<Value>& args, Env&) {
            for (const Value& a : args)
              if (!a.is_number())
                fail(std::string("range() arguments must be numbers, got ") + kind_name(a.kind));
            if (args.empty()) fail("range() expects at least 1 argument");
            double start = args[0].num, stop = 0, step = args.size() > 2 ? args[2].num : 1;
            if (args.size() == 1) {
              stop = start;
              start = 0;
            } else {
              stop = args[1].num;
            }
            if (step == 0) fail("range() step must not be zero");
            Array out;
            for (double i = start; step > 0 ? i < stop : i > stop; i += step)
              out.push_back(std::fmod(i, 1.0) == 0 ? Value::integer(i) : Value::floating(i));
            return Value::array(std::move(out));
          }));
  const auto now = opt_.now_unix_s;
  env.set("strftime_now", Value::function([now](std::vector<Value>& args, Env&) {
            if (args.empty() || args[0].kind != Kind::String) fail("strftime_now() expects a format string");
            std::tm t{};
            if (now) {
              const std::time_t s = static_cast<std::time_t>(*now);
              gmtime_r(&s, &t);
            } else {
              const std::time_t s = std::time(nullptr);
              localtime_r(&s, &t);
            }
            std::string out;
            strftime_js(out, args[0].str, t);
            return Value::string(std::move(out));
          }));
}

}  // namespace spk::rt::jinja
