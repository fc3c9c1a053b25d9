// Many executions at once, and the HTTP server stays responsive while sandboxes run.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { setup, SLOW, sleep } from './harness.mjs';

const server = setup();

test('20 concurrent executions all succeed, each with its own output', async () => {
  const runs = await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      server.request('POST', '/v1/execute', {
        key: server.keys.agent,
        json: { tool: 'python', code: `import sys\nprint(${i} * 1000 + len(sys.stdin.read()))`, stdin: 'x'.repeat(i) },
      }),
    ),
  );
  const statuses = runs.map((r) => r.status);
  assert.deepEqual(statuses, Array(20).fill(200), runs.filter((r) => r.status !== 200).map((r) => r.text).join('\n'));
  runs.forEach((r, i) => {
    assert.equal(r.json.status, 'completed', r.json.stderr);
    assert.equal(r.json.stdout, `${i * 1001}\n`);
  });
  assert.equal(new Set(runs.map((r) => r.json.id)).size, 20);
});

test('/healthz answers quickly while 4 long sleeps run (HTTP threads are not blocked)', async () => {
  const sleepMs = 3000;
  const t0 = Date.now();
  const long = Array.from({ length: 4 }, (_, i) =>
    server.request('POST', '/v1/execute', {
      key: server.keys.agent,
      json: { tool: 'shell', code: `sleep ${sleepMs / 1000}; echo done-${i}` },
    }),
  );
  await sleep(500);
  const latencies = [];
  while (Date.now() - t0 < sleepMs - 500) {
    const h = await server.request('GET', '/healthz', { timeout: 5000 });
    assert.equal(h.status, 200);
    latencies.push(h.ms);
    // Other API routes keep working too.
    const tools = await server.request('GET', '/v1/tools', { key: server.keys.auditor, timeout: 5000 });
    assert.equal(tools.status, 200);
    await sleep(100);
  }
  const stillRunning = Date.now() - t0 < sleepMs;
  const results = await Promise.all(long);
  assert.ok(latencies.length >= 5, `only ${latencies.length} health checks completed during the sleeps`);
  const worst = Math.max(...latencies);
  assert.ok(worst < 250 * SLOW, `slowest /healthz took ${worst.toFixed(0)} ms while sandboxes ran`);
  assert.ok(stillRunning, 'the health checks did not overlap the sleeps');
  results.forEach((r, i) => {
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.status, 'completed');
    assert.equal(r.json.stdout, `done-${i}\n`);
    assert.ok(r.json.duration_ms >= sleepMs - 50, `duration_ms ${r.json.duration_ms}`);
  });
  // The four ran in parallel, not one after another.
  const total = Date.now() - t0;
  assert.ok(total < sleepMs * 2.5, `4 parallel ${sleepMs} ms sleeps took ${total} ms in all`);
});

test('a client that disconnects mid-execution: its call runs to its end and is stored; the server is unharmed', async () => {
  const ac = new AbortController();
  const t = crypto.randomBytes(6).toString('hex');
  const code = `echo early-${t}; sleep 2; echo late-${t}`;
  const p = fetch(`${server.base}/v1/execute`, {
    method: 'POST',
    headers: { authorization: `Bearer ${server.keys.agent}` },
    body: JSON.stringify({ tool: 'shell', code }),
    signal: ac.signal,
  }).catch((e) => e);
  await sleep(300);
  ac.abort();
  assert.ok((await p) instanceof Error, 'the aborted request was answered');
  // The call's fate, not only the server's health: it ran to its end and its outcome is stored.
  let row = '';
  for (let i = 0; i < 100 && !/^completed\|/.test(row); i++) {
    await sleep(100);
    row = (await server.sql(`SELECT e.status || '|' || (e.result->>'stdout') FROM executions e JOIN audit_log l
      ON l.action = 'execute' AND l.record->>'execution_id' = e.id::text
      WHERE l.record->'params'->>'code' = '${code}'`)).trim();
  }
  assert.equal(row, `completed|early-${t}\nlate-${t}`); // (psql's output, trimmed)
  const h = await server.request('GET', '/healthz');
  assert.equal(h.status, 200);
  const { json: r } = await server.execute({ tool: 'python', code: 'print("still fine")' });
  assert.equal(r.stdout, 'still fine\n');
});
