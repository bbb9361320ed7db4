// A tensor-parallel process group: rendezvous, the communicator, and the control channel over which
// rank 0 drives the other ranks step by step.
//
// Rendezvous: rank 0 hosts a small TCP store on `master` (its fabric address); every connection
// must present `token` first (wrong token: refused, named in both logs). Workers may start first and
// retry until `join_timeout`; on timeout the error names the ranks that never arrived. Through the
// store the ranks exchange what the communicator needs (Gloo pair addresses / the NCCL unique id).
//
// Control channel: one TCP connection from each worker to rank 0. Rank 0 broadcasts one message per
// step (the step plan; bytes are opaque here); workers receive them in order. Both sides send
// heartbeats; a peer whose connection closes or whose heartbeats stop for `peer_timeout` is lost,
// and `on_lost` is called once (from a reader thread) with the lost rank and why. Workers watch only
// rank 0 and rank 0 watches every worker, so a lost worker reaches the other workers as rank 0's exit.
// The caller (cli/) decides to exit; nothing below cli/ exits the process.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "kernels/base/status.h"
#include "runtime/dist/communicator.h"

namespace spk::rt::dist {

struct GroupOptions {
  int rank = 0;
  int world = 1;
  std::string master;  // "host:port" of rank 0's store; rank 0 binds it
  std::string token;   // shared secret (env SPARKCTL_RDZV_TOKEN in the runtime)
  // "gloo" (CPU backend) | "nccl" (CUDA backend, when built: nccl_built()) | "gloo-host" (CUDA backend
  // over Gloo through pinned host copies: several ranks on one GPU, or no NCCL path between hosts)
  std::string comm = "gloo";
  int cuda_device = 0;  // nccl: the device this rank drives
  std::chrono::milliseconds join_timeout{60000};
  std::chrono::milliseconds peer_timeout{5000};
  // Bounds every collective (a peer that stops mid-step without the control channel noticing).
  std::chrono::milliseconds collective_timeout{300000};
  // Called at most once, from a group thread; must not call close() (it joins that thread).
  std::function<void(int lost_rank, const std::string& why)> on_lost;
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  [[nodiscard]] virtual int rank() const = 0;
  [[nodiscard]] virtual int world() const = 0;
  [[nodiscard]] virtual Communicator& comm() = 0;

  // Rank 0 only: sends `msg` to every other rank (in order, reliably, or an error naming the rank).
  virtual Status broadcast(const std::string& msg) = 0;
  // Ranks != 0: the next message from rank 0; after the last one an error that says rank 0 closed
  // the group, or names the lost rank.
  virtual Result<std::string> receive() = 0;
  // Ranks != 0: true once rank 0 closed the group on purpose (receive() then fails after the last
  // message; that is the normal end, not a loss).
  [[nodiscard]] virtual bool closed_by_rank0() const = 0;
  // Leaves. Rank 0 closing ends the group for the workers (no loss); a worker closing is a loss for
  // rank 0 (the group cannot go on without it).
  virtual void close() = 0;
};

// world == 1 needs no master and gives the single communicator.
Result<std::unique_ptr<ProcessGroup>> join_group(const GroupOptions& opts);

}  // namespace spk::rt::dist
