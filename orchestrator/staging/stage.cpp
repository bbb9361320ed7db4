#include "orchestrator/staging/stage.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <sstream>
#include <thread>

#include "orchestrator/gmu/process_probe.h"
#include "orchestrator/node/node_verbs.h"
#include "orchestrator/staging/hub/hub_download.h"
#include "orchestrator/staging/push/file_io.h"

namespace spk::staging {

namespace {

using nlohmann::json;

// Head copy of a synthetic lane: run the plan's own synth-model command for the head.
Status synth_on_head(const Plan& plan, const Node& head, const StageOptions& opt) {
  for (const auto& st : plan.steps)
    if (st.kind == StepKind::synth_model)
      for (const auto& c : st.commands)
        if (c.node == head.name) {
          std::string log = (opt.log_dir.empty() ? std::string("/tmp") : opt.log_dir) + "/synth-model.log";
          std::error_code ec;
          std::filesystem::create_directories(std::filesystem::path(log).parent_path(), ec);
          return run_logged(c.argv, log);
        }
  return make_error("the plan has no synth-model command for " + head.name, "report this as a bug");
}

std::string fail_text(const NodeAnswer& a) {
  return a.body.value("error", a.body.dump()) +
         (a.body.value("fix", std::string()).empty() ? "" : " (" + a.body.value("fix", std::string()) + ")");
}

VerifyReport verify_on(RemoteExec& exec, const std::string& dir, const std::vector<ManifestEntry>& expect,
                       std::string& error, bool prune = false) {
  json in{{"dir", dir}};
  if (!expect.empty()) in["expect"] = manifest_to_json(expect);
  if (prune && !expect.empty()) in["prune"] = true;
  auto a = call_node(exec, NodeVerb::kStageVerify, in, std::chrono::hours(6));
  if (!a.ok()) {
    error = a.error().what();
    return {};
  }
  if (a->exit_code != kNodeOk && a->exit_code != kNodeCheckFailed) error = "stage-verify: " + fail_text(*a);
  return VerifyReport::from_json(a->body);
}

// Where stage-recv listens: the worker's reach address when it is an IPv4 literal (its fabric IP, or an
// SSH host given as an address). A host name may resolve differently on the worker itself (Debian maps
// a machine's own name to 127.0.1.1), so then it listens on every address; the session token gates it.
std::string recv_bind_address(const Node& w) {
  in_addr a{};
  return ::inet_pton(AF_INET, w.reach_address().c_str(), &a) == 1 ? w.reach_address() : "0.0.0.0";
}

// prune: files only on the worker are removed after the push (the dir is sparkctl's own: synth or hub
// under the cache dir); else (the lane's own model path, which may hold the user's files) they are
// reported and the node is incomplete until someone removes them.
void push_to(const Node& w, const std::string& head_dir, const std::vector<ManifestEntry>& expect,
             const StageOptions& opt, bool prune, NodeStage& out) {
  auto token = random_token();
  if (!token) {
    out.error = token.error().what();
    return;
  }
  auto got = opt.exec_for(w);
  if (!got) {
    out.error = got.error().what();
    return;
  }
  auto exec = std::move(*got);
  json in{{"root", out.dir}, {"token", *token}, {"bind", recv_bind_address(w)}, {"port", opt.port}};
  Result<NodeAnswer> recv = make_error("stage-recv did not run");
  std::atomic<bool> recv_failed{false};
  std::thread t([&] {
    auto a = call_node(*exec, NodeVerb::kStageRecv, in, std::chrono::hours(24));
    const bool failed = !a.ok() || a->exit_code != 0;
    recv = std::move(a);
    recv_failed = failed;
  });
  PushOptions po;
  po.source_dir = head_dir;
  po.host = w.reach_address();
  po.port = opt.port;
  po.token = *token;
  po.streams = opt.streams;
  po.hash_all = opt.hash;
  po.receiver_gone = [&] { return recv_failed.load(); };  // e.g. its port was taken: no 60 s wait
  if (opt.progress) po.progress = [&](const PushProgress& p) { opt.progress(w.name, p); };
  auto rep = push_tree(po);
  t.join();
  if (!recv.ok())
    out.error = recv.error().what();
  else if (recv->exit_code != 0)
    out.error = "stage-recv: " + fail_text(*recv);
  else if (!rep.ok())
    out.error = rep.error().what();
  if (!out.error.empty()) return;
  out.pushed = true;
  out.push = *rep;
  out.verify = verify_on(*exec, out.dir, expect, out.error, prune);
}

}  // namespace

Status fetch_from_hub(const Recipe& r, const Node& head, const std::string& dir) {
  HubOptions ho = hub_options_from_env(head.cache_dir + "/hub");
  SPK_ASSIGN(HubSnapshot snap, hub_download(r.model.id, r.model.revision, ho));
  // The lane's model dir names the snapshot: a symlink swapped in atomically.
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(fs::path(dir).parent_path(), ec);
  if (fs::exists(fs::symlink_status(dir)) && !fs::is_symlink(fs::symlink_status(dir)))
    return make_error(dir + " exists and is not the link to the hub snapshot", "remove it and stage again");
  std::string tmp = dir + ".tmp." + std::to_string(::getpid());
  fs::remove(tmp, ec);
  fs::create_directory_symlink(snap.dir, tmp, ec);
  if (ec || ::rename(tmp.c_str(), dir.c_str()) != 0)
    return make_error("cannot link " + dir + " to " + snap.dir, "check the cache dir");
  return ok_status();
}

Result<std::string> random_token() {
  unsigned char b[16];
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::read(fd, b, sizeof(b)) != static_cast<ssize_t>(sizeof(b))) {
    if (fd >= 0) ::close(fd);
    return make_error("cannot read /dev/urandom for a push token", "check /dev/urandom");
  }
  ::close(fd);
  char hex[33];
  for (int i = 0; i < 16; ++i) std::snprintf(hex + 2 * i, 3, "%02x", b[i]);
  return std::string(hex, 32);
}

