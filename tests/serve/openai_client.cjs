// Drives a live sparkctl server with the official `openai` npm client. Exit code 0 only when every
// check passes. usage: node openai_client.cjs NPM_DIR BASE_URL API_KEY MODEL
const path = require('path');
const [npmDir, baseURL, apiKey, model] = process.argv.slice(2);
const OpenAI = require(path.join(npmDir, 'openai'));

const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });
let failures = 0;
function check(cond, what) {
  if (!cond) {
    failures++;
    console.error('FAIL: ' + what);
  }
}

async function streamChat(content, maxTokens) {
  const stream = await client.chat.completions.create({
    model, messages: [{ role: 'user', content }], max_tokens: maxTokens, temperature: 0,
    stream: true, stream_options: { include_usage: true },
  });
  let text = '', finish = null, usage = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta && c.delta.content) text += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { text, finish, usage, chunks };
}

async function main() {
  // non-streaming completion
  const c = await client.completions.create({ model, prompt: 'Once upon', max_tokens: 8, temperature: 0 });
  check(c.usage.completion_tokens === 8, `completion tokens ${c.usage.completion_tokens} != 8`);
  check(c.choices[0].finish_reason === 'length', 'completion finish_reason');

  // models
  const models = await client.models.list();
  check(models.data.length === 1 && models.data[0].id === model, 'models.list');

  // streaming chat == non-streaming chat
  const s = await streamChat('stream me', 12);
  const ns = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'stream me' }], max_tokens: 12, temperature: 0 });
  check(s.text === ns.choices[0].message.content, `stream "${s.text}" != non-stream "${ns.choices[0].message.content}"`);
  check(s.usage && s.usage.completion_tokens === 12, 'stream usage');
  check(s.finish === 'length', 'stream finish_reason');
  // Role chunk, content chunks, usage chunk: tokens decoded while the writer is busy are sent together,
  // so under load fewer than one chunk per token is legitimate; a single body would not be streaming.
  check(s.chunks >= 3, `stream had ${s.chunks} chunks`);

  // 32 concurrent streams: right token counts, and batched greedy == single-request greedy
  const N = 32, M = 16;
  const prompts = Array.from({ length: N }, (_, i) => `concurrent request ${i} ` + 'y'.repeat(i));
  const single = [];
  for (const p of prompts.slice(0, 8)) single.push((await streamChat(p, M)).text);
  const t0 = Date.now();
  const all = await Promise.all(prompts.map((p) => streamChat(p, M)));
  const dt = (Date.now() - t0) / 1000;
  all.forEach((r, i) => {
    check(r.usage && r.usage.completion_tokens === M, `stream ${i}: completion_tokens ${r.usage && r.usage.completion_tokens}`);
    check(r.finish === 'length', `stream ${i}: finish ${r.finish}`);
    if (i < single.length) check(r.text === single[i], `stream ${i}: batched "${r.text}" != single "${single[i]}"`);
  });
  console.log(`32 concurrent streams x ${M} tokens in ${dt.toFixed(2)} s`);

  // errors the client surfaces as typed exceptions
  const expectStatus = async (fn, status, what) => {
    try {
      await fn();
      check(false, `${what}: no error`);
    } catch (e) {
      check(e.status === status, `${what}: status ${e.status} != ${status}`);
    }
  };
  await expectStatus(() => new OpenAI({ baseURL, apiKey: 'wrong', maxRetries: 0 }).models.list(), 401, 'wrong key');
  await expectStatus(() => client.completions.create({ model: 'nope', prompt: 'x' }), 404, 'unknown model');
  await expectStatus(() => client.completions.create({ model, prompt: 'x', max_tokens: -1 }), 400, 'negative max_tokens');
  const after = await client.completions.create({ model, prompt: 'alive?', max_tokens: 2 });
  check(after.usage.completion_tokens === 2, 'server alive after errors');

  if (failures) {
    console.error(`${failures} check(s) failed`);
    process.exit(1);
  }
  console.log('ok: all checks passed');
}

main().catch((e) => {
  console.error('FAIL: ' + (e && e.stack ? e.stack : e));
  process.exit(1);
});
