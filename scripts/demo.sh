#!/usr/bin/env bash
# The main job on the embedded default: lane-demo on the implicit one-node local cluster, CPU backend,
# a synthetic Qwen3-tiny checkpoint (random weights) with the real Qwen3 tokenizer and chat template.
# `sparkctl up` is not built yet (issue #7), so this script walks the plan's steps itself: it prints
# `sparkctl plan lane-demo`, runs its synth-model and runtime-serve commands exactly as planned, sends
# one chat completion over the OpenAI API with the API key, prints the answer, and stops the server.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD=${SPARKCTL_BUILD_DIR:-build}
S="$PWD/$BUILD/bin/sparkctl"

"$S" plan lane-demo
plan=$("$S" --json plan lane-demo)
# argv of one planned step / rank, NUL-separated, with the binary path substituted for `sparkctl`.
argv_of() {
  node -e '
    const p = JSON.parse(require("fs").readFileSync(0));
    const a = process.argv[1] === "serve" ? p.ranks[0].argv : p.steps.find(s => s.kind === "synth_model").commands[0].argv;
    process.stdout.write(a.slice(1).join("\0") + "\0");' "$1" <<<"$plan"
}
mapfile -d '' synth < <(argv_of synth)
mapfile -d '' serve < <(argv_of serve)
port=$(node -e 'console.log(new URL(JSON.parse(require("fs").readFileSync(0)).endpoint).port)' <<<"$plan")

echo; echo "== step synth_model"
"$S" "${synth[@]}"

echo; echo "== step launch_rank0 (log: $BUILD/demo-serve.log)"
export SPARKCTL_API_KEY=${SPARKCTL_API_KEY:-demo-$RANDOM$RANDOM}
"$S" "${serve[@]}" >"$BUILD/demo-serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 240); do
  grep -q '^ready:' "$BUILD/demo-serve.log" && break
  kill -0 $pid 2>/dev/null || { cat "$BUILD/demo-serve.log"; echo "demo: the runtime exited before it was ready" >&2; exit 1; }
  sleep 0.5
done
grep -q '^ready:' "$BUILD/demo-serve.log" || { tail -20 "$BUILD/demo-serve.log"; echo "demo: not ready after 120 s" >&2; exit 1; }
grep -E 'Available KV cache memory|KV cache size|Maximum concurrency|^ready:' "$BUILD/demo-serve.log"

echo; echo "== one chat completion (random weights: the words are noise, the tokens and the protocol are real)"
curl -sS --fail-with-body "http://127.0.0.1:$port/v1/chat/completions" \
  -H "Authorization: Bearer $SPARKCTL_API_KEY" -H 'Content-Type: application/json' \
  -d '{"model":"demo","messages":[{"role":"user","content":"Say hello to the DGX Sparks."}],"max_tokens":24,"temperature":0.9,"seed":7}' |
  node -e 'const r = JSON.parse(require("fs").readFileSync(0)); console.log(JSON.stringify(r.choices[0].message.content)); console.log("usage:", JSON.stringify(r.usage));'
echo; echo "== stop"
kill -TERM $pid
wait $pid && echo "runtime exited cleanly"
trap - EXIT
