#include "kernels/formats/gptq_int4.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "kernels/cpu/thread_pool.h"
#include "kernels/dtype.h"

namespace spk {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

int effective_group(const LinearWeight& w) {
  return w.group_size > 0 ? w.group_size : static_cast<int>(w.in);
}

Status check_tensor(const Tensor& t, const std::string& name, const char* suffix, DType dtype,
                    const std::vector<int64_t>& want, const LinearWeight& w) {
  if (t.dtype == dtype && t.shape == want && !t.empty()) return ok_status();
  const std::string found = t.empty() ? "missing" : "is " + describe(t);
  return make_error("tensor '" + name + suffix + "' " + found + ", " +
                        std::string(weight_format_name(w.format)) + " with in " + std::to_string(w.in) +
                        ", out " + std::to_string(w.out) + ", group " + std::to_string(effective_group(w)) +
                        " expects " + shape_str(want) + " " + std::string(dtype_name(dtype)),
                    "the checkpoint and its quantization_config disagree: re-quantize or re-download it");
}

// Unpacked view of one layer: the group of a column, the nibble of (c, o), the zero point (stored + 1).
struct Unpacked {
  const uint32_t* q;  // [in/8, out]
  const uint32_t* z;  // [groups, out/8]
  const uint16_t* s;  // [groups, out]
  const int32_t* g;   // [in] or null
  int64_t out, in;
  int gs;
  explicit Unpacked(const LinearWeight& w)
      : q(w.values.ptr<const uint32_t>()),
        z(w.zeros.ptr<const uint32_t>()),
        s(w.scales.ptr<const uint16_t>()),
        g(w.g_idx.empty() ? nullptr : w.g_idx.ptr<const int32_t>()),
        out(w.out),
        in(w.in),
        gs(effective_group(w)) {}
  [[nodiscard]] int64_t group(int64_t c) const { return g ? g[c] : c / gs; }
  [[nodiscard]] int nibble(int64_t c, int64_t o) const {
    return static_cast<int>((q[(c / 8) * out + o] >> (4 * (c % 8))) & 15u);
  }
  [[nodiscard]] int zero(int64_t grp, int64_t o) const {
    return static_cast<int>((z[grp * (out / 8) + o / 8] >> (4 * (o % 8))) & 15u) + 1;
  }
  [[nodiscard]] float scale(int64_t grp, int64_t o) const { return f16_to_f32(s[grp * out + o]); }
};

// Columns [o0, o0 + B) of W as rows of buf [B, in] (buf[b * in + c] = W[o0 + b][c]).
void dequant_block(const Unpacked& u, int64_t o0, int64_t B, int64_t groups, std::vector<float>& sc,
                   std::vector<int>& zp, float* buf) {
  sc.resize(static_cast<size_t>(groups * B));
  zp.resize(static_cast<size_t>(groups * B));
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t b = 0; b < B; ++b) sc[g * B + b] = u.scale(g, o0 + b), zp[g * B + b] = u.zero(g, o0 + b);
  for (int64_t c = 0; c < u.in; ++c) {
    const int64_t g = u.group(c);
    const uint32_t* qr = u.q + (c / 8) * u.out + o0;
    const int shift = static_cast<int>(4 * (c % 8));
    for (int64_t b = 0; b < B; ++b) {
      const int q = static_cast<int>((qr[b] >> shift) & 15u);
      buf[b * u.in + c] = sc[g * B + b] * static_cast<float>(q - zp[g * B + b]);
    }
  }
}

float dot(const float* a, const float* b, int64_t n) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) s[k] += a[i + k] * b[i + k];
  float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; i < n; ++i) r += a[i] * b[i];
  return r;
}

}  // namespace

int64_t gptq_groups(int64_t in, int group_size) {
  if (group_size <= 0 || group_size >= in) return 1;
  return (in + group_size - 1) / group_size;
}

