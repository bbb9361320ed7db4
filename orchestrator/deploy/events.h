// The deployment's event log: <state-dir>/deploy/events.jsonl, one JSON object a line
// {ts_ms, kind, message}, appended with O_APPEND (one write per event, so concurrent writers interleave
// whole lines). Written by up/down/restart/switch and the supervisor; shown by `status`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace spk {

struct DeployEvent {
  int64_t ts_ms = 0;
  std::string kind;  // up | ready | down | rank_died | hang | restart | restored | give_up | failed | ...
  std::string message;
};

// Best effort: an unwritable log never fails the action it records.
void append_event(const std::string& state_dir, const std::string& kind, const std::string& message);

// The last `max` events, oldest first.
std::vector<DeployEvent> read_events(const std::string& state_dir, size_t max = 20);

int64_t wall_ms();

}  // namespace spk
