// The plot PNG: signature, IHDR fields, every chunk's CRC, the stored-deflate stream decoded by hand
// and checked against the raster and its Adler-32, and known CRC32/Adler-32 values.
#include "orchestrator/bench/png_plot.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace spk {
namespace {

uint32_t be32(const std::string& s, size_t o) {
  return (uint32_t(uint8_t(s[o])) << 24) | (uint32_t(uint8_t(s[o + 1])) << 16) |
         (uint32_t(uint8_t(s[o + 2])) << 8) | uint32_t(uint8_t(s[o + 3]));
}

TEST(BenchPng, KnownChecksums) {
  const char* s = "123456789";
  EXPECT_EQ(crc32(reinterpret_cast<const uint8_t*>(s), 9), 0xcbf43926u);  // the CRC-32 check value
  const char* w = "Wikipedia";
  EXPECT_EQ(adler32(reinterpret_cast<const uint8_t*>(w), 9), 0x11e60398u);
}

TEST(BenchPng, PlotIsAValidPng) {
  PlotSeries agg{{1, 2, 4, 8}, {10, 19, 35, 60}, 0x1f77b4};
  PlotSeries per{{1, 2, 4, 8}, {10, 9.5, 8.7, 7.5}, 0xff7f0e};
  Raster r = plot_lines({agg, per}, {"concurrency", "tok/s"}, 320, 200);
  const std::string png = encode_png(r);
  ASSERT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  size_t o = 8;
  std::string idat;
  std::vector<std::string> types;
  while (o + 12 <= png.size()) {
    const uint32_t len = be32(png, o);
    const std::string type = png.substr(o + 4, 4);
    ASSERT_LE(o + 12 + len, png.size());
    const uint32_t crc = crc32(reinterpret_cast<const uint8_t*>(png.data() + o + 4), 4 + len);
    EXPECT_EQ(crc, be32(png, o + 8 + len)) << type;
    if (type == "IHDR") {
      ASSERT_EQ(len, 13u);
      EXPECT_EQ(be32(png, o + 8), 320u);
      EXPECT_EQ(be32(png, o + 12), 200u);
      EXPECT_EQ(png[o + 16], 8);  // bit depth
      EXPECT_EQ(png[o + 17], 2);  // RGB
    }
    if (type == "IDAT") idat += png.substr(o + 8, len);
    types.push_back(type);
    o += 12 + len;
  }
  EXPECT_EQ(o, png.size());
  ASSERT_EQ(types.front(), "IHDR");
  ASSERT_EQ(types.back(), "IEND");
  // zlib header, then stored blocks: [final][LEN][NLEN][bytes]..., then Adler-32 of the raw raster.
  ASSERT_EQ(uint8_t(idat[0]), 0x78);
  EXPECT_EQ(((uint8_t(idat[0]) << 8) | uint8_t(idat[1])) % 31, 0);
  std::string raw;
  size_t p = 2;
  bool final = false;
  while (!final) {
    ASSERT_LT(p + 5, idat.size());
    final = idat[p] & 1;
    EXPECT_EQ((uint8_t(idat[p]) >> 1) & 3, 0);  // stored
    const uint16_t len = uint8_t(idat[p + 1]) | (uint8_t(idat[p + 2]) << 8);
    const uint16_t nlen = uint8_t(idat[p + 3]) | (uint8_t(idat[p + 4]) << 8);
    EXPECT_EQ(uint16_t(~len), nlen);
    raw += idat.substr(p + 5, len);
    p += 5 + len;
  }
  ASSERT_EQ(raw.size(), size_t(200) * (320 * 3 + 1));
  EXPECT_EQ(be32(idat, p), adler32(reinterpret_cast<const uint8_t*>(raw.data()), raw.size()));
  EXPECT_EQ(p + 4, idat.size());
  // The raster round-trips, and the lines were drawn (some blue and some orange pixels).
  int blue = 0, orange = 0;
  for (int y = 0; y < 200; ++y) {
    ASSERT_EQ(raw[y * 961], 0);
    EXPECT_EQ(std::memcmp(raw.data() + y * 961 + 1, r.rgb.data() + y * 960, 960), 0);
    for (int x = 0; x < 320; ++x) {
      const uint8_t* px = r.rgb.data() + (y * 320 + x) * 3;
      blue += px[0] == 0x1f && px[1] == 0x77 && px[2] == 0xb4;
      orange += px[0] == 0xff && px[1] == 0x7f && px[2] == 0x0e;
    }
  }
  EXPECT_GT(blue, 100);
  EXPECT_GT(orange, 100);
  // An independent decoder, when there is one: Python's zlib must inflate the stream to the raster.
  if (std::system("python3 -c 'import zlib' 2>/dev/null") == 0) {
    const std::string f = "/tmp/bench-png-test-" + std::to_string(::getpid()) + ".bin";
    FILE* fp = std::fopen(f.c_str(), "wb");
    std::fwrite(idat.data(), 1, idat.size(), fp);
    std::fclose(fp);
    const std::string cmd = "python3 -c \"import zlib,sys; d=zlib.decompress(open('" + f +
                            "','rb').read()); sys.exit(0 if len(d)==" + std::to_string(raw.size()) +
                            " else 1)\"";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    std::remove(f.c_str());
  }
}

// Issue 27: the bench PNG is deflated (zlib), stacks two panels, and inflates back to the same raster.
TEST(BenchPng, CompressedPlotInflatesToTheRaster) {
  PlotSeries agg{{1, 2, 4, 8, 16}, {10, 19, 35, 60, 80}, 0x1f77b4, "aggregate"};
  Raster top = plot_lines({agg}, {"concurrency", "tok/s", "lane-demo  demo  cpu  2026-12-03 18:20 UTC", true},
                          320, 200);
  Raster both = stack(top, plot_lines({agg}, {"concurrency", "TTFT ms", "", true}, 320, 120));
  EXPECT_EQ(both.height, 320);
  const std::string stored = encode_png(both), packed = encode_png(both, true);
  EXPECT_LT(packed.size() * 10, stored.size()) << packed.size() << " vs " << stored.size();
  // IDAT of the compressed file, inflated.
  const size_t at = packed.find("IDAT");
  ASSERT_NE(at, std::string::npos);
  const uint32_t len = be32(packed, at - 4);
  std::string raw(static_cast<size_t>(both.width * 3 + 1) * both.height, '\0');
  uLongf n = raw.size();
  ASSERT_EQ(uncompress(reinterpret_cast<Bytef*>(raw.data()), &n,
                       reinterpret_cast<const Bytef*>(packed.data() + at + 4), len),
            Z_OK);
  ASSERT_EQ(n, raw.size());
  for (int y = 0; y < both.height; ++y)
    ASSERT_EQ(0, std::memcmp(raw.data() + static_cast<size_t>(y) * (both.width * 3 + 1) + 1,
                             &both.rgb[static_cast<size_t>(y) * both.width * 3], both.width * 3))
        << "row " << y;
}

}  // namespace
}  // namespace spk
