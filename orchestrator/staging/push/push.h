// Worker push of a staged model tree (issue #8, push half). The head calls push_tree() once per
// worker; the worker runs serve_receive() inside the `sparkctl node stage-recv` verb.
//
// Protocol contract (wire.h has the message sequence; block_plan.h the pure core):
//  - quick check (rsync's default): a final file at the destination whose size and mtime (nanoseconds)
//    equal the source's is skipped without being read on either end; every landed file gets the source's
//    mtime (futimens before the rename; in place for a file whose hashes proved it equal). hash_all turns
//    the quick check off: then a corruption that kept size and mtime is found and repaired too;
//  - files are split into fixed blocks (default 4 MiB); the receiver reports the xxhash64 of each block
//    of <name>.sparkctl-partial when one exists, else of the final file; the sender sends only the
//    blocks that differ (a cold file: all, hashed while read, so the source is read once);
//  - blocks spread over `streams` parallel TCP connections, each authenticated by `token`;
//  - the receiver hashes every received block and refuses it unless it matches the sender's hash; a
//    refused or missing block is asked for again (repair rounds); kept blocks matched by hash. Then
//    ftruncate, fsync, rename over the final name, fsync the directory: no partial file is ever visible.
//    A file is finished as soon as its last block lands, while the others still arrive (receiver.cpp);
//  - disk preflight (statvfs, or max_bytes) before the first byte: the error names bytes needed, free,
//    and the path. ENOSPC while writing removes this session's partial files and names the path;
//  - the receiver writes only under `root`: absolute paths, `..` and symlink escapes are refused;
//  - one receiver per root at a time (flock on <root>.stage-recv.lock); a receiver stops as soon as its
//    head goes away (head_fd hang-up, or the control connection's end), so `stage` re-run right after a
//    killed one finds the port free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/base/status.h"

namespace spk::staging {

inline constexpr std::uint64_t kDefaultBlockBytes = 4ull << 20;  // 4 MiB: 1 GiB shard = 256 hashes

struct PushProgress {
  std::uint64_t bytes_sent = 0;   // payload bytes on the wire so far
  std::uint64_t bytes_total = 0;  // payload bytes this push will send (after the delta plan)
  double rate_bytes_per_s = 0;
  double eta_s = 0;
};

struct PushOptions {
  std::string source_dir;          // local root of the tree
  std::vector<std::string> files;  // relative paths under source_dir; empty = every regular file
  std::string host;                // worker fabric address, e.g. "10.0.0.2"
  int port = 0;                    // port the worker's stage-recv listens on
  std::string token;               // shared secret handed to stage-recv in its JSON input
  int streams = 4;                 // parallel TCP streams
  std::uint64_t block_bytes = kDefaultBlockBytes;
  std::function<void(const PushProgress&)> progress;  // called at most ~10x/s; may be empty
  int connect_timeout_s = 30;  // stage-recv may still be starting: refused connects are retried
  // Polled every 100 ms; true = stage-recv has failed: the push stops at once (no connect retries, no
  // waiting on a silent socket). May be empty.
  std::function<bool()> receiver_gone;
  int io_timeout_s = 60;  // a receiver silent this long fails the push (retryable)
  std::function<void(std::uint64_t bytes_sent)> after_block;  // fault injection (tests); may be empty
  // true: hash every block on both ends even where size and mtime match (`stage --hash`); false: such
  // files are skipped unread (a corruption that kept both is then not seen).
  bool hash_all = false;
};

struct PushReport {
  std::uint64_t files = 0;
  std::uint64_t bytes_total = 0;  // size of the whole tree
  std::uint64_t bytes_sent = 0;   // payload actually sent (delta)
  std::uint64_t blocks_sent = 0;
  std::uint64_t blocks_skipped = 0;       // already identical at the destination
  std::uint64_t files_skipped_quick = 0;  // size and mtime matched: skipped, read on neither end
  std::uint64_t bytes_hashed = 0;         // source bytes the head read to find the differing blocks
  std::uint64_t worker_bytes_hashed = 0;  // destination bytes the worker read for the same
  double seconds = 0;
};

Result<PushReport> push_tree(const PushOptions& opt);

struct ReceiveOptions {
  std::string root;  // the node's cache dir; nothing is written outside it
  std::string bind = "0.0.0.0";
  int port = 0;
  std::string token;
  std::uint64_t max_bytes = 0;  // 0 = statvfs free space; else a cap (tests simulate a full disk)
  int idle_timeout_s = 60;      // gives up when the sender stays silent this long
  bool direct_io = true;  // O_DIRECT block writes where the filesystem supports them; false = page cache
  std::function<void(int port)> on_listening;  // called once with the bound port (port 0 = any)
  // An fd whose hang-up means the head went away (the verb passes its stdout when that is a pipe or a
  // socket: a killed head, or its dropped ssh session, closes the other end). The session then stops at
  // once: listener, control and data connections shut down, partial files kept for the next run.
  // -1 = none.
  int head_fd = -1;
  // Another stage-recv serving the same root (e.g. one whose head was just killed) is waited for this
  // long (it stops within ~0.1 s of its head going away) before this one gives up naming its pid.
  int takeover_wait_s = 10;
};

struct ReceiveReport {
  std::vector<std::string> files;     // relative paths completed and renamed into place
  std::uint64_t bytes_received = 0;   // block payload accepted (hash matched) and written
  std::uint64_t bytes_direct = 0;     // of those, written O_DIRECT (the rest: page cache + writeback)
  std::uint64_t blocks_rejected = 0;  // payload whose hash did not match: asked for again
};

Result<ReceiveReport> serve_receive(const ReceiveOptions& opt);

}  // namespace spk::staging
