#include "recipes/recipe_loader.h"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "kernels/base/fs.h"
#include "recipes/capabilities.h"
#include "recipes/input_text.h"
#include "recipes/syntax.h"

namespace spk {

namespace {

constexpr std::string_view kTopKeys[] = {"name",
                                         "description",
                                         "backend",
                                         "model",
                                         "draft",
                                         "tensor_parallel",
                                         "nodes",
                                         "kv_cache_dtype",
                                         "block_size",
                                         "max_model_len",
                                         "max_num_seqs",
                                         "max_num_batched_tokens",
                                         "enable_prefix_caching",
                                         "gpu_memory_utilization",
                                         "device_memory_gib",
                                         "port",
                                         "bind",
                                         "api_key_env",
                                         "master_port",
                                         "mem_floor_gib",
                                         "chat_template_kwargs",
                                         "tool_call_parser",
                                         "reasoning_parser",
                                         "env",
                                         "warmup",
                                         "fabric"};
constexpr std::string_view kModelKeys[] = {"hub", "path", "synthetic", "revision", "served_name"};
constexpr std::string_view kSynthKeys[] = {"arch", "preset", "tokenizer", "seed"};
constexpr std::string_view kDraftKeys[] = {"model", "revision", "method", "num_tokens"};
constexpr std::string_view kFabricKeys[] = {"setup", "mtu"};
constexpr std::string_view kWarmupKeys[] = {"prompt_tokens", "max_tokens", "repeat"};
constexpr std::string_view kKvDtypes[] = {"auto",     "bf16",     "fp16", "fp32", "fp8",
                                          "fp8_e4m3", "fp8_e5m2", "fp4",  "nvfp4"};
constexpr std::string_view kArchs[] = {"qwen3", "qwen2", "llama", "mistral"};
constexpr std::string_view kTokenizers[] = {"qwen3", "llama3_1", "deepseek_v3", "gptoss"};
constexpr std::string_view kMethods[] = {"eagle3", "eagle", "mtp", "ngram"};
// The runtime's parser names (runtime/serve/tool_parser.cpp, reasoning_parser.cpp) plus auto and none.
constexpr std::string_view kToolParsers[] = {"auto",       "none",        "hermes",      "qwen3_coder",
                                             "minimax_m2", "deepseek_v3", "deepseek_v31"};
constexpr std::string_view kReasoningParsers[] = {"auto", "none", "qwen3", "deepseek_r1", "minimax"};
constexpr std::string_view kBackends[] = {"cuda", "cpu"};
constexpr std::string_view kPresets[] = {"tiny", "small", "8b"};  // `sparkctl dev synth-model --preset`

std::string list_of(std::span<const std::string_view> xs) {
  std::string out;
  for (auto x : xs) out += (out.empty() ? "" : "|") + std::string(x);
  return out;
}

bool member(std::string_view v, std::span<const std::string_view> xs) {
  return std::find(xs.begin(), xs.end(), v) != xs.end();
}

// One recipe being read: the reader, the root and the recipe filled in as fields check out.
class Loader {
 public:
  Loader(YamlReader& y, const YAML::Node& root, Recipe& r) : y_(y), root_(root), r_(r) {}

  void run() {
    if (!y_.map(root_, "", kTopKeys)) return;
    record_positions(root_, "", 0);
    top_level();
    model();
    draft();
    sizes();
    serving();
    extras();
  }

 private:
  YAML::Node at(const YAML::Node& map, std::string_view key) {
    YAML::Node v = YamlReader::find(map, key);
    return v.IsDefined() ? v : map;
  }

