// Network egress: tools with a network allowlist reach the outside only through the
// egress proxy (127.0.0.1:3128 inside the sandbox), which enforces the allowlist, refuses
// loopback/private/metadata addresses not named literally, and reports every attempt in
// the result's "network" array. Upstreams are node HTTP servers on the host's loopback;
// the policy allowlists one of them by its literal address.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { setup, BIN } from './harness.mjs';
import { openEvents } from './fixtures/sse.mjs';

async function upstream(name) {
  const seen = [];
  const srv = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      seen.push({ method: req.method, url: req.url, headers: req.headers, body });
      res.end(`hello from ${name} ${req.method} ${req.url} ${body}\n`);
    });
  });
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
  return { srv, seen, port: srv.address().port, saw: (p) => seen.filter((s) => s.url.startsWith(p)) };
}

const A = await upstream('A'); // allowlisted as 127.0.0.1:<A>
const B = await upstream('B'); // never allowlisted

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'toolcage-egress-'));
const policyPath = path.join(dir, 'policy.json');
const common = {
  prescreen: { rules: 'none' },
  // the attempts' hosts are redacted like stdout; keep literal loopback addresses readable
  output: { redact: { disable: ['private_ip'] } },
  // generous: these runs share the host with everything else the suite does
  limits: { timeout_ms: { default: 30000, max: 60000 }, cpu_ms: { default: 30000, max: 60000 } },
};
const shell = { language: 'shell', command: ['/bin/bash', '--noprofile', '--norc', '{code_file}'], code_file: 'main.sh' };
const python = { language: 'python', command: ['/usr/bin/python3', '-I', '-B', '{code_file}'], code_file: 'main.py' };
fs.writeFileSync(policyPath, JSON.stringify({
  version: 1,
  tools: {
    fetch: { description: 'curl with an allowlist', ...shell, ...common, network: { allow: [`127.0.0.1:${A.port}`, '*.example.com'] }, session: { enabled: true, max_ttl_seconds: 600, max_idle_seconds: 300 } },
    fetchpy: { description: 'python with an allowlist', ...python, ...common, network: { allow: [`127.0.0.1:${A.port}`] } },
    named: { description: 'allowlists a name that resolves to loopback', ...shell, ...common, network: { allow: [`localhost:${A.port}`] } },
    offline: { description: 'no network', ...python, ...common, network: 'none' },
  },
}, null, 2));

const server = setup('egress', { policy: policyPath });

after(async () => {
  A.srv.closeAllConnections?.();
  B.srv.closeAllConnections?.();
  await Promise.all([new Promise((r) => A.srv.close(r)), new Promise((r) => B.srv.close(r))]);
  fs.rmSync(dir, { recursive: true, force: true });
});

const run = async (tool, code) => (await server.execute({ tool, code })).json;

function assertAttempt(a, want) {
  for (const [k, v] of Object.entries(want)) assert.deepEqual(a[k], v, `attempt.${k}: ${JSON.stringify(a)}`);
  for (const k of ['host', 'port', 'allowed', 'reason', 'bytes_sent', 'bytes_received', 'resolved']) {
    assert.ok(k in a, `attempt lacks ${k}: ${JSON.stringify(a)}`);
  }
}

test('allowlisted upstream: curl through HTTP_PROXY gets its body; the upstream saw the request; the attempt is reported', async () => {
  const r = await run('fetch', `echo "proxy=$HTTP_PROXY"\ncurl -sS --max-time 10 "http://127.0.0.1:${A.port}/t1?x=1"`);
  assert.equal(r.status, 'completed', JSON.stringify(r));
  assert.equal(r.stdout, `proxy=http://127.0.0.1:3128\nhello from A GET /t1?x=1 \n`);
  const seen = A.saw('/t1');
  assert.equal(seen.length, 1);
  assert.equal(seen[0].url, '/t1?x=1'); // origin-form upstream
  assert.equal(seen[0].headers.host, `127.0.0.1:${A.port}`);
  assert.equal(seen[0].headers.connection, 'close');
  assert.equal(seen[0].headers['proxy-connection'], undefined);
  assert.equal(r.network.length, 1, JSON.stringify(r.network));
  assertAttempt(r.network[0], { host: '127.0.0.1', port: A.port, allowed: true, reason: 'allowed', resolved: '127.0.0.1' });
  assert.ok(r.network[0].bytes_sent > 20, JSON.stringify(r.network[0]));
  assert.ok(r.network[0].bytes_received >= 'hello from A GET /t1?x=1 \n'.length, JSON.stringify(r.network[0]));
});

