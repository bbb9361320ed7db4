// Benchmark driver for scripts/bench-stage.sh (not a test): push_tree() of DIR to a running
// `sparkctl node stage-recv`. Token from $SPK_PUSH_TOKEN. Prints one JSON line with the PushReport.
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "orchestrator/staging/push/push.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: staging_push_bench DIR HOST PORT [STREAMS]\n";
    return 2;
  }
  spk::staging::PushOptions o;
  o.source_dir = argv[1];
  o.host = argv[2];
  o.port = std::atoi(argv[3]);
  o.streams = argc > 4 ? std::atoi(argv[4]) : 4;
  const char* t = std::getenv("SPK_PUSH_TOKEN");
  o.token = t ? t : "";
  auto r = spk::staging::push_tree(o);
  if (!r) {
    std::cerr << "push: " << r.error().what() << "\n";
    return 1;
  }
  std::cout << nlohmann::json{{"files", r->files},
                              {"bytes_total", r->bytes_total},
                              {"bytes_sent", r->bytes_sent},
                              {"blocks_sent", r->blocks_sent},
                              {"blocks_skipped", r->blocks_skipped},
                              {"files_skipped_quick", r->files_skipped_quick},
                              {"bytes_hashed", r->bytes_hashed},
                              {"worker_bytes_hashed", r->worker_bytes_hashed},
                              {"seconds", r->seconds}}
                   .dump()
            << "\n";
  return 0;
}
