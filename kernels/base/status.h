// Errors are values. An Error carries what went wrong (naming the bad value), the knob that fixes it,
// and whether a retry can help. Result<T> holds either a T or an Error; Status is Result<void>.
// No exceptions cross a library boundary and nothing below cli/ calls exit().
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace spk {

struct Error {
  std::string message;     // what is wrong, with the offending value: "node-b: port 29500 in use"
  std::string fix;         // the knob that fixes it: "set rendezvous.port or --port"; may be empty
  bool retryable = false;  // true when the same call may succeed later (timeouts, busy ports)

  // "message (fix)" — the one-line form every CLI prints.
  [[nodiscard]] std::string what() const { return fix.empty() ? message : message + " (" + fix + ")"; }
};

inline Error make_error(std::string message, std::string fix = {}, bool retryable = false) {
  return Error{std::move(message), std::move(fix), retryable};
}

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  [[nodiscard]] bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const {
    assert(!ok());
    return std::get<1>(v_);
  }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : err_(std::move(error)), ok_(false) {}  // NOLINT: implicit by design

  [[nodiscard]] bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const {
    assert(!ok_);
    return err_;
  }

 private:
  Error err_;
  bool ok_ = true;
};

using Status = Result<void>;

inline Status ok_status() { return {}; }

}  // namespace spk

// Propagate an error from an expression returning Result/Status: SPK_TRY(write_file(...));
#define SPK_TRY(expr)                                          \
  do {                                                         \
    auto spk_try_result_ = (expr);                             \
    if (!spk_try_result_.ok()) return spk_try_result_.error(); \
  } while (0)

// Bind the value of a Result or propagate its error: SPK_ASSIGN(auto cfg, load_config(path));
#define SPK_CONCAT_INNER_(a, b) a##b
#define SPK_CONCAT_(a, b) SPK_CONCAT_INNER_(a, b)
#define SPK_ASSIGN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                     \
  if (!tmp.ok()) return tmp.error();     \
  lhs = std::move(tmp).value()
#define SPK_ASSIGN(lhs, expr) SPK_ASSIGN_IMPL_(SPK_CONCAT_(spk_assign_, __LINE__), lhs, expr)
