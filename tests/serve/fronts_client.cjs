// The official `openai` (responses) and `@anthropic-ai/sdk` (messages) npm clients against a live server,
// each non-streamed and streamed. Exit 0 only when every check passes.
// usage: node fronts_client.cjs NPM_DIR BASE_URL(without /v1) API_KEY MODEL
const path = require('path');
const [npmDir, base, apiKey, model] = process.argv.slice(2);
const OpenAI = require(path.join(npmDir, 'openai'));
const Anthropic = require(path.join(npmDir, '@anthropic-ai/sdk')).default;
let failures = 0;
const check = (c, what) => { if (!c) { failures++; console.error('FAIL: ' + what); } };

async function main() {
  const oa = new OpenAI({ baseURL: base + '/v1', apiKey, maxRetries: 0 });
  const r = await oa.responses.create({ model, input: 'hello', max_output_tokens: 6, temperature: 0 });
  check(r.object === 'response' && r.output[0].type === 'message', 'responses.create shape');
  check(typeof r.output_text === 'string' && r.usage.output_tokens === 6, 'responses output_text/usage');
  let text = '', last = null, n = 0;
  for await (const ev of await oa.responses.create({ model, input: 'hello', max_output_tokens: 6, temperature: 0, stream: true })) {
    check(ev.sequence_number === n++, `sequence_number ${ev.sequence_number}`);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    last = ev;
  }
  check(last && (last.type === 'response.incomplete' || last.type === 'response.completed'), `last event ${last && last.type}`);
  check(text === r.output_text, `streamed "${text}" != "${r.output_text}"`);

  const an = new Anthropic({ baseURL: base, apiKey, maxRetries: 0 });
  const m = await an.messages.create({ model, max_tokens: 6, temperature: 0, system: 'be brief',
    messages: [{ role: 'user', content: 'hello' }] });
  check(m.type === 'message' && m.content[0].type === 'text' && m.stop_reason === 'max_tokens', 'messages.create shape');
  const s = an.messages.stream({ model, max_tokens: 6, temperature: 0, system: 'be brief',
    messages: [{ role: 'user', content: 'hello' }] });
  let st = '';
  s.on('text', (t) => { st += t; });
  const fin = await s.finalMessage();
  check(fin.stop_reason === 'max_tokens' && fin.usage.output_tokens === 6, 'stream final message');
  check(st === m.content[0].text, `streamed "${st}" != "${m.content[0].text}"`);
  if (failures) process.exit(1);
  console.log('ok: all fronts checks passed');
}
main().catch((e) => { console.error('FAIL: ' + (e && e.stack || e)); process.exit(1); });
