// POST /v1/execute: running code and reporting what happened.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setup, UUID_RE, LIMIT_NAMES, SLOW } from './harness.mjs';

const server = setup();

let toolLimits;
async function policyLimits(tool) {
  if (!toolLimits) {
    const res = await server.request('GET', '/v1/tools', { key: server.keys.agent });
    assert.equal(res.status, 200);
    toolLimits = Object.fromEntries(res.json.tools.map((t) => [t.name, t.limits]));
  }
  return toolLimits[tool];
}

test('python print(6*7) prints 42 and completes with exit code 0', async () => {
  const before = Date.now();
  const { json: r } = await server.execute({ tool: 'python', code: 'print(6*7)' });
  assert.equal(r.stdout, '42\n');
  assert.equal(r.stderr, '');
  assert.equal(r.status, 'completed');
  assert.equal(r.exit_code, 0);
  assert.equal(r.signal, null);
  assert.equal(r.killed_reason, null);
  assert.equal(r.error, null);
  assert.equal(r.tool, 'python');
  assert.match(r.id, UUID_RE);
  assert.equal(r.stdout_truncated, false);
  assert.equal(r.stderr_truncated, false);
  assert.deepEqual(r.policy_violations, []);
  // Timestamps are plausible and ordered.
  const created = Date.parse(r.created_at);
  const finished = Date.parse(r.finished_at);
  assert.ok(created >= before - 5000 && created <= Date.now() + 5000, `created_at ${r.created_at}`);
  assert.ok(finished >= created, `finished_at ${r.finished_at} before created_at ${r.created_at}`);
  assert.ok(r.duration_ms >= 0 && r.duration_ms < 10_000 * SLOW, `duration_ms ${r.duration_ms}`);
});

test('a synchronous answer says where its time went (Server-Timing): every phase, in order, within the client\'s own time', async () => {
  const res = await server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'python', code: 'print(1)' } });
  assert.equal(res.status, 200, res.text.slice(0, 300));
  const header = res.headers.get('server-timing') ?? '';
  const t = {};
  for (const part of header.split(',')) {
    const m = /^\s*([a-z]+);dur=([0-9]+\.[0-9]{3})$/.exec(part);
    assert.ok(m, `Server-Timing entry ${JSON.stringify(part)} in ${header}`);
    t[m[1]] = Number(m[2]);
  }
  const phases = ['request', 'screen', 'admit', 'lease', 'setup', 'run', 'record'];
  assert.deepEqual(Object.keys(t).sort(), [...phases, 'auth', 'start', 'program', 'total'].sort(), header);
  // the key's check is part of reading the request, the start record and the program are
  // run's two parts; the phases follow one another
  assert.ok(t.auth > 0 && t.auth <= t.request, header);
  assert.ok(t.start > 0 && t.program > 0 && Math.abs(t.start + t.program - t.run) <= 0.003, header);
  const sum = phases.reduce((a, k) => a + t[k], 0);
  assert.ok(Math.abs(t.total - sum) <= 0.001 * phases.length + 0.05, `total ${t.total} against the phases' ${sum}: ${header}`);
  // the server's total lies inside the client's round trip (it starts at the request line)
  assert.ok(t.total < res.ms, `server total ${t.total} ms, the client saw ${res.ms} ms`);
  assert.ok(t.run > 0 && t.admit > 0, header);
});

test('result carries the effective limits (policy defaults) and how each was enforced', async () => {
  const defaults = await policyLimits('python');
  const { json: r } = await server.execute({ tool: 'python', code: 'x = [0] * 1000000\nprint(len(x))' });
  assert.equal(r.stdout, '1000000\n');
  for (const name of LIMIT_NAMES) {
    assert.equal(r.limits[name], defaults[name].default, `limits.${name}`);
  }
  assert.ok(Object.keys(r.enforced).length > 0, `enforced is empty: ${JSON.stringify(r.enforced)}`);
  assert.ok(r.memory_peak_bytes > 8_000_000, `memory_peak_bytes ${r.memory_peak_bytes} too small for an 8 MB list`);
  assert.ok(r.cpu_ms >= 0);
});