  // Enumerated string value: errors name the choices and suggest the nearest one.
  std::optional<std::string> choice(const YAML::Node& map, std::string_view key, const std::string& path,
                                    std::span<const std::string_view> xs) {
    auto v = y_.str(map, key, path);
    if (!v) return std::nullopt;
    if (member(*v, xs)) return v;
    std::string near = closest(*v, xs);
    y_.error(
        at(map, key), YamlReader::join(path, key),
        "'" + *v + "' is not one of " + list_of(xs) + (near.empty() ? "" : " (did you mean '" + near + "'?)"),
        "set one of " + list_of(xs));
    return std::nullopt;
  }

  // Position of a key (a `key:` without value has no useful position of its own), else of `fallback`.
  SourcePos key_pos(const std::string& key, const YAML::Node& fallback) {
    auto it = r_.positions.find(key);
    return it != r_.positions.end() ? it->second : YamlReader::pos(fallback);
  }

  void record_positions(const YAML::Node& map, const std::string& path, int depth) {
    if (!map.IsMap() || depth > 3) return;
    for (auto it = map.begin(); it != map.end(); ++it) {
      if (!it->first.IsScalar()) continue;
      std::string key = YamlReader::join(path, it->first.Scalar());
      r_.positions.emplace(key, YamlReader::pos(it->first));
      record_positions(it->second, key, depth + 1);
    }
  }

  void top_level() {
    if (auto v = y_.str(root_, "name", "")) {
      if (is_name(*v))
        r_.name = *v;
      else
        y_.error(at(root_, "name"), "name", "'" + *v + "' is not a lane name",
                 "use lowercase letters, digits, '.', '_' or '-', like lane-a");
    } else {
      y_.error(root_, "name", "missing required key", "add `name: <lane>` matching the file name");
    }
    if (auto v = y_.str(root_, "description", "")) r_.description = *v;
    if (auto v = choice(root_, "backend", "", kBackends))
      r_.backend = *v == "cpu" ? Backend::cpu : Backend::cuda;
  }

  void model() {
    YAML::Node m = YamlReader::find(root_, "model");
    if (!m.IsDefined() || m.IsNull()) {
      y_.error(root_, "model", "missing required key", "add `model: {hub: ORG/NAME, revision: COMMIT}`");
      return;
    }
    if (!y_.map(m, "model", kModelKeys)) return;
    auto hub = y_.str(m, "hub", "model");
    auto path = y_.str(m, "path", "model");
    YAML::Node syn = YamlReader::find(m, "synthetic");
    int sources = (hub ? 1 : 0) + (path ? 1 : 0) + (syn.IsDefined() && !syn.IsNull() ? 1 : 0);
    if (sources != 1) {
      y_.error(m, "model", sources == 0 ? "no model source" : "more than one model source",
               "set exactly one of model.hub, model.path, model.synthetic");
    }
    if (hub) {
      r_.model.source = ModelSource::hub;
      r_.model.id = *hub;
      if (!is_hub_id(*hub))
        y_.error(at(m, "hub"), "model.hub", "'" + *hub + "' is not a hub id",
                 "write ORG/NAME, or use model.path");
      else if (hub->rfind("PLACEHOLDER", 0) == 0)
        y_.add(Severity::warning, YamlReader::pos(at(m, "hub")), "model.hub",
               "'" + *hub + "' is a placeholder, not a real checkpoint", "set model.hub to the real hub id");
    } else if (path) {
      r_.model.source = ModelSource::path;
      r_.model.id = *path;
      if (path->empty() || (*path)[0] != '/')
        y_.error(at(m, "path"), "model.path", "'" + *path + "' is not an absolute path",
                 "write the checkpoint directory as /abs/dir");
    } else if (syn.IsDefined() && !syn.IsNull()) {
      r_.model.source = ModelSource::synthetic;
      synthetic(syn);
    }
    YAML::Node rev = YamlReader::find(m, "revision");
    if (auto v = y_.str(m, "revision", "model")) r_.model.revision = *v;
    if (r_.model.source == ModelSource::hub && hub) {
      if (r_.model.revision.empty())
        y_.add(Severity::warning, key_pos("model.revision", m), "model.revision",
               "not pinned: a missing pin can silently start a full download that fills the worker disk",
               "set model.revision to the 40-hex commit of the checkpoint");
      else if (!is_commit_hash(r_.model.revision))
        y_.add(Severity::warning, YamlReader::pos(rev), "model.revision",
               "'" + r_.model.revision + "' is a branch or tag, which can move",
               "pin the 40-hex commit instead");
    } else if (!r_.model.revision.empty()) {
      y_.error(rev, "model.revision", "'" + r_.model.revision + "' applies to hub models only",
               "remove model.revision");
    }
    if (auto v = y_.str(m, "served_name", "model")) r_.model.served_name = *v;
    if (r_.model.served_name.empty()) {
      if (r_.model.source == ModelSource::synthetic)
        r_.model.served_name = r_.model.synthetic.arch + "-" + r_.model.synthetic.preset;
      else
        r_.model.served_name = r_.model.id.substr(r_.model.id.find_last_of('/') + 1);
    }
  }

