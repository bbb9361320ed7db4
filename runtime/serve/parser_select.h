// Which tool-call and reasoning parsers a server runs: --tool-call-parser / --reasoning-parser NAME, "none"
// (off) or "auto" (the default), which picks by the checkpoint's config.json model_type and the markers
// its chat template writes:
//   qwen3, qwen3_moe, qwen3_next  -> hermes + qwen3   (qwen3_coder when the template writes <function=...>;
//                                                      no reasoning parser when it has no <think>)
//   qwen2, qwen2_moe              -> hermes
//   minimax_m2, minimax           -> minimax_m2 + minimax
//   deepseek_v3 (and _v32)        -> deepseek_v3 + deepseek_r1 (deepseek_v31 when the template writes
//                                    NAME<｜tool▁sep｜> without the "function" type)
//   anything else                 -> by template markers (<tool_call>, <minimax:tool_call>, tool▁calls▁begin;
//                                    <think> for reasoning), else none.
#pragma once

#include <string>
#include <string_view>

#include "kernels/base/status.h"
#include "runtime/serve/output_parser.h"

namespace spk::rt {

// The defaults for a model (pure: tests call it with the real templates).
OutputParsing default_parsers(std::string_view model_type, std::string_view template_source);

// The flags resolved: NAME, "none" or "auto". An unknown name is an error listing the valid ones.
Result<OutputParsing> select_parsers(const std::string& tool_flag, const std::string& reasoning_flag,
                                     std::string_view model_type, std::string_view template_source);

// model_type of <dir>/config.json (text_config.model_type for a wrapper); "" when unreadable.
std::string read_model_type(const std::string& model_dir);

}  // namespace spk::rt
