// Robustness of the HTTP surface under hostile clients: slow and idle connections, lying
// framing, odd request targets, JSON bombs, abandoned long-polls and streams, races on one
// Idempotency-Key or one approval, and shutdown with everything in flight. Each test asserts
// the server survives with evidence: /healthz answers fast, a normal execute still works,
// toolcage_sandboxes_in_flight returns to 0, the open descriptors of the server process
// return to their baseline, and (harness) SIGTERM exits 0 with no sanitizer report.
// Known bugs are `todo` tests that name the bug; they turn green when it is fixed.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import fs from 'node:fs';
import crypto from 'node:crypto';
import { setup, Server, SLOW, sleep, assertProblem } from './harness.mjs';

// A database of its own: the tests below write megabytes of audit records.
const server = setup('robustness', { freshDatabase: true });

// ---------------------------------------------------------------------------
// helpers

/** Sends raw bytes (a string or Buffer, or an array sent 20 ms apart) and collects what
 * comes back until the server closes or `timeout` ms pass. */
function raw(data, { timeout = 5000 * SLOW, port = server.port, from } = {}) {
  return new Promise((resolve) => {
    const chunks = [];
    const t0 = Date.now();
    const s = net.connect({ port, host: '127.0.0.1', ...(from ? { localAddress: from } : {}) });
    let done = false;
    const finish = (why) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      s.destroy();
      const buf = Buffer.concat(chunks);
      resolve({ buf, text: buf.toString('latin1'), why, ms: Date.now() - t0, status: Number(buf.toString('latin1').match(/^HTTP\/1\.[01] (\d{3})/)?.[1] ?? 0) });
    };
    const timer = setTimeout(() => finish('timeout'), timeout);
    s.on('data', (d) => chunks.push(d));
    s.on('end', () => finish('closed'));
    s.on('error', () => finish('error'));
    s.on('connect', async () => {
      for (const part of Array.isArray(data) ? data : [data]) {
        if (s.destroyed) break;
        s.write(part);
        if (Array.isArray(data)) await sleep(20);
      }
    });
  });
}

function openSocket(port = server.port) {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => resolve(s));
    s.on('error', reject);
  });
}

const fdCount = (srv = server) => fs.readdirSync(`/proc/${srv.proc.pid}/fd`).length;