bool StageReport::ok() const {
  for (const auto& n : nodes)
    if (!n.ok()) return false;
  return !nodes.empty();
}

json StageReport::to_json() const {
  json a = json::array();
  for (const auto& n : nodes) {
    json j{{"node", n.node}, {"dir", n.dir}, {"ok", n.ok()}, {"verify", n.verify.to_json()}};
    if (!n.error.empty()) j["error"] = n.error;
    if (n.pushed)
      j["push"] = {{"files", n.push.files},
                   {"bytes_total", n.push.bytes_total},
                   {"bytes_sent", n.push.bytes_sent},
                   {"blocks_sent", n.push.blocks_sent},
                   {"blocks_skipped", n.push.blocks_skipped},
                   {"files_skipped_quick", n.push.files_skipped_quick},
                   {"bytes_hashed", n.push.bytes_hashed},
                   {"worker_bytes_hashed", n.push.worker_bytes_hashed},
                   {"seconds", n.push.seconds}};
    a.push_back(j);
  }
  return {{"lane", lane}, {"ok", ok()}, {"nodes", a}};
}

std::string StageReport::to_text() const {
  std::ostringstream o;
  for (const auto& n : nodes) {
    o << n.node << ": " << (n.ok() ? "complete" : "INCOMPLETE") << "  " << n.dir << "  (" << n.verify.files
      << " files, " << human_bytes(n.verify.bytes) << " of weights)\n";
    if (n.pushed) {
      double mbps = n.push.seconds > 0 ? static_cast<double>(n.push.bytes_sent) / n.push.seconds / 1e6 : 0;
      o << "  pushed " << human_bytes(n.push.bytes_sent) << " of " << human_bytes(n.push.bytes_total) << " ("
        << n.push.blocks_sent << " blocks sent, " << n.push.blocks_skipped << " already there; "
        << n.push.files_skipped_quick << " of " << n.push.files
        << " files skipped unread, size and mtime unchanged) in " << std::fixed << std::setprecision(2)
        << n.push.seconds << " s, " << static_cast<long>(mbps) << " MB/s\n";
    }
    if (!n.verify.removed.empty()) {
      o << "  removed " << n.verify.removed.size() << " file(s) the head does not have:";
      for (const auto& f : n.verify.removed) o << " " << f;
      o << "\n";
    }
    if (!n.error.empty()) o << "  error: " << n.error << "\n";
    for (const auto& p : n.verify.problems) o << "  " << p << "\n";
  }
  return o.str();
}

Result<StageReport> stage_lane(const Recipe& r, const Cluster& c, const Plan& plan, const StageOptions& opt) {
  if (r.nodes > static_cast<int>(c.nodes.size()))
    return make_error(r.name + " needs " + std::to_string(r.nodes) + " nodes, the cluster has " +
                          std::to_string(c.nodes.size()),
                      "pass --cluster with enough nodes");
  StageReport rep;
  rep.lane = r.name;
  const Node& head = c.nodes.front();
  NodeStage hs;
  hs.node = head.name;
  hs.dir = model_dir(r, head);
  hs.verify = verify_model_dir(hs.dir, {}, opt.verify_only && opt.hash);
  if (!hs.verify.complete() && !opt.verify_only) {
    Status got = ok_status();
    if (r.model.source == ModelSource::synthetic)
      got = synth_on_head(plan, head, opt);
    else if (r.model.source == ModelSource::hub)
      got = fetch_from_hub(r, head, hs.dir);
    else
      got = make_error(hs.dir + " is the lane's model path and it is incomplete", "copy the model there");
    if (!got.ok()) hs.error = got.error().what();
    hs.verify = verify_model_dir(hs.dir);
  }
  rep.nodes.push_back(hs);
  if (r.nodes == 1) return rep;
  if (!hs.ok()) {
    for (int i = 1; i < r.nodes; ++i) {
      NodeStage ns;
      ns.node = c.nodes[i].name;
      ns.dir = model_dir(r, c.nodes[i]);
      ns.error = "not staged: the head's copy is incomplete";
      rep.nodes.push_back(ns);
    }
    return rep;
  }
  SPK_ASSIGN(auto expect, build_manifest(hs.dir, opt.verify_only && opt.hash));
  std::vector<NodeStage> workers(static_cast<std::size_t>(r.nodes - 1));
  std::vector<std::thread> threads;
  for (int i = 1; i < r.nodes; ++i) {
    const Node& w = c.nodes[i];
    NodeStage& ns = workers[i - 1];
    ns.node = w.name;
    ns.dir = model_dir(r, w);
    threads.emplace_back([&, i] {
      (void)i;
      if (opt.verify_only) {
        auto exec = opt.exec_for(w);
        if (exec.ok())
          ns.verify = verify_on(**exec, ns.dir, expect, ns.error);
        else
          ns.error = exec.error().what();
      } else {
        push_to(w, hs.dir, expect, opt, r.model.source != ModelSource::path, ns);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& w : workers) rep.nodes.push_back(std::move(w));
  return rep;
}

}  // namespace spk::staging
