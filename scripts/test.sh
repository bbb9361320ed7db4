#!/usr/bin/env bash
# Set up, build and run the whole test suite (labels: unit, multinode, gpu; gpu tests skip without a GPU).
#   scripts/test.sh [ctest args...]    e.g. scripts/test.sh -L unit
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD=${SPARKCTL_BUILD_DIR:-build}
cd "$BUILD"
ctest --output-on-failure --timeout 600 -j "$(nproc)" "$@"
