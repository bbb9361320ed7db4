#!/usr/bin/env bash
# Fuzz every parser for MINUTES each, all at once under nice (one process per parser):
#   scripts/fuzz.sh [MINUTES] [PARSER...]      parsers: recipe model_config safetensors tokenizer openai
# With clang-14 and libFuzzer (Debian: clang-14, libclang-rt-14-dev) the harnesses are built in
# build-fuzz/ with libFuzzer + ASan + UBSan; otherwise the seeded mutation driver of the normal build
# (build/, target fuzz_<parser>) runs for the same time. Seeds come from tests/fuzz/corpus/<parser>; new
# inputs go to build-fuzz/corpus/<parser> (the seed corpus stays small), crashes to
# build-fuzz/artifacts/<parser>/. Prints executions and crashes per parser; exit 1 when any crashed.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MINUTES=${1:-10}
shift || true
PARSERS=("$@")
[ ${#PARSERS[@]} -eq 0 ] && PARSERS=(recipe model_config safetensors tokenizer openai)
OUT=${SPARKCTL_FUZZ_DIR:-$ROOT/build-fuzz}
SECS=$(awk "BEGIN{print int($MINUTES*60)}")
JOBS=${SPARKCTL_FUZZ_BUILD_JOBS:-2}

engine=driver
if command -v clang++-14 >/dev/null && ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  engine=libfuzzer
fi
targets=()
for p in "${PARSERS[@]}"; do targets+=("fuzz_$p"); done
if [ $engine = libfuzzer ]; then
  BUILD=$OUT
  flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
    -DSPARKCTL_CUDA=OFF -DSPARKCTL_FUZZ_LIBFUZZER=ON -DSPARKCTL_TEST_AREAS=fuzz >/dev/null || exit 2
else
  echo "fuzz: clang-14 with libFuzzer not found: using the seeded mutation driver" >&2
  BUILD=${SPARKCTL_BUILD_DIR:-$ROOT/build}
  [ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$ROOT" -B "$BUILD" -G Ninja >/dev/null || exit 2
fi
nice cmake --build "$BUILD" --target "${targets[@]}" -j"$JOBS" || exit 2

mkdir -p "$OUT"
pids=()
for p in "${PARSERS[@]}"; do
  mkdir -p "$OUT/corpus/$p" "$OUT/artifacts/$p"
  rm -f "$OUT/artifacts/$p"/*
  log="$OUT/fuzz-$p.log"
  if [ $engine = libfuzzer ]; then
    (cd "$OUT/artifacts/$p" && nice "$BUILD/tests/fuzz/fuzz_$p" -max_total_time="$SECS" -timeout=10 \
      -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 -artifact_prefix="$OUT/artifacts/$p/" \
      "$OUT/corpus/$p" "$ROOT/tests/fuzz/corpus/$p") >"$log" 2>&1 &
  else
    (cd "$OUT/artifacts/$p" && nice "$BUILD/tests/fuzz/fuzz_$p" -max_total_time="$SECS" -seed="$RANDOM" \
      -max_len=65536 "$ROOT/tests/fuzz/corpus/$p") >"$log" 2>&1 &
  fi
  pids+=($!)
done
fail=0
for i in "${!PARSERS[@]}"; do
  wait "${pids[$i]}"
  rc=$?
  p=${PARSERS[$i]}
  log="$OUT/fuzz-$p.log"
  # slow-unit-* files only mean a run took long (on a shared machine, often someone else's load): not crashes
  crashes=$(find "$OUT/artifacts/$p" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
    -o -name 'oom-*' -o -name 'fuzz-crash-*' \) | wc -l)
  if [ $engine = libfuzzer ]; then
    execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | awk '{print $2}')
  else
    execs=$(grep -o '[0-9]* mutated inputs' "$log" | tail -1 | awk '{print $1}')
  fi
  [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ] && crashes=1
  echo "fuzz $p ($engine, ${MINUTES} min): executions ${execs:-?}, crashes $crashes (exit $rc, log $log)"
  [ "$crashes" -ne 0 ] && fail=1
done
exit $fail
