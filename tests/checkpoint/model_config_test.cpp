// config.json parsing for the four architectures and the named-key errors.
#include "runtime/model/model_config.h"

#include <gtest/gtest.h>

#include <cmath>
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
  EXPECT_EQ(r->num_key_value_heads, 8);  // MistralConfig's class default when the key is absent
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
  for (const char* type : {"dynamic", "longrope", "mrope"}) {
    j["rope_scaling"] = {{"rope_type", type}, {"factor", 4.0}};
    const auto e = err(j);
    EXPECT_NE(e.find(std::string("\"") + type + "\""), std::string::npos) << e;
    EXPECT_NE(e.find("rope_scaling.rope_type"), std::string::npos) << e;
    EXPECT_NE(e.find("default, linear, llama3, yarn"), std::string::npos) << e;
  }
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}};
  EXPECT_NE(err(j).find("rope_scaling.high_freq_factor"), std::string::npos) << err(j);
}

TEST(ModelConfig, MissingAndIllTypedKeysNamed) {
  for (const char* key : {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                          "vocab_size", "architectures"}) {
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
        Case{"hidden_act", "gelu"}, Case{"rope_scaling", 3}, Case{"architectures", "Llama"},
        Case{"rope_parameters", "x"}, Case{"partial_rotary_factor", 0.5}, Case{"text_config", 1},
        Case{"mlp_bias", "no"}, Case{"rope_theta", -1}}) {
    json j = llama31_8b();
    if (std::string(c.key) == "rope_parameters") j.erase("rope_scaling");  // rope_scaling wins when both
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

// transformers 5 writes rope_parameters (theta + type + scaling fields) and dtype; no rope_theta key.
json llama31_8b_v5() {
  json j = llama31_8b();
  j.erase("rope_scaling");
  j.erase("rope_theta");
  j.erase("torch_dtype");
  j["dtype"] = "bfloat16";
  j["rope_parameters"] = {{"factor", 8.0},           {"low_freq_factor", 1.0},
                          {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192},
                          {"rope_theta", 500000.0},  {"rope_type", "llama3"}};
  return j;
}

TEST(ModelConfig, Transformers5RopeParameters) {
  auto r = parse(llama31_8b_v5());
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ(r->rope_theta, 500000.0);  // was 10000 (the silent default) before rope_parameters was read
  ASSERT_TRUE(r->rope_scaling.has_value());
  EXPECT_EQ(r->rope_scaling->rope_type, "llama3");
  EXPECT_EQ(r->rope_scaling->original_max_position_embeddings, 8192);
  // Both spellings give the same inverse frequencies.
  EXPECT_EQ(rope_inv_freq(128, r->rope()), rope_inv_freq(128, parse(llama31_8b())->rope()));

  json j = qwen3_06b();  // default rope in the 5.x spelling
  j.erase("rope_theta");
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_theta", 1000000.0}, {"rope_type", "default"}};
  auto q = parse(j);
  ASSERT_TRUE(q.ok()) << q.error().what();
  EXPECT_EQ(q->rope_theta, 1000000.0);
  EXPECT_FALSE(q->rope_scaling.has_value());
  // transformers' priority: rope_theta inside the object, then the top-level key, then 10000.
  j["rope_theta"] = 5.0;
  EXPECT_EQ(parse(j)->rope_theta, 1000000.0);
  j["rope_parameters"].erase("rope_theta");
  EXPECT_EQ(parse(j)->rope_theta, 5.0);
  j.erase("rope_theta");
  EXPECT_EQ(parse(j)->rope_theta, 10000.0);
}

TEST(ModelConfig, PerLayerTypeRopeParameters) {
  json j = qwen3_06b();
  j.erase("rope_scaling");
  json one = {{"rope_theta", 1e6}, {"rope_type", "default"}};
  j["rope_parameters"] = {{"full_attention", one}, {"sliding_attention", one}};
  auto r = parse(j);
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ(r->rope_theta, 1e6);
  j["rope_parameters"]["sliding_attention"]["rope_theta"] = 1e4;
  const auto e = err(j);
  EXPECT_NE(e.find("\"rope_parameters\""), std::string::npos) << e;
  EXPECT_NE(e.find("per-layer-type rope is not supported"), std::string::npos) << e;
}

TEST(ModelConfig, LinearAndYarnRope) {
  json j = llama31_8b_v5();
  j["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 4.0}, {"rope_theta", 10000.0}};
  auto r = parse(j);
  ASSERT_TRUE(r.ok()) << r.error().what();
  const auto plain = rope_inv_freq(64, RopeConfig{10000.0, std::nullopt});
  const auto lin = rope_inv_freq(64, r->rope());
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_FLOAT_EQ(lin[i], plain[i] / 4.0f);
  EXPECT_EQ(rope_attention_factor(r->rope()), 1.0);

  // Qwen3's published yarn form (4.x spelling): factor 4 over 32768 original positions.
  j = qwen3_06b();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  r = parse(j);
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ(r->rope_scaling->rope_type, "yarn");
  EXPECT_NEAR(rope_attention_factor(r->rope()), 0.1 * std::log(4.0) + 1.0, 1e-12);
  const auto base = rope_inv_freq(128, RopeConfig{1e6, std::nullopt});
  const auto yarn = rope_inv_freq(128, r->rope());
  EXPECT_FLOAT_EQ(yarn.front(), base.front());       // high frequencies extrapolate unchanged
  EXPECT_FLOAT_EQ(yarn.back(), base.back() / 4.0f);  // low frequencies interpolate by the factor
  for (size_t i = 1; i < yarn.size(); ++i) EXPECT_LE(yarn[i], yarn[i - 1]);
  // DeepSeek-style mscale / mscale_all_dim, and an explicit attention_factor that wins over both.
  j["rope_scaling"]["mscale"] = 1.0;
  j["rope_scaling"]["mscale_all_dim"] = 1.0;
  EXPECT_NEAR(rope_attention_factor(parse(j)->rope()), 1.0, 1e-12);
  j["rope_scaling"]["attention_factor"] = 1.25;
  EXPECT_EQ(rope_attention_factor(parse(j)->rope()), 1.25);
  j["rope_scaling"].erase("factor");
  EXPECT_NE(err(j).find("rope_scaling.factor"), std::string::npos) << err(j);
}

TEST(ModelConfig, PartialRotaryRefusedByName) {
  json j = llama31_8b_v5();
  j["rope_parameters"]["partial_rotary_factor"] = 0.5;
  const auto e = err(j);
  EXPECT_NE(e.find("rope_parameters.partial_rotary_factor"), std::string::npos) << e;
  j["rope_parameters"]["partial_rotary_factor"] = 1.0;
  EXPECT_TRUE(parse(j).ok());
}

TEST(ModelConfig, ClassDefaultsOfEachFamily) {
  json j = qwen3_06b();
  j.erase("head_dim");  // Qwen3Config: 128 whatever hidden / heads is
  EXPECT_EQ(parse(j)->head_dim, 128);
  j["head_dim"] = nullptr;  // null: derived
  EXPECT_EQ(parse(j)->head_dim, 64);
  j = llama31_8b();
  j["architectures"] = {"MistralForCausalLM"};
  j.erase("rope_scaling");
  j.erase("sliding_window");
  EXPECT_EQ(parse(j)->sliding_window, 4096);  // MistralConfig's default when the key is absent
  j.erase("max_position_embeddings");
  EXPECT_EQ(parse(j)->max_position_embeddings, 131072);
  j = llama31_8b();
  j["hidden_act"] = "swish";  // transformers' alias of silu
  EXPECT_TRUE(parse(j).ok());
  j["dtype"] = "float32";  // 5.x key wins over torch_dtype
  EXPECT_EQ(parse(j)->torch_dtype, DType::f32);
}

TEST(ModelConfig, QwenSlidingLayers) {
  json j = qwen3_06b();
  j["num_hidden_layers"] = 4;
  j["use_sliding_window"] = true;
  j["sliding_window"] = 16;
  j["max_window_layers"] = 2;  // layers >= 2 slide
  auto r = parse(j);
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ(r->layer_window(0), 0);
  EXPECT_EQ(r->layer_window(1), 0);
  EXPECT_EQ(r->layer_window(2), 16);
  EXPECT_EQ(r->layer_window(3), 16);
  j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention"};
  r = parse(j);  // layer_types wins over max_window_layers
  EXPECT_EQ(r->layer_window(0), 16);
  EXPECT_EQ(r->layer_window(1), 0);
  EXPECT_EQ(r->layer_window(3), 0);
  j["use_sliding_window"] = false;  // transformers: sliding_window = None, every layer full
  r = parse(j);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(r->layer_window(i), 0);
  j["layer_types"] = {"sliding_attention", "chunked_attention", "full_attention", "full_attention"};
  EXPECT_NE(err(j).find("\"layer_types\" entry 1"), std::string::npos) << err(j);
  j["layer_types"] = {"full_attention"};
  EXPECT_NE(err(j).find("\"layer_types\" must list num_hidden_layers (4)"), std::string::npos) << err(j);
}

TEST(ModelConfig, LlamaMlpBias) {
  json j = llama31_8b();
  j["mlp_bias"] = true;
  EXPECT_TRUE(parse(j)->mlp_bias);
}

TEST(ModelConfig, TextConfigWrapper) {
  // Mistral-Small-3.1's layout: the language model's config under text_config.
  json text = llama31_8b_v5();
  text.erase("architectures");
  text["model_type"] = "mistral";
  text["sliding_window"] = nullptr;
  json j = {{"architectures", {"Mistral3ForConditionalGeneration"}},
            {"model_type", "mistral3"},
            {"text_config", text},
            {"vision_config", {{"model_type", "pixtral"}}},
            {"dtype", "bfloat16"}};
  auto r = parse(j);
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ(r->arch, Arch::mistral);
  EXPECT_TRUE(r->text_config_wrapper);
  EXPECT_EQ(r->hidden_size, 4096);
  EXPECT_EQ(r->rope_theta, 500000.0);
  j["text_config"]["model_type"] = "gemma3_text";
  const auto e = err(j);
  EXPECT_NE(e.find("\"text_config.model_type\""), std::string::npos) << e;
  EXPECT_NE(e.find("gemma3_text"), std::string::npos) << e;
  j["text_config"]["model_type"] = "mistral";
  j["text_config"]["hidden_size"] = "big";
  EXPECT_NE(err(j).find("\"text_config.hidden_size\""), std::string::npos) << err(j);
}

}  // namespace
}  // namespace spk::rt
