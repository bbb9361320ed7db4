#include "kernels/attention/attn_spec.h"

namespace spk {

std::string_view attn_kind_name(AttnKind k) {
  switch (k) {
    case AttnKind::causal:
      return "causal";
    case AttnKind::sliding:
      return "sliding-window";
  }
  return "?";
}

}  // namespace spk
