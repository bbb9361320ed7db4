// Deterministic test doubles for the serving layer: a byte tokenizer, a one-line chat template and a
// Model whose next-token logits are a hash of the whole context READ BACK FROM ITS PAGED KV POOL.
// Wrong block tables, positions or ctx_len therefore change the output, so batching-equals-single and
// preemption tests really check the KV bookkeeping.
#pragma once

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "runtime/chat/chat_template.h"
#include "runtime/model/model.h"
#include "runtime/serve/engine.h"
#include "runtime/tokenizer/tokenizer.h"

namespace spk::rt::testing {

// ids 0..255 = bytes, 256 = <bos>, 257 = <eos>.
class ByteTokenizer : public Tokenizer {
 public:
  static constexpr int32_t kBos = 256, kEos = 257;
  std::vector<int32_t> encode(std::string_view text, bool add_special) const override {
    std::vector<int32_t> ids;
    if (add_special) ids.push_back(kBos);
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids, bool skip_special) const override {
    std::string s;
    for (int32_t i : ids) {
      if (i < 256)
        s.push_back(static_cast<char>(i));
      else if (!skip_special)
        s += i == kBos ? "<bos>" : "<eos>";
    }
    return s;
  }
  int32_t token_to_id(std::string_view t) const override {
    if (t == "<bos>") return kBos;
    if (t == "<eos>") return kEos;
    return t.size() == 1 ? static_cast<unsigned char>(t[0]) : -1;
  }
  std::string id_to_token(int32_t id) const override { return decode({id}, false); }
  size_t vocab_size() const override { return 258; }
  bool is_special(int32_t id) const override { return id >= 256; }
};

// "<role>: <content>\n" per message, then "assistant:" when add_generation_prompt; a "[think]" marker
// when chat_template_kwargs.enable_thinking is true.
class LineTemplate : public ChatTemplate {
 public:
  Result<std::string> render(const nlohmann::json& ctx) const override {
    std::string s;
    if (ctx.value("enable_thinking", false)) s += "[think]";
    for (const auto& m : ctx["messages"])
      s += m["role"].get<std::string>() + ": " + m.value("content", "") + "\n";
    if (ctx.value("add_generation_prompt", false)) s += "assistant:";
    return s;
  }
  Result<std::string> render(const nlohmann::ordered_json& ctx) const override {
    return render(nlohmann::json::parse(ctx.dump()));
  }
};

inline ChatConfig line_chat_config() {
  return ChatConfig{std::make_shared<LineTemplate>(), "<bos>", "<eos>", "", {}};
}

// Greedy output: printable ASCII chosen by a hash of the context; never eos unless eos_every > 0.
class HashModel : public Model {
 public:
  explicit HashModel(int step_delay_ms = 0) : delay_ms_(step_delay_ms) {
    cfg_.vocab_size = 258;
    cfg_.max_position_embeddings = 1 << 20;
    cfg_.eos_token_ids = {ByteTokenizer::kEos};
  }
  const ModelConfig& config() const override { return cfg_; }
  uint64_t weight_bytes() const override { return 1 << 20; }
  uint64_t kv_bytes_per_token() const override { return 1024; }
  uint64_t activation_bytes(const StepLimits& l) const override {
    return 4096ull * static_cast<uint64_t>(l.max_tokens);
  }
  Status allocate_kv(int num_blocks, int block_size) override {
    nb_ = num_blocks;
    bs_ = block_size;
    kv_.assign(static_cast<size_t>(num_blocks) * block_size, -1);
    return {};
  }
  int block_size() const override { return bs_; }
  int num_blocks() const override { return nb_; }

  Status forward(const StepBatch& b, std::vector<float>& logits) override {
    ++steps;
    max_batch_seqs = std::max<int>(max_batch_seqs, static_cast<int>(b.seqs.size()));
    batch_sizes.push_back(static_cast<int>(b.seqs.size()));  // engine thread only; read after stop()
    if (delay_ms_) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
    // 1. write every new token into its slot
    for (const auto& s : b.seqs)
      for (int i = 0; i < s.q_len; ++i) {
        int pos = b.positions[static_cast<size_t>(s.q_start + i)];
        if (pos != s.ctx_len - s.q_len + i) return make_error("fake model: bad position");
        slot(s, pos) = b.tokens[static_cast<size_t>(s.q_start + i)];
      }
    // 2. logits for the requested rows: hash of context [0, pos] read back from the pool
    logits.assign(b.logit_rows.size() * 258, 0.0f);
    for (size_t r = 0; r < b.logit_rows.size(); ++r) {
      int row = b.logit_rows[r];
      const SeqSlice* s = nullptr;
      for (const auto& c : b.seqs)
        if (row >= c.q_start && row < c.q_start + c.q_len) s = &c;
      if (!s) return make_error("fake model: logit row outside the batch");
      int last = s->ctx_len - s->q_len + (row - s->q_start);
      uint64_t h = 1469598103934665603ull;
      for (int p = 0; p <= last; ++p) {
        int32_t t = slot(*s, p);
        if (t < 0) return make_error("fake model: read an unwritten KV slot");
        h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ull;
      }
      float* lg = logits.data() + r * 258;
      for (int v = 0; v < 258; ++v) lg[v] = static_cast<float>((h >> (v % 48)) & 7) * 0.1f;
      lg[32 + static_cast<int>(h % 95)] = 5.0f;  // the greedy choice, printable ASCII
      lg[ByteTokenizer::kEos] = -10.0f;
    }
    return {};
  }

  std::atomic<int> steps{0};
  std::atomic<int> max_batch_seqs{0};
  std::vector<int> batch_sizes;  // sequences in each forward(), in order

 private:
  int32_t& slot(const SeqSlice& s, int pos) {
    int32_t blk = s.block_table.at(static_cast<size_t>(pos / bs_));
    return kv_.at(static_cast<size_t>(blk) * bs_ + pos % bs_);
  }
  ModelConfig cfg_;
  int delay_ms_;
  int nb_ = 0, bs_ = 16;
  std::vector<int32_t> kv_;
};

// What a sequence's channel ended with (tokens, finish, counts, error), or "timeout" after 20 s.
struct Drained {
  std::vector<int32_t> tokens;
  FinishReason finish = FinishReason::none;
  int num_generated = 0;
  int cached = -1;
  std::string error;
};

inline Drained drain(SeqChannel& ch) {
  Drained r;
  SeqUpdate u;
  while (!u.done) {
    if (!ch.take(u, std::chrono::seconds(20))) {
      r.error = "timeout";
      return r;
    }
  }
  r.tokens = u.tokens;
  r.finish = u.finish;
  r.num_generated = u.num_generated;
  r.cached = u.cached_tokens;
  r.error = u.error;
  return r;
}

}  // namespace spk::rt::testing
