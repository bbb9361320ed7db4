// NFC against the Unicode conformance file (NFC column: c2 == NFC(c1) == NFC(c2) == NFC(c3),
// c4 == NFC(c4) == NFC(c5)), read through bzcat from the unicode-data package.
#include "runtime/tokenizer/nfc.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "runtime/tokenizer/utf8.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace spk::rt {
namespace {

std::string field_to_utf8(const std::string& f) {
  std::istringstream is(f);
  std::string h, out;
  while (is >> h) utf8::append(out, static_cast<uint32_t>(std::stoul(h, nullptr, 16)));
  return out;
}

TEST(Nfc, NormalizationTestConformance) {
  std::string path = "/usr/share/unicode/NormalizationTest.txt";
  std::string cmd;
  if (std::filesystem::exists(path))
    cmd = "cat " + path;
  else if (std::filesystem::exists(path + ".bz2"))
    cmd = "bzcat " + path + ".bz2";
  else
    GTEST_SKIP() << path << "(.bz2) not present (install unicode-data)";
  auto [rc, text] = testing::run(cmd);
  ASSERT_EQ(rc, 0) << text.substr(0, 200);
  std::istringstream in(text);
  std::string line;
  size_t checked = 0, failed = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line[0] == '@') continue;
    std::vector<std::string> c;
    std::istringstream ls(line);
    std::string f;
    while (std::getline(ls, f, ';') && c.size() < 5) c.push_back(field_to_utf8(f));
    ASSERT_EQ(c.size(), 5u) << line;
    const std::pair<int, int> checks[] = {{1, 0}, {1, 1}, {1, 2}, {3, 3}, {3, 4}};
    for (auto [want, from] : checks) {
      ++checked;
      if (nfc(c[from]) != c[want] && ++failed <= 10)
        ADD_FAILURE() << "NFC(c" << from + 1 << ") != c" << want + 1 << ": " << line;
    }
  }
  EXPECT_GT(checked, 80000u);
  EXPECT_EQ(failed, 0u);
}

TEST(Nfc, AsciiAndSimpleCases) {
  EXPECT_EQ(nfc("plain ascii"), "plain ascii");
  EXPECT_EQ(nfc("e\xCC\x81"), "\xC3\xA9");                      // e + U+0301 -> é
  EXPECT_EQ(nfc("\xC3\xA9"), "\xC3\xA9");                       // already composed
  EXPECT_EQ(nfc("\xE1\x84\x80\xE1\x85\xA1"), "\xEA\xB0\x80");   // Hangul L+V -> 가
  EXPECT_EQ(nfc("a\xCC\xA3\xCC\x87"), "\xE1\xBA\xA1\xCC\x87");  // a + dot below + dot above -> ạ̇
  EXPECT_EQ(nfc("\xE2\x84\xAB"), "\xC3\x85");                   // Angstrom sign (singleton) -> Å
}

}  // namespace
}  // namespace spk::rt