test('requested limits below the policy maximum are applied and reported', async () => {
  const { json: r } = await server.execute({
    tool: 'python',
    code: 'print("ok")',
    limits: { timeout_ms: 5000, memory_mb: 128, pids: 16, output_bytes: 4096 },
  });
  assert.equal(r.status, 'completed');
  assert.equal(r.limits.timeout_ms, 5000);
  assert.equal(r.limits.memory_mb, 128);
  assert.equal(r.limits.pids, 16);
  assert.equal(r.limits.output_bytes, 4096);
});

test('shell tool runs bash and separates stdout from stderr', async () => {
  const { json: r } = await server.execute({
    tool: 'shell',
    code: 'echo hello; echo oops >&2; echo "$((6*7))"; echo "$BASH_VERSION" | cut -c1 >&2',
  });
  assert.equal(r.status, 'completed');
  assert.equal(r.exit_code, 0);
  assert.equal(r.tool, 'shell');
  assert.equal(r.stdout, 'hello\n42\n');
  assert.match(r.stderr, /^oops\n[0-9]\n$/);
});

test('non-zero exit is reported as failed with the exit code (python)', async () => {
  const { json: r } = await server.execute({ tool: 'python', code: 'import sys\nprint("before")\nsys.exit(3)' });
  assert.equal(r.status, 'failed');
  assert.equal(r.exit_code, 3);
  assert.equal(r.stdout, 'before\n');
  assert.equal(r.killed_reason, null);
});

test('non-zero exit is reported as failed with the exit code (shell)', async () => {
  const { json: r } = await server.execute({ tool: 'shell', code: 'exit 7' });
  assert.equal(r.status, 'failed');
  assert.equal(r.exit_code, 7);
});

test('an uncaught python exception fails with exit code 1 and the traceback on stderr', async () => {
  const { json: r } = await server.execute({ tool: 'python', code: 'raise ValueError("boom")' });
  assert.equal(r.status, 'failed');
  assert.equal(r.exit_code, 1);
  assert.match(r.stderr, /Traceback/);
  assert.match(r.stderr, /ValueError: boom/);
});

test('stdin is delivered to the program', async () => {
  const { json: r } = await server.execute({
    tool: 'python',
    code: 'import sys\ndata = sys.stdin.read()\nprint(len(data), data.upper())',
    stdin: 'abc\ndef',
  });
  assert.equal(r.status, 'completed');
  assert.equal(r.stdout, '7 ABC\nDEF\n');
});

test('without stdin the program reads EOF immediately', async () => {
  const { json: r } = await server.execute({ tool: 'python', code: 'import sys\nprint(repr(sys.stdin.read()))' });
  assert.equal(r.stdout, "''\n");
});

test('non-ASCII text round-trips through code, stdin and stdout', async () => {
  const { json: r } = await server.execute({
    tool: 'python',
    code: 'import sys\nprint("héllo ✓ " + sys.stdin.read())',
    stdin: 'zażółć 🚀',
  });
  assert.equal(r.status, 'completed', r.stderr);
  assert.equal(r.stdout, 'héllo ✓ zażółć 🚀\n');
});

test('files are written into the workspace (utf8 and base64)', async () => {
  const { json: r } = await server.execute({
    tool: 'python',
    code: [
      'import os',
      'print(open("data.txt").read())',
      'print(open("sub/bin.dat", "rb").read().hex())',
      'print(os.getcwd())',
    ].join('\n'),
    files: [
      { path: 'data.txt', content: 'hello file' },
      { path: 'sub/bin.dat', content: Buffer.from([0, 1, 2, 255]).toString('base64'), encoding: 'base64' },
    ],
  });
  assert.equal(r.status, 'completed', r.stderr);
  assert.equal(r.stdout, 'hello file\n000102ff\n/workspace\n');
});

test('timeout_ms stops a sleeping program: status timeout, killed_reason timeout', async () => {
  const t0 = Date.now();
  const { json: r } = await server.execute({
    tool: 'python',
    code: 'import time\nprint("started", flush=True)\ntime.sleep(30)\nprint("not reached")',
    limits: { timeout_ms: 700 },
  });
  const elapsed = Date.now() - t0;
  assert.equal(r.status, 'timeout');
  assert.equal(r.killed_reason, 'timeout');
  assert.equal(r.exit_code, null);
  assert.equal(r.limits.timeout_ms, 700);
  assert.equal(r.stdout, 'started\n', 'output written before the kill is kept');
  assert.ok(r.duration_ms >= 650, `duration_ms ${r.duration_ms} < timeout`);
  assert.ok(r.duration_ms < 5000 * SLOW, `duration_ms ${r.duration_ms}: not killed near the timeout`);
  assert.ok(elapsed < 10_000 * SLOW, `request took ${elapsed} ms`);
});

