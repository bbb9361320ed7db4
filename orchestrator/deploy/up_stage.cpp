#include "orchestrator/deploy/up_stage.h"

#include <cstdio>
#include <memory>

#include "orchestrator/deploy/node_links.h"
#include "orchestrator/staging/push/file_io.h"
#include "orchestrator/staging/stage.h"
#include "orchestrator/transport/local_exec.h"
#include "orchestrator/transport/ssh_exec.h"

namespace spk {

Status stage_for_up(const Recipe& r, const Cluster& c, const Plan& plan, const UpStageOptions& opt,
                    const Progress& progress) {
  staging::StageOptions so;
  so.port = opt.port;
  so.log_dir = opt.log_dir;
  so.exec_for = [&opt](const Node& n) -> Result<std::unique_ptr<RemoteExec>> {
    if (n.local)
      return std::unique_ptr<RemoteExec>(
          std::make_unique<LocalExec>(LocalTarget{n.name, opt.self, local_node_root(n), {}}));
    SshTarget t = ssh_target(n);
    t.accept_new_host_key = opt.accept_new_host_key;
    auto ssh = std::make_unique<SshExec>(t);
    if (Status s = ssh->connect(t.connect_timeout_s); !s.ok())
      return make_error(n.name + ": " + s.error().message, s.error().fix, s.error().retryable);
    return std::unique_ptr<RemoteExec>(std::move(ssh));
  };
  SPK_ASSIGN(staging::StageReport rep, staging::stage_lane(r, c, plan, so));
  std::string bad;
  for (const auto& n : rep.nodes) {
    std::string line = n.node + ": " + (n.ok() ? "complete" : "INCOMPLETE") + " " + n.dir + " (" +
                       std::to_string(n.verify.files) + " files, " + staging::human_bytes(n.verify.bytes) +
                       ")";
    if (n.pushed) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "; pushed %s of %s, %llu of %llu files skipped unread, in %.2f s",
                    staging::human_bytes(n.push.bytes_sent).c_str(),
                    staging::human_bytes(n.push.bytes_total).c_str(),
                    static_cast<unsigned long long>(n.push.files_skipped_quick),
                    static_cast<unsigned long long>(n.push.files), n.push.seconds);
      line += buf;
      if (n.push.bytes_sent == 0) line += ": moved nothing";
    }
    progress("stage_weights", line);
    if (n.ok()) continue;
    std::string why = n.error;
    for (const auto& pr : n.verify.problems) why += (why.empty() ? "" : "; ") + pr;
    bad += (bad.empty() ? "" : "; ") + n.node + ": " + why;
  }
  if (!bad.empty())
    return make_error("staging " + r.name + " failed before any rank started: " + bad,
                      "see `sparkctl stage " + r.name + " --verify`; fix the node named, or --skip-stage");
  return ok_status();
}

}  // namespace spk
