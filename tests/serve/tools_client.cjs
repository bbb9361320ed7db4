// The official `openai` and `@anthropic-ai/sdk` npm clients against a server whose engine emits a scripted
// answer (reasoning, text, one hermes tool call): chat completions with tools, streamed (raw chunks and the
// SDK's stream helper) and not; a call cut off by max_tokens; tool_choice none; /v1/messages tool_use and
// thinking blocks; /v1/responses reasoning and function_call items. Exit 0 only when every check passes.
// usage: node tools_client.cjs NPM_DIR BASE_URL(without /v1) API_KEY MODEL CUT_AT(max_tokens inside the call)
const path = require('path');
const assert = require('assert');
const [npmDir, base, apiKey, model, cutAt] = process.argv.slice(2);
const OpenAI = require(path.join(npmDir, 'openai'));
const Anthropic = require(path.join(npmDir, '@anthropic-ai/sdk')).default;
let failures = 0;
const check = (c, what) => { if (!c) { failures++; console.error('FAIL: ' + what); } };
const same = (a, b) => { try { assert.deepStrictEqual(a, b); return true; } catch { return false; } };

const tools = [{ type: 'function', function: { name: 'get_weather', description: 'weather',
  parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } } } } }];
const messages = [{ role: 'user', content: 'Weather in Paris?' }];
const ARGS = { city: 'Paris', days: 3 };
const REASONING = 'I should call the tool.';
const CONTENT = 'Checking the weather.';