test('CONNECT tunnel to the allowlisted upstream relays both ways and counts the bytes', async () => {
  const r = await run('fetch', `curl -sS --max-time 10 --proxytunnel -d ping "http://127.0.0.1:${A.port}/t2"`);
  assert.equal(r.stdout, 'hello from A POST /t2 ping\n', JSON.stringify(r));
  assert.equal(A.saw('/t2').length, 1);
  assert.equal(A.saw('/t2')[0].body, 'ping');
  assert.equal(r.network.length, 1);
  assertAttempt(r.network[0], { host: '127.0.0.1', port: A.port, allowed: true, reason: 'allowed' });
  assert.ok(r.network[0].bytes_sent > 'ping'.length && r.network[0].bytes_received > 27, JSON.stringify(r.network[0]));
});

test('Python urllib honours the proxy environment', async () => {
  const r = await run('fetchpy', [
    'import urllib.request',
    `print(urllib.request.urlopen("http://127.0.0.1:${A.port}/t3", timeout=10).read().decode(), end="")`,
  ].join('\n'));
  assert.equal(r.status, 'completed', r.stderr);
  assert.equal(r.stdout, 'hello from A GET /t3 \n');
  assert.equal(A.saw('/t3').length, 1);
  assertAttempt(r.network[0], { host: '127.0.0.1', port: A.port, allowed: true, reason: 'allowed' });
});

test('destinations outside the allowlist get 403 and never see a byte', async () => {
  const r = await run('fetch', [
    `curl -s -o /dev/null -w '%{http_code}\\n' "http://127.0.0.1:${B.port}/t4"`, // port not listed
    'curl -s -o /dev/null -w \'%{http_code}\\n\' "http://example.org/t4"', // host not listed
    'curl -s -o /dev/null -w \'%{http_code}\\n\' "http://example.com/t4"', // *.example.com is not example.com
    'curl -s -o /dev/null -w \'%{http_code}\\n\' "https://example.org/t4"; echo "exit=$?"', // CONNECT refused
  ].join('\n'));
  assert.equal(r.stdout, '403\n403\n403\n000\nexit=56\n', JSON.stringify(r));
  assert.equal(B.saw('/').length, 0, 'upstream B must not see anything');
  assert.equal(A.saw('/t4').length, 0);
  assert.equal(r.network.length, 4, JSON.stringify(r.network));
  assertAttempt(r.network[0], { host: '127.0.0.1', port: B.port, allowed: false, reason: 'port_not_allowed', bytes_sent: 0, bytes_received: 0, resolved: null });
  assertAttempt(r.network[1], { host: 'example.org', port: 80, allowed: false, reason: 'host_not_allowed' });
  assertAttempt(r.network[2], { host: 'example.com', port: 80, allowed: false, reason: 'host_not_allowed' });
  assertAttempt(r.network[3], { host: 'example.org', port: 443, allowed: false, reason: 'host_not_allowed' });
});

test('a name that resolves to loopback is refused unless the address itself is allowlisted', async () => {
  const r = await run('named', [
    'echo "$NO_PROXY"',
    // NO_PROXY keeps localhost direct: that is the sandbox's own loopback, where nothing listens
    `curl -s -o /dev/null -w '%{http_code}\\n' "http://localhost:${A.port}/t5"`,
    // through the proxy: the name matches the allowlist, its address does not pass
    `curl -s --noproxy '' -w '\\n%{http_code}\\n' "http://localhost:${A.port}/t5"`,
  ].join('\n'));
  assert.match(r.stdout, /^localhost,127\.0\.0\.1,::1\n000\n.*resolves to an address that is not allowed\n\n403\n$/, JSON.stringify(r));
  assert.equal(A.saw('/t5').length, 0, 'the loopback upstream must not see the request');
  assert.equal(r.network.length, 1);
  assertAttempt(r.network[0], { host: 'localhost', port: A.port, allowed: false, reason: 'blocked_loopback', bytes_sent: 0 });
  assert.ok(['127.0.0.1', '::1'].includes(r.network[0].resolved), JSON.stringify(r.network[0]));
});

