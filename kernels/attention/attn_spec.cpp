#include "kernels/attention/attn_spec.h"

namespace spk {

std::string_view attn_kind_name(AttnKind k) {
  switch (k) {
    case AttnKind::causal:
      return "causal";
    case AttnKind::sliding:
      return "sliding-window";
    case AttnKind::mla:
      return "mla (multi-head latent attention)";
  }
  return "?";
}

}  // namespace spk
