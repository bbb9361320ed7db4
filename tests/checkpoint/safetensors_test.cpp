// Safetensors round trip and every header violation class: each must fail naming the file and,
// where there is one, the tensor.
#include "runtime/checkpoint/safetensors.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace spk::rt {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("spk_st_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Raw file: u64 LE length, header text, `data_bytes` zero bytes.
  std::string raw(const std::string& header, size_t data_bytes, const std::string& name = "x.safetensors",
                  std::optional<uint64_t> len_override = {}) {
    const std::string p = (dir_ / name).string();
    std::ofstream o(p, std::ios::binary);
    uint64_t n = len_override.value_or(header.size());
    for (int i = 0; i < 8; ++i) o.put(static_cast<char>(n >> (8 * i)));
    o << header << std::string(data_bytes, '\0');
    return p;
  }

  // Expects open(path) to fail with a message containing the path and every needle.
  void expect_error(const std::string& path, std::initializer_list<std::string> needles) {
    auto r = SafetensorsFile::open(path);
    ASSERT_FALSE(r.ok()) << "opened a bad file: " << path;
    const std::string msg = r.error().what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    for (const auto& n : needles)
      EXPECT_NE(msg.find(n), std::string::npos) << "missing '" << n << "' in: " << msg;
  }

  fs::path dir_;
};

TEST_F(SafetensorsTest, RoundTripNamesShapesBytesMetadata) {
  std::vector<TensorSpec> specs = {
      {"a", DType::f32, {2, 3}}, {"b.weight", DType::bf16, {5}}, {"empty", DType::f16, {0, 4}}};
  const std::string p = (dir_ / "m.safetensors").string();
  auto fill = [](const TensorSpec& t, uint8_t* dst, uint64_t n) {
    for (uint64_t i = 0; i < n; ++i) dst[i] = static_cast<uint8_t>(i * 7 + t.name.size());
  };
  ASSERT_TRUE(write_safetensors(p, specs, fill, {{"format", "pt"}}).ok());
  // data section 8-byte aligned
  std::ifstream in(p, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ((8 + n) % 8, 0u);

  auto r = SafetensorsFile::open(p);
  ASSERT_TRUE(r.ok()) << r.error().what();
  auto& f = **r;
  EXPECT_EQ(f.metadata().at("format"), "pt");
  ASSERT_EQ(f.tensors().size(), 3u);
  const TensorInfo* a = f.find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, DType::f32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->nbytes(), 24u);
  auto v = f.view(*a);
  EXPECT_EQ(v.numel(), 6u);
  for (uint64_t i = 0; i < 24; ++i) ASSERT_EQ(v.data[i], static_cast<uint8_t>(i * 7 + 1));
  const TensorInfo* b = f.find("b.weight");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::bf16);
  EXPECT_EQ(f.view(*b).data[3], static_cast<uint8_t>(3 * 7 + 8));
  EXPECT_EQ(f.find("empty")->nbytes(), 0u);
  EXPECT_EQ(f.find("nope"), nullptr);
  // no temp file left behind
  for (const auto& e : fs::directory_iterator(dir_)) EXPECT_EQ(e.path().filename(), "m.safetensors");
}

TEST_F(SafetensorsTest, ShardedWriterSplitsAndIndexes) {
  std::vector<TensorSpec> specs;
  for (int i = 0; i < 5; ++i) specs.push_back({"t" + std::to_string(i), DType::f32, {256}});  // 1 KiB each
  auto fill = [](const TensorSpec&, uint8_t* dst, uint64_t n) { std::memset(dst, 1, n); };
  ASSERT_TRUE(write_checkpoint_shards(dir_.string(), specs, fill, 2048).ok());
  EXPECT_TRUE(fs::exists(dir_ / "model.safetensors.index.json"));
  EXPECT_TRUE(fs::exists(dir_ / "model-00001-of-00003.safetensors"));
  EXPECT_TRUE(fs::exists(dir_ / "model-00003-of-00003.safetensors"));
  EXPECT_FALSE(fs::exists(dir_ / "model.safetensors"));
  // rewriting small removes the stale index
  ASSERT_TRUE(write_checkpoint_shards(dir_.string(), specs, fill, 1 << 20).ok());
  EXPECT_TRUE(fs::exists(dir_ / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir_ / "model.safetensors.index.json"));
}

