#include "runtime/serve/tp_step.h"

#include <spdlog/spdlog.h>

#include <cstring>

namespace spk::rt {
namespace {

void put(std::string& s, int32_t v) {
  char b[4];
  std::memcpy(b, &v, 4);
  s.append(b, 4);
}
void put_vec(std::string& s, const std::vector<int32_t>& v) {
  put(s, static_cast<int32_t>(v.size()));
  s.append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

struct Reader {
  const std::string& s;
  size_t at = 1;  // after the type byte
  bool get(int32_t& v) {
    if (s.size() < at + 4) return false;
    std::memcpy(&v, s.data() + at, 4);
    at += 4;
    return true;
  }
  bool get_vec(std::vector<int32_t>& v) {
    int32_t n = 0;
    if (!get(n) || n < 0 || s.size() - at < static_cast<size_t>(n) * 4) return false;
    v.resize(static_cast<size_t>(n));
    std::memcpy(v.data(), s.data() + at, static_cast<size_t>(n) * 4);
    at += static_cast<size_t>(n) * 4;
    return true;
  }
};

Error bad(const std::string& what) {
  return make_error("malformed step plan from rank 0: " + what, "run the same sparkctl build on every rank");
}

}  // namespace

std::string encode_step(const StepBatch& b) {
  std::string s = "S";
  put_vec(s, b.tokens);
  put_vec(s, b.positions);
  put(s, static_cast<int32_t>(b.seqs.size()));
  for (const SeqSlice& q : b.seqs) {
    put(s, q.q_start);
    put(s, q.q_len);
    put(s, q.ctx_len);
    put_vec(s, q.block_table);
  }
  put_vec(s, b.logit_rows);
  return s;
}

Result<StepBatch> decode_step(const std::string& msg) {
  if (msg.empty() || msg[0] != 'S') return bad("not a step message");
  Reader r{msg};
  StepBatch b;
  int32_t n = 0;
  if (!r.get_vec(b.tokens) || !r.get_vec(b.positions) || !r.get(n) || n < 0) return bad("truncated header");
  for (int32_t i = 0; i < n; ++i) {
    SeqSlice q;
    if (!r.get(q.q_start) || !r.get(q.q_len) || !r.get(q.ctx_len) || !r.get_vec(q.block_table))
      return bad("truncated sequence " + std::to_string(i));
    b.seqs.push_back(std::move(q));
  }
  if (!r.get_vec(b.logit_rows) || r.at != msg.size()) return bad("bad logit rows or trailing bytes");
  return b;
}

Status LeaderModel::allocate_kv(int num_blocks, int block_size) {
  std::string s = "A";
  put(s, num_blocks);
  put(s, block_size);
  SPK_TRY(fatal(g_.broadcast(s)));
  return fatal(m_.allocate_kv(num_blocks, block_size));
}

Status LeaderModel::forward(const StepBatch& batch, std::vector<float>& logits) {
  SPK_TRY(fatal(g_.broadcast(encode_step(batch))));
  return fatal(m_.forward(batch, logits));
}

Status LeaderModel::fatal(Status st) {
  if (!st.ok() && on_fatal_) on_fatal_(st.error());
  return st;
}

Status follow_leader(Model& m, dist::ProcessGroup& g, int max_blocks) {
  std::vector<float> logits;
  uint64_t steps = 0;
  for (;;) {
    auto next = g.receive();
    if (!next.ok() && g.closed_by_rank0()) {
      spdlog::info("rank {}: rank 0 closed the group after {} steps", g.rank(), steps);
      return ok_status();
    }
    if (!next.ok()) return next.error();
    const std::string& msg = *next;
    if (!msg.empty() && msg[0] == 'A') {
      Reader r{msg};
      int32_t blocks = 0, bs = 0;
      if (!r.get(blocks) || !r.get(bs) || r.at != msg.size()) return bad("bad allocate message");
      if (blocks > max_blocks)
        return make_error("rank 0 plans a KV pool of " + std::to_string(blocks) + " blocks, rank " +
                              std::to_string(g.rank()) + "'s memory allows " + std::to_string(max_blocks),
                          "give every rank the same --device-memory-gib / --gpu-memory-utilization");
      SPK_TRY(m.allocate_kv(blocks, bs));
      m.seal_memory();  // as rank 0 does: nothing allocates after the pool
      continue;
    }
    SPK_ASSIGN(StepBatch b, decode_step(msg));
    if (Status st = m.forward(b, logits); !st.ok()) {
      if (g.closed_by_rank0()) {  // a peer left at shutdown mid-teardown: the group is ending anyway
        spdlog::info("rank {}: rank 0 closed the group during step {}", g.rank(), steps);
        return ok_status();
      }
      return make_error("rank " + std::to_string(g.rank()) + ": step " + std::to_string(steps) +
                            " failed: " + st.error().message,
                        st.error().fix);
    }
    ++steps;
  }
}

}  // namespace spk::rt
