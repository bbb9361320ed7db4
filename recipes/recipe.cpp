#include "recipes/recipe.h"

namespace spk {

const char* backend_name(Backend b) { return b == Backend::cpu ? "cpu" : "cuda"; }

const char* model_source_name(ModelSource s) {
  switch (s) {
    case ModelSource::hub:
      return "hub";
    case ModelSource::path:
      return "path";
    case ModelSource::synthetic:
      return "synthetic";
  }
  return "?";
}

const char* spec_method_name(SpecMethod m) {
  switch (m) {
    case SpecMethod::eagle3:
      return "eagle3";
    case SpecMethod::eagle:
      return "eagle";
    case SpecMethod::mtp:
      return "mtp";
    case SpecMethod::ngram:
      return "ngram";
  }
  return "?";
}

nlohmann::json to_json(const Recipe& r) {
  using nlohmann::json;
  json model = {{"source", model_source_name(r.model.source)}, {"served_name", r.model.served_name}};
  if (r.model.source == ModelSource::synthetic) {
    const auto& s = r.model.synthetic;
    model["synthetic"] = {
        {"arch", s.arch}, {"preset", s.preset}, {"tokenizer", s.tokenizer}, {"seed", s.seed}};
  } else {
    model[r.model.source == ModelSource::hub ? "hub" : "path"] = r.model.id;
  }
  if (r.model.source == ModelSource::hub)
    model["revision"] = r.model.revision.empty() ? json() : json(r.model.revision);
  json j = {{"name", r.name},
            {"description", r.description},
            {"source", r.source},
            {"backend", backend_name(r.backend)},
            {"model", model},
            {"draft", nullptr},
            {"tensor_parallel", r.tensor_parallel},
            {"nodes", r.nodes},
            {"kv_cache_dtype", r.kv_cache_dtype},
            {"block_size", r.block_size},
            {"max_model_len", r.max_model_len},
            {"max_num_seqs", r.max_num_seqs},
            {"max_num_batched_tokens", r.max_num_batched_tokens},
            {"enable_prefix_caching", r.enable_prefix_caching},
            {"gpu_memory_utilization", r.gpu_memory_utilization},
            {"device_memory_gib", r.device_memory_gib ? json(*r.device_memory_gib) : json()},
            {"port", r.port},
            {"bind", r.bind},
            {"api_key_env", r.api_key_env},
            {"master_port", r.master_port},
            {"mem_floor_gib", r.mem_floor_gib},
            {"chat_template_kwargs", r.chat_template_kwargs},
            {"tool_call_parser", r.tool_call_parser},
            {"reasoning_parser", r.reasoning_parser},
            {"env", json::object()},
            {"warmup", json::array()},
            {"fabric", {{"setup", r.fabric_setup}, {"mtu", r.fabric_mtu}}}};
  if (r.draft)
    j["draft"] = {{"model", r.draft->model},
                  {"revision", r.draft->revision.empty() ? json() : json(r.draft->revision)},
                  {"method", spec_method_name(r.draft->method)},
                  {"num_tokens", r.draft->num_tokens}};
  for (auto& [k, v] : r.env) j["env"][k] = v;
  for (auto& w : r.warmup)
    j["warmup"].push_back(
        {{"prompt_tokens", w.prompt_tokens}, {"max_tokens", w.max_tokens}, {"repeat", w.repeat}});
  return j;
}

}  // namespace spk