TEST_F(SafetensorsTest, ShorterThanLengthPrefix) {
  const std::string p = (dir_ / "short.safetensors").string();
  std::ofstream(p) << "abc";
  expect_error(p, {"shorter than the 8-byte"});
}

TEST_F(SafetensorsTest, HeaderLengthOverCap) {
  expect_error(raw("{}", 0, "x.safetensors", 200ull << 20), {"exceeds the"});
}

TEST_F(SafetensorsTest, HeaderLengthPastFileEnd) {
  expect_error(raw("{}", 0, "x.safetensors", 4096), {"file size"});
}

TEST_F(SafetensorsTest, HeaderLengthHugeNoOverflow) {
  expect_error(raw("{}", 0, "x.safetensors", UINT64_MAX), {"header length"});
}

TEST_F(SafetensorsTest, HeaderNotJson) {
  expect_error(raw("{\"a\": ", 0), {"does not end with '}'"});
  expect_error(raw("{\"a\": }", 0), {"not valid JSON"});
}

TEST_F(SafetensorsTest, HeaderNotObject) { expect_error(raw("[1,2]", 0), {"does not start with '{'"}); }

TEST_F(SafetensorsTest, HeaderTooDeep) {
  expect_error(raw("{\"a\":" + std::string(10000, '[') + std::string(10000, ']') + "}", 0), {"depth"});
  expect_error(raw(R"({"w":{"dtype":"F32","shape":[[[[1]]]],"data_offsets":[0,4]}})", 4), {"depth"});
}