test('timeout kills the whole process tree, not only the main process', async () => {
  const { json: r } = await server.execute({
    tool: 'shell',
    code: '(sleep 30; echo child-survived) & sleep 30',
    limits: { timeout_ms: 700 },
  });
  assert.equal(r.status, 'timeout');
  assert.equal(r.killed_reason, 'timeout');
  assert.ok(!r.stdout.includes('child-survived'));
  assert.ok(r.duration_ms < 5000 * SLOW, `duration_ms ${r.duration_ms}`);
});

test('output beyond output_bytes is truncated and flagged', async () => {
  const { json: r } = await server.execute({
    tool: 'python',
    code: 'import sys\nsys.stdout.write("x" * 100000)\nsys.stderr.write("e" * 10)',
    limits: { output_bytes: 1000 },
  });
  assert.equal(r.stdout_truncated, true);
  assert.ok(r.stdout.length <= 1000, `stdout has ${r.stdout.length} bytes`);
  assert.ok(r.stdout.length > 0 && /^x+$/.test(r.stdout));
  assert.equal(r.stderr_truncated, false);
  assert.equal(r.stderr, 'eeeeeeeeee');
});

test('memory_mb kills a program that allocates beyond it: status killed, killed_reason memory', async () => {
  const { json: r } = await server.execute({
    tool: 'python',
    code: 'blocks = []\nwhile True:\n    blocks.append(bytearray(16 * 1024 * 1024))',
    limits: { memory_mb: 64 },
  });
  assert.equal(r.limits.memory_mb, 64);
  assert.notEqual(r.status, 'completed');
  // Killed by the memory limit (cgroup OOM) where the host has the memory controller (as the
  // launcher reported it at start), else MemoryError under the RLIMIT_AS fallback.
  if ((server.hostReport().controllers || []).includes('memory')) {
    assert.equal(r.status, 'killed', JSON.stringify(r.enforced));
    assert.equal(r.killed_reason, 'memory');
  } else {
    assert.match(r.stderr, /MemoryError/);
  }
  assert.ok(r.memory_peak_bytes <= 80 * 1024 * 1024, `memory_peak_bytes ${r.memory_peak_bytes} above the 64 MB limit`);
});

test('pids caps the number of processes: fork fails with EAGAIN at the limit', async () => {
  const { json: r } = await server.execute({
    tool: 'python',
    code: [
      'import os, time',
      'n = 0',
      'try:',
      '    for i in range(100):',
      '        if os.fork() == 0:',
      '            time.sleep(0.5)',
      '            os._exit(0)',
      '        n += 1',
      '    print("forked", n)',
      'except OSError as e:',
      '    print("fork refused after", n, e.errno)',
    ].join('\n'),
    limits: { pids: 16 },
  });
  assert.equal(r.limits.pids, 16);
  const m = r.stdout.match(/^fork refused after (\d+) 11\n$/); // 11 = EAGAIN
  assert.ok(m, `fork was not refused: ${JSON.stringify(r)}`);
  assert.ok(Number(m[1]) >= 4 && Number(m[1]) < 16, `forked ${m[1]} children with pids=16`);
});

test('the body is parsed as JSON whatever the Content-Type (curl -d sends form-urlencoded)', async () => {
  const res = await server.request('POST', '/v1/execute', {
    key: server.keys.agent,
    body: JSON.stringify({ tool: 'python', code: 'print("curl")' }),
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.json.stdout, 'curl\n');
});

test('admin role may execute too', async () => {
  const { json: r } = await server.execute({ tool: 'python', code: 'print("admin")' }, { key: server.keys.admin });
  assert.equal(r.stdout, 'admin\n');
});

test('every execution gets a distinct id', async () => {
  const a = await server.execute({ tool: 'shell', code: 'true' });
  const b = await server.execute({ tool: 'shell', code: 'true' });
  assert.notEqual(a.json.id, b.json.id);
  assert.notEqual(a.headers.get('x-request-id'), b.headers.get('x-request-id'));
});