  void synthetic(const YAML::Node& s) {
    if (!y_.map(s, "model.synthetic", kSynthKeys)) return;
    SyntheticModel& out = r_.model.synthetic;
    if (auto v = choice(s, "arch", "model.synthetic", kArchs)) out.arch = *v;
    if (auto v = choice(s, "preset", "model.synthetic", kPresets)) out.preset = *v;
    if (auto v = choice(s, "tokenizer", "model.synthetic", kTokenizers)) out.tokenizer = *v;
    if (auto v = y_.integer_in(s, "seed", "model.synthetic", 0, (int64_t{1} << 53), "use a seed in [0,2^53]"))
      out.seed = *v;
  }

  void draft() {
    YAML::Node d = YamlReader::find(root_, "draft");
    if (!d.IsDefined() || d.IsNull()) return;
    if (!y_.map(d, "draft", kDraftKeys)) return;
    DraftSpec out;
    auto model = y_.str(d, "model", "draft");
    auto method = choice(d, "method", "draft", kMethods);
    auto k = y_.integer_in(d, "num_tokens", "draft", 1, 16, "propose 1..16 tokens per step, like 3");
    if (!method && !YamlReader::find(d, "method").IsDefined())
      y_.error(d, "draft.method", "a drafter without a speculative method",
               "set draft.method to " + list_of(kMethods));
    if (!k && !YamlReader::find(d, "num_tokens").IsDefined())
      y_.error(d, "draft.num_tokens", "speculative decoding without a token count",
               "set draft.num_tokens, like 3");
    if (method) {
      out.method = *method == "eagle3"  ? SpecMethod::eagle3
                   : *method == "eagle" ? SpecMethod::eagle
                   : *method == "mtp"   ? SpecMethod::mtp
                                        : SpecMethod::ngram;
      bool needs_model = out.method == SpecMethod::eagle3 || out.method == SpecMethod::eagle;
      if (needs_model && !model)
        y_.error(d, "draft.model", "method " + *method + " needs a drafter checkpoint",
                 "set draft.model to its hub id or path");
      if (!needs_model && model)
        y_.error(at(d, "model"), "draft.model", "method " + *method + " uses no drafter checkpoint",
                 "remove draft.model or set draft.method: eagle3");
    }
    if (model) {
      out.model = *model;
      if (!is_hub_id(*model) && (model->empty() || (*model)[0] != '/'))
        y_.error(at(d, "model"), "draft.model", "'" + *model + "' is neither a hub id nor an absolute path",
                 "write ORG/NAME or /abs/dir");
    }
    if (auto v = y_.str(d, "revision", "draft")) out.revision = *v;
    if (model && is_hub_id(*model)) {
      if (out.revision.empty())
        y_.add(Severity::warning, key_pos("draft.revision", d), "draft.revision",
               "drafter revision not pinned", "set draft.revision to the 40-hex commit of the drafter");
      else if (model->rfind("PLACEHOLDER", 0) != 0 && !is_commit_hash(out.revision))
        y_.add(Severity::warning, YamlReader::pos(at(d, "revision")), "draft.revision",
               "'" + out.revision + "' is a branch or tag, which can move", "pin the 40-hex commit instead");
    }
    if (model && model->rfind("PLACEHOLDER", 0) == 0)
      y_.add(Severity::warning, YamlReader::pos(at(d, "model")), "draft.model",
             "'" + *model + "' is a placeholder, not a real checkpoint",
             "set draft.model to the real hub id");
    if (k) out.num_tokens = static_cast<int>(*k);
    r_.draft = out;
  }

