// Input caps and small helpers of the YAML reader: hostile input ends in an error, never a crash.
#include "recipes/yaml_reader.h"

#include <gtest/gtest.h>

#include <string>

#include "recipes/recipe_loader.h"
#include "recipes/syntax.h"

namespace spk {
namespace {

std::string first_error(const RecipeLoad& l) {
  for (const auto& d : l.diagnostics)
    if (d.severity == Severity::error) return d.str();
  return "";
}

TEST(YamlCaps, OversizeInputIsRefusedBeforeParsing) {
  std::string big = "name: x\ndescription: \"" + std::string((1u << 20) + 10, 'a') + "\"\n";
  auto l = load_recipe(big, "big.yaml", "t");
  EXPECT_FALSE(l.ok());
  EXPECT_NE(first_error(l).find("more than the cap of 1048576"), std::string::npos) << first_error(l);
}

TEST(YamlCaps, DeepFlowNestingIsAnErrorNotACrash) {
  std::string deep = "name: x\nmodel: " + std::string(100000, '[') + std::string(100000, ']') + "\n";
  auto l = load_recipe(deep, "deep.yaml", "t");
  EXPECT_FALSE(l.ok());
  EXPECT_FALSE(first_error(l).empty());
}

TEST(YamlCaps, NestingBeyondTheDepthCapIsRefused) {
  std::string doc = "name: x\nenv: ";
  for (int i = 0; i < 20; ++i) doc += "{a: ";
  doc += "1" + std::string(20, '}') + "\n";
  auto l = load_recipe(doc, "nest.yaml", "t");
  EXPECT_FALSE(l.ok());
  EXPECT_NE(first_error(l).find("nesting deeper than 16 levels"), std::string::npos) << first_error(l);
}

TEST(YamlCaps, AliasExpansionCountsAgainstTheNodeCap) {
  // 10 levels of 10 aliases = 10^10 nodes when expanded; the walk stops at the cap.
  std::string doc = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 10; ++i) {
    std::string p = "*a" + std::to_string(i - 1);
    doc += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [" + p;
    for (int k = 1; k < 10; ++k) doc += ", " + p;
    doc += "]\n";
  }
  auto l = load_recipe(doc, "bomb.yaml", "t");
  EXPECT_FALSE(l.ok());
  EXPECT_NE(first_error(l).find("more than 4096 YAML nodes"), std::string::npos) << first_error(l);
}

TEST(YamlReader, EditDistanceAndSuggestions) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3);
  EXPECT_EQ(edit_distance("", "abc"), 3);
  constexpr std::string_view keys[] = {"max_model_len", "max_num_seqs", "block_size"};
  EXPECT_EQ(closest("max_model_length", keys), "max_model_len");
  EXPECT_EQ(closest("blocksize", keys), "block_size");
  EXPECT_EQ(closest("completely_different", keys), "");
}

TEST(Syntax, AddressesNamesAndHashes) {
  EXPECT_TRUE(is_ipv4("10.0.0.1"));
  EXPECT_FALSE(is_ipv4("10.0.0"));
  EXPECT_FALSE(is_ipv4("10.0.0.256"));
  EXPECT_FALSE(is_ipv4("10.0.0.01"));
  EXPECT_TRUE(is_cidr("192.168.100.1/24"));
  EXPECT_FALSE(is_cidr("192.168.100.1/33"));
  EXPECT_FALSE(is_cidr("192.168.100.1"));
  EXPECT_TRUE(is_env_name("NCCL_IB_HCA"));
  EXPECT_FALSE(is_env_name("1BAD"));
  EXPECT_TRUE(is_name("lane-a"));
  EXPECT_FALSE(is_name("Lane A"));
  EXPECT_TRUE(is_hub_id("org/model-1.5"));
  EXPECT_FALSE(is_hub_id("org/a/b"));
  EXPECT_FALSE(is_hub_id("../x"));
  EXPECT_TRUE(is_commit_hash("0123456789abcdef0123456789abcdef01234567"));
  EXPECT_FALSE(is_commit_hash("main"));
  EXPECT_TRUE(is_power_of_two(128));
  EXPECT_FALSE(is_power_of_two(100));
}

}  // namespace
}  // namespace spk
