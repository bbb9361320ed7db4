// Load for the HTTP front (issue 28): `streams` concurrent streaming chat clients, each sending `rounds`
// requests, while `slow` unauthenticated connections are held open (half idle, half sending one header
// byte every `trickle_ms`; each is reopened when the server closes it, so the attack never lets up), and
// /health is polled every 250 ms. Prints one JSON line: errors, p50/p95/max request seconds, /health
// p95/max, slow connections opened and closed by the server. Exit 1 on any client error.
// usage: node soak_load.cjs BASE_URL KEY MODEL STREAMS ROUNDS MAX_TOKENS SLOW [TRICKLE_MS]
'use strict';
const http = require('http');
const net = require('net');

const [base, key, model, streamsS, roundsS, maxTokS, slowS, trickleS] = process.argv.slice(2);
const url = new URL(base);
const streams = +streamsS, rounds = +roundsS, maxTokens = +maxTokS, slow = +slowS;
const trickleMs = +(trickleS || 2000);
const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });

function pct(a, p) {
  if (!a.length) return 0;
  const s = [...a].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.floor(p * (s.length - 1) + 0.5))];
}

// ---- the attack: slow unauthenticated connections ----
let stopping = false, opened = 0, closedByServer = 0;
const socks = new Set();
function openSlow(i) {
  if (stopping) return;
  const s = net.connect(+url.port, url.hostname);
  opened++;
  socks.add(s);
  let timer = null;
  s.on('connect', () => {
    if (i % 2 === 1) {
      s.write('GET /v1/models HTTP/1.1\r\n');
      timer = setInterval(() => s.write('X'), trickleMs);
    }
  });
  s.on('data', () => {});
  s.on('error', () => {});
  s.on('close', () => {
    if (timer) clearInterval(timer);
    socks.delete(s);
    if (!stopping) {
      closedByServer++;
      setTimeout(() => openSlow(i), 50);
    }
  });
}

// ---- streaming clients ----
function streamOnce(id) {
  return new Promise((resolve) => {
    const body = JSON.stringify({
      model, stream: true, max_tokens: maxTokens, temperature: 0.8, seed: id,
      messages: [{ role: 'user', content: `soak client ${id}: tell me something.` }],
    });
    const t0 = process.hrtime.bigint();
    const req = http.request({
      host: url.hostname, port: url.port, method: 'POST', path: url.pathname.replace(/\/$/, '') + '/chat/completions',
      agent, headers: { 'Content-Type': 'application/json', 'Authorization': `Bearer ${key}`, 'Content-Length': Buffer.byteLength(body) },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('end', () => {
        const s = Number(process.hrtime.bigint() - t0) / 1e9;
        if (res.statusCode !== 200) return resolve({ ok: false, s, why: `HTTP ${res.statusCode}: ${text.slice(0, 200)}` });
        if (!text.includes('data: [DONE]')) return resolve({ ok: false, s, why: 'stream ended without [DONE]' });
        resolve({ ok: true, s });
      });
      res.on('error', (e) => resolve({ ok: false, s: 0, why: String(e) }));
    });
    req.on('error', (e) => resolve({ ok: false, s: 0, why: String(e) }));
    req.setTimeout(600000, () => req.destroy(new Error('client timeout')));
    req.end(body);
  });
}

function health() {
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint();
    const req = http.get({ host: url.hostname, port: url.port, path: '/health', agent }, (res) => {
      res.resume();
      res.on('end', () => resolve({ ok: res.statusCode === 200, s: Number(process.hrtime.bigint() - t0) / 1e9 }));
    });
    req.on('error', () => resolve({ ok: false, s: Number(process.hrtime.bigint() - t0) / 1e9 }));
  });
}

(async () => {
  for (let i = 0; i < slow; i++) openSlow(i);
  if (slow) await new Promise((r) => setTimeout(r, 1000));  // the attack is in place first
  const lat = [], errors = [], hl = [];
  let healthFails = 0, done = false;
  const poller = (async () => {
    while (!done) {
      const h = await health();
      hl.push(h.s);
      if (!h.ok) healthFails++;
      await new Promise((r) => setTimeout(r, 250));
    }
  })();
  const t0 = Date.now();
  await Promise.all(Array.from({ length: streams }, async (_, c) => {
    for (let r = 0; r < rounds; r++) {
      const x = await streamOnce(c * 1000 + r);
      if (x.ok) lat.push(x.s); else errors.push(x.why);
    }
  }));
  done = true;
  await poller;
  stopping = true;
  const held = socks.size;
  for (const s of socks) s.destroy();
  const out = {
    streams, rounds, slow, requests: streams * rounds, errors: errors.length, first_errors: errors.slice(0, 3),
    wall_s: (Date.now() - t0) / 1000, p50_s: pct(lat, 0.5), p95_s: pct(lat, 0.95), max_s: pct(lat, 1),
    health_polls: hl.length, health_fails: healthFails, health_p95_s: pct(hl, 0.95), health_max_s: pct(hl, 1),
    slow_opened: opened, slow_closed_by_server: closedByServer, slow_held_at_end: held,
  };
  console.log(JSON.stringify(out));
  process.exit(errors.length || healthFails ? 1 : 0);
})();
