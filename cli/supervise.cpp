// `sparkctl supervise` (hidden): the supervisor daemon `up` starts detached on the head
// (orchestrator/deploy/supervisor.h). SIGTERM/SIGINT end it cleanly; exit 1 after giving up.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <memory>

#include "cli/verbs.h"
#include "orchestrator/deploy/supervisor.h"

namespace spk::cli {
namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

struct SuperviseCliOptions {
  int poll_ms = 2000;
  int health_timeout_ms = 5000;
  int hang_polls = 3;
  int stall_after_ms = 60000;
  int backoff_base_ms = 10000;
  int backoff_cap_ms = 300000;
  int reset_after_ms = 600000;
  int give_up = 8;
};

}  // namespace

void setup_supervise(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<SuperviseCliOptions>();
  auto* s = app.add_subcommand("supervise", "the supervisor daemon started by up (internal)");
  s->group("");  // hidden from --help
  s->add_option("--poll-ms", o->poll_ms, "health poll period")->envname("SPARKCTL_SUPERVISE_POLL_MS");
  s->add_option("--health-timeout-ms", o->health_timeout_ms, "one /health poll's timeout");
  s->add_option("--hang-polls", o->hang_polls, "unanswered /health polls in a row that count as a hang");
  s->add_option("--stall-after-ms", o->stall_after_ms,
                "an engine with work that completes no step for this long is hung (from /health's progress)")
      ->envname("SPARKCTL_STALL_AFTER_MS");
  s->add_option("--backoff-base-ms", o->backoff_base_ms, "first restart delay (doubles)")
      ->envname("SPARKCTL_RESTART_BACKOFF_MS");
  s->add_option("--backoff-cap-ms", o->backoff_cap_ms, "largest restart delay");
  s->add_option("--reset-after-ms", o->reset_after_ms, "healthy this long = backoff starts over");
  s->add_option("--give-up", o->give_up, "restarts without a reset before giving up")
      ->envname("SPARKCTL_RESTART_GIVE_UP");
  s->callback([&ctx, o] {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    ::sigaction(SIGTERM, &sa, nullptr);
    ::sigaction(SIGINT, &sa, nullptr);
    SupervisorOptions so;
    so.ctx = DeployContext{ctx.global.state_dir, ctx.global.cluster_file, false, nullptr};
    so.poll = std::chrono::milliseconds(o->poll_ms);
    so.health_timeout = std::chrono::milliseconds(o->health_timeout_ms);
    so.hang_polls = o->hang_polls;
    so.stall_after = std::chrono::milliseconds(o->stall_after_ms);
    so.backoff = BackoffPolicy{std::chrono::milliseconds(o->backoff_base_ms),
                               std::chrono::milliseconds(o->backoff_cap_ms),
                               std::chrono::milliseconds(o->reset_after_ms), o->give_up};
    ctx.exit_code = run_supervisor(so, g_stop);
  });
}

}  // namespace spk::cli
