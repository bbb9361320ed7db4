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
  // 5x7 glyphs (bitmap_font.h), top-left at (x, y), 6 px advance per character.
  void text(int x, int y, const std::string& s, uint32_t color);
};

uint32_t crc32(const uint8_t* data, size_t n, uint32_t crc = 0);
uint32_t adler32(const uint8_t* data, size_t n);

// The PNG file bytes of `r`: stored deflate blocks (no compression), or zlib's deflate with `compress`.
std::string encode_png(const Raster& r, bool compress = false);
// A PNG file around an already zlib-wrapped IDAT stream.
std::string png_file(const Raster& r, const std::string& zlib_stream);
// `top` above `bottom` in one raster (white where one is narrower).
Raster stack(const Raster& top, const Raster& bottom);

// Axes with labelled ticks at quarters of the largest x and y, one polyline per series (all on one
// scale from 0), axis titles and a legend of the series' names. Single-point series draw a marker only.
struct PlotSeries {
  std::vector<double> x, y;
  uint32_t color = 0x1f77b4;
  std::string name;  // legend entry; empty = none
};
struct PlotLabels {
  std::string x_title, y_title;
  std::string title;    // centred above the plot; empty = none
  bool log2_x = false;  // x on a log2 scale, a tick at every power of two (concurrency ladders)
};
Raster plot_lines(const std::vector<PlotSeries>& series, const PlotLabels& labels = {}, int width = 640,
                  int height = 400);

}  // namespace spk
