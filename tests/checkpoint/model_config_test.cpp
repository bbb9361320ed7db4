// config.json parsing for the four architectures and the named-key errors.
#include "runtime/model/model_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace spk::rt {
namespace {

using nlohmann::json;

// Llama-3.1-8B's config.json, verbatim in the fields we read.
json llama31_8b() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
    "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "transformers_version": "4.43.0.dev0", "use_cache": true, "vocab_size": 128256})");
}

json qwen3_06b() {
  return json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "bos_token_id": 151643,
    "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024,
    "intermediate_size": 3072, "max_position_embeddings": 40960, "max_window_layers": 28,
    "model_type": "qwen3", "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
    "tie_word_embeddings": true, "torch_dtype": "bfloat16", "use_sliding_window": false,
    "vocab_size": 151936})");
}

Result<ModelConfig> parse(const json& j) { return parse_model_config(j.dump(), "/m/config.json"); }

std::string err(const json& j) {
  auto r = parse(j);
  return r.ok() ? "<parsed>" : r.error().what();
}

TEST(ModelConfig, Llama31) {
  auto r = parse(llama31_8b());
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ(r->arch, Arch::llama);
  EXPECT_EQ(r->head_dim, 128);
  EXPECT_EQ(r->num_key_value_heads, 8);
  EXPECT_EQ(r->vocab_size, 128256);
  ASSERT_TRUE(r->rope_scaling.has_value());
  EXPECT_EQ(r->rope_scaling->factor, 8.0);
  EXPECT_EQ(r->rope_scaling->original_max_position_embeddings, 8192);
  EXPECT_EQ(r->rope_theta, 500000.0);
  EXPECT_EQ(r->rms_norm_eps, 1e-5);
  EXPECT_EQ(r->eos_token_ids, (std::vector<int>{128001, 128008, 128009}));
  EXPECT_EQ(r->bos_token_id, 128000);
  EXPECT_FALSE(r->tie_word_embeddings);
  EXPECT_FALSE(r->attention_bias);
  EXPECT_FALSE(r->qk_norm);
  EXPECT_EQ(r->torch_dtype, DType::bf16);
}

TEST(ModelConfig, Qwen3) {
  auto r = parse(qwen3_06b());
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ(r->arch, Arch::qwen3);
  EXPECT_EQ(r->head_dim, 128);  // from config, not 1024/16
  EXPECT_TRUE(r->qk_norm);
  EXPECT_TRUE(r->tie_word_embeddings);
  EXPECT_FALSE(r->rope_scaling.has_value());
  EXPECT_EQ(r->eos_token_ids, (std::vector<int>{151645}));
  EXPECT_EQ(r->sliding_window, 0);
}

TEST(ModelConfig, Qwen2AlwaysHasBias) {
  json j = qwen3_06b();
  j["architectures"] = {"Qwen2ForCausalLM"};
  j.erase("head_dim");
  j.erase("attention_bias");
  auto r = parse(j);
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ(r->arch, Arch::qwen2);
  EXPECT_TRUE(r->attention_bias);
  EXPECT_FALSE(r->qk_norm);
  EXPECT_EQ(r->head_dim, 64);  // hidden / heads
}

TEST(ModelConfig, MistralSlidingWindow) {
  json j = llama31_8b();
  j["architectures"] = {"MistralForCausalLM"};
  j.erase("rope_scaling");
  j.erase("num_key_value_heads");
  j["sliding_window"] = 4096;
  auto r = parse(j);
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ(r->arch, Arch::mistral);
  EXPECT_EQ(r->sliding_window, 4096);
  EXPECT_EQ(r->num_key_value_heads, 32);  // defaults to heads
  j["sliding_window"] = nullptr;
  EXPECT_EQ(parse(j)->sliding_window, 0);
}

TEST(ModelConfig, UnknownArchitectureNamedWithSupportedList) {
  json j = llama31_8b();
  j["architectures"] = {"GPTNeoXForCausalLM"};
  const auto e = err(j);
  EXPECT_NE(e.find("GPTNeoXForCausalLM"), std::string::npos) << e;
  EXPECT_NE(e.find("Qwen3ForCausalLM"), std::string::npos) << e;
  EXPECT_NE(e.find("/m/config.json"), std::string::npos) << e;
}

TEST(ModelConfig, OtherRopeTypeNamed) {
  json j = llama31_8b();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  const auto e = err(j);
  EXPECT_NE(e.find("yarn"), std::string::npos) << e;
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}};
  EXPECT_NE(err(j).find("rope_scaling.high_freq_factor"), std::string::npos) << err(j);
}

TEST(ModelConfig, MissingAndIllTypedKeysNamed) {
  for (const char* key : {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                          "vocab_size", "max_position_embeddings", "architectures"}) {
    json j = llama31_8b();
    j.erase(key);
    const auto e = err(j);
    EXPECT_NE(e.find(std::string("\"") + key + "\""), std::string::npos) << key << ": " << e;
    EXPECT_NE(e.find("/m/config.json"), std::string::npos) << e;
  }
  struct Case {
    const char* key;
    json value;
  };
  for (const Case& c :
       {Case{"hidden_size", "4096"}, Case{"hidden_size", 0}, Case{"num_key_value_heads", 5},
        Case{"rms_norm_eps", "x"}, Case{"tie_word_embeddings", 1}, Case{"torch_dtype", "int8"},
        Case{"eos_token_id", "eos"}, Case{"eos_token_id", json::array({1, 999999})},
        Case{"hidden_act", "gelu"}, Case{"rope_scaling", 3}, Case{"architectures", "Llama"}}) {
    json j = llama31_8b();
    j[c.key] = c.value;
    const auto e = err(j);
    EXPECT_NE(e.find(std::string("\"") + c.key + "\""), std::string::npos)
        << c.key << "=" << c.value << ": " << e;
  }
}

TEST(ModelConfig, NotJson) { EXPECT_NE(err(json()).find("/m/config.json"), std::string::npos); }

TEST(ModelConfig, LoadFromMissingDirNamesPath) {
  auto r = load_model_config("/nonexistent/model");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().what().find("/nonexistent/model/config.json"), std::string::npos);
}

}  // namespace
}  // namespace spk::rt
