#!/usr/bin/env bash
# kill -9 of `sparkctl stage` at N random points (default 20), each followed by an immediate re-run that
# must succeed with trees identical to an uninterrupted run (tests/staging_push/stage_kill_test.cpp).
#   scripts/stage-kill-soak.sh [N] [SEED]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${SPARKCTL_BUILD_DIR:-$ROOT/build}
nice cmake --build "$BUILD" --target sparkctl staging_stage_kill_test -j2
export SPARKCTL_STAGE_KILLS=${1:-20}
[ -n "${2:-}" ] && export SPARKCTL_STAGE_KILL_SEED=$2
exec "$BUILD/tests/staging_push/staging_stage_kill_test"
