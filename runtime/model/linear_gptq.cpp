#include "runtime/model/linear_gptq.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/formats/gptq_int4.h"
#include "runtime/model/linear_compressed_tensors.h"

namespace spk::rt {
namespace {

Tensor host_view(const HostWeight& hw) {
  Tensor t;
  t.data = const_cast<void*>(hw.data);
  t.dtype = hw.dtype;
  t.shape = hw.shape;
  return t;
}

void drop_plain_g_idx(LinearWeight& w) {
  if (w.g_idx.empty()) return;
  const int32_t* g = w.g_idx.ptr<const int32_t>();
  bool plain = true;
  for (int64_t c = 0; c < w.in && plain; ++c) plain = g[c] == c / w.group_size;
  if (plain) w.g_idx = Tensor{};
}

Error shard_error(const std::string& prefix, const std::string& what) {
  return make_error("gptq-int4 module '" + prefix + "': " + what,
                    "use a tensor-parallel size whose shards keep whole packed words and scale groups "
                    "(or --tp 1 for this checkpoint)");
}

// The whole module as gptq-int4 host tensors, checked against the config: views into the checkpoint
// (GPTQ) or converted buffers (compressed-tensors), held by `keep`. An act-order g_idx that is the plain
// grouping c / group_size is dropped (AutoGPTQ writes one for every layer).
Result<ConvertedModule> host_module(const WeightSource& src, const QuantConfig& q, const std::string& prefix,
                                    int64_t out, int64_t in) {
  if (q.method == "compressed-tensors") {
    SPK_ASSIGN(ConvertedModule m, compressed_tensors_module(src, q, prefix, out, in));
    SPK_TRY(check_gptq_layout(m.w, prefix));
    drop_plain_g_idx(m.w);
    return m;
  }
  LinearWeight w;
  w.format = WeightFormat::gptq_int4;
  w.out = out, w.in = in;
  w.group_size = q.group_size > 0 && q.group_size < in ? q.group_size : static_cast<int>(in);
  Tensor* dst[] = {&w.values, &w.zeros, &w.scales};
  const char* suffix[] = {".qweight", ".qzeros", ".scales"};
  for (int i = 0; i < 3; ++i) {
    const std::string name = prefix + suffix[i];
    if (!src.has(name))
      return make_error("tensor '" + name + "' is missing: " + q.path + " says the model is " + q.describe() +
                            " and '" + prefix + "' is not in modules_to_not_convert",
                        "re-quantize the checkpoint, or list the module in "
                        "quantization_config.modules_to_not_convert if it is stored dense");
    SPK_ASSIGN(HostWeight hw, src.get(name));
    *dst[i] = host_view(hw);
  }
  if (src.has(prefix + ".g_idx")) {
    SPK_ASSIGN(HostWeight hw, src.get(prefix + ".g_idx"));
    w.g_idx = host_view(hw);
  } else if (q.desc_act) {
    return make_error("tensor '" + prefix + ".g_idx' is missing: " + q.path + " says desc_act true",
                      "re-quantize the checkpoint with its g_idx, or fix desc_act in the config");
  }
  SPK_TRY(check_gptq_layout(w, prefix));
  drop_plain_g_idx(w);
  return ConvertedModule{w, src.keepalive()};
}

// Rows [r0, r0 + rc) x columns [c0, c0 + cc) of the 2-D host tensor t: a view when whole rows are taken,
// else a copy (held by `keep`).
Tensor slice2d(const Tensor& t, int64_t r0, int64_t rc, int64_t c0, int64_t cc, std::shared_ptr<void>& keep,
               const std::shared_ptr<void>& src_keep) {
  const int64_t C = t.dim(1);
  const size_t esz = dtype_size(t.dtype);
  const char* first = static_cast<const char*>(t.data) + static_cast<size_t>(r0 * C) * esz;
  Tensor s = t;
  s.shape = {rc, cc};
  if (c0 == 0 && cc == C) {
    s.data = const_cast<char*>(first);
    keep = src_keep;
    return s;
  }
  auto buf = std::make_shared<std::vector<char>>(static_cast<size_t>(rc * cc) * esz);
  for (int64_t r = 0; r < rc; ++r)
    std::memcpy(buf->data() + static_cast<size_t>(r * cc) * esz,
                first + static_cast<size_t>(r * C + c0) * esz, static_cast<size_t>(cc) * esz);
  s.data = buf->data();
  keep = buf;
  return s;
}

struct HostShard {
  LinearWeight w;                 // host views
  std::shared_ptr<void> keep[4];  // qweight, qzeros, scales, g_idx
};

Result<HostShard> host_shard(const WeightSource& src, const QuantConfig& q, const std::string& prefix,
                             int64_t out, int64_t in, ShardRange rows, ShardRange cols) {
  SPK_ASSIGN(ConvertedModule mod, host_module(src, q, prefix, out, in));
  const LinearWeight& full = mod.w;
  const int64_t ob = rows.begin, oc = rows.count, cb = cols.begin, cc = cols.count;
  if (ob < 0 || oc <= 0 || ob + oc > out || cb < 0 || cc <= 0 || cb + cc > in)
    return shard_error(prefix, "slice out [" + std::to_string(ob) + ", " + std::to_string(ob + oc) +
                                   "), in [" + std::to_string(cb) + ", " + std::to_string(cb + cc) +
                                   ") is outside [" + std::to_string(out) + " x " + std::to_string(in) + "]");
  if (ob % 8 != 0 || oc % 8 != 0)
    return shard_error(prefix, "the column-parallel shard takes outputs [" + std::to_string(ob) + ", " +
                                   std::to_string(ob + oc) +
                                   "); qzeros packs 8 outputs per word, so a shard's "
                                   "out must start at and be a multiple of 8");
  if (cb % 8 != 0 || cc % 8 != 0)
    return shard_error(prefix, "the row-parallel shard takes inputs [" + std::to_string(cb) + ", " +
                                   std::to_string(cb + cc) +
                                   "); qweight packs 8 inputs per word, so a shard's "
                                   "in must start at and be a multiple of 8");
  const int64_t gs = full.group_size, groups = gptq_groups(in, full.group_size);
  HostShard s;
  s.w = full;
  s.w.out = oc, s.w.in = cc;
  int64_t g0 = 0, gc = groups;
  if (cc != in) {
    if (groups == 1) {
      s.w.group_size = static_cast<int>(cc);  // one group: every shard keeps it
    } else if (full.g_idx.empty()) {
      if (cb % gs != 0 || (cc % gs != 0 && cb + cc != in))
        return shard_error(prefix, "the row-parallel shard takes inputs [" + std::to_string(cb) + ", " +
                                       std::to_string(cb + cc) + "), which splits a scale group of " +
                                       std::to_string(gs) + " columns");
      g0 = cb / gs, gc = gptq_groups(cc, static_cast<int>(gs));
    } else {
      const int32_t* g = full.g_idx.ptr<const int32_t>() + cb;
      const auto [lo, hi] = std::minmax_element(g, g + cc);
      g0 = *lo, gc = *hi - *lo + 1;
      if (gc != gptq_groups(cc, static_cast<int>(gs)))
        return shard_error(prefix, "act-order (desc_act) g_idx spreads the row-parallel shard's inputs [" +
                                       std::to_string(cb) + ", " + std::to_string(cb + cc) +
                                       ") over groups " + std::to_string(*lo) + ".." + std::to_string(*hi) +
                                       "; this build shards act-order layers only when each shard's columns "
                                       "use their own groups");
    }
  }
  const std::shared_ptr<void>& sk = mod.keep;
  s.w.values = slice2d(full.values, cb / 8, cc / 8, ob, oc, s.keep[0], sk);
  s.w.zeros = slice2d(full.zeros, g0, gc, ob / 8, oc / 8, s.keep[1], sk);
  s.w.scales = slice2d(full.scales, g0, gc, ob, oc, s.keep[2], sk);
  if (!full.g_idx.empty()) {
    auto buf = std::make_shared<std::vector<int32_t>>(full.g_idx.ptr<const int32_t>() + cb,
                                                      full.g_idx.ptr<const int32_t>() + cb + cc);
    for (int32_t& v : *buf) v -= static_cast<int32_t>(g0);
    s.w.g_idx.data = buf->data();
    s.w.g_idx.shape = {cc};
    s.keep[3] = buf;
  }
  SPK_TRY(check_gptq_layout(s.w, prefix));
  return s;
}

}  // namespace

Result<LinearWeight> load_gptq_linear(Backend& be, const WeightSource& src, const QuantConfig& q,
                                      const std::string& prefix, int64_t out, int64_t in, ShardRange rows,
                                      ShardRange cols) {
  SPK_TRY(require_support(be, WeightFormat::gptq_int4, prefix));
  SPK_ASSIGN(HostShard s, host_shard(src, q, prefix, out, in, rows, cols));
  LinearWeight w = s.w;
  Tensor* t[] = {&w.values, &w.zeros, &w.scales, &w.g_idx};
  for (int i = 0; i < 4; ++i) {
    if (t[i]->empty()) continue;
    SPK_ASSIGN(*t[i], be.import_weight(t[i]->data, t[i]->dtype, t[i]->shape, s.keep[i], t[i]->dtype));
  }
  return w;
}

}  // namespace spk::rt