test('no route around the proxy: direct connections and DNS fail inside the sandbox', async () => {
  const r = await run('fetchpy', [
    'import os, socket',
    'def try_connect(addr):',
    '    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)',
    '    s.settimeout(5)',
    '    try:',
    '        s.connect(addr); return "connected"',
    '    except OSError as e:',
    '        return f"errno={e.errno}"',
    `print("upstream", try_connect(("127.0.0.1", ${A.port})))`,
    'print("outside", try_connect(("10.255.255.1", 80)))',
    'try:',
    '    socket.getaddrinfo("example.com", 80); print("dns resolved")',
    'except socket.gaierror:',
    '    print("dns failed")',
  ].join('\n'));
  assert.equal(r.status, 'completed', r.stderr);
  // 111 ECONNREFUSED: the sandbox's 127.0.0.1 is its own loopback; 101 ENETUNREACH: only lo
  assert.equal(r.stdout, 'upstream errno=111\noutside errno=101\ndns failed\n');
  assert.equal(A.saw('/').length, A.seen.length); // (all requests so far came from earlier tests)
  assert.deepEqual(r.network, []);
});

test('a tool with network "none" has no proxy and no proxy environment', async () => {
  const before = A.seen.length;
  const r = await run('offline', [
    'import os, socket',
    'print(sorted(k for k in os.environ if "proxy" in k.lower()))',
    'try:',
    '    socket.create_connection(("127.0.0.1", 3128), timeout=5); print("connected")',
    'except OSError as e:',
    '    print("errno", e.errno)',
    `try:`,
    `    socket.create_connection(("127.0.0.1", ${A.port}), timeout=5); print("connected")`,
    'except OSError as e:',
    '    print("errno", e.errno)',
  ].join('\n'));
  assert.equal(r.stdout, '[]\nerrno 111\nerrno 111\n', JSON.stringify(r));
  assert.deepEqual(r.network, []);
  assert.equal(A.seen.length, before);
});

test('malformed requests to the proxy get 400 and are recorded', async () => {
  const r = await run('fetchpy', [
    'import socket',
    's = socket.create_connection(("127.0.0.1", 3128), timeout=5)',
    's.sendall(b"GET /not-absolute HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")',
    'print(s.recv(100).split(b"\\r\\n")[0].decode())',
    's = socket.create_connection(("127.0.0.1", 3128), timeout=5)',
    's.sendall(b"CONNECT 2130706433:80 HTTP/1.1\\r\\n\\r\\n")',
    'print(s.recv(100).split(b"\\r\\n")[0].decode())',
  ].join('\n'));
  assert.equal(r.stdout, 'HTTP/1.1 400 Bad Request\nHTTP/1.1 400 Bad Request\n', JSON.stringify(r));
  assert.equal(r.network.length, 2);
  for (const a of r.network) assertAttempt(a, { host: null, port: 0, allowed: false, reason: 'bad_request' });
});

/** Signs a console user of tenant a in with plain HTTP; resolves the session cookie header. */
async function consoleSession(role) {
  const name = `${role}-${Date.now()}`;
  const child = spawn(BIN, ['users', 'add', '--name', name, '--role', role, '--tenant', server.tenants.a],
    { env: { ...process.env, ...server.env }, stdio: ['pipe', 'ignore', 'inherit'] });
  child.stdin.end('correct horse battery staple\n');
  assert.equal(await new Promise((resolve) => child.on('exit', resolve)), 0);
  const page = await fetch(`${server.base}/console/signin`);
  const pre = page.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
  const csrf = (await page.text()).match(/name="csrf" value="([^"]+)"/)[1];
  const res = await fetch(`${server.base}/console/signin`, {
    method: 'POST', redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: pre, origin: server.base },
    body: new URLSearchParams({ csrf, name, password: 'correct horse battery staple' }),
  });
  assert.equal(res.status, 303, await res.text());
  return res.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
}

