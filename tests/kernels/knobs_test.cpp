// Kernel knobs are declared once (kernels/knobs.h): every SPARKCTL_* variable the kernels read is in the
// table, every table entry is read somewhere, and values are clamped to their range.
#include "kernels/knobs.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace spk {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(Knobs, EveryKernelEnvironmentVariableIsDeclaredOnceAndRead) {
  std::set<std::string> declared;
  for (const KnobInfo& k : knobs()) EXPECT_TRUE(declared.insert(k.name).second) << k.name << " twice";
  for (const WordKnobInfo& k : word_knobs())
    EXPECT_TRUE(declared.insert(k.name).second) << k.name << " twice";
  // Any "SPARKCTL_..." string literal or knob enum read in kernels/ must be a declared knob.
  const std::regex literal("\"(SPARKCTL_[A-Z0-9_]+)\""), enum_use("Knob::([A-Z0-9_]+)");
  std::set<std::string> read;
  const fs::path root = fs::path(SPARKCTL_SOURCE_DIR) / "kernels";
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string ext = e.path().extension().string();
    if (!e.is_regular_file() || (ext != ".cpp" && ext != ".cu" && ext != ".h" && ext != ".cuh")) continue;
    if (e.path().filename() == "knobs.cpp" || e.path().filename() == "knobs.h") continue;
    const std::string text = slurp(e.path());
    for (std::sregex_iterator it(text.begin(), text.end(), literal), end; it != end; ++it) {
      EXPECT_TRUE(declared.count((*it)[1])) << (*it)[1] << " is read in " << e.path() << " but not declared";
      read.insert((*it)[1]);
    }
    for (std::sregex_iterator it(text.begin(), text.end(), enum_use), end; it != end; ++it)
      read.insert("SPARKCTL_" + (*it)[1].str());
  }
  for (const std::string& d : declared)
    EXPECT_TRUE(read.count(d)) << d << " is declared but nothing reads it";
}

TEST(Knobs, ValuesAreTheDefaultOrClampedToTheRange) {
  const KnobInfo& k = knob_info(Knob::GEMV_MAX_BATCH);
  unsetenv(k.name);
  EXPECT_EQ(knob(Knob::GEMV_MAX_BATCH), k.def);
  setenv(k.name, "1000", 1);
  EXPECT_EQ(knob(Knob::GEMV_MAX_BATCH), k.hi);
  setenv(k.name, "-5", 1);
  EXPECT_EQ(knob(Knob::GEMV_MAX_BATCH), k.lo);
  setenv(k.name, "4", 1);
  EXPECT_EQ(knob(Knob::GEMV_MAX_BATCH), 4);
  unsetenv(k.name);
}

}  // namespace
}  // namespace spk
