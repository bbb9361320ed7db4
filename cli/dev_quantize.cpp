// `sparkctl dev quantize`: a GPTQ 4-bit checkpoint from an unquantized one (round-to-nearest, the layout
// GPTQ/AutoGPTQ/transformers write; or with --format compressed-tensors the same weights in the
// pack-quantized layout llm-compressor writes), plus optionally the fp32 checkpoint of its exact
// dequantized weights.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/json_out.h"
#include "cli/verbs.h"
#include "runtime/checkpoint/quantize_checkpoint.h"

namespace spk::cli {
namespace {

struct QuantizeFlags {
  std::string in, out, dequantized_out, format = "gptq";
  int group_size = 128;
  bool desc_act = false, asym = false;
};

int run_quantize(const QuantizeFlags& f, const Context& ctx) {
  rt::QuantizeOptions o;
  o.in_dir = f.in, o.out_dir = f.out, o.dequantized_out = f.dequantized_out;
  o.group_size = f.group_size, o.desc_act = f.desc_act, o.sym = !f.asym, o.format = f.format;
  auto r = rt::quantize_checkpoint(o);
  if (!r.ok()) {
    print_error("dev quantize", r.error().what());
    return kExitFailed;
  }
  if (ctx.global.json) {
    nlohmann::ordered_json j = {{"out", f.out},
                                {"format", f.format},
                                {"group_size", f.group_size},
                                {"sym", !f.asym},
                                {"desc_act", f.desc_act},
                                {"quantized", r->quantized},
                                {"dense", r->dense},
                                {"bytes_in", r->bytes_in},
                                {"bytes_out", r->bytes_out},
                                {"dequantized_out", f.dequantized_out}};
    std::cout << json_text(j) << "\n";
  } else {
    std::printf(
        "wrote %s: %s 4-bit group %d%s%s, %zu linear modules quantized, %zu tensors kept, %.1f MB -> %.1f "
        "MB\n",
        f.out.c_str(), f.format.c_str(), f.group_size, f.asym ? " asym" : " sym",
        f.desc_act ? " desc_act" : "", r->quantized, r->dense, static_cast<double>(r->bytes_in) / 1e6,
        static_cast<double>(r->bytes_out) / 1e6);
    if (!f.dequantized_out.empty())
      std::printf("wrote %s: the dequantized weights in fp32\n", f.dequantized_out.c_str());
  }
  return kExitOk;
}

}  // namespace

void setup_dev_quantize(CLI::App& app, Context& ctx) {
  CLI::App* dev = app.get_subcommand("dev");
  auto f = std::make_shared<QuantizeFlags>();
  auto* s = dev->add_subcommand("quantize",
                                "write a quantized checkpoint from an unquantized one (round-to-nearest)");
  s->add_option("--in", f->in, "unquantized HF checkpoint directory (bf16/f16/f32)")->required();
  s->add_option("--out", f->out, "output checkpoint directory")->required();
  s->add_option("--format", f->format,
                "gptq (default) or compressed-tensors (pack-quantized W4A16; --desc-act: actorder group)")
      ->check(CLI::IsMember({"gptq", "compressed-tensors"}));
  s->add_option("--group-size", f->group_size, "input columns per scale group (-1: one group per row)");
  s->add_flag("--desc-act", f->desc_act, "act order: write a g_idx that permutes the groups");
  s->add_flag("--asym", f->asym, "min/max zero points instead of GPTQ's symmetric zero 8");
  s->add_option("--dequantized-out", f->dequantized_out,
                "also write the fp32 checkpoint whose linear weights are exactly the dequantized values");
  s->callback([f, &ctx] { ctx.exit_code = run_quantize(*f, ctx); });
}

}  // namespace spk::cli
