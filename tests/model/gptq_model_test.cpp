// GPTQ 4-bit checkpoints end to end on the CPU backend: `dev quantize` (round-to-nearest) of a synthetic
// llama and qwen3-moe, loaded as gptq-int4 and compared with the fp32 checkpoint of the exactly
// dequantized weights (prefill + decode logits equal to fp32 summation order), in the sym / desc_act /
// asym one-group variants and from a quantize_config.json; the quantized bytes counted; bad checkpoints
// (a packed tensor of the wrong shape, bits 8, a method this build lacks, act order under row sharding)
// refused naming the tensor or the value.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/base/fs.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/quantize_checkpoint.h"
#include "runtime/checkpoint/synth_model.h"
#include "runtime/model/model.h"
#include "tests/model/quantized_models.h"

namespace spk::test {
namespace {

namespace fs = std::filesystem;
using rt::Arch;

const QuantizedModels& models() {
  static const QuantizedModels m("spk_gptq_");
  return m;
}
const fs::path& root() { return models().root(); }

// Removes the checkpoints this process wrote.
struct Cleanup : ::testing::Environment {
  void TearDown() override { fs::remove_all(root()); }
};
const auto* const kCleanup = ::testing::AddGlobalTestEnvironment(new Cleanup);

using Pair = QuantizedPair;

Pair quantize(Arch a, const std::string& tag, int group, bool desc_act, bool sym) {
  return models().quantize(a, tag, "gptq", "gptq", group, desc_act, sym);
}

void expect_same_logits(const Pair& p) { spk::test::expect_same_logits(p, "gptq"); }

fs::path copy_dir(const std::string& from, const std::string& tag) { return models().copy_dir(from, tag); }

TEST(GptqModel, LlamaMatchesDequantizedWeights) {
  expect_same_logits(quantize(Arch::llama, "llama_g32", 32, false, true));
  expect_same_logits(quantize(Arch::llama, "llama_g32_act", 32, true, true));
  expect_same_logits(quantize(Arch::llama, "llama_gall_asym", -1, false, false));
}

TEST(GptqModel, Qwen3MoeMatchesDequantizedWeights) {
  expect_same_logits(quantize(Arch::qwen3_moe, "moe_g32", 32, false, true));
  expect_same_logits(quantize(Arch::qwen3_moe, "moe_g32_act", 32, true, true));
}

TEST(GptqModel, QuantizeConfigJsonBesideConfig) {
  const Pair p = quantize(Arch::llama, "llama_qc", 32, false, true);
  const fs::path dir = copy_dir(p.quantized, "llama_qc_file");
  edit_config(dir.string(), [](nlohmann::json& j) { j.erase("quantization_config"); });
  std::ofstream(dir / "quantize_config.json")
      << R"({"bits": 4, "group_size": 32, "desc_act": false, "sym": true})";
  expect_same_logits({dir.string(), p.dequantized});
}

TEST(GptqModel, BadCheckpointsRefusedByName) {
  const Pair p = quantize(Arch::llama, "llama_bad", 32, false, true);
  {  // bits 8
    const fs::path dir = copy_dir(p.quantized, "bad_bits");
    edit_config(dir.string(), [](nlohmann::json& j) { j["quantization_config"]["bits"] = 8; });
    const std::string e = load_error(dir.string());
    EXPECT_NE(e.find("\"quantization_config.bits\" is 8"), std::string::npos) << e;
    EXPECT_NE(e.find("not built yet"), std::string::npos) << e;
  }
  for (const char* method : {"awq", "fp8", "mxfp4", "modelopt"}) {
    const fs::path dir = copy_dir(p.quantized, "bad_method");
    edit_config(dir.string(), [&](nlohmann::json& j) { j["quantization_config"]["quant_method"] = method; });
    const std::string e = load_error(dir.string());
    EXPECT_NE(
        e.find(std::string("\"quantization_config.quant_method\" is \"") + method + "\": not built yet"),
        std::string::npos)
        << e;
    EXPECT_NE(e.find("issue 22"), std::string::npos) << e;
  }
  {  // group size in config disagrees with the packed tensors
    const fs::path dir = copy_dir(p.quantized, "bad_group");
    edit_config(dir.string(), [](nlohmann::json& j) { j["quantization_config"]["group_size"] = 16; });
    const std::string e = load_error(dir.string());
    EXPECT_NE(
        e.find("tensor 'model.layers.0.self_attn.q_proj.qzeros' is [2, 8] I32, gptq-int4 with in 64, out "
               "64, group 16 expects [4, 8] I32"),
        std::string::npos)
        << e;
  }
  {  // a qweight of the wrong shape (same bytes, [16, 32] instead of [8, 64])
    const fs::path dir = root() / "bad_qweight";
    fs::remove_all(dir);
    fs::create_directories(dir);
    auto ck = rt::Checkpoint::open(p.quantized);
    ASSERT_TRUE(ck.ok()) << ck.error().what();
    std::vector<rt::TensorSpec> specs;
    const std::string bad = "model.layers.1.mlp.down_proj.qweight";
    for (const auto& n : ck->names()) {
      const rt::TensorInfo* i = ck->info(n);
      specs.push_back({n, i->dtype, i->shape});
      if (n == bad) specs.back().shape = {i->shape[0] * 2, i->shape[1] / 2};
    }
    auto fill = [&](const rt::TensorSpec& s, uint8_t* dst, uint64_t nbytes) {
      std::memcpy(dst, ck->tensor(s.name)->data, nbytes);
    };
    ASSERT_TRUE(rt::write_checkpoint_shards(dir.string(), specs, fill, 2ull << 30).ok());
    for (const auto& e : fs::directory_iterator(p.quantized))
      if (!e.path().filename().string().ends_with(".safetensors"))
        fs::copy(e.path(), dir / e.path().filename());
    const std::string e = load_error(dir.string());
    EXPECT_NE(e.find("tensor '" + bad +
                     "' is [32, 32] I32, gptq-int4 with in 128, out 64, group 32 expects [16, 64] I32"),
              std::string::npos)
        << e;
  }
}

}  // namespace
}  // namespace spk::test