  void sizes() {
    if (auto v =
            y_.integer_in(root_, "tensor_parallel", "", 1, 64, "set the number of GPUs in total, like 2"))
      r_.tensor_parallel = static_cast<int>(*v);
    if (auto v = y_.integer_in(root_, "nodes", "", 1, 64, "set the number of nodes, like 2"))
      r_.nodes = static_cast<int>(*v);
    if (r_.tensor_parallel % r_.nodes != 0)
      y_.error(at(root_, "tensor_parallel"), "tensor_parallel",
               std::to_string(r_.tensor_parallel) + " is not a multiple of nodes " +
                   std::to_string(r_.nodes) + " (TP = nodes x GPUs per node)",
               "set tensor_parallel to " + std::to_string(r_.nodes) + " x GPUs per node");
    if (auto v = choice(root_, "kv_cache_dtype", "", kKvDtypes)) r_.kv_cache_dtype = *v;
    if (auto v = y_.integer_in(root_, "block_size", "", 1, 1024, "set a power of two like 16 or 128")) {
      if (is_power_of_two(*v))
        r_.block_size = static_cast<int>(*v);
      else {
        int64_t lo = 1;
        while (lo * 2 < *v) lo *= 2;
        y_.error(at(root_, "block_size"), "block_size", std::to_string(*v) + " is not a power of two",
                 "set " + std::to_string(lo) + " or " + std::to_string(lo * 2));
      }
    }
    if (auto v = y_.integer_in(root_, "max_model_len", "", 1, int64_t{1} << 24,
                               "set the context length, like 131072"))
      r_.max_model_len = *v;
    if (auto v = y_.integer_in(root_, "max_num_seqs", "", 1, 4096, "set the concurrent sequences, like 8"))
      r_.max_num_seqs = static_cast<int>(*v);
    YAML::Node mbt = YamlReader::find(root_, "max_num_batched_tokens");
    if (auto v = y_.integer_in(root_, "max_num_batched_tokens", "", 1, int64_t{1} << 24,
                               "set tokens per step, like 8192")) {
      r_.max_num_batched_tokens = *v;
      if (*v < r_.block_size)
        y_.error(mbt, "max_num_batched_tokens",
                 std::to_string(*v) + " is smaller than block_size " + std::to_string(r_.block_size),
                 "set max_num_batched_tokens >= block_size, like 8192");
    }
    if (auto v = y_.boolean(root_, "enable_prefix_caching", "")) r_.enable_prefix_caching = *v;
    YAML::Node gmu = YamlReader::find(root_, "gpu_memory_utilization");
    if (auto v = y_.number(root_, "gpu_memory_utilization", "")) {
      if (*v <= 0.0 || *v > 1.0)
        y_.error(gmu, "gpu_memory_utilization", gmu.Scalar() + " is out of range (0,1]",
                 "set a value like 0.90");
      else
        r_.gpu_memory_utilization = *v;
    }
    YAML::Node dm = YamlReader::find(root_, "device_memory_gib");
    if (auto v = y_.number(root_, "device_memory_gib", "")) {
      if (*v <= 0.0 || *v > 4096.0)
        y_.error(dm, "device_memory_gib", dm.Scalar() + " is out of range (0,4096]",
                 "set the RAM budget in GiB, like 2");
      else if (r_.backend != Backend::cpu)
        y_.error(dm, "device_memory_gib", "applies to backend cpu only (GPUs report their own memory)",
                 "remove device_memory_gib or set backend: cpu");
      else
        r_.device_memory_gib = *v;
    } else if (r_.backend == Backend::cpu && !dm.IsDefined()) {
      y_.error(at(root_, "backend"), "device_memory_gib",
               "backend cpu needs a RAM budget for the memory planner", "set device_memory_gib, like 2");
    }
  }

