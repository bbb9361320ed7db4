#include "runtime/serve/prefix_hash.h"

#define XXH_INLINE_ALL  // header-only: no link dependency on libxxhash
#include <xxhash.h>

#include <algorithm>
#include <cstring>

namespace spk::rt {

BlockHash hash_block(const BlockHash& parent, const int32_t* tokens, int n) {
  XXH3_state_t st;
  XXH3_128bits_reset(&st);
  const uint64_t p[2] = {parent.lo, parent.hi};
  XXH3_128bits_update(&st, p, sizeof p);
  XXH3_128bits_update(&st, tokens, static_cast<size_t>(std::max(n, 0)) * sizeof(int32_t));
  const XXH128_hash_t h = XXH3_128bits_digest(&st);
  return {h.low64, h.high64};
}

void extend_block_hashes(std::vector<BlockHash>& hashes, const std::vector<int32_t>& tokens, int upto,
                         int block_size) {
  const int full = std::min(upto, static_cast<int>(tokens.size())) / block_size;
  for (int i = static_cast<int>(hashes.size()); i < full; ++i) {
    const BlockHash parent = i == 0 ? BlockHash{} : hashes[static_cast<size_t>(i - 1)];
    hashes.push_back(hash_block(parent, tokens.data() + static_cast<size_t>(i) * block_size, block_size));
  }
}

}  // namespace spk::rt