TEST_F(SafetensorsTest, BracketsInsideStringsDoNotCountAsDepth) {
  auto p =
      raw(R"({"__metadata__":{"k":"[[[[[[{{{{"},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4);
  auto r = SafetensorsFile::open(p);
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ((*r)->metadata().at("k"), "[[[[[[{{{{");
}

TEST_F(SafetensorsTest, EntryNotObject) { expect_error(raw(R"({"w": 3})", 0), {"'w'", "not an object"}); }

TEST_F(SafetensorsTest, MissingDtype) {
  expect_error(raw(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", 4), {"'w'", "dtype"});
}

TEST_F(SafetensorsTest, UnknownDtype) {
  expect_error(raw(R"({"w":{"dtype":"F99","shape":[1],"data_offsets":[0,4]}})", 4), {"'w'", "F99"});
}

TEST_F(SafetensorsTest, BadShape) {
  expect_error(raw(R"({"w":{"dtype":"F32","shape":"1","data_offsets":[0,4]}})", 4), {"'w'", "shape"});
  expect_error(raw(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4), {"'w'", "non-negative"});
  expect_error(raw(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4),
               {"'w'", "non-negative"});
}

TEST_F(SafetensorsTest, BadOffsets) {
  expect_error(raw(R"({"w":{"dtype":"F32","shape":[1]}})", 4), {"'w'", "data_offsets"});
  expect_error(raw(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4), {"'w'", "data_offsets"});
  expect_error(raw(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8),
               {"'w'", "begin 8 > end 4"});
}

TEST_F(SafetensorsTest, OffsetsPastData) {
  expect_error(raw(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8),
               {"'w'", "past the data section"});
}

TEST_F(SafetensorsTest, ShapeDtypeLengthMismatch) {
  expect_error(raw(R"({"w":{"dtype":"BF16","shape":[3],"data_offsets":[0,8]}})", 8),
               {"'w'", "needs 6 bytes"});
}

TEST_F(SafetensorsTest, ShapeOverflow) {
  expect_error(raw(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8),
               {"'w'", "overflow"});
}

TEST_F(SafetensorsTest, Overlap) {
  expect_error(
      raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
          12),
      {"'b'", "overlap", "'a'"});
}

TEST_F(SafetensorsTest, BadMetadata) {
  expect_error(raw(R"({"__metadata__":{"k":1}})", 0), {"__metadata__", "'k'"});
  expect_error(raw(R"({"__metadata__":[]})", 0), {"__metadata__"});
}

TEST_F(SafetensorsTest, MissingFile) {
  auto r = SafetensorsFile::open((dir_ / "nope.safetensors").string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().what().find("nope.safetensors"), std::string::npos);
}

// The header length must make the JSON end exactly where the data starts: one byte short or long
// shifts every weight by a byte, and is refused.
TEST_F(SafetensorsTest, HeaderLengthOffByOneIsRefused) {
  const std::string h = R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})";
  const std::string ok_path = raw(h, 4, "ok.safetensors");
  ASSERT_TRUE(SafetensorsFile::open(ok_path).ok());
  // One byte short: the JSON loses its closing brace (the inner one now ends the text).
  expect_error(raw(h, 4, "short.safetensors", h.size() - 1), {"not valid JSON"});
  // One byte long over space padding: the padding is fine, but a space is left over in the data.
  expect_error(raw(h + "  ", 4, "long2.safetensors", h.size() + 1), {"1 trailing bytes belong to no tensor"});
  // One byte long: the header swallows the first data byte (a zero), which is not space padding.
  expect_error(raw(h, 4, "long.safetensors", h.size() + 1), {"does not end with '}'", "0x00"});
}

// Only spaces (0x20) may pad the header, as the format says; NUL or newline padding is refused.
TEST_F(SafetensorsTest, PaddingMustBeSpaces) {
  const std::string h = R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})";
  ASSERT_TRUE(SafetensorsFile::open(raw(h + "     ", 4, "spaces.safetensors")).ok());
  expect_error(raw(h + std::string(5, '\0'), 4, "nul.safetensors"), {"padding is not spaces", "0x00"});
  expect_error(raw(h + "\n", 4, "nl.safetensors"), {"does not end with '}'"});
  expect_error(raw("   " + h, 4, "lead.safetensors"), {"does not start with '{'"});
}

TEST_F(SafetensorsTest, DuplicateKeysAreRefused) {
  expect_error(raw(R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                   R"("w":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
                   8),
               {"key 'w' twice"});
  expect_error(raw(R"({"w":{"dtype":"U8","dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4),
               {"key 'dtype' twice"});
}

// The data section is exactly the tensors: no unused trailing byte, no gap between tensors.
TEST_F(SafetensorsTest, TrailingAndUnownedBytesAreRefused) {
  expect_error(raw(R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", 5),
               {"1 trailing bytes belong to no tensor"});
  expect_error(raw(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                   R"("b":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}})",
                   12),
               {"'b'", "starts at data offset 8", "'a'", "gap"});
  expect_error(raw(R"({"b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})", 8), {"'b'", "gap"});
  expect_error(raw("{}", 3), {"3 trailing bytes"});
  ASSERT_TRUE(SafetensorsFile::open(raw("{}", 0, "empty.safetensors")).ok());
}

TEST_F(SafetensorsTest, FifoIsRefusedWithoutBlocking) {
  const std::string p = (dir_ / "fifo.safetensors").string();
  ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0);
  expect_error(p, {"not a regular file"});
}

// Parser messages quote the bad input; bytes that are not UTF-8 are escaped so the error can be printed
// as JSON.
TEST_F(SafetensorsTest, ErrorTextIsValidUtf8) {
  auto r = SafetensorsFile::open(raw("{\"a\xff\": 1 x}", 0));
  ASSERT_FALSE(r.ok());
  EXPECT_NO_THROW((void)nlohmann::json(r.error().what()).dump()) << r.error().what();
}

}  // namespace
}  // namespace spk::rt
