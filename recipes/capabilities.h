// What this build of the runtime can honour. A recipe may ask for more (the data describes the real
// deployment); validate() reports each such setting as "not honoured by this build", and plan/up can
// refuse on the typed list. Flip a flag here in the change that lands the feature.
#pragma once

#include <string>
#include <vector>

#include "recipes/diagnostic.h"
#include "recipes/recipe.h"

namespace spk {

struct Capabilities {
  bool kv_cache_explicit = false;     // a KV dtype other than auto (runtime serve: "only auto is built")
  bool kv_cache_fp8 = false;          // fp8 KV cache pages
  bool kv_cache_4bit = false;         // fp4 / nvfp4 KV cache pages
  bool speculative_decoding = false;  // any drafter (EAGLE-3, EAGLE, MTP, n-gram)
  bool multi_node = false;            // cuda ranks on more than one node (NCCL over the RoCE fabric)
  bool tensor_parallel = false;       // more than one rank on backend cuda (NCCL communicator: not built)
  bool tensor_parallel_cpu = true;    // more than one rank on backend cpu (Gloo; runtime serve builds it)
  bool multi_node_cpu = true;  // backend cpu across nodes: up launches worker-first over SSH, Gloo over TCP
};

// This binary's capabilities.
Capabilities build_capabilities();

enum class Feature {
  kv_cache_explicit,
  kv_cache_fp8,
  kv_cache_4bit,
  speculative_decoding,
  multi_node,
  tensor_parallel
};
const char* feature_name(Feature f);  // "kv_cache_4bit", ...

struct Unhonoured {
  Feature feature;
  std::string key;     // the recipe key that asks for it: "kv_cache_dtype"
  std::string value;   // what it asks: "nvfp4"
  std::string detail;  // one line for humans
  SourcePos pos;
};

// Settings of `r` that `caps` cannot honour, in recipe order.
std::vector<Unhonoured> unhonoured(const Recipe& r, const Capabilities& caps = build_capabilities());

// The same list as diagnostics of severity not_honoured (for `validate`).
std::vector<Diagnostic> unhonoured_diagnostics(const Recipe& r,
                                               const Capabilities& caps = build_capabilities());

}  // namespace spk
