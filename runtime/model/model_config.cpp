#include "runtime/model/model_config.h"

namespace spk::rt {

const char* arch_name(Arch a) {
  switch (a) {
    case Arch::llama:
      return "llama";
    case Arch::mistral:
      return "mistral";
    case Arch::qwen2:
      return "qwen2";
    case Arch::qwen3:
      return "qwen3";
  }
  return "?";
}

}  // namespace spk::rt
