#include "orchestrator/node/preflight_report.h"

#include <algorithm>
#include <sstream>
#include <thread>

namespace spk {

void append_preflight_rows(PreflightReport& report, const std::string& node,
                           const Result<NodeAnswer>& answer) {
  auto fail = [&](const std::string& check, const std::string& detail, const std::string& fix) {
    report.rows.push_back({node, check, "fail", detail, fix});
    report.ok = false;
  };
  if (!answer.ok()) return fail("reach", answer.error().message, answer.error().fix);
  const auto& body = answer->body;
  if (answer->exit_code == 2 || !body.contains("checks") || !body["checks"].is_array())
    return fail("input", body.value("error", std::string("no checks in the answer")),
                body.value("fix", std::string()));
  for (const auto& c : body["checks"]) {
    if (!c.is_object()) continue;
    PreflightRow row{node, c.value("name", std::string("?")), c.value("status", std::string("fail")),
                     c.value("detail", std::string()), c.value("fix", std::string())};
    if (row.status == "fail") report.ok = false;
    report.rows.push_back(std::move(row));
  }
  if (answer->exit_code != 0 && report.ok)
    fail("exit", "node preflight exited " + std::to_string(answer->exit_code), "");
}

PreflightReport run_preflight_all(const std::vector<RemoteExec*>& nodes, const nlohmann::json& input,
                                  std::chrono::milliseconds timeout) {
  std::vector<Result<NodeAnswer>> answers(nodes.size(), Result<NodeAnswer>(make_error("not run")));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < nodes.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        nlohmann::json in = input;  // "model_dirs": {node: dir} becomes that node's "model_dir"
        if (auto md = in.find("model_dirs"); md != in.end()) {
          if (auto d = md->find(nodes[i]->node()); d != md->end()) in["model_dir"] = *d;
          in.erase("model_dirs");
        }
        answers[i] = call_node(*nodes[i], NodeVerb::kPreflight, in, timeout);
      } catch (const std::exception& e) {  // never std::terminate the head for one node's answer
        answers[i] = make_error(nodes[i]->node() + ": preflight failed: " + e.what(), "");
      }
    });
  for (auto& t : threads) t.join();
  PreflightReport report;
  for (size_t i = 0; i < nodes.size(); ++i) append_preflight_rows(report, nodes[i]->node(), answers[i]);
  return report;
}

std::string PreflightReport::table() const {
  size_t wn = 4, wc = 5, ws = 6;
  for (const auto& r : rows) {
    wn = std::max(wn, r.node.size());
    wc = std::max(wc, r.check.size());
    ws = std::max(ws, r.status.size());
  }
  auto pad = [](const std::string& s, size_t w) {
    return s + std::string(w - std::min(w, s.size()) + 2, ' ');
  };
  std::ostringstream out;
  out << pad("NODE", wn) << pad("CHECK", wc) << pad("STATUS", ws) << "DETAIL\n";
  for (const auto& r : rows)
    out << pad(r.node, wn) << pad(r.check, wc) << pad(r.status, ws) << r.detail << "\n";
  size_t failed = 0;
  for (const auto& r : rows)
    if (r.status == "fail") {
      ++failed;
      if (!r.fix.empty()) out << "fix " << r.node << "/" << r.check << ": " << r.fix << "\n";
    }
  out << (ok ? "preflight: ok" : "preflight: " + std::to_string(failed) + " check(s) failed") << "\n";
  return out.str();
}

}  // namespace spk
