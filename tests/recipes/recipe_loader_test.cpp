// The recipe loader: every error class names file:line:column, the key, the bad value and the fix;
// all errors are collected; the shipped lanes are valid and report what this build cannot honour.
#include "recipes/recipe_loader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "kernels/base/fs.h"
#include "recipes/capabilities.h"
#include "recipes/recipe_store.h"

namespace spk {
namespace {

RecipeLoad fixture(const std::string& name) {
  auto text = read_file(std::string(RECIPES_FIXTURES) + "/" + name);
  EXPECT_TRUE(text.ok()) << name;
  return load_recipe(text.ok() ? *text : "", name, "test");
}

std::vector<std::string> lines(const RecipeLoad& l, Severity s = Severity::error) {
  std::vector<std::string> out;
  for (const auto& d : l.diagnostics)
    if (d.severity == s) out.push_back(d.str());
  return out;
}

std::string dump(const RecipeLoad& l) {
  std::string out;
  for (const auto& d : l.diagnostics) out += d.str() + "\n";
  return out;
}

bool has_line(const RecipeLoad& l, const std::string& want) {
  auto all = lines(l);
  return std::find(all.begin(), all.end(), want) != all.end();
}

TEST(RecipeLoader, UnknownKeysSuggestTheNearestKnownKey) {
  auto l = fixture("unknown_key.yaml");
  EXPECT_FALSE(l.ok());
  EXPECT_TRUE(has_line(l, "unknown_key.yaml:4:3: model: unknown key 'revison' (did you mean 'revision'?)"))
      << dump(l);
  EXPECT_TRUE(
      has_line(l, "unknown_key.yaml:5:1: unknown key 'max_model_length' (did you mean 'max_model_len'?)"))
      << dump(l);
}

TEST(RecipeLoader, TypeErrorsNameTheValue) {
  auto l = fixture("bad_types.yaml");
  EXPECT_FALSE(l.ok());
  EXPECT_TRUE(
      has_line(l,
               "bad_types.yaml:5:18: tensor_parallel: expected an integer, got 'two' (write a whole number "
               "without quotes)"))
      << dump(l);
  EXPECT_TRUE(
      has_line(l,
               "bad_types.yaml:6:15: max_num_seqs: expected an integer, got '8' (write a whole number "
               "without quotes)"))
      << dump(l);
  EXPECT_TRUE(
      has_line(l,
               "bad_types.yaml:7:25: gpu_memory_utilization: expected a number, got 'high' (write a number "
               "like 0.90 without quotes)"))
      << dump(l);
  EXPECT_TRUE(has_line(l, "bad_types.yaml:8:6: env: expected a map, got a list (write `NAME: value` lines)"))
      << dump(l);
  EXPECT_EQ(lines(l).size(), 4u) << dump(l);
}

TEST(RecipeLoader, RangeErrorsNameTheRangeAndAFix) {
  auto l = fixture("bad_ranges.yaml");
  EXPECT_FALSE(l.ok());
  EXPECT_TRUE(has_line(
      l, "bad_ranges.yaml:5:25: gpu_memory_utilization: 1.3 is out of range (0,1] (set a value like 0.90)"))
      << dump(l);
  EXPECT_TRUE(has_line(l, "bad_ranges.yaml:6:13: block_size: 100 is not a power of two (set 64 or 128)"))
      << dump(l);
  EXPECT_TRUE(
      has_line(l, "bad_ranges.yaml:7:7: port: 70000 is out of range [1,65535] (set a TCP port like 8000)"))
      << dump(l);
  auto all = dump(l);
  EXPECT_NE(all.find("kv_cache_dtype: 'fp9' is not one of"), std::string::npos) << all;
  EXPECT_NE(all.find("did you mean 'fp8'?"), std::string::npos) << all;
  EXPECT_EQ(lines(l).size(), 4u) << all;
}

// mem_floor_gib: the node's MemAvailable floor below which a rank stops its engine (issue 27).
TEST(RecipeLoader, MemFloorIsANumberOfGiBAndReachesTheRecipe) {
  const std::string base = "name: x\nbackend: cpu\nmodel: {path: /m}\ndevice_memory_gib: 1\n";
  auto good = load_recipe(base + "mem_floor_gib: 3.5\n", "f.yaml", "t");
  ASSERT_TRUE(good.ok()) << dump(good);
  EXPECT_DOUBLE_EQ(good.recipe->mem_floor_gib, 3.5);
  EXPECT_DOUBLE_EQ(load_recipe(base, "f.yaml", "t").recipe.value().mem_floor_gib, 0.0) << "off unless set";
  auto neg = load_recipe(base + "mem_floor_gib: -1\n", "f.yaml", "t");
  EXPECT_FALSE(neg.ok());
  EXPECT_NE(dump(neg).find("mem_floor_gib: -1 is out of range [0,4096]"), std::string::npos) << dump(neg);
  EXPECT_NE(dump(neg).find("like 3 (0 = off)"), std::string::npos) << dump(neg);
}

TEST(RecipeLoader, CrossFieldErrors) {
  auto l = fixture("cross_field.yaml");
  EXPECT_FALSE(l.ok());
  auto all = dump(l);
  EXPECT_NE(all.find("cross_field.yaml:6:3: draft.method: a drafter without a speculative method"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("draft.num_tokens: speculative decoding without a token count"), std::string::npos)
      << all;
  EXPECT_NE(all.find("cross_field.yaml:8:18: tensor_parallel: 3 is not a multiple of nodes 2"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("cross_field.yaml:11:25: max_num_batched_tokens: 64 is smaller than block_size 128"),
            std::string::npos)
      << all;
}

TEST(RecipeLoader, MissingModelAndSyntaxErrors) {
  auto l = fixture("no_model.yaml");
  EXPECT_FALSE(l.ok());
  EXPECT_NE(dump(l).find("model: missing required key"), std::string::npos) << dump(l);
  auto s = fixture("syntax_error.yaml");
  EXPECT_FALSE(s.ok());
  ASSERT_EQ(s.diagnostics.size(), 1u);
  EXPECT_GT(s.diagnostics[0].pos.line, 0);
  EXPECT_NE(s.diagnostics[0].message.find("YAML syntax"), std::string::npos);
}

TEST(RecipeLoader, ValidPinnedRecipeHasNoFindings) {
  auto l = fixture("valid_pinned.yaml");
  ASSERT_TRUE(l.ok()) << dump(l);
  EXPECT_TRUE(l.diagnostics.empty()) << dump(l);
  const Recipe& r = *l.recipe;
  EXPECT_EQ(r.name, "valid_pinned");
  EXPECT_DOUBLE_EQ(r.gpu_memory_utilization, 0.85);
  EXPECT_EQ(r.block_size, 16);  // default
  EXPECT_EQ(r.model.served_name, "model");
}

TEST(RecipeLoader, ModelSourcesAreExclusiveAndDraftMethodsChecked) {
  auto l = load_recipe("name: x\nmodel: {hub: a/b, path: /m}\n", "x.yaml", "t");
  EXPECT_NE(dump(l).find("more than one model source"), std::string::npos) << dump(l);
  l = load_recipe("name: x\nmodel: {path: /m}\ndraft: {method: eagle3, num_tokens: 3}\n", "x.yaml", "t");
  EXPECT_NE(dump(l).find("method eagle3 needs a drafter checkpoint"), std::string::npos) << dump(l);
  l = load_recipe("name: x\nmodel: {path: /m}\ndraft: {method: ngram, num_tokens: 2}\n", "x.yaml", "t");
  EXPECT_TRUE(l.ok()) << dump(l);
  l = load_recipe("name: x\nbackend: cpu\nmodel: {path: /m}\n", "x.yaml", "t");
  EXPECT_NE(dump(l).find("device_memory_gib: backend cpu needs a RAM budget"), std::string::npos) << dump(l);
  l = load_recipe("name: x\nmodel: {path: m}\nport: 29500\n", "x.yaml", "t");
  EXPECT_NE(dump(l).find("'m' is not an absolute path"), std::string::npos) << dump(l);
  EXPECT_NE(dump(l).find("master_port: 29500 is also the serving port"), std::string::npos) << dump(l);
}

TEST(RecipeLoader, SyntheticModelChoicesMatchSynthModel) {
  auto l = load_recipe(
      "name: x\nbackend: cpu\ndevice_memory_gib: 1\nmodel: {synthetic: {arch: qwen4, preset: huge}}\n",
      "x.yaml", "t");
  EXPECT_NE(
      dump(l).find(
          "model.synthetic.arch: 'qwen4' is not one of qwen3|qwen2|llama|mistral (did you mean 'qwen3'?)"),
      std::string::npos)
      << dump(l);
  EXPECT_NE(dump(l).find("model.synthetic.preset: 'huge' is not one of tiny|small|8b"), std::string::npos)
      << dump(l);
}

TEST(RecipeLoader, CollectsAllErrorsNotJustTheFirst) {
  auto l =
      load_recipe("name: x\nmodel: {path: /m}\nblock_size: 3\nmax_num_seqs: 0\nbind: nowhere\nmistake: 1\n",
                  "x.yaml", "t");
  EXPECT_EQ(lines(l).size(), 4u) << dump(l);
}

TEST(RecipeLoader, DuplicateKeysAreErrors) {
  auto l = load_recipe("name: x\nmodel: {path: /m}\nport: 1\nport: 2\n", "x.yaml", "t");
  EXPECT_TRUE(has_line(l, "x.yaml:4:1: port: duplicate key (keep one of the two entries)")) << dump(l);
}

RecipeLoad embedded(const std::string& name) {
  auto l = load_named_recipe(name, {});
  EXPECT_TRUE(l.ok()) << name;
  return l.ok() ? *l : RecipeLoad{};
}

bool has_feature(const Recipe& r, Feature f) {
  auto u = unhonoured(r);
  return std::any_of(u.begin(), u.end(), [f](const Unhonoured& x) { return x.feature == f; });
}

TEST(RecipeLoader, FabricSetupAndMtuAreTypedAndChecked) {
  const std::string base =
      "name: lane-x\nbackend: cpu\ndevice_memory_gib: 2\nmodel: {path: /m, served_name: x}\n";
  auto ok = load_recipe(base + "nodes: 2\ntensor_parallel: 2\nfabric: {setup: true, mtu: 9216}\n", "x.yaml",
                        "test");
  ASSERT_TRUE(ok.ok()) << dump(ok);
  EXPECT_TRUE(ok.recipe->fabric_setup);
  EXPECT_EQ(ok.recipe->fabric_mtu, 9216);
  auto def = load_recipe(base, "x.yaml", "test");
  ASSERT_TRUE(def.ok()) << dump(def);
  EXPECT_FALSE(def.recipe->fabric_setup);
  EXPECT_EQ(def.recipe->fabric_mtu, 9000);
  auto bad = load_recipe(base + "fabric: {setup: yes please, mtu: 100}\n", "x.yaml", "test");
  EXPECT_FALSE(bad.ok());
  auto all = dump(bad);
  EXPECT_NE(all.find("fabric.setup: expected true or false"), std::string::npos) << all;
  EXPECT_NE(all.find("fabric.mtu: 100 is out of range [1280,65535]"), std::string::npos) << all;
  auto typo = load_recipe(base + "fabric: {stup: true}\n", "x.yaml", "test");
  EXPECT_FALSE(typo.ok());
  EXPECT_NE(dump(typo).find("fabric: unknown key 'stup' (did you mean 'setup'?)"), std::string::npos)
      << dump(typo);
}

TEST(ShippedLanes, LaneAIsValidWithWarningsAndNotHonouredNotes) {
  auto l = embedded("lane-a");
  ASSERT_TRUE(l.ok()) << dump(l);
  const Recipe& r = *l.recipe;
  EXPECT_EQ(r.source, "embedded");
  EXPECT_EQ(r.tensor_parallel, 2);
  EXPECT_EQ(r.nodes, 2);
  EXPECT_EQ(r.block_size, 128);
  EXPECT_EQ(r.max_model_len, 196608);
  EXPECT_EQ(r.max_num_seqs, 1);
  EXPECT_DOUBLE_EQ(r.gpu_memory_utilization, 0.929);
  ASSERT_TRUE(r.draft.has_value());
  EXPECT_EQ(r.draft->method, SpecMethod::eagle3);
  EXPECT_EQ(r.draft->num_tokens, 3);
  auto warn = dump(l);
  EXPECT_NE(warn.find("lane-a.yaml:8:3: warning: model.revision: not pinned"), std::string::npos) << warn;
  EXPECT_NE(warn.find("is a placeholder"), std::string::npos) << warn;
  EXPECT_TRUE(has_feature(r, Feature::kv_cache_4bit));
  EXPECT_TRUE(has_feature(r, Feature::speculative_decoding));
  EXPECT_TRUE(has_feature(r, Feature::multi_node));
  EXPECT_TRUE(has_feature(r, Feature::tensor_parallel));
  EXPECT_EQ(count(l.diagnostics, Severity::not_honoured), 4) << warn;
  // A build that has the features honours the same recipe.
  EXPECT_TRUE(unhonoured(r, Capabilities{true, true, true, true, true, true}).empty());
}

TEST(ShippedLanes, LanesBAndCMirrorTheDeployment) {
  auto b = embedded("lane-b");
  ASSERT_TRUE(b.ok()) << dump(b);
  EXPECT_EQ(b.recipe->max_model_len, 262144);
  EXPECT_FALSE(b.recipe->draft.has_value());
  EXPECT_FALSE(has_feature(*b.recipe, Feature::speculative_decoding));
  EXPECT_TRUE(has_feature(*b.recipe, Feature::kv_cache_4bit));
  auto c = embedded("lane-c");
  ASSERT_TRUE(c.ok()) << dump(c);
  EXPECT_EQ(c.recipe->max_model_len, 131072);
  EXPECT_TRUE(has_feature(*c.recipe, Feature::speculative_decoding));
}

TEST(ShippedLanes, LaneDemoIsCleanAndSynthetic) {
  auto l = embedded("lane-demo");
  ASSERT_TRUE(l.ok()) << dump(l);
  EXPECT_TRUE(l.diagnostics.empty()) << dump(l);
  const Recipe& r = *l.recipe;
  EXPECT_EQ(r.backend, Backend::cpu);
  EXPECT_EQ(r.model.source, ModelSource::synthetic);
  EXPECT_EQ(r.model.synthetic.arch, "qwen3");
  EXPECT_EQ(r.model.synthetic.preset, "tiny");
  EXPECT_EQ(r.model.synthetic.tokenizer, "qwen3");
  ASSERT_TRUE(r.device_memory_gib.has_value());
  EXPECT_DOUBLE_EQ(*r.device_memory_gib, 2.0);
  EXPECT_EQ(r.chat_template_kwargs.value("enable_thinking", true), false);
  EXPECT_TRUE(unhonoured(r).empty());
}

}  // namespace
}  // namespace spk
