// `sparkctl node <verb>`: the fixed entrypoint the head runs on a node (over SSH, or fork/exec locally).
// JSON object on stdin (nothing, or a terminal, = {}), one JSON object on stdout, exit 0 ok / 1 a check
// failed / 2 bad input. The verbs are the compiled-in allowlist of orchestrator/transport/node_verb.h.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <iterator>
#include <string>

#include "cli/json_out.h"
#include "cli/verbs.h"
#include "orchestrator/node/node_verbs.h"

namespace spk::cli {

namespace {

struct VerbHelp {
  NodeVerb verb;
  const char* help;
};

constexpr VerbHelp kHelp[] = {
    {NodeVerb::kVersion, "version and XXH3 hash of this binary"},
    {NodeVerb::kEcho, "answer the JSON input unchanged (transport test)"},
    {NodeVerb::kFacts, "memory, disk, runtime processes, shared-memory segments"},
    {NodeVerb::kPreflight, "every launch check of this node, one JSON report"},
    {NodeVerb::kClean, "kill stale sparkctl runtime process groups, remove leaked shm segments"},
    {NodeVerb::kLaunch, "start a detached daemon from argv+env (setsid, pidfile, log)"},
    {NodeVerb::kStop, "SIGTERM then SIGKILL the daemons' process groups, remove pidfiles"},
    {NodeVerb::kPs, "the daemons of the pidfiles: alive or dead, uptime"},
    {NodeVerb::kLogTail, "the tail of the daemons' logs (or from given offsets)"},
    {NodeVerb::kStageRecv, "receive one weight push from the head into a cache dir (token-checked TCP)"},
    {NodeVerb::kStageVerify, "is a model dir complete: config, tokenizer, every shard's size (and hash)"},
    {NodeVerb::kFabricDoctor, "fabric doctor on this node (DoctorRequest JSON): findings with value and fix"},
    {NodeVerb::kFabricSetup, "fabric setup on this node (SetupRequest JSON, root): IP, MTU, link up"},
    {NodeVerb::kFabricEnv, "this node's NCCL/Gloo env from its own GID table ({discover, env} JSON)"},
};

void run_node(NodeVerb verb, Context& ctx) {
  std::string input;
  if (!::isatty(0)) input.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  VerbOutput out = run_node_verb(verb, input, node_env_from_process(ctx.global.state_dir));
  std::cout << json_text(out.body, -1) << "\n" << std::flush;
  ctx.exit_code = out.exit_code;
}

}  // namespace

void setup_node(CLI::App& app, Context& ctx) {
  auto* node =
      app.add_subcommand("node", "fixed entrypoint the head runs on a node (JSON on stdin, JSON out)");
  node->require_subcommand(1);
  for (const auto& h : kHelp) {
    const NodeVerb verb = h.verb;
    node->add_subcommand(std::string(node_verb_name(verb)), h.help)->callback([verb, &ctx] {
      run_node(verb, ctx);
    });
  }
}

}  // namespace spk::cli
