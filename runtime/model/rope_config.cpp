#include "runtime/model/rope_config.h"

#include <algorithm>
#include <cmath>

#include "kernels/backend.h"

namespace spk::rt {

namespace {

using nlohmann::json;

constexpr const char* kRopeTypes = "default, linear, llama3, yarn";

// transformers: a rope_parameters object keyed by layer type ({"full_attention": {...}, ...}) gives each
// layer type its own rope. One set of parameters is all these architectures can use.
Result<const json*> single_rope_object(const ConfigReader& r, const char* key) {
  const json& obj = r.j[key];
  if (!obj.is_object()) return r.bad(key, "must be an object or null, got " + ConfigReader::dump(obj));
  const bool per_layer = obj.contains("full_attention") || obj.contains("sliding_attention");
  if (!per_layer) return &obj;
  const json* first = nullptr;
  for (const auto& [name, v] : obj.items()) {
    if (v.is_null()) continue;
    if (first != nullptr && v != *first)
      return r.bad(key, "gives layer types different rope parameters (" + ConfigReader::dump(obj) +
                            "); per-layer-type rope is not supported for this architecture");
    first = &v;
  }
  if (first == nullptr || !first->is_object())
    return r.bad(key, "has no rope parameters for any layer type: " + ConfigReader::dump(obj));
  return first;
}

double yarn_mscale(double scale, double m) { return scale <= 1.0 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; }

Status parse_scaling(const ConfigReader& r, const ConfigReader& rs, const std::string& type, int max_pos,
                     RopeScaling& s) {
  s.rope_type = type;
  // transformers moves a top-level original_max_position_embeddings (Phi-3 style) into the rope
  // parameters with priority, else defaults it to max_position_embeddings.
  auto original_max = [&]() -> Result<int> {
    if (r.present("original_max_position_embeddings")) return r.integer("original_max_position_embeddings");
    return rs.integer("original_max_position_embeddings", max_pos);
  };
  if (type == "linear") {
    SPK_ASSIGN(s.factor, rs.number("factor", 0));
    if (!rs.present("factor")) return rs.bad("factor", "is missing (rope_type linear needs it)");
    return ok_status();
  }
  if (type == "llama3") {
    for (const char* k : {"factor", "low_freq_factor", "high_freq_factor"})
      if (!rs.present(k)) return rs.bad(k, "is missing (rope_type llama3 needs it)");
    SPK_ASSIGN(s.factor, rs.number("factor", 0));
    SPK_ASSIGN(s.low_freq_factor, rs.number("low_freq_factor", 0));
    SPK_ASSIGN(s.high_freq_factor, rs.number("high_freq_factor", 0));
    SPK_ASSIGN(s.original_max_position_embeddings, original_max());
    if (s.high_freq_factor <= s.low_freq_factor)
      return rs.bad("high_freq_factor", "must be greater than low_freq_factor");
    return ok_status();
  }
  // yarn
  SPK_ASSIGN(s.original_max_position_embeddings, original_max());
  if (rs.present("factor")) {
    SPK_ASSIGN(s.factor, rs.number("factor", 0));
  } else if (rs.j.contains("factor")) {  // null: transformers derives it from the two lengths
    s.factor = static_cast<double>(max_pos) / s.original_max_position_embeddings;
  } else {
    return rs.bad("factor", "is missing (rope_type yarn needs it)");
  }
  if (rs.present("attention_factor")) {
    SPK_ASSIGN(double af, rs.number("attention_factor", 0));
    s.attention_factor = af;
  }
  // transformers reads these with `or`: a 0 or null takes the default.
  SPK_ASSIGN(s.beta_fast, rs.number("beta_fast", 32.0, true));
  SPK_ASSIGN(s.beta_slow, rs.number("beta_slow", 1.0, true));
  if (s.beta_fast == 0) s.beta_fast = 32.0;
  if (s.beta_slow == 0) s.beta_slow = 1.0;
  SPK_ASSIGN(s.mscale, rs.number("mscale", 0.0, true));
  SPK_ASSIGN(s.mscale_all_dim, rs.number("mscale_all_dim", 0.0, true));
  SPK_ASSIGN(s.truncate, rs.boolean("truncate", true));
  return ok_status();
}

}  // namespace

Result<RopeConfig> parse_rope_config(const ConfigReader& r, double default_theta, int max_pos) {
  RopeConfig out;
  // transformers: a legacy rope_scaling object takes the place of rope_parameters; rope_theta inside the
  // object wins over the top-level key, which wins over the architecture's default.
  const char* key = r.present("rope_scaling")      ? "rope_scaling"
                    : r.present("rope_parameters") ? "rope_parameters"
                                                   : nullptr;
  static const json kEmpty = json::object();
  const json* obj = &kEmpty;
  if (key != nullptr) {
    SPK_ASSIGN(obj, single_rope_object(r, key));
  }
  const ConfigReader rs = r.sub(*obj, key != nullptr ? key : "rope_parameters");

  SPK_ASSIGN(out.theta, r.number("rope_theta", default_theta));
  SPK_ASSIGN(out.theta, rs.number("rope_theta", out.theta));

  for (const ConfigReader* where : {&r, &rs}) {
    if (!where->present("partial_rotary_factor")) continue;
    SPK_ASSIGN(double f, where->number("partial_rotary_factor", 1.0));
    if (f != 1.0)
      return where->bad("partial_rotary_factor",
                        "is " + ConfigReader::dump(where->j["partial_rotary_factor"]) +
                            "; this architecture rotates the whole head (transformers' llama-family rope "
                            "cannot apply a partial one either)");
  }

  std::string type = "default";
  for (const char* k : {"rope_type", "type"}) {
    if (rs.present(k)) {
      SPK_ASSIGN(type, rs.string(k, "default"));
      break;
    }
  }
  if (type == "default") return out;
  if (type != "linear" && type != "llama3" && type != "yarn")
    return rs.bad("rope_type", "is \"" + type + "\", which is not supported (supported: " + kRopeTypes + ")");
  RopeScaling s;
  SPK_TRY(parse_scaling(r, rs, type, max_pos, s));
  out.scaling = s;
  return out;
}

std::vector<float> rope_inv_freq(int rotary_dim, const RopeConfig& rope) {
  const RopeScaling* s = rope.scaling ? &*rope.scaling : nullptr;
  if (s != nullptr && s->rope_type == "llama3") {
    const Llama3RopeScaling l3{s->factor, s->low_freq_factor, s->high_freq_factor,
                               s->original_max_position_embeddings};
    return spk::rope_inv_freq(rotary_dim, rope.theta, &l3);
  }
  const int half = rotary_dim / 2;
  std::vector<float> inv(half);
  const double dim = rotary_dim, base = rope.theta;
  // yarn's correction range: the rotary dims whose wavelength fits beta_fast / beta_slow rotations into
  // the original context (transformers' find_correction_range).
  double low = 0, high = 0;
  if (s != nullptr && s->rope_type == "yarn") {
    auto corr_dim = [&](double rotations) {
      return dim * std::log(s->original_max_position_embeddings / (rotations * 2 * M_PI)) /
             (2 * std::log(base));
    };
    low = corr_dim(s->beta_fast), high = corr_dim(s->beta_slow);
    if (s->truncate) low = std::floor(low), high = std::ceil(high);
    low = std::max(low, 0.0), high = std::min(high, dim - 1);
    if (low == high) high += 0.001;
  }
  for (int i = 0; i < half; ++i) {
    const double pos_freq = std::pow(base, (2.0 * i) / dim);
    double f = 1.0 / pos_freq;
    if (s != nullptr && s->rope_type == "linear") f /= s->factor;
    if (s != nullptr && s->rope_type == "yarn") {
      const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
      const double extrapolation = 1.0 - ramp;  // 1: keep the original frequency
      f = (1.0 / (s->factor * pos_freq)) * (1.0 - extrapolation) + f * extrapolation;
    }
    inv[i] = static_cast<float>(f);
  }
  return inv;
}

double rope_attention_factor(const RopeConfig& rope) {
  if (!rope.scaling || rope.scaling->rope_type != "yarn") return 1.0;
  const RopeScaling& s = *rope.scaling;
  if (s.attention_factor) return *s.attention_factor;
  if (s.mscale != 0 && s.mscale_all_dim != 0)
    return yarn_mscale(s.factor, s.mscale) / yarn_mscale(s.factor, s.mscale_all_dim);
  return yarn_mscale(s.factor, 1.0);
}

}  // namespace spk::rt
