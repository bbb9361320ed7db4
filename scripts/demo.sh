#!/usr/bin/env bash
# The main job on the embedded default: lane-demo on the implicit one-node local cluster, CPU backend,
# a synthetic Qwen3-tiny checkpoint (random weights) with the real Qwen3 tokenizer and chat template.
# `sparkctl up lane-demo` runs the plan (preflight, synth model, launch, wait for a real token, warmup,
# supervisor); then one chat completion over the OpenAI API with the API key, `sparkctl status`, and
# `sparkctl down` (nothing left running).
set -euo pipefail
cd "$(dirname "$0")/.."
# Packages only: the demo needs the one binary, not the test build (that is scripts/test.sh's job).
SPARKCTL_NO_BUILD=1 scripts/setup.sh
BUILD=${SPARKCTL_BUILD_DIR:-build}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
[ -f "$BUILD/build.ninja" ] || cmake -S . -B "$BUILD" -G Ninja ${SPARKCTL_CMAKE_ARGS:-}
cmake --build "$BUILD" --target sparkctl -j "$(nproc)"
S="$PWD/$BUILD/bin/sparkctl"
export SPARKCTL_STATE_DIR=${SPARKCTL_STATE_DIR:-$PWD/$BUILD/demo-state}

"$S" plan lane-demo
port=$("$S" --json plan lane-demo | node -e 'console.log(new URL(JSON.parse(require("fs").readFileSync(0)).endpoint).port)')

echo; echo "== sparkctl up lane-demo"
trap '"$S" down >/dev/null 2>&1 || true' EXIT
"$S" up lane-demo

echo; echo "== one chat completion (random weights: the words are noise, the tokens and the protocol are real)"
key=$(cat "$SPARKCTL_STATE_DIR/deploy/api_key")
curl -sS --fail-with-body "http://127.0.0.1:$port/v1/chat/completions" \
  -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
  -d '{"model":"demo","messages":[{"role":"user","content":"Say hello to the DGX Sparks."}],"max_tokens":24,"temperature":0.9,"seed":7}' |
  node -e 'const r = JSON.parse(require("fs").readFileSync(0)); console.log(JSON.stringify(r.choices[0].message.content)); console.log("usage:", JSON.stringify(r.usage));'

echo; echo "== sparkctl status"
"$S" status

echo; echo "== sparkctl down"
"$S" down
trap - EXIT
