// Framing of the push protocol over TCP (internal to staging/push). Every message is a fixed 32-byte
// header, then `len` payload bytes: a JSON object for control messages, raw file bytes for a block.
// Header fields are host byte order: head and workers are little-endian (x86-64, aarch64).
//
// Session (one control connection, then N data connections, all opening with hello{token, role},
// answered welcome{} or error{}):
//   sender -> manifest{block_bytes, quick_check, files:[{path,size,mtime_ns}]}
//   receiver -> have{bytes_hashed, files:[{have:[xxh64...], same}]}  (hashes of the partial or final
//               file it holds; same = quick check passed: final file of equal size and mtime, not read)
//   sender -> plan{files:[{want:[xxh64...], send:[block...]}]}   (want empty = cold: hash per block)
//   receiver -> ready{}  or error{message, fix}        (disk preflight happens here, before any byte)
//   data conns: block{file, block, hash, payload}..., end -> receiver answers ack{}
//   sender -> done{}; receiver -> resend{files:[{file, blocks}]} (repair) or report{files, bytes}
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "kernels/base/status.h"

namespace spk::staging::wire {

enum class Type : std::uint8_t { json = 1, block = 2, end = 3 };

struct Header {
  std::uint8_t type = 0;
  std::uint8_t pad[3] = {0, 0, 0};
  std::uint32_t file = 0;   // block: index into the manifest
  std::uint64_t block = 0;  // block: index in the file
  std::uint64_t hash = 0;   // block: xxh64 of the payload as the sender read it
  std::uint64_t len = 0;    // payload bytes
};
static_assert(sizeof(Header) == 32);

// A connected socket that closes itself. Errors name `peer` ("127.0.0.1:29700").
class Conn {
 public:
  Conn() = default;
  Conn(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}
  ~Conn();
  Conn(Conn&& o) noexcept : fd_(o.fd_), peer_(std::move(o.peer_)) { o.fd_ = -1; }
  Conn& operator=(Conn&& o) noexcept;
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  [[nodiscard]] int fd() const { return fd_; }
  [[nodiscard]] const std::string& peer() const { return peer_; }
  void set_timeout(int seconds);  // SO_RCVTIMEO/SO_SNDTIMEO: a silent peer becomes an error

  Status send_all(const void* p, std::size_t n);
  Status recv_all(void* p, std::size_t n);
  Status send_json(const nlohmann::json& j);
  Status send_block(std::uint32_t file, std::uint64_t block, std::uint64_t hash, const void* p,
                    std::size_t n);
  Status send_end();
  Result<Header> recv_header();
  // One json message of type `expect` (nullptr = any); an {"error":...} message from the peer becomes
  // an Error carrying its text.
  Result<nlohmann::json> recv_json(const char* expect);

 private:
  int fd_ = -1;
  std::string peer_;
};

// Listening socket on bind:port (port 0 = any); `port` is updated to the bound port.
Result<int> listen_tcp(const std::string& bind, int& port);
// Waits up to `timeout` for a connection on `lfd`.
Result<Conn> accept_tcp(int lfd, std::chrono::milliseconds timeout);
// Connects, retrying refused connections until `timeout` (the receiver may still be starting) or until
// `give_up` (may be empty) answers true between two tries.
Result<Conn> connect_tcp(const std::string& host, int port, std::chrono::milliseconds timeout,
                         const std::function<bool()>& give_up = {});

// {"error": message, "fix": fix}
nlohmann::json error_json(const Error& e);

}  // namespace spk::staging::wire
