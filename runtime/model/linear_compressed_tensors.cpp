#include "runtime/model/linear_compressed_tensors.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/formats/gptq_int4.h"

namespace spk::rt {
namespace {

struct Buffers {
  std::vector<int32_t> qweight, qzeros, g_idx;
  std::vector<uint16_t> scales;
};

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

Tensor host_tensor(void* data, DType dt, std::vector<int64_t> shape) {
  Tensor t;
  t.data = data;
  t.dtype = dt;
  t.shape = std::move(shape);
  return t;
}

class Reader {
 public:
  Reader(const WeightSource& src, const QuantConfig& q, const std::string& prefix, int64_t out, int64_t in,
         int group)
      : src_(src), q_(q), prefix_(prefix), out_(out), in_(in), group_(group) {}

  [[nodiscard]] Error error(const std::string& field, const std::string& what) const {
    return make_error("tensor '" + prefix_ + "." + field + "' " + what,
                      "re-export the checkpoint with compressed-tensors, or fix its config.json");
  }
  // The tensor `field`, checked against the expected shape and one of the dtypes.
  Result<HostWeight> get(const std::string& field, const std::vector<int64_t>& shape,
                         std::initializer_list<DType> dtypes) const {
    const std::string name = prefix_ + "." + field;
    if (!src_.has(name))
      return make_error("tensor '" + name + "' is missing: " + q_.path + " says the model is " +
                            q_.describe() + " and '" + prefix_ + "' is not in quantization_config.ignore",
                        "re-export the checkpoint, or list the module in quantization_config.ignore if it "
                        "is stored dense");
    SPK_ASSIGN(HostWeight hw, src_.get(name));
    bool dt_ok = false;
    for (DType d : dtypes) dt_ok = dt_ok || hw.dtype == d;
    if (hw.shape != shape || !dt_ok) {
      std::string want;
      for (DType d : dtypes) want += (want.empty() ? "" : " or ") + std::string(dtype_name(d));
      return error(field, "is " + shape_text(hw.shape) + " " + std::string(dtype_name(hw.dtype)) + ", " +
                              q_.describe() + " with in " + std::to_string(in_) + ", out " +
                              std::to_string(out_) + ", group " + std::to_string(group_) + " expects " +
                              shape_text(shape) + " " + want);
    }
    return hw;
  }

 private:
  const WeightSource& src_;
  const QuantConfig& q_;
  const std::string& prefix_;
  int64_t out_, in_;
  int group_;
};

std::string float_text(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  return buf;
}

float scale_value(const HostWeight& s, size_t i) {
  if (s.dtype == DType::f32) {
    float f;
    std::memcpy(&f, static_cast<const char*>(s.data) + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, static_cast<const char*>(s.data) + 2 * i, 2);
  return s.dtype == DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
}

}  // namespace

Result<ConvertedModule> compressed_tensors_module(const WeightSource& src, const QuantConfig& q,
                                                  const std::string& prefix, int64_t out, int64_t in) {
  const int gs = q.group_size > 0 && q.group_size < in ? q.group_size : static_cast<int>(in);
  const int64_t groups = gptq_groups(in, gs);
  const Reader r(src, q, prefix, out, in, q.group_size);
  if (in % 8 != 0 || out % 8 != 0)
    return make_error("'" + prefix + "': gptq-int4 (which " + q.describe() +
                          " loads into) needs in and out multiples of 8, got in " + std::to_string(in) +
                          ", out " + std::to_string(out),
                      "keep the module dense (quantization_config.ignore)");
  if (in % gs != 0)
    return r.error("weight_scale", "cannot exist: in " + std::to_string(in) + " is not a multiple of group " +
                                       std::to_string(gs) + " (compressed-tensors requires it)");

  // weight_shape: {out, in}.
  SPK_ASSIGN(HostWeight shp, r.get("weight_shape", {2}, {DType::i64, DType::i32}));
  int64_t dims[2];
  for (int i = 0; i < 2; ++i) {
    if (shp.dtype == DType::i64) {
      std::memcpy(&dims[i], static_cast<const char*>(shp.data) + 8 * i, 8);
    } else {
      int32_t v;
      std::memcpy(&v, static_cast<const char*>(shp.data) + 4 * i, 4);
      dims[i] = v;
    }
  }
  if (dims[0] != out || dims[1] != in)
    return r.error("weight_shape", "is {" + std::to_string(dims[0]) + ", " + std::to_string(dims[1]) +
                                       "}; the model's config expects {" + std::to_string(out) + ", " +
                                       std::to_string(in) + "} (out, in)");

  auto b = std::make_shared<Buffers>();
  // weight_packed [out, in/8] is qweight [in/8, out] transposed: the same words (8 inputs, low bits first,
  // stored q + 8 = GPTQ's unsigned nibble).
  SPK_ASSIGN(HostWeight packed, r.get("weight_packed", {out, in / 8}, {DType::i32}));
  const auto* pw = static_cast<const int32_t*>(packed.data);
  b->qweight.resize(static_cast<size_t>(in / 8 * out));
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in / 8; ++i) b->qweight[i * out + o] = pw[o * (in / 8) + i];

