// Deployment fingerprint = recipe + binary + model revision. A live deployment whose fingerprint differs
// from the one `up`/`switch` computes is never reused: it is stopped and relaunched fresh.
#pragma once

#include <string>
#include <string_view>

#include "kernels/base/status.h"

namespace spk {

struct FingerprintInputs {
  std::string lane;
  std::string recipe_text;     // the resolved recipe, as text (any change => new deployment)
  std::string binary_xxh3;     // file_xxh3_hex of the sparkctl binary
  std::string model_revision;  // empty = unpinned / synthetic
};

// 16 lowercase hex digits (XXH3-64 over the length-prefixed fields, so field boundaries matter).
std::string deployment_fingerprint(const FingerprintInputs& in);

}  // namespace spk
