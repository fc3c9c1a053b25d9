// Slowloris: libmicrohttpd's connection timeout is an idle timeout, so a client that trickles
// its request one byte at a time would keep its connection for ever. The server enforces
// absolute deadlines (server/http_guard.h): the request head within
// TOOLCAGE_HTTP_HEADER_TIMEOUT_MS of the accept (2 s here), the body at
// TOOLCAGE_HTTP_BODY_MIN_RATE bytes/s on average after the same grace, and a kept-alive
// connection's next request line within the 30 s idle allowance. Each test performs the attack
// and asserts when the server cut the connection, that nothing was answered, and that the
// server's descriptors come back; the last checks the same server still serves normally.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import fs from 'node:fs';
import { setup, SLOW, sleep } from './harness.mjs';

const HEAD_MS = 2000;
const server = setup('robustness-deadlines', {
  serveEnv: { TOOLCAGE_HTTP_HEADER_TIMEOUT_MS: String(HEAD_MS), TOOLCAGE_HTTP_BODY_MIN_RATE: '1024' },
});

// How late after its deadline a cut may be observed: the guard scans every 100 ms; the rest is
// this process's event loop and a loaded machine.
const LATE = 1000 * SLOW;

const fdCount = () => fs.readdirSync(`/proc/${server.proc.pid}/fd`).length;

/**
 * Opens a connection, writes `first` (if any), then one byte of `trickle` every `every` ms.
 * Resolves when the server ends the connection (or after `max` ms) with
 * {ms (from the connect), sent (trickled bytes), got (what the server sent), why}.
 */
function trickle({ first = '', trickle: rest = '', every = 1000, max = 20_000 }) {
  return new Promise((resolve) => {
    const s = net.connect(server.port, '127.0.0.1');
    const got = [];
    let t0 = 0;
    let sent = 0;
    let timer;
    const done = (why) => {
      clearInterval(timer);
      clearTimeout(cap);
      s.destroy();
      resolve({ ms: Date.now() - t0, sent, got: Buffer.concat(got).toString('latin1'), why });
    };
    const cap = setTimeout(() => done('still open'), max);
    s.on('data', (d) => got.push(d));
    s.on('end', () => done('closed'));
    s.on('error', (e) => done(e.code || 'error'));
    s.on('connect', () => {
      t0 = Date.now();
      if (first) s.write(first);
      timer = setInterval(() => {
        if (sent < rest.length && !s.destroyed) s.write(rest[sent++]);
      }, every);
    });
  });
}

async function healthzFast() {
  const h = await server.request('GET', '/healthz', { timeout: 5000 });
  assert.equal(h.status, 200);
  assert.ok(h.ms < 1000 * SLOW, `/healthz took ${h.ms.toFixed(0)} ms`);
}