test('the console shows an execution\'s network attempts to an auditor', async () => {
  const r = await run('fetch', `curl -s "http://127.0.0.1:${B.port}/console-check"`);
  assert.equal(r.network.length, 1, JSON.stringify(r));
  const cookie = await consoleSession('auditor');
  const res = await fetch(`${server.base}/console/executions/${r.id}`, { headers: { cookie } });
  const html = await res.text();
  assert.equal(res.status, 200, html.slice(0, 300));
  assert.ok(html.includes(`<code>127.0.0.1:${B.port}</code> refused`), 'the refused attempt is listed');
  assert.ok(!html.includes('None recorded.'), 'the page says no attempts were recorded');
});

test('the attempts are kept with the execution', async () => {
  const r = await run('fetch', `curl -sS "http://127.0.0.1:${A.port}/t9" >/dev/null; curl -s "http://127.0.0.1:${B.port}/t9"`);
  assert.equal(r.network.length, 2, JSON.stringify(r));
  const res = await server.request('GET', `/v1/executions/${r.id}`, { key: server.keys.agent });
  assert.equal(res.status, 200, res.text);
  assert.deepEqual(res.json.network, r.network);
});

test('a session call lists the connections made during it (bytes too), streams them as they happen, and a background job\'s go to the next call', async () => {
  const key = server.keys.agent;
  const opened = await server.request('POST', '/v1/sessions', { key, json: { tool: 'fetch' } });
  assert.equal(opened.status, 201, opened.text);
  const sid = opened.json.id;
  const call = async (code) => {
    const res = await server.request('POST', `/v1/sessions/${sid}/execute`, { key, json: { code } });
    assert.equal(res.status, 200, res.text);
    return res.json;
  };
  try {
    const a = await call(`curl -sS "http://127.0.0.1:${A.port}/s1"; curl -s -o /dev/null "http://127.0.0.1:${B.port}/s1"; echo done`);
    assert.equal(a.stdout, 'hello from A GET /s1 \ndone\n', JSON.stringify(a));
    assert.equal(a.network.length, 2, JSON.stringify(a.network));
    assertAttempt(a.network[0], { host: '127.0.0.1', port: A.port, allowed: true, reason: 'allowed', resolved: '127.0.0.1' });
    assert.ok(a.network[0].bytes_received >= 'hello from A GET /s1 \n'.length, JSON.stringify(a.network[0]));
    assertAttempt(a.network[1], { host: '127.0.0.1', port: B.port, allowed: false });
    assert.equal(B.saw('/s1').length, 0, 'the refused request never reached B');
    // stored with the call
    const got = await server.request('GET', `/v1/executions/${a.id}`, { key });
    assert.deepEqual(got.json.network, a.network);
    // the next call made none: the session's earlier ones are not its
    assert.deepEqual((await call('echo quiet')).network, []);

    // streamed: the attempt comes while the program still runs
    const s = await openEvents(server, 'POST', `/v1/sessions/${sid}/execute`, { key, json: { code: `curl -s -o /dev/null "http://127.0.0.1:${B.port}/s2"; sleep 2; echo the-end` } });
    assert.equal(s.status, 200);
    const events = await s.rest();
    const result = events.at(-1);
    assert.equal(result.event, 'result', JSON.stringify(events.map((e) => e.event)));
    const net = events.filter((e) => e.event === 'network');
    assert.equal(net.length, 1, JSON.stringify(events));
    const { bytes_sent, bytes_received, ...decided } = result.data.network[0];
    assert.deepEqual(net[0].data, decided);
    assert.equal(decided.port, B.port);
    const end = events.find((e) => e.event === 'stdout' && e.data.text.includes('the-end'));
    assert.ok(end && net[0].at < end.at - 1000, `network at ${net[0].at} ms, the-end at ${end?.at} ms`);

    // a job left running makes a connection between calls: the next call lists it
    const bg = await call(`(sleep 0.3; curl -s -o /dev/null "http://127.0.0.1:${B.port}/bg") >/dev/null 2>&1 &`);
    assert.deepEqual(bg.network, []);
    await new Promise((r) => setTimeout(r, 1500));
    const next = await call('echo later');
    assert.equal(next.network.length, 1, JSON.stringify(next));
    assertAttempt(next.network[0], { port: B.port, allowed: false });
    assert.deepEqual((await call('echo again')).network, [], 'told once');
  } finally {
    const res = await server.request('DELETE', `/v1/sessions/${sid}`, { key });
    assert.equal(res.status, 200, res.text);
  }
});
