#include "recipes/capabilities.h"

namespace spk {

Capabilities build_capabilities() {
  // Today's runtime: bf16/fp16/fp32 KV pages, plain decoding, every rank on one node, TP > 1 on the
  // CPU backend (Gloo) but not on CUDA (no NCCL communicator).
  return Capabilities{};
}

const char* feature_name(Feature f) {
  switch (f) {
    case Feature::kv_cache_explicit:
      return "kv_cache_explicit";
    case Feature::kv_cache_fp8:
      return "kv_cache_fp8";
    case Feature::kv_cache_4bit:
      return "kv_cache_4bit";
    case Feature::speculative_decoding:
      return "speculative_decoding";
    case Feature::multi_node:
      return "multi_node";
    case Feature::tensor_parallel:
      return "tensor_parallel";
  }
  return "?";
}

std::vector<Unhonoured> unhonoured(const Recipe& r, const Capabilities& caps) {
  auto at = [&r](const std::string& key) {
    auto it = r.positions.find(key);
    return it == r.positions.end() ? SourcePos{} : it->second;
  };
  std::vector<Unhonoured> out;
  const std::string& kv = r.kv_cache_dtype;
  if ((kv == "fp4" || kv == "nvfp4") && !caps.kv_cache_4bit)
    out.push_back(
        {Feature::kv_cache_4bit, "kv_cache_dtype", kv,
         "4-bit KV cache pages are not implemented; the runtime would have to store bf16 (4x the memory)",
         at("kv_cache_dtype")});
  if (kv.rfind("fp8", 0) == 0 && !caps.kv_cache_fp8)
    out.push_back({Feature::kv_cache_fp8, "kv_cache_dtype", kv, "fp8 KV cache pages are not implemented",
                   at("kv_cache_dtype")});
  if ((kv == "bf16" || kv == "fp16" || kv == "fp32") && !caps.kv_cache_explicit)
    out.push_back({Feature::kv_cache_explicit, "kv_cache_dtype", kv,
                   "the runtime builds only kv_cache_dtype auto (the model dtype)", at("kv_cache_dtype")});
  if (r.draft && !caps.speculative_decoding)
    out.push_back({Feature::speculative_decoding, "draft.method", spec_method_name(r.draft->method),
                   std::string(spec_method_name(r.draft->method)) + " speculative decoding (k=" +
                       std::to_string(r.draft->num_tokens) + ") is not implemented; decoding would be plain",
                   at("draft")});
  if (r.nodes > 1 && !caps.multi_node && !(r.backend == Backend::cpu && caps.multi_node_cpu))
    out.push_back({Feature::multi_node, "nodes", std::to_string(r.nodes),
                   "cuda ranks on " + std::to_string(r.nodes) +
                       " nodes: NCCL over the RoCE fabric was never run on real RoCE hardware (up runs the "
                       "fabric gate, setup and each node's own NCCL env; backend cpu across nodes is built: "
                       "Gloo over TCP)",
                   at("nodes")});
  if (r.tensor_parallel > 1 && r.backend == Backend::cpu && !caps.tensor_parallel_cpu)
    out.push_back({Feature::tensor_parallel, "tensor_parallel", std::to_string(r.tensor_parallel),
                   "the runtime serves one rank only (--tensor-parallel-size 1)", at("tensor_parallel")});
  if (r.tensor_parallel > 1 && r.backend == Backend::cuda && !caps.tensor_parallel)
    out.push_back(
        {Feature::tensor_parallel, "tensor_parallel", std::to_string(r.tensor_parallel),
         "tensor parallelism on backend cuda needs the NCCL communicator, which is not built (TP > 1 "
         "runs on backend cpu over Gloo only; multi-GPU NCCL is unverified)",
         at("tensor_parallel")});
  return out;
}

std::vector<Diagnostic> unhonoured_diagnostics(const Recipe& r, const Capabilities& caps) {
  std::vector<Diagnostic> out;
  for (auto& u : unhonoured(r, caps))
    out.push_back(Diagnostic{Severity::not_honoured, r.file, u.pos, u.key, "'" + u.value + "': " + u.detail,
                             "`up` refuses this recipe until the feature lands"});
  return out;
}

}  // namespace spk
