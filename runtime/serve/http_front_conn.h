// Internal to the connection front (http_front.cpp reads requests, http_front_answer.cpp writes answers
// and runs the handler threads): one connection's state while the front thread owns it.
#pragma once

#include <memory>
#include <string>

#include "runtime/serve/http_front.h"

namespace spk::rt {

struct ConnectionFront::Conn {
  int fd = -1;
  uint64_t serial = 0;
  std::string peer;  // its IP address (peer_ledger.h)
  // draining: answered with Connection: close and shut down for writing; what the client still sends is
  // read and dropped (up to 8 MiB, 1 s; nothing is kept), so that closing does not reset the answer
  // before a client that is still sending its refused body gets to read it.
  enum class Phase { head, body, writing, draining } phase = Phase::head;
  size_t drained = 0;
  Clock::time_point deadline;
  std::string in;      // bytes read and not yet consumed
  size_t scanned = 0;  // head phase: where the search for the blank line resumes
  RequestHead head;
  BodyFraming framing;
  bool body_expected = false;
  std::unique_ptr<ChunkedDecoder> chunked;
  std::string body;
  size_t charged = 0;  // bytes counted against max_buffered_bytes
  std::string out;
  size_t out_off = 0;
  bool close_after_write = false;
};

}  // namespace spk::rt
