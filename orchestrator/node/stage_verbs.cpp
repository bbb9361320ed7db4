#include "orchestrator/node/stage_verbs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <iostream>

#include "orchestrator/node/node_input.h"
#include "orchestrator/staging/push/push.h"
#include "orchestrator/staging/verify.h"

namespace spk {

namespace {
using nlohmann::json;

VerbOutput bad(const Error& e) {
  return {kNodeBadInput, json{{"ok", false}, {"error", e.message}, {"fix", e.fix}}};
}
VerbOutput failed(const Error& e) {
  return {kNodeCheckFailed,
          json{{"ok", false}, {"error", e.message}, {"fix", e.fix}, {"retryable", e.retryable}}};
}
}  // namespace

VerbOutput run_stage_recv(const json& in, const NodeEnv&) {
  namespace ni = node_input;
  if (auto s = ni::only_keys(
          in, {"root", "token", "bind", "port", "max_bytes", "idle_timeout_s", "direct_io"}, "stage-recv");
      !s)
    return bad(s.error());
  auto root = ni::str(in, "root", "");
  auto token = ni::str(in, "token", "");
  auto bind = ni::str(in, "bind", "0.0.0.0");
  auto port = ni::u64(in, "port", 0);
  auto max_bytes = ni::u64(in, "max_bytes", 0);
  auto idle = ni::u64(in, "idle_timeout_s", 60);
  auto direct = ni::boolean(in, "direct_io", true);
  if (!direct) return bad(direct.error());
  for (const auto* r : {&root, &token, &bind})
    if (!*r) return bad(r->error());
  for (const auto* r : {&port, &max_bytes, &idle})
    if (!*r) return bad(r->error());
  if (*port > 65535) return bad(make_error("input 'port' is " + std::to_string(*port), "ports are 0..65535"));
  if (*idle < 1 || *idle > 3600) return bad(make_error("input 'idle_timeout_s' out of range", "use 1..3600"));
  staging::ReceiveOptions o;
  o.root = *root;
  o.token = *token;
  o.bind = *bind;
  o.port = static_cast<int>(*port);
  o.max_bytes = *max_bytes;
  o.idle_timeout_s = static_cast<int>(*idle);
  o.direct_io = *direct;
  // The head reads our stdout through a pipe (local node) or an ssh channel (sshd's pipe or socket):
  // when the head dies, that end closes, and the receive stops instead of listening on for minutes.
  struct stat out_st {};
  if (::fstat(STDOUT_FILENO, &out_st) == 0 && (S_ISFIFO(out_st.st_mode) || S_ISSOCK(out_st.st_mode)))
    o.head_fd = STDOUT_FILENO;
  int bound = 0;
  o.on_listening = [&bound, &o](int p) {
    bound = p;
    std::cerr << "stage-recv: listening on " << o.bind << ":" << p << std::endl;
  };
  auto r = staging::serve_receive(o);
  if (!r) {
    VerbOutput out = failed(r.error());
    out.body["port"] = bound;
    return out;
  }
  return {kNodeOk, json{{"ok", true},
                        {"port", bound},
                        {"files", r->files},
                        {"bytes_received", r->bytes_received},
                        {"bytes_direct", r->bytes_direct},
                        {"blocks_rejected", r->blocks_rejected}}};
}

VerbOutput run_stage_verify(const json& in, const NodeEnv&) {
  namespace ni = node_input;
  if (auto s = ni::only_keys(in, {"dir", "expect", "prune"}, "stage-verify"); !s) return bad(s.error());
  auto dir = ni::str(in, "dir", "");
  if (!dir) return bad(dir.error());
  auto prune = ni::boolean(in, "prune", false);
  if (!prune) return bad(prune.error());
  if (dir->empty()) return bad(make_error("node stage-verify: input 'dir' is missing", "pass the model dir"));
  std::vector<staging::ManifestEntry> expect;
  if (in.contains("expect")) {
    auto m = staging::manifest_from_json(in["expect"]);
    if (!m) return bad(m.error());
    expect = std::move(*m);
  }
  // prune removes what `expect` lacks: without a list it would have nothing to keep.
  if (*prune && expect.empty())
    return bad(
        make_error("node stage-verify: 'prune' needs a non-empty 'expect'", "pass the head's file list"));
  auto rep = staging::verify_model_dir(*dir, expect, false, *prune);
  json out = rep.to_json();
  out["ok"] = rep.complete();
  return {rep.complete() ? kNodeOk : kNodeCheckFailed, out};
}

}  // namespace spk
