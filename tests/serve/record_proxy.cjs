// A recording HTTP proxy on 127.0.0.1 for the agent CLI tests (agent_cli_test.cpp): forwards every request
// to the server at 127.0.0.1:<target port> and appends one JSON line per exchange to <log file>:
// {method, url, status, request (the body as sent, parsed when JSON), error (the answer's body when the
// status is not 2xx)}. Streams pass through as they come. Prints the readiness line serve_daemon.h waits
// for: "ready: serving proxy on http://127.0.0.1:<port>".
//   node record_proxy.cjs <target port> <log file>
'use strict';
const http = require('http');
const fs = require('fs');
const zlib = require('zlib');

const [target, logFile] = [Number(process.argv[2]), process.argv[3]];

// The answer's body as text, undoing the content-encoding the server chose (the clients accept gzip, br).
function decoded(buf, encoding) {
  try {
    if (encoding === 'gzip') return zlib.gunzipSync(buf).toString();
    if (encoding === 'br') return zlib.brotliDecompressSync(buf).toString();
    if (encoding === 'deflate') return zlib.inflateSync(buf).toString();
  } catch (e) {
    return `undecodable ${encoding} body: ${e}`;
  }
  return buf.toString();
}

function parsed(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const up = http.request(
      {host: '127.0.0.1', port: target, method: req.method, path: req.url, headers: req.headers},
      (ur) => {
        res.writeHead(ur.statusCode, ur.headers);
        const ok = ur.statusCode >= 200 && ur.statusCode < 300;
        const answer = [];
        ur.on('data', (c) => {
          if (!ok) answer.push(c);
          res.write(c);
        });
        ur.on('end', () => {
          res.end();
          const line = {method: req.method, url: req.url, status: ur.statusCode,
                        request: parsed(body.toString())};
          if (!ok) line.error = parsed(decoded(Buffer.concat(answer), ur.headers['content-encoding']));
          fs.appendFileSync(logFile, JSON.stringify(line) + '\n');
        });
      });
    up.on('error', (e) => {
      res.writeHead(502);
      res.end(String(e));
    });
    up.end(body);
  });
});
server.listen(0, '127.0.0.1', () => {
  console.log(`ready: serving proxy on http://127.0.0.1:${server.address().port}`);
});