Status check_gptq_layout(const LinearWeight& w, const std::string& name) {
  const std::string fmt(weight_format_name(WeightFormat::gptq_int4));
  if (w.format != WeightFormat::gptq_int4)
    return make_error("'" + name + "' is " + describe(w) + ", not " + fmt, "this is a caller bug");
  if (w.in <= 0 || w.out <= 0 || w.in % 8 != 0 || w.out % 8 != 0)
    return make_error("'" + name + "': " + fmt + " needs in and out multiples of 8, got in " +
                          std::to_string(w.in) + ", out " + std::to_string(w.out),
                      "this layer cannot be stored as 4-bit GPTQ: keep it dense (modules_to_not_convert)");
  const int64_t groups = gptq_groups(w.in, effective_group(w));
  SPK_TRY(check_tensor(w.values, name, ".qweight", DType::i32, {w.in / 8, w.out}, w));
  SPK_TRY(check_tensor(w.zeros, name, ".qzeros", DType::i32, {groups, w.out / 8}, w));
  SPK_TRY(check_tensor(w.scales, name, ".scales", DType::f16, {groups, w.out}, w));
  if (w.g_idx.empty()) return ok_status();
  SPK_TRY(check_tensor(w.g_idx, name, ".g_idx", DType::i32, {w.in}, w));
  const int32_t* g = w.g_idx.ptr<const int32_t>();
  for (int64_t c = 0; c < w.in; ++c)
    if (g[c] < 0 || g[c] >= groups)
      return make_error("tensor '" + name + ".g_idx' has group " + std::to_string(g[c]) + " at column " +
                            std::to_string(c) + "; " + fmt + " with in " + std::to_string(w.in) + ", group " +
                            std::to_string(effective_group(w)) + " has groups 0.." +
                            std::to_string(groups - 1),
                        "the checkpoint and its quantization_config disagree: re-quantize or re-download it");
  return ok_status();
}

void gptq_dequantize(const LinearWeight& w, float* out) {
  const Unpacked u(w);
  const int64_t groups = w.scales.dim(0);
  std::vector<float> sc;
  std::vector<int> zp;
  for (int64_t o0 = 0; o0 < w.out; o0 += 8) dequant_block(u, o0, 8, groups, sc, zp, out + o0 * w.in);
}

Status gptq_int4_linear(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& y,
                        cpu::ThreadPool& pool) {
  const int64_t in = w.in, outf = w.out;
  const bool ok = w.format == WeightFormat::gptq_int4 && x.dtype == DType::f32 && y.dtype == DType::f32 &&
                  x.rank() >= 1 && y.rank() >= 1 && x.dim(-1) == in && y.dim(-1) == outf &&
                  x.numel() / std::max<int64_t>(1, in) == y.numel() / std::max<int64_t>(1, outf) &&
                  (bias == nullptr || (bias->dtype == DType::f32 && bias->numel() == outf));
  if (!ok)
    return make_error("gptq-int4 linear: x " + describe(x) + ", w " + describe(w) + ", y " + describe(y) +
                          (bias ? ", bias " + describe(*bias) : ""),
                      "this is a caller bug in the model graph: report it");
  const int64_t n = x.numel() / std::max<int64_t>(1, in);
  const Unpacked u(w);
  const int64_t groups = w.scales.dim(0);
  const float* xp = x.ptr<const float>();
  float* yp = y.ptr<float>();
  const float* bp = bias ? bias->ptr<const float>() : nullptr;
  // Blocks of 16 output columns (two qzeros words): a 16 x in fp32 buffer stays in L2 for in <= 16K.
  constexpr int64_t kB = 16;
  const int64_t blocks = (outf + kB - 1) / kB;
  pool.parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    thread_local std::vector<float> buf, sc;
    thread_local std::vector<int> zp;
    buf.resize(static_cast<size_t>(kB * in));
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t o0 = blk * kB, B = std::min(kB, outf - o0);
      dequant_block(u, o0, B, groups, sc, zp, buf.data());
      for (int64_t i = 0; i < n; ++i)
        for (int64_t b = 0; b < B; ++b)
          yp[i * outf + o0 + b] = dot(xp + i * in, buf.data() + b * in, in) + (bp ? bp[o0 + b] : 0.0f);
    }
  });
  return ok_status();
}

