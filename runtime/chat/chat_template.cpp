#include "runtime/chat/chat_template.h"

#include <filesystem>

#include "kernels/base/fs.h"
#include "runtime/chat/jinja_lexer.h"
#include "runtime/chat/jinja_parser.h"
#include "runtime/chat/jinja_template.h"

namespace spk::rt {

namespace jinja {

Result<std::shared_ptr<JinjaTemplate>> JinjaTemplate::compile(const std::string& source,
                                                              const std::string& name) {
  try {
    NodePtr program = parse_program(tokenize(source));
    return std::shared_ptr<JinjaTemplate>(new JinjaTemplate(std::move(program), name));
  } catch (const JinjaError& e) {
    return make_error(name + ":" + std::to_string(e.line) + ": " + e.what(),
                      "fix chat_template in tokenizer_config.json (or chat_template.jinja) at that line");
  }
}

Result<std::string> JinjaTemplate::render_value(const Value& context, const RenderOptions& opt) const {
  if (!context.is_object()) {
    return make_error(name_ + ": render context must be a JSON object, got " + kind_name(context.kind),
                      "pass {\"messages\": [...], ...}");
  }
  Interpreter interp(opt);
  Env global;
  interp.setup_globals(global);
  for (const auto& [k, v] : context.obj->items) {
    if (global.has_own(k)) {
      return make_error(name_ + ": context variable '" + k + "' clashes with a template global",
                        "rename or drop that chat_template_kwargs entry");
    }
    global.set(k, v);
  }
  try {
    return interp.render(*program_, global);
  } catch (const JinjaError& e) {
    return make_error(name_ + ":" + std::to_string(e.line) + ": " + e.what(),
                      "check the request's messages/tools against what the chat template expects");
  } catch (const std::exception& e) {
    return make_error(name_ + ": internal error while rendering: " + e.what());
  }
}

Result<std::string> JinjaTemplate::render(const nlohmann::json& context) const {
  return render_value(from_json(context), {});
}
Result<std::string> JinjaTemplate::render(const nlohmann::ordered_json& context) const {
  return render_value(from_json(context), {});
}

}  // namespace jinja

Result<std::shared_ptr<ChatTemplate>> ChatTemplate::parse(const std::string& source,
                                                          const std::string& name) {
  SPK_ASSIGN(auto t, jinja::JinjaTemplate::compile(source, name));
  return std::shared_ptr<ChatTemplate>(std::move(t));
}

namespace {
// bos_token / eos_token are a string or an AddedToken object {"content": "..."}; null means none.
std::string token_text(const nlohmann::json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string())
    return j["content"].get<std::string>();
  return {};
}
}  // namespace

Result<ChatConfig> load_chat_config(const std::string& model_dir) {
  const std::string path = model_dir + "/tokenizer_config.json";
  SPK_ASSIGN(std::string text, read_file(path));
  nlohmann::json cfg = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (cfg.is_discarded() || !cfg.is_object()) {
    return make_error(path + ": not a JSON object", "re-download tokenizer_config.json for this model");
  }
  ChatConfig out;
  if (cfg.contains("bos_token")) out.bos_token = token_text(cfg["bos_token"]);
  if (cfg.contains("eos_token")) out.eos_token = token_text(cfg["eos_token"]);
  std::string source;
  std::string name = path;
  if (cfg.contains("chat_template") && !cfg["chat_template"].is_null()) {
    const auto& ct = cfg["chat_template"];
    if (ct.is_string()) {
      source = ct.get<std::string>();
    } else if (ct.is_array()) {
      for (const auto& entry : ct) {
        if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
            entry["template"].is_string()) {
          source = entry["template"].get<std::string>();
        }
      }
      if (source.empty()) {
        return make_error(path + ": chat_template is a list without a 'default' entry",
                          "add a {\"name\": \"default\", \"template\": ...} entry");
      }
      name += "#default";
    } else {
      return make_error(path + ": chat_template must be a string or a list of {name, template}",
                        "fix chat_template in tokenizer_config.json");
    }
  } else if (std::filesystem::exists(model_dir + "/chat_template.jinja")) {
    // Newer checkpoints ship the template as its own file.
    name = model_dir + "/chat_template.jinja";
    SPK_ASSIGN(source, read_file(name));
  } else {
    return out;  // no template: chat_template stays null
  }
  SPK_ASSIGN(out.chat_template, ChatTemplate::parse(source, name));
  out.expects = detect_template_expectations(source);
  out.template_source = std::move(source);
  return out;
}

}  // namespace spk::rt