async function main() {
  const oa = new OpenAI({ baseURL: base + '/v1', apiKey, maxRetries: 0, timeout: 60000 });

  // 1. non-streamed
  const r = await oa.chat.completions.create({ model, messages, tools, temperature: 0 });
  const m = r.choices[0].message;
  check(r.choices[0].finish_reason === 'tool_calls', `finish_reason ${r.choices[0].finish_reason}`);
  check(m.tool_calls && m.tool_calls.length === 1, `tool_calls ${JSON.stringify(m.tool_calls)}`);
  const tc = m.tool_calls[0];
  check(tc.type === 'function' && tc.function.name === 'get_weather' && tc.id.startsWith('call_'), 'call shape');
  check(same(JSON.parse(tc.function.arguments), ARGS), `arguments ${tc.function.arguments}`);
  check(m.content === CONTENT, `content ${JSON.stringify(m.content)}`);
  check(m.reasoning_content === REASONING, `reasoning_content ${JSON.stringify(m.reasoning_content)}`);

  // 2. streamed, raw chunks: tool_calls deltas (index, id, type, name, then arguments) as they come
  const calls = []; let content = '', reasoning = '', finish = null, beforeName = false;
  for await (const ch of await oa.chat.completions.create({ model, messages, tools, temperature: 0, stream: true })) {
    for (const c of ch.choices) {
      const d = c.delta || {};
      if (d.content) content += d.content;
      if (d.reasoning_content) reasoning += d.reasoning_content;
      for (const t of d.tool_calls || []) {
        if (!calls[t.index]) {
          if (!t.id || t.type !== 'function' || !t.function || !t.function.name) beforeName = true;
          calls[t.index] = { id: t.id, name: t.function.name, arguments: '' };
        }
        calls[t.index].arguments += (t.function && t.function.arguments) || '';
      }
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  check(!beforeName, 'the first delta of a call carries id, type and function.name');
  check(finish === 'tool_calls', `streamed finish_reason ${finish}`);
  check(content === CONTENT && reasoning === REASONING, `streamed content/reasoning ${content} / ${reasoning}`);
  check(calls.length === 1 && calls[0].name === 'get_weather' && same(JSON.parse(calls[0].arguments), ARGS),
    `streamed calls ${JSON.stringify(calls)}`);

  // 3. the SDK's stream helper assembles the same message
  const helper = (oa.chat.completions.stream ? oa.chat.completions : oa.beta.chat.completions)
    .stream({ model, messages, tools, temperature: 0 });
  const fin = await helper.finalChatCompletion();
  const fm = fin.choices[0].message;
  check(fm.tool_calls && fm.tool_calls.length === 1 && same(JSON.parse(fm.tool_calls[0].function.arguments), ARGS),
    `stream helper tool_calls ${JSON.stringify(fm.tool_calls)}`);
  check(fin.choices[0].finish_reason === 'tool_calls', 'stream helper finish_reason');

  // 4. cut off inside the call by max_tokens: length, no call, its text returned as content
  for (const stream of [false, true]) {
    let f = null, text = '', got = 0;
    if (stream) {
      for await (const ch of await oa.chat.completions.create({ model, messages, tools, max_tokens: +cutAt, stream: true })) {
        for (const c of ch.choices) {
          if (c.delta && c.delta.content) text += c.delta.content;
          if (c.delta && c.delta.tool_calls) got++;
          if (c.finish_reason) f = c.finish_reason;
        }
      }
    } else {
      const x = await oa.chat.completions.create({ model, messages, tools, max_tokens: +cutAt });
      f = x.choices[0].finish_reason; text = x.choices[0].message.content || '';
      got = (x.choices[0].message.tool_calls || []).length;
    }
    check(f === 'length' && got === 0, `cut (stream ${stream}): finish ${f}, ${got} calls`);
    check(text.startsWith(CONTENT + '\n<tool_call>') && text.includes('"city"'), `cut content ${JSON.stringify(text)}`);
  }

  // 5. tool_choice none: no call parsing
  const none = await oa.chat.completions.create({ model, messages, tools, tool_choice: 'none' });
  check(!none.choices[0].message.tool_calls && none.choices[0].finish_reason === 'stop' &&
    none.choices[0].message.content.includes('<tool_call>'), `tool_choice none ${JSON.stringify(none.choices[0])}`);

  // 6. a named function that is not in tools: 400 naming it
  try {
    await oa.chat.completions.create({ model, messages, tools, tool_choice: { type: 'function', function: { name: 'nope' } } });
    check(false, 'named tool_choice outside tools was accepted');
  } catch (e) {
    check(e.status === 400 && /nope/.test(e.message), `tool_choice error ${e.status} ${e.message}`);
  }

  // 7. /v1/messages: thinking, text and tool_use blocks; stop_reason tool_use; streamed == not
  const an = new Anthropic({ baseURL: base, apiKey, maxRetries: 0 });
  const atools = [{ name: 'get_weather', description: 'weather', input_schema: tools[0].function.parameters }];
  const am = await an.messages.create({ model, max_tokens: 200, tools: atools, messages });
  const kinds = am.content.map((b) => b.type).join(',');
  check(kinds === 'thinking,text,tool_use', `messages blocks ${kinds}`);
  const tu = am.content.find((b) => b.type === 'tool_use');
  check(am.stop_reason === 'tool_use' && tu && tu.name === 'get_weather' && same(tu.input, ARGS) && tu.id.startsWith('toolu_'),
    `messages tool_use ${JSON.stringify(am)}`);
  const as = await an.messages.stream({ model, max_tokens: 200, tools: atools, messages }).finalMessage();
  const stu = as.content.find((b) => b.type === 'tool_use');
  check(as.stop_reason === 'tool_use' && stu && same(stu.input, ARGS) &&
    as.content.find((b) => b.type === 'thinking').thinking === REASONING, `messages stream ${JSON.stringify(as)}`);

  // 8. /v1/responses: reasoning, message and function_call items; streamed arguments == whole
  const rr = await oa.responses.create({ model, input: 'Weather in Paris?', tools: [{ type: 'function', ...tools[0].function }] });
  const types = rr.output.map((o) => o.type).join(',');
  check(types === 'reasoning,message,function_call', `responses items ${types}`);
  const fc = rr.output.find((o) => o.type === 'function_call');
  check(fc && fc.name === 'get_weather' && same(JSON.parse(fc.arguments), ARGS), `responses call ${JSON.stringify(fc)}`);
  let sargs = '', done = null;
  for await (const ev of await oa.responses.create({ model, input: 'Weather in Paris?', stream: true,
    tools: [{ type: 'function', ...tools[0].function }] })) {
    if (ev.type === 'response.function_call_arguments.delta') sargs += ev.delta;
    if (ev.type === 'response.completed') done = ev.response;
  }
  check(done && same(JSON.parse(sargs), ARGS), `responses stream arguments ${sargs}`);

  if (failures) process.exit(1);
  console.log('ok: all tool-call checks passed');
}
main().catch((e) => { console.error('FAIL: ' + (e && e.stack || e)); process.exit(1); });
