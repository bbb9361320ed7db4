// The ChatTemplate implementation: a parsed program plus render entry points. Internal header; tests use
// it to inject the clock (strftime_now) through RenderOptions.
#pragma once

#include <memory>
#include <string>

#include "runtime/chat/chat_template.h"
#include "runtime/chat/jinja_ast.h"
#include "runtime/chat/jinja_interpreter.h"

namespace spk::rt::jinja {

class JinjaTemplate final : public ChatTemplate {
 public:
  static Result<std::shared_ptr<JinjaTemplate>> compile(const std::string& source, const std::string& name);

  [[nodiscard]] Result<std::string> render(const nlohmann::json& context) const override;
  [[nodiscard]] Result<std::string> render(const nlohmann::ordered_json& context) const override;
  // `context` must be an Object value (see from_json).
  [[nodiscard]] Result<std::string> render_value(const Value& context, const RenderOptions& opt) const;

 private:
  JinjaTemplate(NodePtr program, std::string name) : program_(std::move(program)), name_(std::move(name)) {}
  NodePtr program_;
  std::string name_;
};

}  // namespace spk::rt::jinja
