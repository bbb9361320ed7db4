// Fuzz harnesses: one LLVMFuzzerTestOneInput per parser, linked either with libFuzzer (clang,
// scripts/fuzz.sh) or with driver.cpp (any compiler: the corpus plus a bounded number of seeded
// mutations, a CTest `unit` test). A harness crashes (abort, ASan report, uncaught exception) on a bug;
// a clean error is a pass. `--json` output is emulated: every string that a verb would print as JSON is
// dump()ed, which throws on ill-formed UTF-8 exactly as the CLI would.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
