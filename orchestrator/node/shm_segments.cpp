#include "orchestrator/node/shm_segments.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "orchestrator/node/runtime_procs.h"

namespace fs = std::filesystem;

namespace spk {

namespace {

// Every path some live process holds open or mapped under `dir`. O(processes x (fds + maps)): a few ms.
std::set<std::string> paths_in_use(const std::string& dir, const std::string& proc_dir) {
  std::set<std::string> used;
  std::error_code ec;
  const std::string prefix = dir + "/";
  for (const auto& e : fs::directory_iterator(proc_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code ec2;
    for (const auto& fd : fs::directory_iterator(e.path() / "fd", ec2)) {
      std::error_code ec3;
      std::string target = fs::read_symlink(fd.path(), ec3).string();
      if (!ec3 && target.compare(0, prefix.size(), prefix) == 0) used.insert(target);
    }
    std::ifstream maps(e.path() / "maps");
    std::string line;
    while (std::getline(maps, line)) {
      auto pos = line.find(prefix);
      if (pos == std::string::npos) continue;
      std::string p = line.substr(pos);
      const std::string deleted = " (deleted)";
      if (p.size() > deleted.size() && p.compare(p.size() - deleted.size(), deleted.size(), deleted) == 0)
        p.resize(p.size() - deleted.size());
      used.insert(p);
    }
  }
  return used;
}

// "sparkctl-<pid>-..." -> pid, else 0.
pid_t embedded_pid(const std::string& name) {
  const std::string p = "sparkctl-";
  if (name.compare(0, p.size(), p) != 0) return 0;
  size_t i = p.size(), j = i;
  while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j]))) ++j;
  if (j == i || j - i > 9 || (j < name.size() && name[j] != '-')) return 0;
  return static_cast<pid_t>(std::stol(name.substr(i, j - i)));
}

}  // namespace

std::vector<ShmSegment> find_shm_segments(const std::string& shm_dir,
                                          const std::vector<std::string>& prefixes,
                                          const std::string& proc_dir) {
  std::vector<ShmSegment> out;
  std::error_code ec;
  const std::string dir = fs::weakly_canonical(shm_dir, ec).string();
  std::set<std::string> used;
  bool scanned = false;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    bool ours = false;
    for (const auto& p : prefixes) ours = ours || name.compare(0, p.size(), p) == 0;
    std::error_code ec2;
    if (!ours || !e.is_regular_file(ec2)) continue;
    if (!scanned) used = paths_in_use(dir, proc_dir), scanned = true;
    ShmSegment s;
    s.path = e.path().string();
    s.bytes = static_cast<uint64_t>(e.file_size(ec2));
    pid_t owner = embedded_pid(name);
    s.in_use = used.count(s.path) > 0 || (owner > 0 && pid_alive(owner));
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> remove_leaked_shm(const std::vector<ShmSegment>& segments) {
  std::vector<std::string> removed;
  for (const auto& s : segments)
    if (!s.in_use && ::unlink(s.path.c_str()) == 0) removed.push_back(s.path);
  return removed;
}

}  // namespace spk
