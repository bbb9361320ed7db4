// Node side of detached daemons (the runtime ranks): `node launch | stop | ps | log-tail`. A daemon is
// started from an argv + env given as JSON (execve, never a shell), in its own session and process group
// (setsid), stdin /dev/null, stdout+stderr appended to <dir>/<name>.log, and recorded in <dir>/<name>.pid
// (JSON: pid, pgid, start_ticks, argv, log, started_ms; written atomically). start_ticks (field 22 of
// /proc/<pid>/stat) guards against pid reuse: a pidfile whose process has another start time is dead.
//   launch   {dir, name, argv:[..], env:{K:V}, wait_ms?} -> {ok, pid, log}   (wait_ms > 0: run to the end
//            within wait_ms, no pidfile, -> {ok, exit_code, log})
//   stop     {dir, names?:[..], grace_ms?}  -> {ok, stopped:[{name,pid,signal}], remaining:[name]}
//            SIGTERM to each live group, SIGKILL after grace_ms (default 5000), pidfiles removed
//   ps       {dir}                          -> {ok, daemons:[{name,pid,alive,started_ms,uptime_s,log,
//            exit_note?}]}  (exit_note: what a dead daemon said when it stopped on purpose; each launch
//            passes $SPARKCTL_EXIT_NOTE = <dir>/<name>.exit and removes the previous run's note)
//   log-tail {dir, names?:[..], max_bytes?, offsets?:{name:n}} -> {ok, logs:[{name,size,from,text}]}
// Names are [A-Za-z0-9._-]{1,64}; `dir` is absolute.
#pragma once

#include <nlohmann/json.hpp>

#include "orchestrator/node/node_verbs.h"

namespace spk {

VerbOutput node_launch(const nlohmann::json& in, const NodeEnv& env);
VerbOutput node_stop(const nlohmann::json& in, const NodeEnv& env);
VerbOutput node_ps(const nlohmann::json& in, const NodeEnv& env);
VerbOutput node_log_tail(const nlohmann::json& in, const NodeEnv& env);

// Start ticks of `pid` (field 22 of /proc/<pid>/stat); 0 when it does not exist.
unsigned long long process_start_ticks(int pid);

}  // namespace spk