async function metric(name, srv = server) {
  const r = await srv.request('GET', '/metrics');
  const m = r.text.match(new RegExp(`^${name} (\\S+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
}

async function until(fn, ms, what) {
  const deadline = Date.now() + ms;
  let last;
  while (Date.now() < deadline) {
    last = await fn();
    if (last === true) return;
    await sleep(100);
  }
  assert.fail(`${what} (last: ${JSON.stringify(last)})`);
}

/** The descriptors of the server process come back to at most baseline + slack. */
async function fdsBackTo(baseline, srv = server, slack = 2) {
  await until(async () => fdCount(srv) <= baseline + slack || fdCount(srv), 10_000 * SLOW,
    `the server's open descriptors did not return to ${baseline} (+${slack})`);
}

/** The server is well: /healthz fast, an execute works, nothing left in flight. */
async function assertHealthy(srv = server) {
  const h = await srv.request('GET', '/healthz', { timeout: 5000 });
  assert.equal(h.status, 200);
  assert.ok(h.ms < 1000 * SLOW, `/healthz took ${h.ms.toFixed(0)} ms`);
  const { json } = await srv.execute({ tool: 'python', code: 'print(6 * 7)' });
  assert.equal(json.stdout, '42\n', JSON.stringify(json).slice(0, 600));
  await until(async () => (await metric('toolcage_sandboxes_in_flight', srv)) === 0 || 'in flight', 10_000 * SLOW,
    'toolcage_sandboxes_in_flight did not return to 0');
}

const auth = (key) => `Authorization: Bearer ${key}\r\n`;
const get = (path, extra = '') => `GET ${path} HTTP/1.1\r\nHost: x\r\n${extra}Connection: close\r\n\r\n`;

async function held(marker = crypto.randomBytes(4).toString('hex'), srv = server, code) {
  const r = await srv.request('POST', '/v1/execute', {
    key: srv.keys.agent,
    json: { tool: 'deploy', code: code ?? `echo deploy ${marker}` },
  });
  assert.equal(r.status, 202, r.text.slice(0, 500));
  return r.json;
}

// ---------------------------------------------------------------------------
// Slowloris: one connection trickles its header one byte every 5 s from the start of the
// file; the last test checks that the server cut it off at the header deadline
// (TOOLCAGE_HTTP_HEADER_TIMEOUT_MS, 10 s by default; MHD's own 30 s timeout is an idle timeout
// and never would). robustness-deadlines.test.mjs tests the deadlines one by one.

let slowloris = null;
function startSlowloris() {
  const st = { start: Date.now(), closedAt: null, sent: 0 };
  const s = net.connect(server.port, '127.0.0.1');
  st.socket = s;
  const head = Buffer.from('GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: ');
  s.on('close', () => { st.closedAt ??= Date.now(); clearInterval(st.timer); });
  s.on('error', () => {});
  s.on('connect', () => {
    s.write(head);
    st.timer = setInterval(() => { if (!s.destroyed) { s.write('a'); st.sent++; } }, 5000);
  });
  return st;
}
after(() => { if (slowloris) { clearInterval(slowloris.timer); slowloris.socket.destroy(); } });

test('baseline: the server is healthy (and a slowloris connection starts trickling)', async () => {
  slowloris = startSlowloris();
  await assertHealthy();
});

// ---------------------------------------------------------------------------
// Connections

// 200: below the per-address limit (TOOLCAGE_MAX_CONNECTIONS_PER_IP, 256), so that the server
// really holds them all; the next test goes past it.
test('200 idle and half-sent connections do not starve other clients; their descriptors are released', async () => {
  const before = fdCount();
  const socks = [];
  for (let i = 0; i < 200; i++) {
    const s = await openSocket();
    s.on('error', () => {});
    if (i % 2) s.write(`POST /v1/execute HTTP/1.1\r\nHost: x\r\n${auth(server.keys.agent)}Content-Length: 100\r\n\r\n{"tool":`);
    socks.push(s);
  }
  await until(async () => fdCount() >= before + 190 || fdCount(), 5000, 'the server did not accept the connections');
  await assertHealthy();
  for (const s of socks) s.destroy();
  await fdsBackTo(before);
});

test('1000 idle connections from one client do not lock everyone else out', async () => {
  const before = fdCount();
  const socks = [];
  try {
    for (let i = 0; i < 1000; i++) {
      const s = await openSocket().catch(() => null);
      if (!s) break;
      s.on('error', () => {});
      socks.push(s);
    }
    await sleep(300);
    // another client (another loopback address) still gets in: one address holds at most
    // TOOLCAGE_MAX_CONNECTIONS_PER_IP (256) of the 1000 slots
    const r = await raw(get('/healthz'), { timeout: 3000, from: '127.0.0.2' });
    assert.equal(r.status, 200, `with ${socks.length} idle connections open, /healthz got: ${JSON.stringify(r.text.slice(0, 80))} (${r.why})`);
    const own = await raw(get('/healthz'), { timeout: 3000 });
    assert.notEqual(own.status, 200, 'the client holding the connections got yet another one');
    assert.ok(fdCount() - before <= 256 + 8, `the server holds ${fdCount() - before} connections for one address`);
  } finally {
    for (const s of socks) s.destroy();
    await fdsBackTo(before);
  }
});

test('Content-Length longer than the body: the request waits, other clients are unaffected, nothing leaks', async () => {
  const before = fdCount();
  const pending = Array.from({ length: 20 }, () =>
    raw(`POST /v1/execute HTTP/1.1\r\nHost: x\r\n${auth(server.keys.agent)}Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"tool":"python","code":"print(1)"}`, { timeout: 1500 }));
  await sleep(300);
  await assertHealthy();
  const res = await Promise.all(pending);
  for (const r of res) assert.equal(r.why, 'timeout', `a truncated body was answered: ${r.text.slice(0, 200)}`);
  await fdsBackTo(before);
});

test('Content-Length shorter than the body: the surplus is parsed as a next request, never executed as part of the first', async () => {
  const body = '{"tool":"python","code":"print(1)"}';
  const r = await raw(`POST /v1/execute HTTP/1.1\r\nHost: x\r\n${auth(server.keys.agent)}Content-Length: 10\r\n\r\n${body}`, { timeout: 3000 });
  assert.equal(r.status, 400, r.text.slice(0, 300));
  assert.match(r.text, /invalid-json/);
  assert.ok(!/"stdout"/.test(r.text), 'something ran');
});

test('two Content-Length headers, or one with Transfer-Encoding, are refused (request smuggling)', async () => {
  for (const [a, b] of [[0, 5], [5, 0], [5, 5]]) {
    // the second request hides in the first one's body for whoever reads the other length
    const smuggled = `GET /v1/tools HTTP/1.1\r\nHost: x\r\n\r\n`;
    const r = await raw(`POST /v1/prescreen HTTP/1.1\r\nHost: x\r\nContent-Length: ${a}\r\nContent-Length: ${b}\r\n\r\nabcde${smuggled}`);
    assert.equal(r.status, 400, `Content-Length: ${a} and ${b}: ${r.text.slice(0, 120)}`);
    assert.match(r.text, /urn:toolcage:problem:bad-request/);
    assert.equal(r.text.match(/HTTP\/1\.1 \d{3}/g).length, 1, 'one response, then the connection is closed');
  }
  const te = await raw(`POST /v1/prescreen HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`);
  assert.equal(te.status, 400, te.text.slice(0, 120));
  assert.match(te.text, /not both/);
  await assertHealthy();
});

test('an invalid Content-Length gets exactly one response', {
  // Not fixable in toolcage with libmicrohttpd 0.9.75 (Debian 12): its parse_connection_headers()
  // queues its own 400/413 and builds the response header, then MHD_connection_handle_idle()
  // overwrites the state with HEADERS_PROCESSED and builds the header a second time. No
  // application callback runs in between (the access handler never sees this request, the URI
  // log callback runs before the headers are read), so the application cannot step in.
  // libmicrohttpd 1.0.0 fixed it (the state is checked after parse_connection_headers()).
  todo: 'bug of libmicrohttpd 0.9.75, fixed in 1.0.0: "Content-Length: -1" or a 23-digit value gets its status line and headers sent twice, the second copy inside the first one\'s body; the access handler is never called for it',
}, async () => {
  for (const cl of ['-1', '99999999999999999999999']) {
    const r = await raw(`POST /v1/execute HTTP/1.1\r\nHost: x\r\nContent-Length: ${cl}\r\nConnection: close\r\n\r\nabc`);
    assert.ok([400, 413].includes(r.status), r.text.slice(0, 200));
    assert.equal(r.text.match(/HTTP\/1\.1 \d{3}/g).length, 1, `Content-Length: ${cl}: ${JSON.stringify(r.text)}`);
  }
});

test('a chunked body over the cap, and a chunk size that overflows, give 413 and the server stays well', async () => {
  const big = 'f'.repeat(18);
  const r1 = await raw(`POST /v1/execute HTTP/1.1\r\nHost: x\r\n${auth(server.keys.agent)}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n${big}\r\nabc\r\n0\r\n\r\n`);
  assert.equal(r1.status, 413, r1.text.slice(0, 200));
  // 5 MiB in 64 KiB chunks: drained, not buffered, then 413 from the handler
  const chunk = `10000\r\n${'x'.repeat(0x10000)}\r\n`;
  const r2 = await raw([`POST /v1/execute HTTP/1.1\r\nHost: x\r\n${auth(server.keys.agent)}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n`, chunk.repeat(80), '0\r\n\r\n'], { timeout: 20_000 * SLOW });
  assert.equal(r2.status, 413, r2.text.slice(0, 300));
  await assertHealthy();
});

// ---------------------------------------------------------------------------
// Request line, targets and headers

test('odd methods, versions and request targets get a clean answer, never a hang or a crash', async () => {
  const cases = [
    [get('*'), 404],
    ['OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', 404],
    [get('http://evil.example/v1/tools'), 404],
    [get('/v1/../healthz'), 404],
    [get('/%2e%2e/healthz'), 404],
    [get('//healthz'), 404],
    [get('/healthz/'), 404],
    [get('/v1/tools/'), 404],
    [get('/v1/executions//'), 404],
    ['FOO /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', 405],
    ['G\tET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', 0],
    ['GET /healthz HTTP/9.9\r\nHost: x\r\nConnection: close\r\n\r\n', 505],
    ['GET /healthz HTTP/1.0\r\n\r\n', 200],
    [`GET /healthz?${'a'.repeat(100_000)} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`, 414],
    [`GET /v1/executions/${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n${auth(server.keys.agent)}Connection: close\r\n\r\n`, 404],
    [`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(100_000)}\r\nConnection: close\r\n\r\n`, 431],
    [`GET /healthz HTTP/1.1\r\nHost: x\r\n${Array.from({ length: 5000 }, (_, i) => `X-H${i}: v\r\n`).join('')}Connection: close\r\n\r\n`, 431],
    [`GET /v1/tools HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${'a'.repeat(10_000)}\r\nConnection: close\r\n\r\n`, 401],
    ['\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03' + 'x'.repeat(64) + '\r\n\r\n', 0], // a TLS ClientHello
  ];
  const results = await Promise.all(cases.map(([req]) => raw(req)));
  results.forEach((r, i) => {
    const [req, want] = cases[i];
    assert.notEqual(r.why, 'timeout', `${JSON.stringify(req.slice(0, 60))}: no answer`);
    if (want) assert.equal(r.status, want, `${JSON.stringify(req.slice(0, 60))}: ${JSON.stringify(r.text.slice(0, 200))}`);
  });
  await assertHealthy();
});

// libmicrohttpd 0.9.75 keeps the request line and headers as C strings, so a raw NUL would cut
// them short (GET /healthz\0junk would answer as /healthz); the server finds the NUL from where
// the strings lie in the read buffer and refuses the request (server/http.c, head_nul()).
test('%00 or a raw NUL in the path does not truncate it onto another route', async () => {
  for (const req of [get('/healthz%00junk'), get('/healthz\0junk'), get('/v1/audit/1%00junk', auth(server.keys.auditor)),
    get('/v1/tools%00/../../admin', auth(server.keys.agent))]) {
    const r = await raw(req);
    assert.ok([400, 404].includes(r.status), `${JSON.stringify(req.slice(0, 40))}: ${r.text.slice(0, 120)}`);
  }
  // a raw NUL in the method, the target or a header value: 400, and the connection is closed
  for (const req of [get('/healthz\0junk'), get('/healthz\0'), 'GET\0junk /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    get('/v1/tools?x=1\0&y=2', auth(server.keys.agent)),
    get('/v1/tools', `Authorization: Bearer ${server.keys.agent}\u0000junk\r\n`),
    `GET /v1/tools HTTP/1.1\r\nAuthorization: Bearer ${server.keys.agent}\u0000junk\r\nHost: x\r\n\r\n`,
    `GET /v1/tools HTTP/1.1\nHost: x\nAuthorization: Bearer ${server.keys.agent}\u0000junk\n\n`,
    // a line that starts with NUL ends the head for libmicrohttpd: what follows it would
    // become the body or the next request for it, and headers for a proxy in front
    `GET /v1/tools HTTP/1.1\r\nHost: x\r\n\0X-Smuggled: 1\r\n${auth(server.keys.agent)}\r\n`,
    `POST /v1/prescreen HTTP/1.1\r\nHost: x\r\n\0\r\nContent-Length: 5\r\n\r\nabcde`]) {
    const r = await raw(req);
    assert.equal(r.status, 400, `${JSON.stringify(req.slice(0, 60))}: ${r.text.slice(0, 200)}`);
    assert.match(r.text, /urn:toolcage:problem:bad-request/);
    assert.match(r.text, /NUL byte/);
    assert.equal(r.why, 'closed');
  }
  // the same requests without the NUL are answered as usual (the check has no false alarms,
  // also with bare LF line ends, an empty header value and several spaces after the method)
  for (const [req, want] of [[get('/healthz'), 200], [get('/v1/tools?x=1&y=%41', auth(server.keys.agent)), 200],
    [`GET /v1/tools HTTP/1.1\nHost: x\nX-Empty:\nAuthorization: Bearer ${server.keys.agent}\nConnection: close\n\n`, 200],
    ['GET   /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', 200]]) {
    const r = await raw(req);
    assert.equal(r.status, want, `${JSON.stringify(req.slice(0, 60))}: ${r.text.slice(0, 200)}`);
  }
});

test('Authorization variants: scheme case-insensitive, anything malformed or huge is a quick 401, never a 5xx', async () => {
  const key = server.keys.agent;
  const cases = [
    [`authorization: bearer ${key}\r\n`, 200],
    [`Authorization: BEARER ${key}\r\n`, 200],
    [`Authorization: Bearer  ${key}\r\n`, 401],
    [`Authorization: Bearer\t${key}\r\n`, 401],
    [`Authorization: Basic ${Buffer.from(`x:${key}`).toString('base64')}\r\n`, 401],
    [`Authorization: Bearer ${key.slice(0, -1)}%\r\n`, 401],
    [`Authorization: Bearer ${key}${'A'.repeat(10_000)}\r\n`, 401],
    ['Authorization: Bearer \r\n', 401],
    ['Authorization:\r\n', 401],
  ];
  const results = await Promise.all(cases.map(([h]) => raw(get('/v1/tools', h))));
  results.forEach((r, i) => assert.equal(r.status, cases[i][1], `${JSON.stringify(cases[i][0].slice(0, 40))}: ${r.text.slice(0, 200)}`));
  // 200 concurrent 10 KB bogus tokens: all 401, quickly
  const t0 = Date.now();
  const many = await Promise.all(Array.from({ length: 200 }, () => raw(get('/v1/tools', `Authorization: Bearer tc_${'x'.repeat(10_000)}\r\n`))));
  assert.ok(many.every((r) => r.status === 401), many.map((r) => r.status).join(','));
  assert.ok(Date.now() - t0 < 5000 * SLOW, `200 bogus tokens took ${Date.now() - t0} ms`);
  await assertHealthy();
});

test('two Authorization headers are refused rather than one of them silently used', async () => {
  const r = await raw(get('/v1/tools', `Authorization: Bearer ${server.keys.agent}\r\nAuthorization: Bearer tc_forged\r\n`));
  assert.ok([400, 401].includes(r.status), r.text.slice(0, 200));
});

// ---------------------------------------------------------------------------
// JSON bombs

async function post(path, body, key = server.keys.agent, timeout = 60_000 * SLOW) {
  return server.request('POST', path, { key, body, headers: { 'content-type': 'application/json' }, timeout });
}

test('JSON bombs under the 4 MiB cap are refused quickly and cleanly', async () => {
  const cases = [
    ['['.repeat(100_000), 400, 'invalid-json'],
    ['{"a":'.repeat(100_000), 400, 'invalid-json'],
    [`{"tool":"python","code":[${Array(1_900_000).fill('0').join(',')}]}`, 400, 'validation'],
    ['{"tool":"python","code":"\\ud800"}', 400, 'invalid-json'],
    ['{"tool":"python","code":"\\udc00\\ud800"}', 400, 'invalid-json'],
    [Buffer.from([...Buffer.from('{"tool":"python","code":"'), 0xc0, 0xaf, ...Buffer.from('"}')]), 400, 'invalid-encoding'],
    [Buffer.from([...Buffer.from('{"tool":"python","code":"'), 0xed, 0xa0, 0x80, ...Buffer.from('"}')]), 400, 'invalid-encoding'],
    [Buffer.from([...Buffer.from('{"tool":"python","code":"'), 0xf4, 0x90, 0x80, 0x80, ...Buffer.from('"}')]), 400, 'invalid-encoding'],
    ['{"tool":"python","code":"x","limits":{"timeout_ms":1e999}}', 400, 'invalid-json'],
    ['{"tool":"python","code":"x","limits":{"timeout_ms":-1e999}}', 400, 'invalid-json'],
    ['{"tool":"python","code":"x","limits":{"timeout_ms":99999999999999999999999}}', 400, 'invalid-json'],
    ['{"tool":"python","code":"x","limits":{"timeout_ms":9223372036854775807}}', 422, 'limit-exceeds-policy'],
    ['{"tool":"python","code":"x","limits":{"timeout_ms":-9223372036854775808}}', 400, 'validation'],
    ['{"tool":"python","code":"x","limits":{"timeout_ms":1.0e2}}', 400, 'validation'],
    ['{"tool":"python","tool":"shell","code":"x"}', 400, 'invalid-json'],
    ['{"tool":"python","code":"x"}\u0000', 400, 'invalid-json'],
    ['\ufeff{"tool":"python","code":"x"}', 400, 'invalid-json'],
  ];
  for (const [body, status, type] of cases) {
    const r = await post('/v1/execute', body);
    assertProblem(r, status, type);
    assert.ok(r.ms < 10_000 * SLOW, `${String(body).slice(0, 40)} took ${r.ms.toFixed(0)} ms`);
  }
  await assertHealthy();
});

test('a body of 340 000 unknown fields gets a bounded problem response', async () => {
  const keys = Array.from({ length: 340_000 }, (_, i) => `"k${i}":0`).join(',');
  for (const [path, body] of [['/v1/execute', `{${keys}}`], ['/v1/execute', `{"tool":"python","code":"x","limits":{${keys}}}`], ['/v1/prescreen', `{${keys}}`]]) {
    const r = await post(path, body);
    assertProblem(r, 400, 'validation');
    assert.ok(r.body.length < 64 * 1024, `${path}: ${body.length} byte request got a ${r.body.length} byte answer in ${r.ms.toFixed(0)} ms`);
  }
});

// ---------------------------------------------------------------------------
// Long-polls

test('?wait long-polls abandoned by their clients are released at their deadline; edge values are refused', async () => {
  const e = await held();
  const path = `/v1/executions/${e.id}`;
  const before = fdCount();
  const socks = await Promise.all(Array.from({ length: 50 }, () => openSocket()));
  for (const s of socks) {
    s.on('error', () => {});
    s.write(`GET ${path}?wait=2 HTTP/1.1\r\nHost: x\r\n${auth(server.keys.agent)}\r\n`);
  }
  await sleep(300);
  for (const s of socks) s.destroy();
  await assertHealthy();
  await sleep(2500);
  await fdsBackTo(before);
  // repeated parameter: the first one counts (a 1 s wait, not 60 s)
  const t0 = Date.now();
  const r = await server.request('GET', `${path}?wait=1&wait=60`, { key: server.keys.agent, timeout: 10_000 * SLOW });
  assert.equal(r.status, 200);
  assert.equal(r.json.status, 'pending_approval');
  assert.ok(Date.now() - t0 < 5000 * SLOW && Date.now() - t0 >= 900, `wait=1&wait=60 took ${Date.now() - t0} ms`);
  for (const w of ['61', '-1', '1.5', '', '0x10', '1e1', '99999999999999999999']) {
    const b = await server.request('GET', `${path}?wait=${w}`, { key: server.keys.agent, timeout: 5000 * SLOW });
    assert.equal(b.status, 400, `wait=${w}: ${b.text.slice(0, 200)}`);
  }
});

// ---------------------------------------------------------------------------
// Idempotency-Key and approval races

test('the same Idempotency-Key sent 20 times at once runs exactly one execution', async () => {
  const marker = `idem-${crypto.randomBytes(6).toString('hex')}`;
  const key = crypto.randomUUID();
  const payload = { tool: 'python', code: `import time; time.sleep(0.5); print("${marker}")` };
  const res = await Promise.all(Array.from({ length: 20 }, () =>
    server.request('POST', '/v1/execute', { key: server.keys.agent, json: payload, headers: { 'idempotency-key': key } })));
  const ok = res.filter((r) => r.status === 200);
  const busy = res.filter((r) => r.status === 409);
  assert.equal(ok.length + busy.length, 20, res.map((r) => `${r.status} ${r.text.slice(0, 100)}`).join('\n'));
  assert.ok(ok.length >= 1);
  assert.equal(new Set(ok.map((r) => r.json.id)).size, 1, 'different executions for one key');
  for (const b of busy) assert.equal(b.json.type, 'urn:toolcage:problem:idempotency-in-progress');
  // a replay afterwards answers from the first
  const again = await server.request('POST', '/v1/execute', { key: server.keys.agent, json: payload, headers: { 'idempotency-key': key } });
  assert.equal(again.status, 200);
  assert.equal(again.json.id, ok[0].json.id);
  // the audit trail has one "execute" record for it
  const audit = await server.request('GET', '/v1/audit?action=execute&limit=500', { key: server.keys.auditor });
  const mine = audit.json.records.filter((x) => JSON.stringify(x.record).includes(marker));
  assert.equal(mine.length, 1, `${mine.length} execute records for one Idempotency-Key`);
  await assertHealthy();
});

test('concurrent approve and deny on one approval: one outcome, no 5xx, the call runs at most once', async () => {
  const e = await held();
  const fire = (key, what) => server.request('POST', `/v1/approvals/${e.approval_id}/${what}`, { key, json: { reason: `race ${what}` } });
  const res = await Promise.all([
    ...Array.from({ length: 10 }, () => fire(server.keys.reviewer, 'approve')),
    ...Array.from({ length: 10 }, () => fire(server.keys.admin, 'deny')),
  ]);
  for (const r of res) assert.ok([200, 409].includes(r.status), `${r.status} ${r.text.slice(0, 200)}`);
  const wins = res.filter((r) => r.status === 200);
  assert.equal(wins.length, 1, `${wins.length} decisions succeeded: ${wins.map((w) => w.text).join('\n')}`);
  const final = wins[0].json.status;
  assert.ok(['approved', 'denied'].includes(final), final);
  const x = await server.request('GET', `/v1/executions/${e.id}?wait=20`, { key: server.keys.agent, timeout: 30_000 * SLOW });
  assert.equal(x.json.status, final === 'approved' ? 'completed' : 'denied', x.text.slice(0, 300));
  const audit = await server.request('GET', `/v1/audit?limit=500`, { key: server.keys.auditor });
  const runs = audit.json.records.filter((r) => r.record.execution_id === e.id && /^execution\.(complete|refused|interrupted)$/.test(r.record.action));
  assert.equal(runs.length, final === 'approved' ? 1 : 0, JSON.stringify(runs.map((r) => r.record.action)));
  const v = await server.request('GET', '/v1/audit/verify', { key: server.keys.auditor });
  assert.equal(v.json.ok, true, v.text);
});

// ---------------------------------------------------------------------------
// Query parameters

test('audit q with SQL and LIKE metacharacters matches literally', async () => {
  const sfx = crypto.randomBytes(4).toString('hex');
  const reasons = [`lit${sfx} 100%_off 'x' \\ y`, `lit${sfx} 100Xaoff 'x' \\ y`, `lit${sfx} 100%off`, `lit${sfx} a_b`, `lit${sfx} axb`];
  for (const reason of reasons) {
    const e = await held();
    const d = await server.request('POST', `/v1/approvals/${e.approval_id}/deny`, { key: server.keys.reviewer, json: { reason } });
    assert.equal(d.status, 200, d.text);
  }
  const q = async (s) => {
    const r = await server.request('GET', `/v1/audit?action=approval.denied&limit=500&q=${encodeURIComponent(s)}`, { key: server.keys.auditor });
    assert.equal(r.status, 200, r.text.slice(0, 300));
    return r.json.records.map((x) => x.record.reason).filter((x) => x?.includes(`lit${sfx}`)).sort();
  };
  assert.deepEqual(await q('100%_off'), [reasons[0]]);
  assert.deepEqual(await q('100%'), [reasons[2], reasons[0]].sort());
  assert.deepEqual(await q(`${sfx} a_b`), [reasons[3]]);
  assert.deepEqual(await q("'x' \\ y"), [reasons[0], reasons[1]].sort());
  assert.deepEqual(await q("' OR '1'='1"), []);
  assert.deepEqual(await q('%'), [reasons[0], reasons[2]].sort());
  assert.deepEqual(await q('_'), [reasons[0], reasons[3]].sort());
  for (const bad of ['', 'x'.repeat(65)]) {
    const r = await server.request('GET', `/v1/audit?q=${bad}`, { key: server.keys.auditor });
    assertProblem(r, 400, 'validation');
  }
  // filters with metacharacters are values, not SQL
  for (const p of ["tool=python'--", 'actor=%25', "status=x'%20OR%20'1'='1", 'action=%5C']) {
    const r = await server.request('GET', `/v1/audit?${p}`, { key: server.keys.auditor });
    assert.equal(r.status, 200, r.text.slice(0, 300));
    assert.equal(r.json.records.length, 0, p);
  }
});

test('cursor and limit at the integer edges: 200 or 400, never 5xx', async () => {
  const A = server.keys.auditor;
  const cases = [
    ['/v1/audit?cursor=9223372036854775807', 200], ['/v1/audit?cursor=9223372036854775808', 400],
    ['/v1/audit?cursor=0', 400], ['/v1/audit?cursor=-1', 400], ['/v1/audit?cursor=-9223372036854775808', 400],
    ['/v1/audit?cursor=1', 200], ['/v1/audit?cursor=1e3', 400],
    ['/v1/audit?limit=0', 400], ['/v1/audit?limit=-5', 400], ['/v1/audit?limit=501', 400], ['/v1/audit?limit=500', 200],
    ['/v1/audit?limit=18446744073709551617', 400], ['/v1/audit?limit=1&limit=100000', 200],
    ['/v1/audit/9223372036854775807', 404], ['/v1/audit/9223372036854775808', 404], ['/v1/audit/0', 404],
    ['/v1/audit/-1', 404], ['/v1/audit/0x10', 404],
    ['/v1/audit?since=9999-99-99T99:99:99Z', 200], ['/v1/audit?since=2026-01-01T00:00:00.000Z&until=1970-01-01', 200],
  ];
  for (const [p, want] of cases) {
    const r = await server.request('GET', p, { key: A });
    assert.equal(r.status, want, `${p}: ${r.text.slice(0, 200)}`);
  }
  const R = server.keys.reviewer;
  for (const [p, want] of [
    ['/v1/approvals?cursor=bogus', 400], ['/v1/approvals?cursor=00000000-0000-0000-0000-000000000000', 200],
    ['/v1/approvals?cursor=ffffffff-ffff-ffff-ffff-ffffffffffff', 200], ["/v1/approvals?cursor='%20OR%201=1--", 400],
    ['/v1/approvals?limit=0', 400], ['/v1/approvals?limit=201', 400], ['/v1/approvals?limit=200', 200],
    ["/v1/approvals?status=pending'--", 400], ["/v1/approvals?tool=deploy'--", 200],
  ]) {
    const r = await server.request('GET', p, { key: R });
    assert.equal(r.status, want, `${p}: ${r.text.slice(0, 200)}`);
  }
});

// ---------------------------------------------------------------------------
// Streamed audit export

let bigAudit = false;
/** ~10 MiB of this tenant's audit records (held calls with 1 MiB of code each). */
async function ensureBigAudit() {
  if (bigAudit) return;
  for (let i = 0; i < 10; i++) await held(undefined, server, `# ${i} ${'x'.repeat(1024 * 1024 - 16)}`);
  bigAudit = true;
}

test('an audit export aborted mid-stream returns its DB connection: 50 requests afterwards are quick', async () => {
  await ensureBigAudit();
  const before = fdCount();
  for (let i = 0; i < 10; i++) {
    await new Promise((resolve) => {
      const s = net.connect(server.port, '127.0.0.1', () => s.write(get('/v1/audit/export', auth(server.keys.auditor))));
      let got = 0;
      s.on('data', (d) => { got += d.length; if (got > 200_000) { s.destroy(); resolve(); } });
      s.on('error', resolve);
      s.on('close', resolve);
    });
  }
  await sleep(500);
  const t0 = Date.now();
  const res = await Promise.all(Array.from({ length: 50 }, () => server.request('GET', '/v1/tools', { key: server.keys.auditor, timeout: 20_000 })));
  assert.deepEqual(res.map((r) => r.status), Array(50).fill(200));
  assert.ok(Date.now() - t0 < 3000 * SLOW, `50 requests after the aborted exports took ${Date.now() - t0} ms (pool not returned?)`);
  await fdsBackTo(before);
  await assertHealthy();
});

test('12 audit exports that the client does not read do not starve the DB pool (a pool of 8)', async () => {
  await ensureBigAudit();
  const socks = [];
  try {
    for (let i = 0; i < 12; i++) {
      const s = await openSocket();
      s.on('error', () => {});
      s.pause(); // stop reading: the kernel buffers fill and the stream stalls
      s.write(get('/v1/audit/export?format=csv', auth(server.keys.auditor)));
      socks.push(s);
    }
    // while they fill their sockets (each a batch of megabyte records), and after they stall:
    // a request waits for a connection in line, behind at most one batch of each
    for (const pause of [0, 300, 1500]) {
      await sleep(pause);
      const r = await server.request('GET', '/v1/tools', { key: server.keys.agent, timeout: 20_000 * SLOW });
      assert.equal(r.status, 200, `with 12 stalled exports: ${r.status} after ${r.ms.toFixed(0)} ms: ${r.text.slice(0, 200)}`);
      assert.ok(r.ms < 1000 * SLOW, `with 12 stalled exports (${pause} ms after) /v1/tools took ${r.ms.toFixed(0)} ms`);
    }
    // two of them stream (half the 4 HTTP threads); the others were refused at once, with
    // the stable type and a Retry-After, and lost nothing (nothing was started)
    const heads = await Promise.all(socks.map((s) => new Promise((resolve) => {
      let got = '';
      const done = () => resolve(got);
      s.on('data', (d) => { got += d.toString('latin1'); if (got.length > 4096) { s.pause(); done(); } });
      s.on('end', done);
      s.on('close', done);
      setTimeout(done, 3000 * SLOW);
      s.resume();
    })));
    const ok = heads.filter((h) => h.startsWith('HTTP/1.1 200'));
    const refused = heads.filter((h) => h.startsWith('HTTP/1.1 503'));
    assert.equal(ok.length, 2, heads.map((h) => h.split('\r\n')[0]).join(' | '));
    assert.equal(refused.length, 10, heads.map((h) => h.split('\r\n')[0]).join(' | '));
    for (const h of refused) {
      assert.match(h, /\r\nretry-after: \d+\r\n/i);
      assert.match(h, /urn:toolcage:problem:overloaded/);
    }
  } finally {
    for (const s of socks) s.destroy();
    await sleep(500);
  }
});

// ---------------------------------------------------------------------------
// Shutdown with everything in flight (a server of its own)

test('SIGTERM with 100 ?wait=60 long-polls, running sandboxes and keep-alive clients still hammering: exits 0 promptly', async () => {
  const s2 = new Server('robustness-shutdown');
  await s2.start();
  let stopping = false;
  const loops = [];
  try {
    const held2 = [];
    for (let i = 0; i < 90; i++) held2.push(await held(undefined, s2));
    const running = Array.from({ length: 4 }, () =>
      s2.request('POST', '/v1/execute', { key: s2.keys.agent, json: { tool: 'shell', code: 'sleep 30; echo late' }, timeout: 60_000 * SLOW, validate: false })
        .catch((e) => ({ status: 0, error: e.message })));
    await until(async () => (await metric('toolcage_sandboxes_in_flight', s2)) === 4 || 'not yet', 15_000 * SLOW, 'the 4 sleeps did not start');
    // 100 long-polls on the 90 held calls
    const ids = [...held2.map((h) => h.id)];
    const waits = Array.from({ length: 100 }, (_, i) => {
      const id = i < 90 ? ids[i] : ids[i % 90];
      return fetch(`${s2.base}/v1/executions/${id}?wait=60`, { headers: { authorization: `Bearer ${s2.keys.agent}` }, signal: AbortSignal.timeout(90_000) })
        .then(async (r) => ({ status: r.status, t: Date.now(), body: await r.text() }))
        .catch((e) => ({ status: 0, t: Date.now(), error: String(e.cause?.code || e.message) }));
    });
    // keep-alive clients that keep registering long-polls and reading /metrics during shutdown
    // (a long-poll registered after tc_waiters_wake_all() used to abort the process:
    // "MHD_stop_daemon() called while we have suspended connections")
    for (let k = 0; k < 12; k++) {
      loops.push((async () => {
        while (!stopping) {
          try {
            const path = k % 4 === 3 ? '/metrics' : `/v1/executions/${ids[k]}?wait=60`;
            const r = await fetch(s2.base + path, { headers: { authorization: `Bearer ${s2.keys.agent}` }, signal: AbortSignal.timeout(90_000) });
            await r.arrayBuffer();
          } catch {
            await sleep(10);
          }
        }
      })());
    }
    await sleep(1000);
    const t0 = Date.now();
    await s2.stop(); // asserts exit code 0 within 20 s and no sanitizer report
    stopping = true;
    const settled = await Promise.all(waits);
    for (const w of settled) assert.ok(w.t - t0 < 20_000 * SLOW, `a long-poll was left hanging ${w.t - t0} ms after SIGTERM`);
    shutdownPolls = settled;
    await Promise.all(running);
  } finally {
    stopping = true;
    await s2.kill();
    await Promise.all(loops);
  }
});

let shutdownPolls = null;
test('at shutdown the suspended long-polls get an answer, not a reset', () => {
  assert.ok(shutdownPolls, 'the shutdown test did not run');
  const answered = shutdownPolls.filter((w) => w.status === 200).length;
  assert.ok(answered >= 90, `only ${answered} of 100 long-polls got an answer at shutdown: ${JSON.stringify(shutdownPolls.filter((w) => w.status !== 200).slice(0, 3))}`);
});

// ---------------------------------------------------------------------------

test('slowloris: a request whose header is still incomplete at the 10 s header deadline has been cut off', async () => {
  assert.ok(slowloris, 'the slowloris connection was not started');
  const left = 40_000 - (Date.now() - slowloris.start);
  if (left > 0 && !slowloris.closedAt) await sleep(left);
  assert.ok(slowloris.closedAt, `still open after ${((Date.now() - slowloris.start) / 1000).toFixed(0)} s and ${slowloris.sent} trickled bytes`);
  const ms = slowloris.closedAt - slowloris.start;
  // cut at the deadline (10 s after the accept; start is taken just before the connect), while
  // it was still trickling (one byte every 5 s: an idle timeout of 30 s would never fire)
  assert.ok(ms >= 9900 && ms <= 10_000 + 3000 * SLOW, `cut after ${ms} ms and ${slowloris.sent} trickled bytes`);
  assert.ok(slowloris.sent >= 1, 'nothing was trickled before the cut');
});

test('after all of the above the server is healthy and its descriptors are back to normal', async () => {
  if (slowloris) { clearInterval(slowloris.timer); slowloris.socket.destroy(); }
  await assertHealthy();
  const r = await server.request('GET', '/readyz');
  assert.equal(r.status, 200, r.text);
});
