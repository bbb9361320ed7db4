// Finding out that an HTTP client hung up while its non-streaming request is still generating.
// cpp-httplib 0.11 (Debian's) hands a handler no socket and offers no disconnect hook, and nothing is
// written to a non-streaming client before the answer, so a write failure cannot tell either. The
// handler does know both ends of its connection (local/remote address and port); the socket with
// exactly those ends is the connection's, and it stays open (owned by httplib) while the handler runs.
// A peer that closed its side shows as POLLRDHUP on that socket.
//
// Limit: a client that half-closes (shutdown(SHUT_WR)) after its request but still reads looks gone;
// HTTP clients (curl, the openai SDK, browsers) do not do that.
#pragma once

#include <string>

namespace spk::rt {

// The fd of this process's connected TCP socket with these ends, or -1 when none matches.
// Cost: one getsockname/getpeername per open fd (a scan of /proc/self/fd), once per request.
int find_connection_fd(const std::string& local_addr, int local_port, const std::string& remote_addr,
                       int remote_port);

// True when the peer of `fd` has closed its side or the connection failed. Never blocks.
bool peer_hung_up(int fd);

}  // namespace spk::rt
