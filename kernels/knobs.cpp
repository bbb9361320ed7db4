#include "kernels/knobs.h"

#include <cstdlib>
#include <string>

namespace spk {

const std::vector<KnobInfo>& knobs() {
  static const std::vector<KnobInfo> all = {
#define SPK_KNOB_INFO(name, def, lo, hi, help) {"SPARKCTL_" #name, def, lo, hi, help},
      SPK_KNOBS(SPK_KNOB_INFO)
#undef SPK_KNOB_INFO
  };
  return all;
}

const KnobInfo& knob_info(Knob k) { return knobs()[static_cast<size_t>(k)]; }

int knob(Knob k) {
  const KnobInfo& i = knob_info(k);
  const char* e = std::getenv(i.name);
  if (!e || !*e) return i.def;
  const int v = std::atoi(e);
  return v < i.lo ? i.lo : v > i.hi ? i.hi : v;
}

const std::vector<WordKnobInfo>& word_knobs() {
  static const std::vector<WordKnobInfo> all = {
      {"SPARKCTL_PREFILL_ATTN", "tc|simt", "prefill attention on tensor cores, or the SIMT kernel"},
      {"SPARKCTL_MOE_GEMV", "2x2,2x4|RxU,RxU",
       "rows x unroll of the MoE grouped GEMV's gate/up and down kernels (default 2x2,2x4)"},
  };
  return all;
}

std::string word_knob(const char* name) {
  const char* e = std::getenv(name);
  return e ? e : "";
}

}  // namespace spk
