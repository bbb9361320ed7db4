// Runs the real sparkctl binary from a test and captures its exit code and output. The command line is
// written by the test itself (never from untrusted input), so going through the shell is fine here.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace spk::test {

struct Run {
  int code;  // exit status, -1 when killed by a signal
  std::string out;
};

// `env` is prepended (e.g. "SPARKCTL_STATE_DIR=/tmp/x "); stderr is merged into `out` unless
// merge_stderr is false (then dropped); stdin is /dev/null.
inline Run run_sparkctl(const std::string& args, const std::string& env = "", bool merge_stderr = true) {
  const std::string cmd =
      env + SPARKCTL_BINARY + " " + args + (merge_stderr ? " 2>&1" : " 2>/dev/null") + " </dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, "popen failed: " + cmd};
  std::string out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int st = ::pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

}  // namespace spk::test
