#include "orchestrator/node/preflight.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "orchestrator/node/host_probe.h"
#include "orchestrator/node/node_input.h"
#include "orchestrator/node/shm_segments.h"
#include "orchestrator/staging/verify.h"
#include "orchestrator/transport/file_hash.h"

namespace spk {

namespace {

using nlohmann::json;

std::string gib(uint64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f GiB", static_cast<double>(b) / (1024.0 * 1024 * 1024));
  return buf;
}

struct Report {
  json checks = json::array();
  bool ok = true;
  void add(const std::string& name, const std::string& status, const std::string& detail,
           const std::string& fix = {}) {
    checks.push_back({{"name", name}, {"status", status}, {"detail", detail}, {"fix", fix}});
    if (status == "fail") ok = false;
  }
};

}  // namespace

Status drop_page_cache(const NodeEnv& env, const std::vector<RuntimeProc>& runtimes) {
  if (!runtimes.empty())
    return make_error("refusing to drop the page cache: " + std::to_string(runtimes.size()) +
                          " sparkctl runtime process(es) alive (pid " + std::to_string(runtimes[0].pid) +
                          "), maybe loading weights",
                      "drop before launch: stop them first (sparkctl node clean / --clean)");
  if (::geteuid() != 0)
    return make_error("cannot drop the page cache as uid " + std::to_string(::geteuid()),
                      "run the node verbs as root or skip the drop");
  ::sync();
  int fd = ::open(env.drop_caches_path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0 || ::write(fd, "3\n", 2) != 2) {
    int e = errno;
    if (fd >= 0) ::close(fd);
    return make_error("cannot write " + env.drop_caches_path + ": " + std::strerror(e),
                      "a container needs /proc/sys writable (privileged) to drop caches");
  }
  ::close(fd);
  return ok_status();
}

VerbOutput run_preflight(const json& in, const NodeEnv& env) {
  namespace ni = node_input;
  auto bad = [](const Error& e) {
    return VerbOutput{kNodeBadInput, json{{"ok", false}, {"error", e.message}, {"fix", e.fix}}};
  };
  if (auto s = ni::only_keys(
          in,
          {"disk_path", "need_disk_bytes", "min_mem_available_bytes", "ports", "drop_caches",
           "expect_version", "expect_binary_xxh3", "shm_dir", "shm_prefixes", "model_dir", "model_required"},
          "preflight");
      !s)
    return bad(s.error());
  auto disk_path = ni::str(in, "disk_path", env.node_root);
  auto need_disk = ni::u64(in, "need_disk_bytes", 0);
  auto min_mem = ni::u64(in, "min_mem_available_bytes", 0);
  auto ports = ni::ports(in, "ports");
  auto drop = ni::boolean(in, "drop_caches", false);
  auto want_version = ni::str(in, "expect_version", "");
  auto want_hash = ni::str(in, "expect_binary_xxh3", "");
  auto shm_dir = ni::str(in, "shm_dir", "/dev/shm");
  auto prefixes = ni::strings(in, "shm_prefixes", default_shm_prefixes());
  for (const Error* e : {disk_path ? nullptr : &disk_path.error(), need_disk ? nullptr : &need_disk.error(),
                         min_mem ? nullptr : &min_mem.error(), ports ? nullptr : &ports.error(),
                         drop ? nullptr : &drop.error(), want_version ? nullptr : &want_version.error(),
                         want_hash ? nullptr : &want_hash.error(), shm_dir ? nullptr : &shm_dir.error(),
                         prefixes ? nullptr : &prefixes.error()})
    if (e) return bad(*e);

  Report r;
  json facts = json::object();

  // binary version + hash
  auto hash = file_xxh3_hex(env.binary);
  std::string h = hash.ok() ? *hash : "?";
  facts["version"] = env.version;
  facts["binary_xxh3"] = h;
  if (!want_version->empty() && *want_version != env.version)
    r.add("binary", "fail", "sparkctl " + env.version + ", head runs " + *want_version,
          "push the head's binary (it is pushed when the hash differs)");
  else if (!want_hash->empty() && *want_hash != h)
    r.add("binary", "fail", "binary hash " + h + ", head's is " + *want_hash, "push the head's binary");
  else
    r.add("binary", "ok", "sparkctl " + env.version + " (" + h + ")");

  // disk free for the model
  if (auto d = disk_free_bytes(*disk_path)) {
    facts["disk_free_bytes"] = *d;
    if (*d < *need_disk)
      r.add("disk", "fail", *disk_path + ": " + gib(*d) + " free, need " + gib(*need_disk),
            "free space on the node or point the model cache elsewhere");
    else
      r.add("disk", "ok",
            *disk_path + ": " + gib(*d) + " free" + (*need_disk ? ", need " + gib(*need_disk) : ""));
  } else {
    r.add("disk", "fail", d.error().message, d.error().fix);
  }

  // memory: MemAvailable, not MemFree (page cache is reclaimable)
  if (auto m = read_meminfo()) {
    facts["mem_available_bytes"] = m->available_bytes;
    facts["mem_total_bytes"] = m->total_bytes;
    if (m->available_bytes < *min_mem)
      r.add("memory", "fail", "MemAvailable " + gib(m->available_bytes) + ", need " + gib(*min_mem),
            "stop other workloads on the node or lower the memory target");
    else
      r.add("memory", "ok", "MemAvailable " + gib(m->available_bytes) + " of " + gib(m->total_bytes));
  } else {
    r.add("memory", "fail", m.error().message, m.error().fix);
  }

  // stale runtime processes
  auto procs = find_runtime_processes(env.root_env);
  json plist = json::array();
  for (const auto& p : procs) plist.push_back({{"pid", p.pid}, {"cmdline", p.cmdline}});
  facts["runtime_processes"] = plist;
  if (procs.empty())
    r.add("stale_processes", "ok", "no sparkctl runtime running");
  else
    r.add("stale_processes", "fail",
          std::to_string(procs.size()) + " sparkctl runtime process(es): pid " +
              std::to_string(procs[0].pid) + " '" + procs[0].cmdline + "'",
          "stop them: sparkctl node clean (or pass --clean)");

  // leaked shared memory
  uint64_t leaked_bytes = 0;
  json leaked = json::array();
  for (const auto& s : find_shm_segments(*shm_dir, *prefixes))
    if (!s.in_use) leaked.push_back(s.path), leaked_bytes += s.bytes;
  facts["leaked_shm"] = leaked;
  if (leaked.empty())
    r.add("shm", "ok", "no leaked segments in " + *shm_dir);
  else
    r.add("shm", "fail",
          std::to_string(leaked.size()) + " leaked segment(s) in " + *shm_dir + ", " + gib(leaked_bytes) +
              ": " + leaked[0].get<std::string>(),
          "remove them: sparkctl node clean (or pass --clean)");

  // ports
  std::string busy;
  for (int p : *ports)
    if (!tcp_port_free(p)) busy += (busy.empty() ? "" : ", ") + std::to_string(p);
  if (ports->empty())
    r.add("ports", "skip", "no ports asked for");
  else if (busy.empty())
    r.add("ports", "ok", std::to_string(ports->size()) + " port(s) free");
  else
    r.add("ports", "fail", "in use: " + busy, "stop what listens there or set other ports in the recipe");

  // page cache: dropped before launch, never during load
  if (!*drop)
    r.add("page_cache", "skip", "drop not requested");
  else if (auto s = drop_page_cache(env, procs); s)
    r.add("page_cache", "ok", "dropped (sync; 3 > " + env.drop_caches_path + ")");
  else
    r.add("page_cache", "fail", s.error().message, s.error().fix);

  // weights: complete, not merely present (orchestrator/staging/verify.h)
  if (auto md = in.find("model_dir"); md == in.end() || !md->is_string()) {
    r.add("weights", "skip", "no model dir asked for");
  } else if (const std::string dir = *md; ::access(dir.c_str(), F_OK) != 0) {
    if (in.value("model_required", false))
      r.add("weights", "fail", dir + " is absent", "stage it first: sparkctl stage LANE");
    else
      r.add("weights", "skip", dir + " is absent: up synthesizes it next");
  } else if (auto v = staging::verify_model_dir(dir); v.complete()) {
    r.add("weights", "ok", std::to_string(v.files) + " file(s), " + gib(v.bytes) + " complete in " + dir);
  } else {
    r.add("weights", "fail", dir + ": " + v.problems[0], "stage it again: sparkctl stage LANE");
  }
  r.add("fabric", "skip",
        "checked after preflight by up's fabric gate on multi-node lanes (`sparkctl fabric doctor` here)");

  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return {r.ok ? kNodeOk : kNodeCheckFailed, json{{"ok", r.ok},
                                                  {"hostname", host},
                                                  {"node_root", env.node_root},
                                                  {"checks", r.checks},
                                                  {"facts", facts}}};
}

}  // namespace spk
