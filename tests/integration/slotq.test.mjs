// Waiting for a sandbox slot, fairly (issue 19): with every slot taken a call waits (up to
// TOOLCAGE_QUEUE_SECONDS) instead of 503 at once, and the waiting calls are served round-robin
// across tenants, so one tenant's backlog does not delay another tenant's single call.
// Evidence: the start times the database recorded, the answers' timing against the programs'
// own sleeps, and that a call refused after its wait left no execution row.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { setup, assertProblem, SLOW } from './harness.mjs';
import { until, lit } from './fixtures/approval-helpers.mjs';

const server = setup('slotq', { serveEnv: { TOOLCAGE_MAX_SANDBOXES: '2', TOOLCAGE_QUEUE_SECONDS: '30' } });
const tag = () => crypto.randomBytes(4).toString('hex');
const running = async (t) => Number((await server.sql(`SELECT count(*) FROM executions WHERE status = 'running' AND request->>'code' LIKE ${lit(`%-${t}%`)}`)).trim());

test('every slot taken: calls wait instead of 503, and another tenant\'s single call goes before the backlog', async () => {
  const t = tag();
  const call = (key, name, sleep) => server.request('POST', '/v1/execute', {
    key, json: { tool: 'shell', code: `sleep ${sleep * SLOW}; echo ${name}-${t}` }, timeout: 120_000 * SLOW,
  }).then((res) => ({ name, res }));
  // Tenant a: two calls fill both slots, then ten more wait.
  const first = [call(server.keys.agent, 'a-run0', 1.5), call(server.keys.agent, 'a-run1', 1.5)];
  await until(async () => (await running(t)) === 2, 10_000 * SLOW, 'both slots taken');
  const backlog = Array.from({ length: 10 }, (_, i) => call(server.keys.agent, `a-q${i}`, 0.5));
  await new Promise((r) => setTimeout(r, 300));
  // Tenant b: one call, after a's ten.
  const b = call(server.keys.otherAgent, 'b', 0.1);
  const all = await Promise.all([...first, ...backlog, b]);
  for (const { name, res } of all) {
    assert.equal(res.status, 200, `${name}: ${res.text.slice(0, 300)}`);
    assert.equal(res.json.stdout, `${name}-${t}\n`);
  }
  // b's answer says it waited for a slot (Server-Timing's queue), and its phases still add up
  const timing = (res) => Object.fromEntries((res.headers.get('server-timing') ?? '').split(',')
    .map((p) => /^\s*([a-z]+);dur=([0-9.]+)$/.exec(p)).filter(Boolean).map((m) => [m[1], Number(m[2])]));
  const tb = timing(all.find((x) => x.name === 'b').res);
  assert.ok(tb.queue >= 500, `b waited for a slot: Server-Timing ${JSON.stringify(tb)}`);
  const sum = ['request', 'queue', 'screen', 'admit', 'lease', 'setup', 'run', 'record'].reduce((a, k) => a + tb[k], 0);
  assert.ok(tb.request < tb.queue && Math.abs(tb.total - sum) <= 0.06, JSON.stringify(tb));
  // Start order as the database has it: b's call started within the first slots that freed,
  // not after a's ten.
  const rows = (await server.sql(`SELECT request->>'code', extract(epoch FROM started_at) FROM executions
      WHERE request->>'code' LIKE ${lit(`%-${t}`)} ORDER BY started_at`)).trim().split('\n').map((l) => l.split('|'));
  const order = rows.map(([code]) => /echo (\S+)-/.exec(code)[1]);
  const bAt = order.indexOf('b');
  assert.ok(bAt >= 2 && bAt <= 3, `b started as call ${bAt + 1} of ${order.length}: ${order.join(' ')}`);
});

test('a call that waits past TOOLCAGE_QUEUE_SECONDS gets 503 overloaded and leaves nothing; a full queue refuses at once', async () => {
  const t = tag();
  const peer = await server.peer('slotq-short', { serveEnv: { TOOLCAGE_MAX_SANDBOXES: '1', TOOLCAGE_QUEUE_SECONDS: '1' } });
  try {
    const long = peer.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'shell', code: `sleep ${4 * SLOW}; echo long-${t}` }, timeout: 60_000 * SLOW });
    await until(async () => (await running(t)) === 1, 10_000 * SLOW, 'the slot taken');
    const t0 = performance.now();
    const res = await peer.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'shell', code: `echo late-${t}` } });
    const waited = performance.now() - t0;
    assertProblem(res, 503, 'overloaded');
    assert.ok(res.headers.get('retry-after'), 'Retry-After');
    assert.ok(waited >= 900, `answered after ${waited.toFixed(0)} ms: it did not wait`);
    assert.match(res.json.detail, /waited/);
    // MCP tools/call takes the same path: it waits too, then answers the problem as -32603.
    const m0 = performance.now();
    const mcp = await peer.request('POST', '/mcp', {
      key: server.keys.agent, headers: { accept: 'application/json, text/event-stream' },
      json: { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'shell', arguments: { code: `echo mcp-${t}` } } },
    });
    assert.equal(mcp.status, 200);
    assert.equal(mcp.json.id, 7);
    assert.equal(mcp.json.error?.code, -32603, mcp.text);
    assert.match(mcp.json.error.data.detail, /waited/);
    assert.ok(performance.now() - m0 >= 900, 'the MCP call did not wait');
    // 70 more from one tenant: 64 wait (then 503 after their second), 6 are refused at once.
    const burst = await Promise.all(Array.from({ length: 70 }, (_, i) => {
      const s = performance.now();
      return peer.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'shell', code: `echo burst${i}-${t}` } })
        .then((r) => ({ r, ms: performance.now() - s }));
    }));
    for (const { r } of burst) assertProblem(r, 503, 'overloaded');
    const quick = burst.filter((x) => /queue for one is full/.test(x.r.json.detail));
    assert.ok(quick.every((x) => x.ms < 900), `refused at once: ${quick.map((x) => x.ms.toFixed(0))}`);
    assert.equal(quick.length, 6, `refused at once: ${quick.length}`);
    assert.equal((await long).status, 200);
    // None of the refused calls left an execution row.
    assert.equal((await server.sql(`SELECT count(*) FROM executions WHERE request->>'code' LIKE ${lit(`%late-${t}`)} OR request->>'code' LIKE ${lit(`%burst%-${t}`)}`)).trim(), '0');
  } finally {
    await peer.stop();
  }
});
