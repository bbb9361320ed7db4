// Golden logits: for each tests/data/golden/<name>.json (written by scripts/hf_reference.py from
// Hugging Face transformers in fp32 on the GPU machine), regenerate the same synthetic checkpoint with
// `sparkctl dev synth-model` (recorded arch/preset/seed/dtype/tokenizer/config_style), run our CPU model on
// the recorded prompt and require: last-position logits within 1e-4 of HF relative to max |logit|, and the
// same greedy tokens. `sparkctl generate --dump-logits` must give the same tokens too.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "kernels/base/fs.h"
#include "runtime/model/logits_summary.h"
#include "runtime/model/model.h"

namespace spk::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<fs::path> golden_files() {
  std::vector<fs::path> out;
  const fs::path dir = fs::path(SPARKCTL_TEST_DATA_DIR) / "golden";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".json") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string sh_quote(const std::string& s) {
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

int run(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

class GoldenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = fs::temp_directory_path() / ("spk_golden_" + std::to_string(::getpid()));
    fs::create_directories(tmp_);
  }
  void TearDown() override { fs::remove_all(tmp_); }
  fs::path tmp_;
};

// Runs our CPU model on the reference's prompt: last-position logits within `tol` of transformers'
// relative to max |logit|, the same greedy tokens, and the same tokens from `sparkctl generate`.
void check_against_reference(const fs::path& model_dir, const json& g, double tol, const fs::path& tmp,
                             const std::string& name) {
  auto m = rt::Model::load(model_dir.string(), {.threads = 2});
  ASSERT_TRUE(m.ok()) << m.error().what();
  rt::Model& model = **m;
  EXPECT_EQ(model.config().architecture, g.at("architecture").get<std::string>());
  const auto prompt = g.at("prompt_ids").get<std::vector<int32_t>>();
  const auto want_tokens = g.at("tokens").get<std::vector<int32_t>>();
  const int bs = 16, total = static_cast<int>(prompt.size() + want_tokens.size());
  ASSERT_TRUE(model.allocate_kv((total + bs - 1) / bs, bs).ok());
  rt::SeqSlice seq;
  for (int b = 0; b < (total + bs - 1) / bs; ++b) seq.block_table.push_back(b);

  // Prefill, compare logits; then greedy decode, compare tokens.
  std::vector<int32_t> step = prompt, got_tokens;
  int ctx = 0;
  std::vector<float> logits;
  const int V = model.config().vocab_size;
  while (got_tokens.size() < want_tokens.size()) {
    rt::StepBatch b;
    b.tokens = step;
    for (size_t i = 0; i < step.size(); ++i) b.positions.push_back(ctx + static_cast<int>(i));
    ctx += static_cast<int>(step.size());
    seq.q_len = static_cast<int32_t>(step.size());
    seq.ctx_len = ctx;
    b.seqs = {seq};
    b.logit_rows = {seq.q_len - 1};
    auto st = model.forward(b, logits);
    ASSERT_TRUE(st.ok()) << st.error().what();
    if (got_tokens.empty()) {
      const auto c = rt::compare_logits(g.at("last_logits"), logits.data(), V);
      ASSERT_TRUE(c.problem.empty()) << c.problem;
      EXPECT_LE(c.max_rel_err, tol) << "worst id " << c.worst_id << " over " << c.compared << " values";
      std::printf("[golden] %s: max rel err %.3g over %d logits\n", name.c_str(), c.max_rel_err, c.compared);
    }
    const int32_t next =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    got_tokens.push_back(next);
    step = {next};
  }
  EXPECT_EQ(got_tokens, want_tokens);

  // The CLI path: same greedy tokens from `sparkctl generate --dump-logits`.
  std::string ids;
  for (size_t i = 0; i < prompt.size(); ++i) ids += (i ? "," : "") + std::to_string(prompt[i]);
  const fs::path dump = tmp / (name + ".ours.json");
  const std::string gen = sh_quote(SPARKCTL_BINARY) + " generate --model " + sh_quote(model_dir.string()) +
                          " --prompt-ids " + ids + " --max-tokens " + std::to_string(want_tokens.size()) +
                          " --temperature 0 --threads 2 --dump-logits " + sh_quote(dump.string()) +
                          " > /dev/null 2>&1";
  ASSERT_EQ(run(gen), 0) << gen;
  auto ours = read_file(dump.string());
  ASSERT_TRUE(ours.ok()) << ours.error().what();
  const json o = json::parse(*ours);
  EXPECT_EQ(o.at("tokens").get<std::vector<int32_t>>(), want_tokens);
  EXPECT_EQ(o.at("last_logits").at("argmax"), g.at("last_logits").at("argmax"));
}

TEST_F(GoldenTest, MatchesHuggingFace) {
  const auto files = golden_files();
  if (files.empty())
    GTEST_SKIP()
        << "no golden data in " << SPARKCTL_TEST_DATA_DIR
        << "/golden: produce it on the GPU machine with scripts/hf_reference.py --synth-all (see its --help)";
  for (const auto& file : files) {
    SCOPED_TRACE(file.string());
    auto text = read_file(file.string());
    ASSERT_TRUE(text.ok()) << text.error().what();
    const json g = json::parse(*text);
    ASSERT_TRUE(g.contains("synth")) << "golden file has no \"synth\" record; it cannot be regenerated";
    const json& s = g["synth"];
    const fs::path model_dir = tmp_ / file.stem();
    const std::string synth =
        sh_quote(SPARKCTL_BINARY) + " dev synth-model --arch " + sh_quote(s.at("arch").get<std::string>()) +
        " --preset " + sh_quote(s.at("preset").get<std::string>()) + " --seed " +
        std::to_string(s.at("seed").get<uint64_t>()) + " --dtype " +
        sh_quote(s.at("dtype").get<std::string>()) + " --tokenizer " +
        sh_quote(std::string(SPARKCTL_NPM_DIR) + "/" + s.at("tokenizer").get<std::string>()) + " --out " +
        sh_quote(model_dir.string()) + " --config-style " + sh_quote(s.value("config_style", "v4")) +
        " > /dev/null";
    ASSERT_EQ(run(synth), 0) << synth;
    check_against_reference(model_dir, g, 1e-4, tmp_, file.stem().string());
    fs::remove_all(model_dir);
  }
}

// Checkpoints written by transformers' own save_pretrained (scripts/hf_parity.py --keep-dir), with the
// reference it computed from them: the config.json spellings and layouts current tools produce.
TEST_F(GoldenTest, TransformersWrittenCheckpoints) {
  const fs::path dir = fs::path(SPARKCTL_TEST_DATA_DIR) / "hf_checkpoints";
  std::vector<fs::path> cells;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (fs::exists(e.path() / "hf_reference.json")) cells.push_back(e.path());
  std::sort(cells.begin(), cells.end());
  ASSERT_FALSE(cells.empty()) << "no checkpoints under " << dir
                              << ": make them on the GPU machine with scripts/hf_parity.py --keep-dir";
  for (const auto& cell : cells) {
    SCOPED_TRACE(cell.string());
    auto text = read_file((cell / "hf_reference.json").string());
    ASSERT_TRUE(text.ok()) << text.error().what();
    check_against_reference(cell, json::parse(*text), 1e-4, tmp_, cell.filename().string());
  }
}

}  // namespace
}  // namespace spk::test
