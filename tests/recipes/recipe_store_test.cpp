// Recipe lookup: embedded lanes are in the binary; directory overrides are searched first.
#include "recipes/recipe_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "kernels/base/fs.h"

namespace spk {
namespace {

namespace fs = std::filesystem;

TEST(RecipeStore, EmbedsTheShippedLanes) {
  auto files = embedded_recipe_files();
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(f.name);
  for (const char* want : {"lane-a.yaml", "lane-b.yaml", "lane-c.yaml", "lane-demo.yaml"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  // The embedded bytes are the source files exactly.
  for (const auto& f : files) {
    auto text = read_file(std::string(SPARKCTL_SOURCE_DIR) + "/recipes/" + f.name);
    ASSERT_TRUE(text.ok()) << f.name;
    EXPECT_EQ(*text, std::string(f.data, f.size)) << f.name;
  }
}

TEST(RecipeStore, OverrideDirectoryShadowsEmbedded) {
  fs::path dir = fs::temp_directory_path() / ("spk-recipes-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  ASSERT_TRUE(write_file_atomic((dir / "lane-demo.yaml").string(),
                                "name: lane-demo\ndescription: override\nmodel: {path: /m}\n")
                  .ok());
  ASSERT_TRUE(write_file_atomic((dir / "extra.yaml").string(), "name: extra\nmodel: {path: /m}\n").ok());
  std::vector<std::string> dirs = {dir.string()};
  auto list = list_recipe_sources(dirs);
  int demo = 0;
  bool extra = false;
  for (const auto& s : list) {
    if (s.name == "lane-demo") {
      ++demo;
      EXPECT_EQ(s.origin, (dir / "lane-demo.yaml").string());
    }
    extra |= s.name == "extra";
  }
  EXPECT_EQ(demo, 1);
  EXPECT_TRUE(extra);
  auto l = load_named_recipe("lane-demo", dirs);
  ASSERT_TRUE(l.ok());
  ASSERT_TRUE(l->ok());
  EXPECT_EQ(l->recipe->description, "override");
  // A path loads that file directly.
  auto p = load_named_recipe((dir / "extra.yaml").string(), {});
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->ok());
  fs::remove_all(dir);
}

TEST(RecipeStore, EnvAndStateDirOrder) {
  ::setenv("SPARKCTL_RECIPES_DIR", "/tmp/from-env", 1);
  auto dirs = recipe_dirs("/state");
  ::unsetenv("SPARKCTL_RECIPES_DIR");
  ASSERT_EQ(dirs.size(), 2u);
  EXPECT_EQ(dirs[0], "/tmp/from-env");
  EXPECT_EQ(dirs[1], "/state/recipes");
}

TEST(RecipeStore, UnknownNameListsTheKnownOnes) {
  auto r = find_recipe_source("lane-z", {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("lane-demo"), std::string::npos) << r.error().what();
  EXPECT_NE(r.error().fix.find("sparkctl recipe list"), std::string::npos);
}

}  // namespace
}  // namespace spk