  // weight_scale [out, groups] -> scales f16 [groups, out], exactly.
  SPK_ASSIGN(HostWeight sc, r.get("weight_scale", {out, groups}, {DType::bf16, DType::f16, DType::f32}));
  b->scales.resize(static_cast<size_t>(groups * out));
  for (int64_t o = 0; o < out; ++o)
    for (int64_t g = 0; g < groups; ++g) {
      const float v = scale_value(sc, static_cast<size_t>(o * groups + g));
      const uint16_t h = f32_to_f16(v);
      if (f16_to_f32(h) != v || !std::isfinite(v))
        return r.error("weight_scale", "holds " + float_text(v) + " at [" + std::to_string(o) + ", " +
                                           std::to_string(g) +
                                           "], which f16 does not hold exactly; gptq-int4 (which this "
                                           "build loads compressed-tensors into) keeps f16 scales");
      b->scales[g * out + o] = h;
    }

  // Zero points: qzeros [groups, out/8] holds zero - 1, zero the stored nibble (z + 8); sym: z = 0.
  b->qzeros.assign(static_cast<size_t>(groups * (out / 8)), 0x77777777);
  if (!q.sym) {
    SPK_ASSIGN(HostWeight zp, r.get("weight_zero_point", {out / 8, groups}, {DType::i32}));
    const auto* zw = static_cast<const uint32_t*>(zp.data);
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t w = 0; w < out / 8; ++w) {
        uint32_t word = 0;
        for (int k = 0; k < 8; ++k) {
          const uint32_t z = (zw[w * groups + g] >> (4 * k)) & 15u;
          if (z == 0)
            return r.error("weight_zero_point",
                           "holds zero point -8 (stored 0) for output " + std::to_string(8 * w + k) +
                               ", group " + std::to_string(g) +
                               "; gptq-int4 (which this build loads compressed-tensors into) stores zero - 1 "
                               "in 4 bits, so zero points are -7..7 here");
          word |= (z - 1) << (4 * k);
        }
        b->qzeros[g * (out / 8) + w] = static_cast<int32_t>(word);
      }
  } else if (src.has(prefix + ".weight_zero_point")) {
    return r.error("weight_zero_point", "is present but " + q.path + " says symmetric: true");
  }

  // g_idx (actorder group); entries of -1 mean "not initialized": the column order.
  if (src.has(prefix + ".weight_g_idx")) {
    SPK_ASSIGN(HostWeight gi, r.get("weight_g_idx", {in}, {DType::i32}));
    const auto* g = static_cast<const int32_t*>(gi.data);
    bool unset = false;
    for (int64_t c = 0; c < in; ++c) unset = unset || g[c] == -1;
    if (!unset) b->g_idx.assign(g, g + in);
  } else if (q.actorder == "group") {
    return r.error("weight_g_idx", "is missing: " + q.path + " says actorder \"group\"");
  }

  ConvertedModule m;
  m.w.format = WeightFormat::gptq_int4;
  m.w.out = out, m.w.in = in, m.w.group_size = gs;
  m.w.values = host_tensor(b->qweight.data(), DType::i32, {in / 8, out});
  m.w.zeros = host_tensor(b->qzeros.data(), DType::i32, {groups, out / 8});
  m.w.scales = host_tensor(b->scales.data(), DType::f16, {groups, out});
  if (!b->g_idx.empty()) m.w.g_idx = host_tensor(b->g_idx.data(), DType::i32, {in});
  m.keep = b;
  return m;
}

}  // namespace spk::rt