  void serving() {
    if (auto v = y_.integer_in(root_, "port", "", 1, 65535, "set a TCP port like 8000"))
      r_.port = static_cast<int>(*v);
    if (auto v = y_.integer_in(root_, "master_port", "", 1, 65535, "set a TCP port like 29500"))
      r_.master_port = static_cast<int>(*v);
    YAML::Node mf = YamlReader::find(root_, "mem_floor_gib");
    if (auto v = y_.number(root_, "mem_floor_gib", "")) {
      if (*v < 0.0 || *v > 4096.0)
        y_.error(mf, "mem_floor_gib", mf.Scalar() + " is out of range [0,4096]",
                 "set the MemAvailable floor in GiB, like 3 (0 = off)");
      else
        r_.mem_floor_gib = *v;
    }
    if (r_.port == r_.master_port)
      y_.error(at(root_, "master_port"), "master_port", std::to_string(r_.port) + " is also the serving port",
               "set master_port and port to different values");
    if (auto v = y_.str(root_, "bind", "")) {
      if (is_ipv4(*v) || *v == "localhost")
        r_.bind = *v;
      else
        y_.error(at(root_, "bind"), "bind", "'" + *v + "' is not an IPv4 address",
                 "set 127.0.0.1 or 0.0.0.0");
    }
    if (auto v = y_.str(root_, "api_key_env", "")) {
      if (is_env_name(*v))
        r_.api_key_env = *v;
      else
        y_.error(at(root_, "api_key_env"), "api_key_env", "'" + *v + "' is not an environment variable name",
                 "name the variable that holds the key, like SPARKCTL_API_KEY");
    }
  }

