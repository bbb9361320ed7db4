// A dependency-free PNG writer and the bench plot (tok/s vs concurrency). The PNG is 8-bit RGB, one
// IDAT holding a zlib stream of "stored" deflate blocks (no compression: a 640x400 plot is ~770 KB,
// fine for a report), CRC32 per chunk and Adler-32 over the raster, as RFC 1950/1951 and PNG 1.2 say.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace spk {

struct Raster {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // width x height x 3, row-major, top row first

  Raster(int w, int h) : width(w), height(h), rgb(static_cast<size_t>(w) * h * 3, 255) {}
  void set(int x, int y, uint32_t color);  // 0xRRGGBB; clipped
  void line(int x0, int y0, int x1, int y1, uint32_t color, int thick = 1);
};

uint32_t crc32(const uint8_t* data, size_t n, uint32_t crc = 0);
uint32_t adler32(const uint8_t* data, size_t n);

// The PNG file bytes of `r`.
std::string encode_png(const Raster& r);

// Axes, ticks, and one polyline per series (y vs x), each scaled to the largest value. Colors cycle
// blue, orange, green. Empty or single-point series draw a marker only.
struct PlotSeries {
  std::vector<double> x, y;
  uint32_t color = 0x1f77b4;
};
Raster plot_lines(const std::vector<PlotSeries>& series, int width = 640, int height = 400);

}  // namespace spk
