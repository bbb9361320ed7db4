// Sampling on the device (Backend::sample on CUDA) against the host sampler (runtime/sampler) on the
// same fresh random logits and the same draw: greedy, top-k, top-p, min-p, their mixes and plain
// temperature, at awkward vocab sizes, with NaN/-inf entries and exact ties. Rows the device hands back
// (host = true) must be ones it cannot decide exactly; they are finished by the host sampler and must
// then agree too. Skips (and says why) where no GPU is present.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/device_buffer.h"
#include "runtime/sampler/sampler.h"
#include "tests/gpu/assert_ok.h"

namespace {

using spk::rt::Sampler;
using spk::rt::SamplingParams;

SamplingParams P(float t, int k = 0, float p = 1.0f, float minp = 0.0f) {
  SamplingParams s;
  s.temperature = t;
  s.top_k = k;
  s.top_p = p;
  s.min_p = minp;
  return s;
}

std::string describe(const SamplingParams& p) {
  return "T=" + std::to_string(p.temperature) + " top_k=" + std::to_string(p.top_k) +
         " top_p=" + std::to_string(p.top_p) + " min_p=" + std::to_string(p.min_p);
}

TEST(CudaSample, MatchesHostSamplerOnSameLogitsAndDraw) {
  std::string why;
  if (!spk::cuda::cuda_device_available(&why)) GTEST_SKIP() << "gpu test skipped: " << why;
  auto gpu = spk::make_backend({"cuda", 0});
  ASSERT_TRUE(gpu.ok()) << gpu.error().what();
  spk::Backend& be = **gpu;
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  const std::vector<SamplingParams> params = {P(0.0f),
                                              P(0.7f, 1),
                                              P(1.0f, 40),
                                              P(0.8f, 1000),
                                              P(1.0f, 2000),
                                              P(1.0f, 0, 0.9f),
                                              P(0.6f, 50, 0.5f),
                                              P(1.0f, 0, 1.0f, 0.1f),
                                              P(1.1f, 0, 0.95f, 0.05f),
                                              P(1.3f),
                                              P(1.0f, 1 << 30),
                                              P(0.9f, 0, 1.0f, 0.3f),
                                              P(2.0f, 0, 0.999f),
                                              P(0.5f, 7, 1.0f, 0.2f)};
  int on_device = 0, total = 0;
  for (int vocab : {1, 97, 5003, 128256}) {
    for (float scale : {0.5f, 4.0f}) {  // flat (cuts beyond the candidate window) and peaked rows
      const int m = static_cast<int>(params.size());
      std::normal_distribution<float> nd(0.0f, scale);
      std::vector<float> logits(static_cast<size_t>(m) * vocab);
      for (auto& x : logits) x = nd(rng);
      for (int r = 0; r < m; ++r) {  // a few NaN / -inf entries and an exact tie at the top
        float* row = logits.data() + static_cast<size_t>(r) * vocab;
        if (vocab > 10) {
          row[rng() % vocab] = std::numeric_limits<float>::quiet_NaN();
          row[rng() % vocab] = -std::numeric_limits<float>::infinity();
          float mx = row[0];
          for (int i = 0; i < vocab; ++i)
            if (row[i] > mx) mx = row[i];
          row[rng() % vocab] = mx;
        }
      }
      auto t = be.alloc(spk::DType::f32, {m, vocab});
      ASSERT_TRUE(t.ok()) << t.error().what();
      ASSERT_OK(be.upload(*t, logits.data(), logits.size() * sizeof(float)));
      std::vector<spk::SampleRow> rows;
      std::vector<uint64_t> seeds;
      for (int r = 0; r < m; ++r) {
        seeds.push_back(rng());
        Sampler s(params[r], seeds.back());
        rows.push_back(s.device_row(/*want_logprob=*/true));
      }
      std::vector<spk::SampledToken> out;
      ASSERT_OK(be.sample(*t, rows, out));
      ASSERT_EQ(out.size(), rows.size());
      for (int r = 0; r < m; ++r) {
        const float* row = logits.data() + static_cast<size_t>(r) * vocab;
        Sampler ref(params[r], seeds[r]);
        float ref_lp = 0;
        const int32_t want = ref.sample(row, vocab, {}, &ref_lp);
        const std::string ctx = "seed=" + std::to_string(seed) + " vocab=" + std::to_string(vocab) +
                                " scale=" + std::to_string(scale) + " " + describe(params[r]);
        ++total;
        if (out[r].host) {
          // Only rows the device cannot decide exactly: top_k beyond its window, or a top-p / min-p cut
          // outside the window (flat rows).
          EXPECT_TRUE(params[r].top_k > spk::kMaxDeviceSampleCandidates || params[r].top_p < 1.0f ||
                      params[r].min_p > 0.0f)
              << ctx;
          Sampler again(params[r], seeds[r]);
          const spk::SampleRow drawn = again.device_row(true);
          float lp = 0;
          EXPECT_EQ(again.sample_drawn(drawn, row, vocab, {}, &lp), want) << ctx;
          continue;
        }
        ++on_device;
        EXPECT_EQ(out[r].id, want) << ctx;
        EXPECT_NEAR(out[r].logprob, ref_lp, 1e-4 * (1 + std::fabs(ref_lp))) << ctx;
      }
    }
  }
  EXPECT_GT(on_device, total * 3 / 4) << "most rows must be decided on the device";
}

TEST(CudaSample, RejectsMismatchedRows) {
  std::string why;
  if (!spk::cuda::cuda_device_available(&why)) GTEST_SKIP() << "gpu test skipped: " << why;
  auto gpu = spk::make_backend({"cuda", 0});
  ASSERT_TRUE(gpu.ok()) << gpu.error().what();
  auto t = (*gpu)->alloc(spk::DType::f32, {3, 17});
  ASSERT_TRUE(t.ok());
  std::vector<spk::SampledToken> out;
  auto st = (*gpu)->sample(*t, std::vector<spk::SampleRow>(2), out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().what().find("sample"), std::string::npos) << st.error().what();
}

}  // namespace