  void extras() {
    if (auto v = choice(root_, "tool_call_parser", "", kToolParsers)) r_.tool_call_parser = *v;
    if (auto v = choice(root_, "reasoning_parser", "", kReasoningParsers)) r_.reasoning_parser = *v;
    YAML::Node kw = YamlReader::find(root_, "chat_template_kwargs");
    if (kw.IsDefined() && !kw.IsNull()) {
      if (!kw.IsMap()) {
        y_.error(kw, "chat_template_kwargs", "expected a map", "write `enable_thinking: true` lines");
      } else {
        for (auto it = kw.begin(); it != kw.end(); ++it) {
          std::string k = it->first.IsScalar() ? it->first.Scalar() : "";
          const YAML::Node v = it->second;  // a copy: it->second lives in a temporary
          if (k.empty() || !v.IsScalar()) {
            y_.error(it->first, "chat_template_kwargs", "expected `name: scalar`",
                     "values are true/false, numbers or strings");
            continue;
          }
          if (r_.chat_template_kwargs.contains(k)) {
            y_.error(it->first, "chat_template_kwargs." + k, "duplicate key", "keep one of the two entries");
            continue;
          }
          r_.chat_template_kwargs[k] = scalar_json(v);
        }
      }
    }
    if (auto env = y_.str_map(root_, "env", "")) {
      YAML::Node en = YamlReader::find(root_, "env");
      for (auto& [k, v] : *env) {
        if (!is_env_name(k))
          y_.error(en, "env", "'" + k + "' is not an environment variable name", "use NAME: value");
        else
          r_.env.emplace_back(k, v);
      }
    }
    YAML::Node f = YamlReader::find(root_, "fabric");
    if (f.IsDefined() && !f.IsNull() && y_.map(f, "fabric", kFabricKeys)) {
      if (auto v = y_.boolean(f, "setup", "fabric")) r_.fabric_setup = *v;
      if (auto v = y_.integer_in(f, "mtu", "fabric", 1280, 65535, "set the fabric MTU, like 9000"))
        r_.fabric_mtu = static_cast<int>(*v);
    }
    YAML::Node w = YamlReader::find(root_, "warmup");
    if (w.IsDefined() && !w.IsNull()) {
      if (!w.IsSequence()) {
        y_.error(w, "warmup", "expected a list", "write `- {prompt_tokens: 16, max_tokens: 8}` items");
        return;
      }
      r_.warmup.clear();
      for (size_t i = 0; i < w.size(); ++i) {
        std::string p = "warmup[" + std::to_string(i) + "]";
        if (!y_.map(w[i], p, kWarmupKeys)) continue;
        WarmupPattern pat;
        if (auto v =
                y_.integer_in(w[i], "prompt_tokens", p, 1, int64_t{1} << 24, "set prompt tokens, like 512"))
          pat.prompt_tokens = static_cast<int>(*v);
        if (auto v = y_.integer_in(w[i], "max_tokens", p, 1, 65536, "set generated tokens, like 8"))
          pat.max_tokens = static_cast<int>(*v);
        if (auto v = y_.integer_in(w[i], "repeat", p, 1, 100, "set 1..100"))
          pat.repeat = static_cast<int>(*v);
        if (pat.prompt_tokens + pat.max_tokens > r_.max_model_len)
          y_.error(w[i], p,
                   std::to_string(pat.prompt_tokens) + "+" + std::to_string(pat.max_tokens) +
                       " tokens exceed max_model_len " + std::to_string(r_.max_model_len),
                   "shorten the warmup request");
        r_.warmup.push_back(pat);
      }
    }
  }

  static nlohmann::json scalar_json(const YAML::Node& v) {
    const std::string& s = v.Scalar();
    if (v.Tag() == "!") return s;  // quoted: always a string
    if (s == "true" || s == "false") return s == "true";
    int64_t i = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), i);
    if (ec == std::errc() && p == s.data() + s.size()) return i;
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(d)) return d;
    return s;
  }

  YamlReader& y_;
  const YAML::Node& root_;
  Recipe& r_;
};

}  // namespace

RecipeLoad load_recipe(std::string_view text, const std::string& file, const std::string& source,
                       const YamlLimits& limits) {
  RecipeLoad out;
  YamlReader y(file, out.diagnostics);
  auto root = y.parse(text, limits);
  if (!root) return out;
  Recipe r;
  r.source = source;
  r.file = file;
  Loader(y, *root, r).run();
  if (has_errors(out.diagnostics)) return out;
  // A lane is looked up as <name>.yaml: a different name in the file is a trap.
  std::string stem = file.substr(file.find_last_of('/') + 1);
  if (stem.size() > 5 && stem.ends_with(".yaml")) stem.resize(stem.size() - 5);
  if (stem != r.name && stem != "-")
    y.add(Severity::warning, r.positions["name"], "name",
          "'" + r.name + "' differs from the file name '" + stem + "'",
          "name the file " + r.name + ".yaml so that lookups by name find it");
  for (auto& d : unhonoured_diagnostics(r)) out.diagnostics.push_back(d);
  out.recipe = std::move(r);
  return out;
}

RecipeLoad load_recipe_file(const std::string& path, const YamlLimits& limits) {
  auto text = read_input_file(path, limits.max_bytes);
  if (!text) {
    RecipeLoad out;
    YamlReader(path, out.diagnostics).add(Severity::error, {}, "", text.error().message, text.error().fix);
    return out;
  }
  return load_recipe(*text, path, path, limits);
}

}  // namespace spk
