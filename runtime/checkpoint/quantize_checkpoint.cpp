#include "runtime/checkpoint/quantize_checkpoint.h"

#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "kernels/base/fs.h"
#include "kernels/formats/gptq_int4.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/quantize_compressed_tensors.h"
#include "runtime/model/model_config.h"

namespace spk::rt {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A linear module of attention or the MLP (dense or expert): "...q_proj", "...experts.3.w2".
bool is_linear_module(const std::string& prefix) {
  static const char* kLeaves[] = {"q_proj",  "k_proj",    "v_proj", "o_proj", "gate_proj",
                                  "up_proj", "down_proj", "w1",     "w2",     "w3"};
  const size_t dot = prefix.rfind('.');
  const std::string leaf = dot == std::string::npos ? prefix : prefix.substr(dot + 1);
  const bool attn_or_mlp = prefix.find(".self_attn.") != std::string::npos ||
                           prefix.find(".mlp.") != std::string::npos ||
                           prefix.find(".block_sparse_moe.") != std::string::npos;
  if (!attn_or_mlp) return false;
  for (const char* l : kLeaves)
    if (leaf == l) return true;
  return false;
}

std::vector<float> to_f32(const TensorView& v) {
  std::vector<float> f(v.numel());
  for (size_t i = 0; i < f.size(); ++i) {
    if (v.dtype == DType::f32) {
      std::memcpy(&f[i], v.data + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, v.data + 2 * i, 2);
      f[i] = v.dtype == DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
  }
  return f;
}

Status copy_side_files(const std::string& from, const std::string& to) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(from, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || name == "config.json" || name == "quantize_config.json" ||
        name.ends_with(".safetensors") || name == "model.safetensors.index.json")
      continue;
    SPK_ASSIGN(std::string data, read_file(e.path().string()));
    SPK_TRY(write_file_atomic(to + "/" + name, data));
  }
  if (ec) return make_error("cannot list " + from + ": " + ec.message(), "check the --in directory");
  return ok_status();
}

}  // namespace

