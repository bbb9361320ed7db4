// Untrusted YAML input: devices, FIFOs and directories are refused by name before a byte is read, size is
// capped before reading, and ill-formed UTF-8 is refused at its file:line:column.
#include "recipes/input_text.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "recipes/recipe_loader.h"

namespace spk {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path p = fs::temp_directory_path() / ("spk_input_text_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(p); }
  ~TempDir() { fs::remove_all(p); }
};

std::string first_error(const RecipeLoad& l) {
  for (const auto& d : l.diagnostics)
    if (d.severity == Severity::error) return d.str();
  return "";
}

TEST(InputText, DevZeroIsRefusedAtOnceByName) {
  const auto t0 = std::chrono::steady_clock::now();
  auto r = read_input_file("/dev/zero", 1u << 20);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("/dev/zero is a character device, not a regular file"), std::string::npos)
      << r.error().message;
  auto l = load_recipe_file("/dev/zero");
  EXPECT_FALSE(l.ok());
  EXPECT_NE(first_error(l).find("not a regular file"), std::string::npos) << first_error(l);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
}

TEST(InputText, FifoAndDirectoryAreRefusedWithoutBlocking) {
  TempDir t;
  const std::string fifo = (t.p / "pipe.yaml").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto r = read_input_file(fifo, 1u << 20);  // no writer: a blocking open would hang here
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("is a FIFO, not a regular file"), std::string::npos) << r.error().message;
  auto d = read_input_file(t.p.string(), 1u << 20);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("is a directory"), std::string::npos) << d.error().message;
}

TEST(InputText, OversizeFileIsRefusedWithItsSize) {
  TempDir t;
  const fs::path f = t.p / "big.yaml";
  std::ofstream(f) << std::string(5000, '#');
  auto r = read_input_file(f.string(), 4096);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("is 5000 bytes, more than the cap of 4096"), std::string::npos)
      << r.error().message;
  auto ok = read_input_file(f.string(), 5000);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->size(), 5000u);
}

TEST(InputText, InvalidUtf8IsFoundAtItsLineAndColumn) {
  EXPECT_FALSE(find_invalid_utf8("name: caf\xc3\xa9\n\xf0\x9f\x98\x80 ok\n").has_value());
  auto p = find_invalid_utf8("a: 1\nb: \xc3\xa9x\xff\n");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->pos.line, 2);
  EXPECT_EQ(p->pos.column, 6);  // "b: é" is 4 characters, then x
  EXPECT_NE(p->what.find("0xff"), std::string::npos) << p->what;
  EXPECT_TRUE(find_invalid_utf8("\xc0\x80").has_value());          // overlong NUL
  EXPECT_TRUE(find_invalid_utf8("\xed\xa0\x80").has_value());      // surrogate U+D800
  EXPECT_TRUE(find_invalid_utf8("\xf4\x90\x80\x80").has_value());  // past U+10FFFF
  EXPECT_TRUE(find_invalid_utf8("ab\xe2\x82").has_value());        // cut off
  EXPECT_TRUE(find_invalid_utf8("\xe2(\xa1").has_value());         // bad continuation
}

TEST(InputText, RecipeWithInvalidUtf8IsRefusedByTheLoader) {
  auto l = load_recipe("name: x\ndescription: \"caf\xe9\"\n", "bad.yaml", "t");
  EXPECT_FALSE(l.ok());
  EXPECT_EQ(first_error(l).rfind("bad.yaml:2:18: invalid UTF-8: byte 0xe9", 0), 0u) << first_error(l);
}

// A NUL early in the file made yaml-cpp read it as UTF-32 and hand back ill-formed UTF-8 (found by the
// fuzzer: --json output threw type_error 316 on "n\0\0\0\0\0\0\0rg/model\n").
TEST(InputText, ControlCharactersAreRefused) {
  EXPECT_FALSE(find_control_char("a:\tb\r\n").has_value());
  auto p = find_control_char("name: x\nmo\x01" "del: y\n");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->pos.line, 2);
  EXPECT_EQ(p->pos.column, 3);
  auto l = load_recipe(std::string("n\0\0\0\0\0\0\0rg/model\n", 17), "nul.yaml", "t");
  EXPECT_FALSE(l.ok());
  EXPECT_EQ(first_error(l).rfind("nul.yaml:1:2: control character 0x00 is not allowed in YAML text", 0), 0u)
      << first_error(l);
}

}  // namespace
}  // namespace spk
