#include "runtime/serve/warmup.h"

#include <algorithm>
#include <string>
#include <vector>

namespace spk::rt {

Result<WarmupReport> warm_decode_buckets(Engine& engine, int max_num_seqs, int32_t token,
                                         std::chrono::seconds timeout) {
  const auto t0 = std::chrono::steady_clock::now();
  const int n = std::max(1, max_num_seqs);
  const int max_tokens_cap = std::max(1, engine.config().max_model_len - 1);
  std::vector<Submitted> subs;
  for (int i = 0; i < n; ++i) {
    SamplingParams p;
    p.temperature = 0;
    p.ignore_eos = true;
    p.max_tokens = std::min(2 * i + 3, max_tokens_cap);
    auto s = engine.submit({{token}, p, false, /*scripted=*/false});
    if (!s.ok()) return make_error("warmup sequence " + std::to_string(i) + ": " + s.error().what());
    subs.push_back(std::move(*s));
  }
  const auto deadline = t0 + timeout;
  for (size_t i = 0; i < subs.size(); ++i) {
    SeqUpdate u;
    while (!u.done) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !subs[i].channel->take(u, left))
        return make_error(
            "warmup sequence " + std::to_string(i) + ": no end within " + std::to_string(timeout.count()) +
                " s",
            "see the runtime log; a slow first step is usually kernel compilation or a too-large batch",
            true);
    }
    if (!u.error.empty()) return make_error("warmup sequence " + std::to_string(i) + " failed: " + u.error);
  }
  return WarmupReport{n, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
}

}  // namespace spk::rt