GptqTensors gptq_quantize_rtn(const float* w, int64_t out, int64_t in, int group_size, bool sym,
                              bool act_order_perm) {
  GptqTensors t;
  t.out = out, t.in = in;
  t.group_size = group_size > 0 && group_size < in ? group_size : static_cast<int>(in);
  t.act_order = act_order_perm;
  const int64_t groups = t.groups(), gs = t.group_size;
  // Column order: identity, or perm[k] = (k * stride + 3) % in with stride coprime to in.
  std::vector<int64_t> perm(in);
  int64_t stride = 1;
  if (act_order_perm) {
    stride = 5;
    while (std::gcd(stride, in) != 1) stride += 2;
  }
  for (int64_t k = 0; k < in; ++k) perm[k] = act_order_perm ? (k * stride + 3) % in : k;
  t.g_idx.assign(in, 0);
  for (int64_t k = 0; k < in; ++k) t.g_idx[perm[k]] = static_cast<int32_t>(k / gs);

  std::vector<uint8_t> q(static_cast<size_t>(out * in));
  std::vector<uint8_t> zero(static_cast<size_t>(groups * out));
  t.scales.assign(static_cast<size_t>(groups * out), 0);
  // Rows are independent: split them over the machine's threads (an 8B checkpoint is ~7 G weights).
  cpu::ThreadPool pool(0);
  pool.parallel_for(out, 64, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      const float* row = w + o * in;
      for (int64_t g = 0; g < groups; ++g) {
        float lo = 0.0f, hi = 0.0f;  // GPTQ's grid always holds 0
        for (int64_t k = g * gs; k < std::min(in, (g + 1) * gs); ++k)
          lo = std::min(lo, row[perm[k]]), hi = std::max(hi, row[perm[k]]);
        if (sym) hi = std::max(std::fabs(lo), hi), lo = -hi;
        if (lo == 0.0f && hi == 0.0f) lo = -1.0f, hi = 1.0f;
        uint16_t sh = f32_to_f16((hi - lo) / 15.0f);
        if (f16_to_f32(sh) == 0.0f) sh = f32_to_f16(6.1e-5f);  // below f16's smallest normal
        const float s = f16_to_f32(sh);
        const int z = sym ? 8 : std::clamp(static_cast<int>(std::nearbyint(-lo / s)), 1, 15);
        t.scales[g * out + o] = sh;
        zero[g * out + o] = static_cast<uint8_t>(z);
        for (int64_t k = g * gs; k < std::min(in, (g + 1) * gs); ++k) {
          const int64_t c = perm[k];
          const int v = static_cast<int>(std::nearbyint(row[c] / s)) + z;
          q[o * in + c] = static_cast<uint8_t>(std::clamp(v, 0, 15));
        }
      }
    }
  });
  t.qweight.assign(static_cast<size_t>(in / 8 * out), 0);
  pool.parallel_for(in / 8, 64, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t o = 0; o < out; ++o) {
        uint32_t word = 0;
        for (int j = 0; j < 8; ++j) word |= static_cast<uint32_t>(q[o * in + 8 * i + j]) << (4 * j);
        t.qweight[i * out + o] = static_cast<int32_t>(word);
      }
  });
  t.qzeros.assign(static_cast<size_t>(groups * (out / 8)), 0);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t o = 0; o < out; ++o) {
      auto& word = reinterpret_cast<uint32_t&>(t.qzeros[g * (out / 8) + o / 8]);
      word |= static_cast<uint32_t>((zero[g * out + o] - 1) & 15) << (4 * (o % 8));
    }
  return t;
}

LinearWeight gptq_host_weight(const GptqTensors& t, bool with_g_idx) {
  auto view = [](const void* p, DType dt, std::vector<int64_t> shape) {
    Tensor x;
    x.data = const_cast<void*>(p);
    x.dtype = dt;
    x.shape = std::move(shape);
    return x;
  };
  LinearWeight w;
  w.format = WeightFormat::gptq_int4;
  w.out = t.out, w.in = t.in, w.group_size = t.group_size;
  const int64_t groups = t.groups();
  w.values = view(t.qweight.data(), DType::i32, {t.in / 8, t.out});
  w.zeros = view(t.qzeros.data(), DType::i32, {groups, t.out / 8});
  w.scales = view(t.scales.data(), DType::f16, {groups, t.out});
  if (with_g_idx) w.g_idx = view(t.g_idx.data(), DType::i32, {t.in});
  return w;
}

}  // namespace spk
