// Field checks shared by the /v1/messages and /v1/responses request parsers: each reads one key of a JSON
// object, leaves `out` untouched when the key is absent or null, and on a wrong type or range records the
// first failure as a FieldError naming the field's full path (e.g. "messages.2.content.0.text").
#pragma once

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "runtime/serve/api_front.h"

namespace spk::rt {

struct FieldChecker {
  using ojson = nlohmann::ordered_json;
  std::optional<FieldError> err;

  // Always false, so that `return c.fail(...)` reads as a refusal.
  bool fail(const std::string& param, const std::string& why, int status = 400) {
    if (!err) err = FieldError{status, param, param + ": " + why, {}};
    return false;
  }
  static const ojson* get(const ojson& obj, const char* key) {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  bool string(const ojson& obj, const char* key, const std::string& path, std::string& out) {
    const ojson* v = get(obj, key);
    if (!v) return false;
    if (!v->is_string()) return fail(path, "must be a string, got " + v->dump().substr(0, 60));
    out = v->get<std::string>();
    return true;
  }
  bool boolean(const ojson& obj, const char* key, const std::string& path, bool& out) {
    const ojson* v = get(obj, key);
    if (!v) return false;
    if (!v->is_boolean()) return fail(path, "must be a boolean, got " + v->dump().substr(0, 60));
    out = v->get<bool>();
    return true;
  }
  bool number(const ojson& obj, const char* key, const std::string& path, float& out, double lo, double hi,
              const char* range) {
    const ojson* v = get(obj, key);
    if (!v) return false;
    if (!v->is_number()) return fail(path, "must be a number, got " + v->dump().substr(0, 60));
    const double d = v->get<double>();
    if (!std::isfinite(d) || d < lo || d > hi) return fail(path, "is " + v->dump() + ", must be in " + range);
    out = static_cast<float>(d);
    return true;
  }
  // Integers up to 2^63-1; an unsigned value above that, a fraction or a string is refused, never wrapped.
  bool integer(const ojson& obj, const char* key, const std::string& path, int64_t& out, int64_t lo,
               const std::string& range) {
    const ojson* v = get(obj, key);
    if (!v) return false;
    if (!v->is_number_integer()) return fail(path, "must be an integer, got " + v->dump().substr(0, 60));
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      return fail(path, "is " + v->dump() + ", must be " + range);
    const int64_t x = v->get<int64_t>();
    if (x < lo) return fail(path, "is " + v->dump() + ", must be " + range);
    out = x;
    return true;
  }
  // A JSON object (when present).
  const ojson* object(const ojson& obj, const char* key, const std::string& path) {
    const ojson* v = get(obj, key);
    if (v && !v->is_object()) {
      fail(path, "must be an object, got " + v->dump().substr(0, 60));
      return nullptr;
    }
    return v;
  }
};

}  // namespace spk::rt
