// Leaked shared-memory segments. Candidates are the files in the shm directory (default /dev/shm) whose
// name starts with one of our prefixes ("sparkctl-", "nccl-"). A candidate is in use when a live process
// has it open (/proc/*/fd) or mapped (/proc/*/maps), or when its name embeds a live pid
// ("sparkctl-<pid>-..."); otherwise it is leaked: nobody will ever unlink it, and its pages stay resident.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace spk {

struct ShmSegment {
  std::string path;
  uint64_t bytes = 0;
  bool in_use = false;
};

inline const std::vector<std::string>& default_shm_prefixes() {
  static const std::vector<std::string> p{"sparkctl-", "nccl-"};
  return p;
}

std::vector<ShmSegment> find_shm_segments(const std::string& shm_dir = "/dev/shm",
                                          const std::vector<std::string>& prefixes = default_shm_prefixes(),
                                          const std::string& proc_dir = "/proc");

// Unlinks the leaked (not in use) ones among `segments`; returns the paths removed.
std::vector<std::string> remove_leaked_shm(const std::vector<ShmSegment>& segments);

}  // namespace spk
