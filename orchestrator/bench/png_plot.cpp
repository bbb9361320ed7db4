#include "orchestrator/bench/png_plot.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "orchestrator/bench/bitmap_font.h"

namespace spk {

namespace {

void put32(std::string& s, uint32_t v) {
  for (int i = 3; i >= 0; --i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void chunk(std::string& out, const char* type, const std::string& data) {
  put32(out, static_cast<uint32_t>(data.size()));
  std::string td = std::string(type, 4) + data;
  out += td;
  put32(out, crc32(reinterpret_cast<const uint8_t*>(td.data()), td.size()));
}

}  // namespace

uint32_t crc32(const uint8_t* data, size_t n, uint32_t crc) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ data[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t adler32(const uint8_t* data, size_t n) {
  uint32_t a = 1, b = 0;
  for (size_t i = 0; i < n; ++i) {
    a = (a + data[i]) % 65521;
    b = (b + a) % 65521;
  }
  return (b << 16) | a;
}

void Raster::set(int x, int y, uint32_t c) {
  if (x < 0 || y < 0 || x >= width || y >= height) return;
  uint8_t* p = &rgb[(static_cast<size_t>(y) * width + x) * 3];
  p[0] = (c >> 16) & 0xff;
  p[1] = (c >> 8) & 0xff;
  p[2] = c & 0xff;
}

void Raster::line(int x0, int y0, int x1, int y1, uint32_t c, int thick) {
  // Bresenham; thickness by stamping a square of side `thick`.
  int dx = std::abs(x1 - x0), sx = x0 < x1 ? 1 : -1, dy = -std::abs(y1 - y0), sy = y0 < y1 ? 1 : -1;
  int err = dx + dy;
  while (true) {
    for (int i = 0; i < thick; ++i)
      for (int j = 0; j < thick; ++j) set(x0 + i - thick / 2, y0 + j - thick / 2, c);
    if (x0 == x1 && y0 == y1) break;
    int e2 = 2 * err;
    if (e2 >= dy) err += dy, x0 += sx;
    if (e2 <= dx) err += dx, y0 += sy;
  }
}

std::string encode_png(const Raster& r, bool compress) {
  // Raster with a filter byte (0 = none) before each row.
  std::string raw;
  const size_t row = static_cast<size_t>(r.width) * 3;
  raw.reserve((row + 1) * r.height);
  for (int y = 0; y < r.height; ++y) {
    raw.push_back('\0');
    raw.append(reinterpret_cast<const char*>(&r.rgb[y * row]), row);
  }
  if (compress) {  // zlib's deflate: a plot of flat colours shrinks ~100x
    uLongf n = compressBound(raw.size());
    std::string zc(n, '\0');
    if (compress2(reinterpret_cast<Bytef*>(zc.data()), &n, reinterpret_cast<const Bytef*>(raw.data()),
                  raw.size(), 9) == Z_OK) {
      zc.resize(n);
      return png_file(r, zc);
    }
  }
  std::string z =
      "\x78\x01";  // zlib: deflate, 32K window, no dictionary, check bits valid (0x7801 % 31 == 0)
  for (size_t off = 0; off < raw.size() || off == 0; off += 65535) {
    const size_t n = std::min<size_t>(65535, raw.size() - off);
    z.push_back(off + n >= raw.size() ? '\x01' : '\x00');  // BFINAL, BTYPE=00 (stored)
    z.push_back(static_cast<char>(n & 0xff));
    z.push_back(static_cast<char>(n >> 8));
    z.push_back(static_cast<char>(~n & 0xff));
    z.push_back(static_cast<char>((~n >> 8) & 0xff));
    z.append(raw, off, n);
    if (raw.empty()) break;
  }
  put32(z, adler32(reinterpret_cast<const uint8_t*>(raw.data()), raw.size()));
  return png_file(r, z);
}

std::string png_file(const Raster& r, const std::string& z) {
  std::string out = "\x89PNG\r\n\x1a\n";
  std::string ihdr;
  put32(ihdr, static_cast<uint32_t>(r.width));
  put32(ihdr, static_cast<uint32_t>(r.height));
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);  // 8-bit, RGB, deflate, adaptive filtering, no interlace
  chunk(out, "IHDR", ihdr);
  chunk(out, "IDAT", z);
  chunk(out, "IEND", "");
  return out;
}

void Raster::text(int x, int y, const std::string& s, uint32_t color) {
  for (size_t i = 0; i < s.size(); ++i) {
    const auto rows = glyph_rows(s[i]);
    for (int r = 0; r < kGlyphH; ++r)
      for (int c = 0; c < kGlyphW; ++c)
        if (rows[r] & (1u << (kGlyphW - 1 - c)))
          set(x + static_cast<int>(i) * (kGlyphW + 1) + c, y + r, color);
  }
}

namespace {

std::string tick_label(double v) {
  char b[32];
  std::snprintf(b, sizeof b, v >= 100 || v == std::floor(v) ? "%.0f" : "%.1f", v);
  return b;
}

}  // namespace

Raster plot_lines(const std::vector<PlotSeries>& series, const PlotLabels& labels, int w, int h) {
  Raster r(w, h);
  const int l = 60, b = h - 40, t = 30, rt = w - 20;  // plot area [l, rt] x [t, b]
  double xmax = 1, ymax = 1;
  for (const auto& s : series) {
    for (double x : s.x) xmax = std::max(xmax, x);
    for (double y : s.y) ymax = std::max(ymax, y);
  }
  // log2 x: 1, 2, 4, ... evenly spaced (a doubling ladder reads as a straight line of points).
  const bool lg = labels.log2_x;
  const double xspan = lg ? std::max(1.0, std::log2(xmax)) : xmax;
  r.line(l, b, rt, b, 0x000000, 2);  // x axis
  r.line(l, b, l, t, 0x000000, 2);   // y axis
  const int gw = kGlyphW + 1;
  for (int i = 0; i <= 4; ++i) {  // ticks, labels and light grid at quarters
    const int y = b - (b - t) * i / 4, x = l + (rt - l) * i / 4;
    if (i > 0) {
      r.line(l + 1, y, rt, y, 0xdddddd);
      r.line(l - 5, y, l, y, 0x000000);
      r.line(x, b, x, b + 5, 0x000000);
    }
    const std::string yl = tick_label(ymax * i / 4), xl = tick_label(xmax * i / 4);
    r.text(l - 8 - gw * static_cast<int>(yl.size()), y - kGlyphH / 2, yl, 0x000000);
    if (!lg) r.text(x - gw * static_cast<int>(xl.size()) / 2, b + 9, xl, 0x000000);
  }
  if (lg)  // a tick and label at every power of two
    for (double v = 1; v <= xmax * 1.0001; v *= 2) {
      const int x = l + static_cast<int>(std::lround(std::log2(v) / xspan * (rt - l)));
      const std::string xl = tick_label(v);
      r.line(x, b, x, b + 5, 0x000000);
      r.text(x - gw * static_cast<int>(xl.size()) / 2, b + 9, xl, 0x000000);
    }
  if (!labels.title.empty())
    r.text((l + rt) / 2 - gw * static_cast<int>(labels.title.size()) / 2, 4, labels.title, 0x000000);
  r.text((l + rt) / 2 - gw * static_cast<int>(labels.x_title.size()) / 2, b + 24, labels.x_title, 0x000000);
  r.text(8, labels.title.empty() ? 10 : 16, labels.y_title, 0x000000);
  auto px = [&](double x) {
    const double u = lg ? std::log2(std::max(1.0, x)) : x;
    return l + static_cast<int>(std::lround(u / xspan * (rt - l)));
  };
  auto py = [&](double y) { return b - static_cast<int>(std::lround(y / ymax * (b - t))); };
  for (const auto& s : series) {
    const size_t n = std::min(s.x.size(), s.y.size());
    for (size_t i = 0; i < n; ++i) {
      if (i + 1 < n) r.line(px(s.x[i]), py(s.y[i]), px(s.x[i + 1]), py(s.y[i + 1]), s.color, 3);
      for (int d = -3; d <= 3; ++d)
        r.line(px(s.x[i]) - 3, py(s.y[i]) + d, px(s.x[i]) + 3, py(s.y[i]) + d, s.color);
    }
  }
  int ly = labels.title.empty() ? 10 : 16;  // legend, top right
  for (const auto& s : series) {
    if (s.name.empty()) continue;
    const int lx = rt - gw * static_cast<int>(s.name.size()) - 30;
    r.line(lx, ly + kGlyphH / 2, lx + 20, ly + kGlyphH / 2, s.color, 3);
    r.text(lx + 26, ly, s.name, 0x000000);
    ly += 12;
  }
  return r;
}

Raster stack(const Raster& top, const Raster& bottom) {
  Raster r(std::max(top.width, bottom.width), top.height + bottom.height);
  auto blit = [&r](const Raster& s, int y0) {
    for (int y = 0; y < s.height; ++y)
      std::copy_n(&s.rgb[static_cast<size_t>(y) * s.width * 3], static_cast<size_t>(s.width) * 3,
                  &r.rgb[(static_cast<size_t>(y0 + y) * r.width) * 3]);
  };
  blit(top, 0);
  blit(bottom, top.height);
  return r;
}

}  // namespace spk
