// A request the connection front (http_front.h) already holds in full, replayed to cpp-httplib's parser
// on a handler thread; the answer goes straight to the socket (non-blocking: each wait for room is
// bounded by the write timeout).
#pragma once

#include <httplib.h>

#include <string>

namespace spk::rt {

class BufferedStream : public httplib::Stream {
 public:
  BufferedStream(int fd, const std::string& request, int write_timeout_ms)
      : fd_(fd), in_(request), timeout_ms_(write_timeout_ms) {}
  bool is_readable() const override { return pos_ < in_.size(); }
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return fd_; }
  [[nodiscard]] bool failed() const { return failed_; }
  [[nodiscard]] bool consumed() const { return pos_ == in_.size(); }

 private:
  int fd_;
  const std::string& in_;
  size_t pos_ = 0;
  int timeout_ms_;
  bool failed_ = false;
};

}  // namespace spk::rt