test('a request head trickled one byte per second is cut off at the header deadline', async () => {
  const before = fdCount();
  const pending = trickle({ trickle: 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: ' + 'a'.repeat(100) });
  await sleep(500);
  await healthzFast(); // others are served meanwhile
  const r = await pending;
  assert.equal(r.why, 'closed', JSON.stringify(r));
  assert.ok(r.ms >= HEAD_MS - 50 && r.ms <= HEAD_MS + LATE, `cut after ${r.ms} ms (deadline ${HEAD_MS} ms)`);
  assert.equal(r.got, '', 'nothing is answered to a request that never arrived');
  // the trickle kept going the whole time: an idle timeout alone would never have fired
  assert.ok(r.sent >= 1, `only ${r.sent} bytes trickled`);
  // the line is written after the socket is closed: give the server a moment to write it
  const cut = /\{"waiting_for":"request head","ms":\d+,[^\n]*"msg":"connection cut: too slow"\}/;
  await until(() => cut.test(fs.readFileSync(server.logPath, 'utf8')), 3000 * SLOW, 'the "connection cut" log line');
  await until(() => fdCount() <= before + 2, 5000, `descriptors: ${fdCount()} (was ${before})`);
});

test('a connection that sends nothing at all is cut at the same deadline', async () => {
  const r = await trickle({});
  assert.equal(r.why, 'closed');
  assert.ok(r.ms >= HEAD_MS - 50 && r.ms <= HEAD_MS + LATE, `cut after ${r.ms} ms`);
});

test('a complete head that arrives in time is answered, however it is split', async () => {
  const head = 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n';
  const r = await trickle({ first: head.slice(0, 10), trickle: head.slice(10), every: 20 });
  assert.match(r.got, /^HTTP\/1\.1 200 /, JSON.stringify(r));
});

test('a body that trickles below TOOLCAGE_HTTP_BODY_MIN_RATE is cut after the grace', async () => {
  const first = `POST /v1/prescreen HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${server.keys.agent}\r\n` +
    'Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"tool":"python","code":"';
  const r = await trickle({ first, trickle: 'x'.repeat(100), every: 200 });
  assert.equal(r.why, 'closed', JSON.stringify(r));
  // ~5 bytes/s earn nothing noticeable: cut at the grace (= the header deadline)
  assert.ok(r.ms >= HEAD_MS - 50 && r.ms <= HEAD_MS + LATE, `cut after ${r.ms} ms`);
  assert.equal(r.got, '');
});

test('a body above the minimum rate may take longer than the grace', async () => {
  // 8 KiB at ~2.5 KiB/s: 3.2 s in all, beyond the 2 s grace, never below 1 KiB/s on average
  const code = 'x'.repeat(8000);
  const body = JSON.stringify({ tool: 'python', code: `# ${code}\nprint(1)` });
  const head = `POST /v1/prescreen HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${server.keys.agent}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`;
  const chunks = body.match(/[^]{1,256}/g);
  const r = await new Promise((resolve) => {
    const s = net.connect(server.port, '127.0.0.1');
    const got = [];
    const t0 = Date.now();
    s.on('data', (d) => got.push(d));
    s.on('close', () => resolve({ ms: Date.now() - t0, got: Buffer.concat(got).toString() }));
    s.on('error', () => {});
    s.on('connect', async () => {
      s.write(head);
      for (const c of chunks) {
        await sleep(100);
        if (s.destroyed) return;
        s.write(c);
      }
    });
  });
  assert.ok(r.ms > HEAD_MS, `sent in ${r.ms} ms: not a test of the grace`);
  assert.match(r.got, /^HTTP\/1\.1 200 /, r.got.slice(0, 300));
});

test('a kept-alive connection may idle longer than the header deadline, then its next head is due', async () => {
  const s = net.connect(server.port, '127.0.0.1');
  const got = [];
  let closedAt = 0;
  s.on('data', (d) => got.push(d));
  s.on('close', () => { closedAt = Date.now(); });
  s.on('error', () => {});
  await new Promise((r) => s.on('connect', r));
  s.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  await until(() => Buffer.concat(got).toString().includes('{"status":"ok"}'), 5000, 'first answer');
  await sleep(HEAD_MS + 1000); // idle, between requests: allowed (30 s)
  assert.equal(closedAt, 0, 'an idle kept-alive connection was cut at the header deadline');
  got.length = 0;
  s.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  await until(() => Buffer.concat(got).toString().includes('{"status":"ok"}'), 5000, 'second answer');
  // the third request line arrives, its headers trickle: due HEAD_MS after the line
  got.length = 0;
  s.write('GET /healthz HTTP/1.1\r\n');
  const t0 = Date.now();
  const timer = setInterval(() => { if (!s.destroyed) s.write('X'); }, 500);
  try {
    await until(() => closedAt > 0, HEAD_MS + 5000 * SLOW, 'the trickled third request was not cut');
  } finally {
    clearInterval(timer);
    s.destroy();
  }
  const ms = closedAt - t0;
  assert.ok(ms >= HEAD_MS - 100 && ms <= HEAD_MS + LATE, `third head cut after ${ms} ms`);
  assert.equal(Buffer.concat(got).length, 0);
});

test('100 trickling connections are all cut at the deadline, and the server is well afterwards', async () => {
  const before = fdCount();
  const all = Array.from({ length: 100 }, () => trickle({ trickle: 'GET /healthz HTTP/1.1\r\nX: ' + 'a'.repeat(50), every: 300 }));
  await sleep(300);
  await healthzFast();
  const res = await Promise.all(all);
  for (const r of res) {
    assert.equal(r.why, 'closed', JSON.stringify(r));
    assert.ok(r.ms <= HEAD_MS + LATE * 2, `cut after ${r.ms} ms`);
  }
  await until(() => fdCount() <= before + 2, 5000, `descriptors: ${fdCount()} (was ${before})`);
  await healthzFast();
  const { json } = await server.execute({ tool: 'python', code: 'print(6 * 7)' });
  assert.equal(json.stdout, '42\n');
});

async function until(fn, ms, what) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await fn()) return;
    await sleep(50);
  }
  assert.fail(what);
}
