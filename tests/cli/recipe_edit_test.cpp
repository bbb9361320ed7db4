// An editable lane (issue 27): `recipe show` prints YAML that `recipe validate` accepts unchanged and
// that resolves to the same recipe; `recipe export NAME` copies a lane into the state dir, where lookups
// by name find it first.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/run_binary.h"

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct Tmp {
  std::string dir;
  Tmp() {
    char t[] = "/tmp/spk-recipe-edit-XXXXXX";
    dir = ::mkdtemp(t) ? t : "";
  }
  ~Tmp() { fs::remove_all(dir); }
  [[nodiscard]] std::string env() const { return "SPARKCTL_STATE_DIR=" + dir + "/state "; }
};

TEST(RecipeEdit, ShowPrintsYamlThatValidateAcceptsUnchanged) {
  Tmp t;
  ASSERT_FALSE(t.dir.empty());
  for (const char* lane : {"lane-a", "lane-b", "lane-c", "lane-demo"}) {
    auto show = spk::test::run_sparkctl(std::string("recipe show ") + lane, t.env(), false);
    ASSERT_EQ(show.code, 0) << show.out;
    const std::string file = t.dir + "/" + lane + "-shown.yaml";
    std::ofstream(file) << show.out;
    auto v = spk::test::run_sparkctl("recipe validate " + file, t.env());
    EXPECT_EQ(v.code, 0) << lane << ":\n" << show.out << "\n" << v.out;
    EXPECT_NE(v.out.find(": valid (0 error(s)"), std::string::npos) << lane << ":\n" << v.out;
    // Same recipe either way (only where it was read from differs).
    auto a =
        json::parse(spk::test::run_sparkctl(std::string("--json recipe show ") + lane, t.env(), false).out);
    auto b = json::parse(spk::test::run_sparkctl("--json recipe show " + file, t.env(), false).out);
    a.erase("source"), b.erase("source"), a.erase("diagnostics"), b.erase("diagnostics");
    EXPECT_EQ(a, b) << lane;
  }
}

TEST(RecipeEdit, ExportCopiesALaneIntoTheStateDirForEditing) {
  Tmp t;
  ASSERT_FALSE(t.dir.empty());
  auto e = spk::test::run_sparkctl("recipe export lane-demo", t.env());
  ASSERT_EQ(e.code, 0) << e.out;
  const std::string copy = t.dir + "/state/recipes/lane-demo.yaml";
  ASSERT_TRUE(fs::exists(copy)) << e.out;
  std::ifstream in(copy);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("# lane-demo:"), std::string::npos) << "the lane's own text, comments kept: " << text;
  const size_t at = text.find("max_num_seqs: 4");
  ASSERT_NE(at, std::string::npos) << text;
  std::ofstream(copy) << text.substr(0, at) << "max_num_seqs: 3" << text.substr(at + 15);  // edit it
  auto shown = json::parse(spk::test::run_sparkctl("--json recipe show lane-demo", t.env(), false).out);
  EXPECT_EQ(shown["max_num_seqs"], 3) << "lookups by name find the edited copy";
  EXPECT_EQ(shown["source"], copy);
  auto again = spk::test::run_sparkctl("recipe export lane-demo", t.env());
  EXPECT_EQ(again.code, 1) << again.out;
  EXPECT_NE(again.out.find("--force"), std::string::npos) << again.out;
  EXPECT_EQ(spk::test::run_sparkctl("recipe export lane-demo --force", t.env()).code, 0);
  auto to = spk::test::run_sparkctl("recipe export lane-a --to " + t.dir + "/mine", t.env());
  EXPECT_EQ(to.code, 0) << to.out;
  EXPECT_TRUE(fs::exists(t.dir + "/mine/lane-a.yaml"));
  EXPECT_EQ(spk::test::run_sparkctl("recipe export lane-nope", t.env()).code, 1);
}

}  // namespace
