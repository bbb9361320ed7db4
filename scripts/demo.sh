#!/usr/bin/env bash
# The main job on the embedded default: a one-node local cluster, CPU backend, synthetic model, real
# tokenizer. Until `up` is built this prints the plan `sparkctl up lane-demo` would run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD=${SPARKCTL_BUILD_DIR:-build}
exec "$BUILD/bin/sparkctl" plan lane-demo "$@"