Result<QuantizeReport> quantize_checkpoint(const QuantizeOptions& o) {
  SPK_ASSIGN(ModelConfig cfg, load_model_config(o.in_dir));
  if (cfg.quant)
    return make_error(o.in_dir + " is already quantized (" + cfg.quant->describe() + ")",
                      "pass an unquantized (bf16/f16/f32) checkpoint to --in");
  if (o.group_size != -1 && (o.group_size < 8 || o.group_size % 8 != 0))
    return make_error("--group-size " + std::to_string(o.group_size) + " is not -1 or a multiple of 8",
                      "use 128 (the usual), 32, 64 or -1 (one group per row)");
  if (o.format != "gptq" && o.format != "compressed-tensors")
    return make_error("--format " + o.format + " is not built", "use gptq or compressed-tensors");
  const bool ct = o.format == "compressed-tensors";
  SPK_ASSIGN(Checkpoint ck, Checkpoint::open(o.in_dir));
  SPK_ASSIGN(std::string config_text, read_file(o.in_dir + "/config.json"));
  json config = json::parse(config_text);

  QuantizeReport rep;
  std::map<std::string, GptqTensors> q;  // module prefix -> its quantized tensors
  std::map<std::string, CtTensors> cq;   // the same as compressed-tensors (--format compressed-tensors)
  bool has_router = false;
  std::map<std::string, std::vector<float>>
      deq;  // module prefix -> dequantized [out, in] (with --dequantized-out)
  std::vector<TensorSpec> specs, deq_specs;
  json not_convert = json::array();
  for (const std::string& name : ck.names()) {
    const TensorInfo* info = ck.info(name);
    rep.bytes_in += info->nbytes();
    const bool weight = name.ends_with(".weight");
    has_router = has_router || name.ends_with(".mlp.gate.weight");
    const std::string prefix = weight ? name.substr(0, name.size() - 7) : name;
    if (weight && is_linear_module(prefix) && info->shape.size() != 2)
      return make_error("tensor '" + name + "' is " + std::to_string(info->shape.size()) +
                            "-D: fused expert tensors cannot be written as GPTQ yet",
                        "write the checkpoint with one 2-D tensor per expert (transformers 4.x layout)");
    const bool quantize =
        weight && is_linear_module(prefix) && info->shape[0] % 8 == 0 && info->shape[1] % 8 == 0;
    if (weight && is_linear_module(prefix) && !quantize) not_convert.push_back(prefix);
    const bool is_float =
        info->dtype == DType::f32 || info->dtype == DType::bf16 || info->dtype == DType::f16;
    deq_specs.push_back({name, is_float ? DType::f32 : info->dtype, info->shape});
    if (!quantize) {
      specs.push_back({name, info->dtype, info->shape});
      ++rep.dense;
      continue;
    }
    const int64_t out = info->shape[0], in = info->shape[1];
    SPK_ASSIGN(TensorView v, ck.tensor(name));
    const std::vector<float> w = to_f32(v);
    GptqTensors t = gptq_quantize_rtn(w.data(), out, in, o.group_size, o.sym, o.desc_act);
    const int64_t groups = t.groups();
    if (ct) {
      CtTensors c = gptq_to_compressed_tensors(
          t, is_float && info->dtype != DType::f32 ? info->dtype : DType::f32, o.sym, o.desc_act);
      for (const std::string& f : c.fields())
        specs.push_back({prefix + "." + f, c.field(f).dtype, c.field(f).shape});
      cq[prefix] = std::move(c);
    } else {
      specs.push_back({prefix + ".qweight", DType::i32, {in / 8, out}});
      specs.push_back({prefix + ".qzeros", DType::i32, {groups, out / 8}});
      specs.push_back({prefix + ".scales", DType::f16, {groups, out}});
      specs.push_back({prefix + ".g_idx", DType::i32, {in}});
    }
    if (!o.dequantized_out.empty()) {
      std::vector<float> d(static_cast<size_t>(out * in));
      gptq_dequantize(gptq_host_weight(t, o.desc_act), d.data());
      deq[prefix] = std::move(d);
    }
    q[prefix] = std::move(t);
    ++rep.quantized;
  }

  auto fill = [&](const TensorSpec& s, uint8_t* dst, uint64_t nbytes) {
    const size_t dot = s.name.rfind('.');
    const std::string prefix = s.name.substr(0, dot), field = s.name.substr(dot + 1);
    if (auto it = cq.find(prefix); it != cq.end() && field.starts_with("weight_")) {
      std::memcpy(dst, it->second.field(field).data, nbytes);
      return;
    }
    if (auto it = q.find(prefix); it != q.end() && field != "weight" && field != "bias") {
      const GptqTensors& t = it->second;
      const void* p = field == "qweight"  ? static_cast<const void*>(t.qweight.data())
                      : field == "qzeros" ? static_cast<const void*>(t.qzeros.data())
                      : field == "scales" ? static_cast<const void*>(t.scales.data())
                                          : static_cast<const void*>(t.g_idx.data());
      std::memcpy(dst, p, nbytes);
      return;
    }
    auto v = ck.tensor(s.name);
    std::memcpy(dst, v->data, nbytes);
  };
  fs::create_directories(o.out_dir);
  SPK_TRY(write_checkpoint_shards(o.out_dir, specs, fill, o.max_shard_bytes));
  for (const auto& s : specs) {
    uint64_t n = dtype_size(s.dtype);
    for (int64_t d : s.shape) n *= static_cast<uint64_t>(d);
    rep.bytes_out += n;
  }
  SPK_TRY(copy_side_files(o.in_dir, o.out_dir));
  json qc = {{"quant_method", "gptq"},     {"bits", 4},
             {"group_size", o.group_size}, {"sym", o.sym},
             {"desc_act", o.desc_act},     {"checkpoint_format", "gptq"}};
  if (!not_convert.empty()) qc["modules_to_not_convert"] = not_convert;
  if (ct) {  // llm-compressor's ignore: the LM head, MoE routers (by regex) and the modules left dense
    json ignore = json::array({"lm_head"});
    if (has_router) ignore.push_back("re:.*mlp\\.gate$");
    for (const auto& m : not_convert) ignore.push_back(m);
    qc = compressed_tensors_config(o.group_size, o.sym, o.desc_act, ignore);
  }
  json qconfig = config;
  qconfig["quantization_config"] = qc;
  SPK_TRY(write_file_atomic(o.out_dir + "/config.json", qconfig.dump(2) + "\n"));

  if (!o.dequantized_out.empty()) {
    auto fill_deq = [&](const TensorSpec& s, uint8_t* dst, uint64_t nbytes) {
      const std::string prefix = s.name.ends_with(".weight") ? s.name.substr(0, s.name.size() - 7) : "";
      if (auto it = deq.find(prefix); it != deq.end()) {
        std::memcpy(dst, it->second.data(), nbytes);
        return;
      }
      auto v = ck.tensor(s.name);
      if (s.dtype == v->dtype) {
        std::memcpy(dst, v->data, nbytes);
        return;
      }
      const std::vector<float> f = to_f32(*v);
      std::memcpy(dst, f.data(), nbytes);
    };
    fs::create_directories(o.dequantized_out);
    SPK_TRY(write_checkpoint_shards(o.dequantized_out, deq_specs, fill_deq, o.max_shard_bytes));
    SPK_TRY(copy_side_files(o.in_dir, o.dequantized_out));
    json dconfig = config;
    dconfig[config.contains("dtype") ? "dtype" : "torch_dtype"] = "float32";
    SPK_TRY(write_file_atomic(o.dequantized_out + "/config.json", dconfig.dump(2) + "\n"));
  }
  return rep;
}

}  // namespace spk::rt
